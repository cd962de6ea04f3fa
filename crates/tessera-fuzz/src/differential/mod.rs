//! The differential target: a random program × formats × data (decoded from bytes by
//! [`generate`]) runs on the Cranelift JIT, on the C backend (a sample of the cases, when a C
//! compiler exists) and on the reference evaluator; a disagreement is a panic.
//!
//! Agreement ([`compare`]): both sides fail (with any error), or both succeed and every tensor
//! holds the same values (floats within a relative 1e-9, NaN equal to NaN), and every compiled
//! tensor is valid storage. A compiled backend may refuse with `Unsupported` what the
//! evaluator runs (counted, not a finding).

pub mod compare;
pub mod generate;
mod parallel;

use arbitrary::Unstructured;
use compare::{Verdict, compare};
use generate::Case;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use tessera::backend::CBackend;
use tessera::notation::ast::Program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// Program shapes on which the backends are known to disagree while their semantics are
/// being fixed: the generator leaves each out unless its flag is on. Switch a flag on (in
/// [`Shapes::AGREED`]) once the fix is in, and the target checks it from then on.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shapes {
    /// `<<choose(z)>>=` (after a write of `-0.0` the backends disagree on whether it is `z`).
    pub choose_after_negative_zero: bool,
    /// Float-valued index expressions (the evaluator truncates, the compilers refuse).
    pub float_indices: bool,
    /// Reads that may be out of range (constant indices, permissive offsets) under `*`: the
    /// compilers simplify `x * 0` to 0 without the read, the evaluator reads first.
    pub times_zero_out_of_range: bool,
    /// NaN or infinite values (`log`, `sqrt`, `exp`, `/`) under `*` or into `*=`: `0 * NaN`
    /// is simplified to 0 by the compilers, NaN in the evaluator.
    pub nan_into_times: bool,
    /// NaN or infinite values under `min`, `max`, `<<min>>=`, `<<max>>=` (not yet commutative
    /// with NaN).
    pub nan_into_min_max: bool,
    /// A write through an index bound nowhere, of the value `missing`.
    pub missing_unbound_index: bool,
    /// A loop reusing the name of a loop around it.
    pub reused_loop_names: bool,
    /// A float value reduced with `+=`, `-=`, `*=` or `<<plus>>=` into an integer or bool
    /// output. Found by this target: the compilers turned a loop-invariant sum into one
    /// product (`for k = 0:2; s[] += 2.5` gave 7 into an `Element(0)`, the evaluator 6,
    /// truncating at each step) and dropped `+= 0.0` (which the evaluator computed in floats,
    /// rounding integers beyond 2^53). Now a static error for the built-in reducers on every
    /// backend; a user reducer's result is stored converted at every step.
    pub float_into_integer_sums: bool,
    /// An output declared at the start of its nest's outermost loop, so every iteration starts
    /// it afresh (under a parallel loop: the iteration's own workspace, issue 17).
    pub declarations_in_loops: bool,
}

impl Shapes {
    /// What the target generates: the shapes whose semantics every backend agrees on (all of
    /// them since the README's "Semantics" rules; `Shapes::default()` has none of them).
    pub const AGREED: Shapes = Shapes::ALL;
    /// Everything, for checking the fixes.
    pub const ALL: Shapes = Shapes {
        choose_after_negative_zero: true,
        float_indices: true,
        times_zero_out_of_range: true,
        nan_into_times: true,
        nan_into_min_max: true,
        missing_unbound_index: true,
        reused_loop_names: true,
        float_into_integer_sums: true,
        declarations_in_loops: true,
    };
}

/// Which cases run on the C backend: one in `C_EVERY` (each case compiles its kernel with
/// `cc`, about a tenth of a second, against milliseconds for the JIT), unless the environment
/// variable `TESSERA_FUZZ_C_EVERY` says otherwise (`1`: every case).
pub const C_EVERY: u64 = 16;

/// `C_EVERY`, or the positive number in `TESSERA_FUZZ_C_EVERY` (read once).
pub(crate) fn c_every() -> u64 {
    static EVERY: OnceLock<u64> = OnceLock::new();
    *EVERY.get_or_init(|| {
        std::env::var("TESSERA_FUZZ_C_EVERY")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(C_EVERY)
    })
}

/// Cases whose kernel is longer than this many lines of C are not run: a few operands with
/// protocols in one loop multiply the code, and compiling that takes the JIT seconds (the
/// compiler refuses only beyond 4000 variables).
pub const MAX_KERNEL_LINES: usize = 4_000;
/// The C backend takes only kernels up to this many lines (`cc -O3` takes seconds on more).
pub const MAX_C_LINES: usize = 1_500;

/// Counts of what the cases came to, for the campaign's report.
#[derive(Debug, Default)]
pub struct Counts {
    pub cases: AtomicUsize,
    /// Both sides ran and agreed.
    pub compared: AtomicUsize,
    /// Both sides failed.
    pub both_failed: AtomicUsize,
    /// The evaluator ran and a compiled backend refused with `Unsupported`.
    pub refused: AtomicUsize,
    /// Cases that also ran on the C backend.
    pub c_runs: AtomicUsize,
    /// Cases passed over for their kernel's size.
    pub large: AtomicUsize,
}

pub static COUNTS: Counts = Counts {
    cases: AtomicUsize::new(0),
    compared: AtomicUsize::new(0),
    both_failed: AtomicUsize::new(0),
    refused: AtomicUsize::new(0),
    c_runs: AtomicUsize::new(0),
    large: AtomicUsize::new(0),
};

/// Print the counts every this many cases (fuzzing prints nothing else about them).
const REPORT_EVERY: usize = 10_000;

impl Counts {
    pub fn summary(&self) -> String {
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        format!(
            "differential: {} cases, {} agreed with values, {} failed on both sides, {} refused as unsupported, {} passed over as large, {} also on C",
            get(&self.cases),
            get(&self.compared),
            get(&self.both_failed),
            get(&self.refused),
            get(&self.large),
            get(&self.c_runs)
        )
    }
}

/// The fuzz target: the agreed shapes, C on a sample.
pub fn differential(data: &[u8]) {
    check(data, &Shapes::AGREED, sampled(data, c_every()));
}

/// Whether the case of `data` is one in `every` (decided by a hash of the bytes, so a case
/// always gets the same backends).
pub(crate) fn sampled(data: &[u8], every: u64) -> bool {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    h.finish().is_multiple_of(every)
}

/// The C backend, kernels cached on disk under the temporary directory; `None` without a C
/// compiler (asked once).
pub(crate) fn c_backend() -> Option<CBackend> {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    let c = CBackend::new().with_cache_dir(std::env::temp_dir().join("tessera-fuzz-c-cache"));
    AVAILABLE
        .get_or_init(|| c.compiler_available())
        .then_some(c)
}

/// Decode the case of `data` and check it on the JIT (and on C if `with_c` and a C compiler
/// exists) against the evaluator; panics on a disagreement.
pub fn check(data: &[u8], shapes: &Shapes, with_c: bool) {
    let case = generate::case(&mut Unstructured::new(data), shapes);
    check_case(&case, with_c);
}

pub fn check_case(case: &Case, with_c: bool) {
    let n = COUNTS.cases.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_multiple_of(REPORT_EVERY) {
        eprintln!("{}", COUNTS.summary());
    }
    // The printed program must be the program (the report shows it).
    let text = case.program.to_string();
    match tessera::notation::parse::parse_program(&text) {
        Ok(p) if p == case.program => {}
        other => panic!("a generated program does not print back: {other:?}\n{text}"),
    }
    // Kernels of thousands of lines take the JIT seconds and `cc` minutes to compile (see
    // `MAX_KERNEL_LINES`); they are counted and passed over.
    let lines = Runner::lower(&case.program, &tessera::api::formats_of(&case.tensors))
        .map_or(0, |(k, _, _)| CBackend::source(&k).lines().count());
    if lines > MAX_KERNEL_LINES {
        COUNTS.large.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let expected = run_eval(&case.program, &case.tensors);
    // A fresh runner per case: its kernel cache would otherwise hold every kernel compiled.
    // Every other case runs on tensors whose arrays are shared (as Python's are): kernels
    // must read them in place and write copies, never the shared memory.
    let shared = n % 2 == 1;
    let verdict = judge(case, &expected, &Runner::jit(), "jit", shared);
    if let Some(c) = (with_c && lines <= MAX_C_LINES).then(c_backend).flatten() {
        COUNTS.c_runs.fetch_add(1, Ordering::Relaxed);
        judge(case, &expected, &Runner::new(Box::new(c)), "c", shared);
    }
    let counter = match verdict {
        Verdict::Agree => &COUNTS.compared,
        Verdict::BothFailed => &COUNTS.both_failed,
        Verdict::Refused => &COUNTS.refused,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Run on one backend and compare with the evaluator's result; panics with the case on a
/// disagreement. With `shared`, the tensors' arrays are shared with a second holder first,
/// which must be unchanged afterwards.
fn judge(
    case: &Case,
    expected: &tessera::Result<BTreeMap<String, Buffer>>,
    runner: &Runner,
    backend: &str,
    shared: bool,
) -> Verdict {
    let mut tensors = case.tensors.clone();
    let holders = shared.then(|| {
        tensors.values_mut().for_each(Tensor::share);
        tensors.clone()
    });
    let got = run_compiled(runner, &case.program, &mut tensors);
    // Compared as printed: NaN equals NaN there, and -0.0 differs from 0.0.
    if let Some(h) = holders
        && format!("{h:?}") != format!("{:?}", case.tensors)
    {
        panic!(
            "{backend} wrote the memory of a tensor it shares\n{}",
            describe(case)
        );
    }
    match compare(expected, got.map(|()| &tensors)) {
        Ok(v) => v,
        Err(why) => panic!(
            "{backend} and the evaluator disagree: {why}\n{}",
            describe(case)
        ),
    }
}

fn run_compiled(
    runner: &Runner,
    program: &Program,
    tensors: &mut BTreeMap<String, Tensor>,
) -> tessera::Result<()> {
    let formats = tessera::api::formats_of(tensors);
    let k = runner.compile(program, &formats)?;
    runner.execute(&k, tensors)
}

/// The evaluator on dense copies; every tensor's values afterwards.
fn run_eval(
    program: &Program,
    tensors: &BTreeMap<String, Tensor>,
) -> tessera::Result<BTreeMap<String, Buffer>> {
    tessera::tensor::evaluate(program, tensors)
}

/// The case as a report: the program, then each tensor's format, shape and dense values.
pub fn describe(case: &Case) -> String {
    let mut out = format!("--- program\n{}--- tensors\n", case.program);
    for (n, t) in &case.tensors {
        out.push_str(&format!(
            "{n}: {} {:?} = {:?}\n",
            t.format,
            t.shape,
            t.to_dense().to_scalars()
        ));
    }
    out
}
