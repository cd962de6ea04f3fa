//! Row-major test matrices with chosen row lengths and values whose every change of summation
//! order shows in the bits, and the check that every backend gives the evaluator's `y` bit
//! for bit (`tests/interleave.rs`, `tests/fill_sink.rs`, `tests/prefetch.rs`).

use super::{fmt, formats_of, run_eval};
use std::collections::BTreeMap;
use tessera::ir::{Kernel, Stmt};
use tessera::notation::ast::Program;
use tessera::run::{Compiled, Runner};
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// y's bits: NaNs compare as NaN (their payload is the hardware's), everything else exactly.
pub fn bits(b: &Buffer) -> Vec<u64> {
    (0..b.len())
        .map(|k| {
            let v = b.get(k).as_f64();
            if v.is_nan() { u64::MAX } else { v.to_bits() }
        })
        .collect()
}

/// Runs `p` on `t` with each of `runners` and asserts that its output `y` has the
/// evaluator's bits (`what` names the case in a failure); `look` sees each runner's compiled
/// kernel first (what the test asserts of the code).
pub fn y_agrees(
    p: &Program,
    t: &BTreeMap<String, Tensor>,
    runners: Vec<(&'static str, Runner)>,
    what: &str,
    look: &mut dyn FnMut(&str, &Compiled),
) {
    let want = run_eval(p, t).unwrap();
    for (name, runner) in runners {
        let c = runner.compile(p, &formats_of(t)).unwrap();
        look(name, &c);
        let mut got = t.clone();
        runner
            .execute(&c, &mut got)
            .unwrap_or_else(|e| panic!("{name} {what}: {e}"));
        assert_eq!(
            bits(&got["y"].to_dense()),
            bits(&want["y"]),
            "{name} {what}"
        );
    }
}

/// `A`, `x` and an empty dense `y` of `A`'s rows: SpMV's tensors.
pub fn spmv_tensors(a: Tensor, x: Tensor) -> BTreeMap<String, Tensor> {
    let rows = a.shape[0];
    BTreeMap::from([
        ("A".to_string(), a),
        ("x".to_string(), x),
        (
            "y".to_string(),
            Tensor::empty(&fmt("Dense(Element(0.0))"), &[rows]).unwrap(),
        ),
    ])
}

/// Whether a kernel holds a comment containing `mark` (what a pass leaves where it applied).
pub fn marked(k: &Kernel, mark: &str) -> bool {
    fn walk(stmts: &[Stmt], mark: &str) -> bool {
        stmts.iter().any(|s| match s {
            Stmt::Comment(c) => c.contains(mark),
            _ => s.bodies().iter().any(|b| walk(b, mark)),
        })
    }
    walk(&k.body, mark)
}

/// [`y_agrees`] for `p` on `matrix(format, lengths, seed, special)` and its `vector`;
/// returns whether some runner's kernel holds `mark` ([`marked`]).
pub fn y_agrees_marked(
    p: &Program,
    (format, lengths, seed, special): (&str, &[usize], u64, bool),
    runners: Vec<(&'static str, Runner)>,
    mark: &str,
) -> bool {
    let t = spmv_tensors(
        matrix(format, lengths, seed, special),
        vector(seed, special),
    );
    let mut shaped = false;
    let what = format!("{format} rows {lengths:?} seed {seed} special {special}");
    y_agrees(p, &t, runners, &what, &mut |_, c| {
        shaped |= marked(&c.ir, mark)
    });
    shaped
}

/// Columns of the test matrices: prime, so `(i * 5 + t * 7) % COLS` are distinct for
/// `t < COLS`.
pub const COLS: usize = 211;

/// A small deterministic generator (no dependence on a crate's stream across versions).
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    /// Values of widely different magnitudes and both signs, so that any change in the
    /// order of a row's sum changes its bits.
    pub fn value(&mut self) -> f64 {
        let m = (self.next() % 1000) as f64 / 7.0 + 0.5;
        let e = (self.next() % 40) as i32 - 20;
        let s = if self.next().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        s * m * 2f64.powi(e)
    }
}

/// A `lengths.len() x COLS` matrix whose row `i` stores `lengths[i]` entries. With
/// `special`, x is 1 at even columns and 0 at odd ones, some rows put `+3`, `-3`, `+3`, ...
/// at their even columns (sums that are often exactly zero) and some start with an infinite
/// entry (a NaN IEEE product where x is 0): both take the re-run with strong-zero products.
pub fn matrix(format: &str, lengths: &[usize], seed: u64, special: bool) -> Tensor {
    let mut rng = Lcg(seed);
    let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
    for (i, &len) in lengths.iter().enumerate() {
        let len = len.min(COLS);
        let mut cs: Vec<usize> = (0..len).map(|t| (i * 5 + t * 7) % COLS).collect();
        cs.sort_unstable();
        let mut even = 0;
        for (t, &j) in cs.iter().enumerate() {
            rows.push(i as i64);
            cols.push(j as i64);
            let v = if special && i % 3 == 1 && j % 2 == 0 {
                even += 1;
                if even % 2 == 1 { 3.0 } else { -3.0 }
            } else if special && i % 5 == 2 && t == 0 {
                f64::INFINITY
            } else {
                rng.value()
            };
            vals.push(v);
        }
    }
    Tensor::from_coo(
        &fmt(format),
        &[lengths.len(), COLS],
        &[rows, cols],
        &Buffer::from(vals),
        |a, _| a,
    )
    .unwrap()
}

/// x: varied values, or with `special` 1 at even columns and 0 at odd ones.
pub fn vector(seed: u64, special: bool) -> Tensor {
    let mut rng = Lcg(seed ^ 0x9e37);
    let v: Vec<f64> = (0..COLS)
        .map(|j| match (special, j % 2) {
            (true, 0) => 1.0,
            (true, _) => 0.0,
            _ => rng.value(),
        })
        .collect();
    Tensor::from_dense(&fmt("Dense(Element(0.0))"), &[COLS], &Buffer::from(v)).unwrap()
}

/// The fault of a kernel that gathered through a bad coordinate of `A`: out of bounds, naming
/// the gathered tensor `x` and the first bad index met in the original order, `first`.
pub fn assert_first_bad_gather(msg: &str, first: i64) {
    assert!(
        msg.contains("out of bounds") || msg.contains("outside"),
        "{msg}"
    );
    assert!(
        msg.contains("tensor `x`"),
        "names the gathered tensor: {msg}"
    );
    assert!(
        msg.contains(&first.to_string()),
        "the first bad index in the original order: {msg}"
    );
}

/// The message (prefixed with the runner's name) of each runner's fault running `p` on `t`,
/// which must fail on every one.
pub fn faults(
    p: &Program,
    t: &BTreeMap<String, Tensor>,
    runners: Vec<(&'static str, Runner)>,
) -> Vec<String> {
    runners
        .into_iter()
        .map(|(name, runner)| {
            let c = runner.compile(p, &formats_of(t)).unwrap();
            let mut got = t.clone();
            let e = runner
                .execute(&c, &mut got)
                .expect_err(&format!("{name}: must fail"));
            format!("{name}: {e}")
        })
        .collect()
}

/// `b`'s elements as memory someone else owns (`Store::shared`, foreign), as
/// `tessera.asarray` shares a SciPy matrix's arrays: it carries no bound.
pub fn foreign(b: &Buffer) -> Buffer {
    use std::sync::Arc;
    use tessera::runtime::store::Store;
    fn of<T: Copy + Send + Sync + 'static>(v: &[T]) -> Store<T> {
        let owner = Arc::new(v.to_vec());
        let (ptr, len) = (owner.as_ptr(), owner.len());
        // SAFETY: `owner` holds `len` initialised elements at `ptr` (aligned, non-null even
        // when empty), which the store keeps alive by holding `owner`; nothing writes them.
        unsafe { Store::shared(ptr, len, owner) }
    }
    match b {
        Buffer::I64(v) => Buffer::I64(of(v)),
        Buffer::I32(v) => Buffer::I32(of(v)),
        Buffer::F64(v) => Buffer::F64(of(v)),
        other => panic!("no foreign {:?} array in these tests", other.elem()),
    }
}

/// `t` with every array foreign memory, as `tessera.asarray(scipy_matrix)` makes it.
pub fn all_foreign(t: &Tensor) -> Tensor {
    let mut f = t.clone();
    for b in f.levels.iter_mut().flatten() {
        *b = foreign(b);
    }
    f
}
