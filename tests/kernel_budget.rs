//! The kernel-size budget: a program whose operands split its loops into thousands of cases is
//! first lowered again with its statements in loops of their own where that changes no result
//! (loop fission), and refused after lowering, before a backend spends seconds to minutes and
//! gigabytes on it, when it still does not fit — with an error naming the loop and what to do;
//! the budget is adjustable.

mod common;

use common::{agree, fmt, formats_of, parse};
use std::collections::BTreeMap;
use tessera::Error;
use tessera::run::{DEFAULT_MAX_KERNEL_SIZE, Runner};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Three CSR operands, each also read through a permissive offset, in four statements: every
/// split of the row and column loops copies the coiteration of six sparse fibers (measured:
/// ~11,900 IR statements in one loop nest, 7 s in Cranelift and 50 s in `cc -O3` before the
/// budget existed). In loops of their own the statements are a few hundred each.
const BLOW_UP: &str = "\
C .= 0
D .= 0
for i = _, j = _
  C[i, j] += A[i, j] * B[i, j] + E[i, j]
  D[i, j] += A[i, j] + B[i, j] * E[i, j]
  C[i, j] += coalesce(A[~(i - 1), j], 0) * B[i, j] + E[i, ~(j + 1)]
  D[i, j] <<max>>= A[i, j] - E[i, j] + B[~(i + 1), j]
end
";

/// The same statements all into `C`: with `C` stored so that it takes writes only in order
/// (CSR), no statement can have a loop of its own (a second pass would append to rows out of
/// order), so the kernel stays one nest of ~40,000 IR statements.
const ONE_OUTPUT: &str = "\
C .= 0
for i = _, j = _
  C[i, j] += A[i, j] * B[i, j] + E[i, j]
  C[i, j] += A[i, j] + B[i, j] * E[i, j]
  C[i, j] += coalesce(A[~(i - 1), j], 0) * B[i, j] + E[i, ~(j + 1)]
  C[i, j] <<max>>= A[i, j] - E[i, j] + B[~(i + 1), j]
end
";

const SPMV: &str = "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n";

fn tensors(names: &[&str]) -> BTreeMap<String, Tensor> {
    let values: Vec<f64> = (0..16)
        .map(|k| if k % 3 == 0 { k as f64 } else { 0.0 })
        .collect();
    let mut ts = BTreeMap::new();
    for n in names {
        let t = Tensor::from_dense(
            &fmt("Dense(SparseList(Element(0.0)))"),
            &[4, 4],
            &Buffer::F64(values.clone().into()),
        )
        .unwrap();
        ts.insert(n.to_string(), t);
    }
    ts
}

fn with_outputs(names: &[&str], format: &str) -> BTreeMap<String, Tensor> {
    let mut ts = tensors(&["A", "B", "E"]);
    for out in names {
        ts.insert(
            out.to_string(),
            Tensor::from_dense(&fmt(format), &[4, 4], &Buffer::F64(vec![0.0; 16].into())).unwrap(),
        );
    }
    ts
}

#[test]
fn a_multiplying_kernel_is_refused_before_the_backend() {
    let ts = with_outputs(&["C"], "Dense(SparseList(Element(0.0)))");
    let runner = Runner::jit();
    let t0 = std::time::Instant::now();
    let err = match runner.compile(&parse(ONE_OUTPUT), &formats_of(&ts)) {
        Ok(_) => panic!("the kernel should be over the default budget"),
        Err(e) => e,
    };
    let Error::Unsupported { span, msg } = &err else {
        panic!("expected an unsupported-program error, got {err}");
    };
    assert_eq!((span.line, span.col), (2, 1), "names the loop: {err}");
    assert!(
        msg.contains("IR statements") && msg.contains("split the loop"),
        "{msg}"
    );
    assert!(msg.contains(&DEFAULT_MAX_KERNEL_SIZE.to_string()), "{msg}");
    // Not a timing assertion on the kernel: lowering alone is fast, the refused JIT is not.
    eprintln!("refused after {:?}", t0.elapsed());
}

#[test]
fn independent_statements_get_loops_of_their_own() {
    // Outputs that take writes in any order: each statement its own nest, in program order
    // per element (`C` sees `+=` before `<<max>>=`), so the results are the evaluator's.
    for (program, outs) in [(BLOW_UP, &["C", "D"][..]), (ONE_OUTPUT, &["C"][..])] {
        let ts = with_outputs(outs, "Dense(Dense(Element(0.0)))");
        let c = Runner::jit()
            .compile(&parse(program), &formats_of(&ts))
            .unwrap_or_else(|e| panic!("{e}\n{program}"));
        assert!(
            c.ir.size() < tessera::run::FISSION_ABOVE,
            "{} IR statements\n{program}",
            c.ir.size()
        );
        agree(program, ts);
    }
    // CSR outputs: the statements into `C` share a nest, those into `D` another.
    let ts = with_outputs(&["C", "D"], "Dense(SparseList(Element(0.0)))");
    let c = Runner::jit()
        .compile(&parse(BLOW_UP), &formats_of(&ts))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(c.ir.size() <= DEFAULT_MAX_KERNEL_SIZE, "{}", c.ir.size());
    agree(BLOW_UP, ts);
}

#[test]
fn the_budget_is_adjustable() {
    let mut ts = tensors(&["A"]);
    ts.insert(
        "x".to_string(),
        Tensor::from_dense(
            &fmt("Dense(Element(0.0))"),
            &[4],
            &Buffer::F64(vec![1.0; 4].into()),
        )
        .unwrap(),
    );
    ts.insert(
        "y".to_string(),
        Tensor::from_dense(
            &fmt("Dense(Element(0.0))"),
            &[4],
            &Buffer::F64(vec![0.0; 4].into()),
        )
        .unwrap(),
    );
    let program = parse(SPMV);
    let runner = Runner::jit();
    assert_eq!(runner.max_kernel_size(), DEFAULT_MAX_KERNEL_SIZE);
    runner.set_max_kernel_size(5);
    let err = runner
        .compile(&program, &formats_of(&ts))
        .err()
        .expect("SpMV is over 5 statements");
    assert!(
        err.to_string()
            .starts_with("2:1: unsupported: the kernel is "),
        "{err}"
    );
    runner.set_max_kernel_size(DEFAULT_MAX_KERNEL_SIZE);
    let c = runner.compile(&program, &formats_of(&ts)).unwrap();
    runner.execute(&c, &mut ts).unwrap();
    let y = ts["y"].to_dense();
    // Row sums of the pattern k % 3 == 0 over a 4x4 row-major matrix of k.
    assert_eq!(y, Buffer::F64(vec![3.0, 6.0, 9.0, 27.0].into()));
}
