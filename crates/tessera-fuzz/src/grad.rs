//! The gradient target (issue 16): a random program of the differential generator, taken
//! apart by reverse-mode differentiation with respect to its floating-point inputs, with
//! random integer seeds for its floating-point outputs and a random tape mode; the gradient
//! program runs on the JIT (and on the C backend for a sample of the cases) and on the
//! reference evaluator, which must agree as in the differential target. `grad` refusing a
//! program (a typed error: an operator without a derivative, two versions in one body) is
//! not a finding; a panic anywhere is, and so is a disagreement.

use crate::differential::compare::{Verdict, compare};
use crate::differential::generate::{self, Case};
use crate::differential::{MAX_C_LINES, MAX_KERNEL_LINES, Shapes, describe};
use arbitrary::Unstructured;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use tessera::api::grad::{bind, is_structured};
use tessera::backend::CBackend;
use tessera::levels::Format;
use tessera::notation::visit;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::transforms::grad::{GradOptions, GradProgram, Tapes, grad_with};
use tessera::types::{ElemType, Scalar};

/// What the cases came to.
#[derive(Debug, Default)]
pub struct Counts {
    pub cases: AtomicUsize,
    /// No floating-point input to differentiate, or no floating-point output to seed.
    pub nothing_to_differentiate: AtomicUsize,
    /// `grad` refused the program with an error.
    pub refused: AtomicUsize,
    /// The gradient program ran on both sides and agreed.
    pub compared: AtomicUsize,
    /// Both sides failed (an out-of-range read, say), or a compiler refused as unsupported.
    pub failed_or_unsupported: AtomicUsize,
}

pub static COUNTS: Counts = Counts {
    cases: AtomicUsize::new(0),
    nothing_to_differentiate: AtomicUsize::new(0),
    refused: AtomicUsize::new(0),
    compared: AtomicUsize::new(0),
    failed_or_unsupported: AtomicUsize::new(0),
};

impl Counts {
    pub fn summary(&self) -> String {
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        format!(
            "grad: {} cases, {} with nothing to differentiate, {} refused by grad, {} gradients agreed, {} failed on both sides or unsupported",
            get(&self.cases),
            get(&self.nothing_to_differentiate),
            get(&self.refused),
            get(&self.compared),
            get(&self.failed_or_unsupported),
        )
    }
}

/// The fuzz target.
pub fn grad(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let case = generate::case(&mut u, &Shapes::AGREED);
    COUNTS.cases.fetch_add(1, Ordering::Relaxed);
    let (reads, writes) = visit::reads_writes(&case.program.body);
    let float = |t: &Tensor| t.format.elem() == ElemType::F64;
    let wrt: Vec<&str> = case
        .tensors
        .iter()
        .filter(|(n, t)| float(t) && reads.contains(n) && !writes.contains(n))
        .map(|(n, _)| n.as_str())
        .collect();
    let outputs: Vec<&String> = case
        .tensors
        .iter()
        .filter(|(n, t)| float(t) && writes.contains(n))
        .map(|(n, _)| n)
        .collect();
    if wrt.is_empty() || outputs.is_empty() {
        COUNTS
            .nothing_to_differentiate
            .fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut seeds = BTreeMap::new();
    for o in &outputs {
        let shape = &case.tensors[*o].shape;
        let values: Vec<f64> = (0..shape.iter().product::<usize>())
            .map(|_| f64::from(u.int_in_range(-3i8..=3).unwrap_or(1)))
            .collect();
        let f = Format::dense(shape.len(), Scalar::F64(0.0));
        let t = Tensor::from_dense(&f, shape, &Buffer::F64(values.into()))
            .expect("a dense tensor of its own shape");
        seeds.insert(o.to_string(), t);
    }
    let tapes = match u.int_in_range(0u8..=2).unwrap_or(0) {
        0 => Tapes::Auto,
        1 => Tapes::All,
        _ => Tapes::None,
    };
    let dense = u.arbitrary::<bool>().unwrap_or(false);
    let masked = wrt
        .iter()
        .filter(|w| !dense && is_structured(&case.tensors[**w]))
        .map(|w| w.to_string())
        .collect();
    let seed_names: Vec<&str> = seeds.keys().map(String::as_str).collect();
    let gp = match grad_with(
        &case.program,
        &wrt,
        &seed_names,
        &GradOptions { tapes, masked },
    ) {
        Ok(gp) => gp,
        Err(e) => {
            // `TESSERA_FUZZ_VERBOSE=1` lists the refusals, to see which constructs `grad`
            // does not take yet.
            if std::env::var_os("TESSERA_FUZZ_VERBOSE").is_some() {
                eprintln!("refused: {e}");
            }
            COUNTS.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    // The gradient program must print back like any program.
    let text = gp.program.to_string();
    match tessera::notation::parse::parse_program(&text) {
        Ok(p) if p == gp.program => {}
        other => panic!(
            "a gradient program does not print back: {other:?}\n{text}\n{}",
            describe(&case)
        ),
    }
    let mut tensors = case.tensors.clone();
    if bind(&gp, &mut tensors, seeds, &BTreeMap::new()).is_err() {
        COUNTS.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let formats = tessera::api::formats_of(&tensors);
    let lines = Runner::lower(&gp.program, &formats)
        .map_or(0, |(k, _, _)| CBackend::source(&k).lines().count());
    if lines > MAX_KERNEL_LINES {
        COUNTS.failed_or_unsupported.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let expected = tessera::tensor::evaluate(&gp.program, &tensors).map(|values| {
        values
            .into_iter()
            .filter(|(n, _)| is_result(&gp, n))
            .collect::<BTreeMap<_, _>>()
    });
    let verdict = judge(&case, &gp, &tensors, &expected, &Runner::jit(), "jit");
    let with_c = crate::differential::sampled(data, crate::differential::c_every());
    if let Some(c) = (with_c && lines <= MAX_C_LINES)
        .then(crate::differential::c_backend)
        .flatten()
    {
        judge(
            &case,
            &gp,
            &tensors,
            &expected,
            &Runner::new(Box::new(c)),
            "c",
        );
    }
    let counter = match verdict {
        Verdict::Agree => &COUNTS.compared,
        Verdict::BothFailed | Verdict::Refused => &COUNTS.failed_or_unsupported,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The tensors compared: the gradients and the forward outputs the gradient program
/// recomputes.
fn is_result(gp: &GradProgram, name: &str) -> bool {
    gp.gradients.iter().any(|(_, d)| d == name) || gp.forward.iter().any(|f| f == name)
}

/// Run the gradient program on one backend and compare its results with the evaluator's;
/// panics with the case on a disagreement.
fn judge(
    case: &Case,
    gp: &GradProgram,
    tensors: &BTreeMap<String, Tensor>,
    expected: &tessera::Result<BTreeMap<String, Buffer>>,
    runner: &Runner,
    backend: &str,
) -> Verdict {
    let mut all = tensors.clone();
    let ran = runner
        .compile(&gp.program, &tessera::api::formats_of(&all))
        .and_then(|k| runner.execute(&k, &mut all));
    let results: BTreeMap<String, Tensor> =
        all.into_iter().filter(|(n, _)| is_result(gp, n)).collect();
    match compare(expected, ran.map(|()| &results)) {
        Ok(v) => v,
        Err(why) => panic!(
            "{backend} and the evaluator disagree on the gradient program: {why}\n--- gradient program\n{}{}",
            gp.program,
            describe(case)
        ),
    }
}
