//! A differential case (a program and its tensors), how it prints when a test fails, how its
//! compiled run is compared with the reference evaluator, and the proptest set-up the
//! differential tests share.

use super::{fmt, formats_of, parse, run_eval};
use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngSeed, TestCaseError, TestCaseResult, TestError, TestRunner,
};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use tessera::backend::CBackend;
use tessera::notation::ast::Program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

/// A program and the tensors it runs on (inputs with data, outputs empty).
#[derive(Clone)]
pub struct Case {
    pub program: Program,
    pub tensors: BTreeMap<String, Tensor>,
}

impl Case {
    /// A case from text, for regressions: the program, and each tensor's name, format, shape
    /// and row-major values.
    pub fn from_text(program: &str, tensors: &[(&str, &str, &[usize], &[f64])]) -> Case {
        let tensors = tensors
            .iter()
            .map(|&(name, format, shape, values)| {
                let t =
                    Tensor::from_dense(&fmt(format), shape, &Buffer::F64(values.to_vec().into()))
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                (name.to_string(), t)
            })
            .collect();
        Case {
            program: parse(program),
            tensors,
        }
    }

    /// Keeps only the tensors the program accesses (generators offer more than it reads); the
    /// generators' tensor names are single letters, never the end of another name.
    pub fn retain_mentioned(mut self) -> Case {
        let text = self.program.to_string();
        self.tensors.retain(|n, _| text.contains(&format!("{n}[")));
        self
    }
}

/// What a failing test prints: the program text, then each tensor's format, shape and values
/// (nested by dimension; `Case::from_text` takes them back flattened).
impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        write!(f, "{}", self.program)?;
        for (n, t) in &self.tensors {
            writeln!(f, "{n}: {} {:?} = {}", t.format, t.shape, show_values(t))?;
        }
        Ok(())
    }
}

/// The dense values of `t`, as nested lists by dimension.
pub fn show_values(t: &Tensor) -> String {
    let values = t.to_dense();
    let all: Vec<String> = (0..values.len())
        .map(|k| values.get(k).to_string())
        .collect();
    fn nest(items: &[String], shape: &[usize]) -> String {
        match shape {
            [] => items.first().cloned().unwrap_or_default(),
            [_] => format!("[{}]", items.join(", ")),
            [n, rest @ ..] => {
                let size: usize = rest.iter().product();
                let parts: Vec<String> = (0..*n)
                    .map(|k| nest(&items[k * size..(k + 1) * size], rest))
                    .collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }
    nest(&all, &t.shape)
}

/// How a case's program is compiled and run (the JIT, the C backend ...).
pub type RunCompiled<'a> =
    dyn Fn(&Program, &mut BTreeMap<String, Tensor>) -> tessera::Result<()> + 'a;

/// How a case that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Both ran and every tensor agrees.
    Agreed,
    /// Both sides rejected the program (e.g. a dimension mismatch).
    BothFailed,
    /// The compiler refused a kernel it could run in principle (too large).
    Refused,
}

/// Runs `case` compiled (by `run`) and through the reference evaluator: every tensor must
/// agree exactly and be a valid instance of its format, or both sides must fail. The message
/// of a failure says what differs; `run_cases` prints the case after it.
pub fn compare(case: &Case, run: &RunCompiled<'_>) -> Result<Outcome, TestCaseError> {
    let expected = run_eval(&case.program, &case.tensors);
    let mut got = case.tensors.clone();
    let ran = run(&case.program, &mut got);
    match (expected, ran) {
        (Ok(want), Ok(())) => {
            for (n, t) in &got {
                if t.to_dense() != want[n] {
                    let want_t = Tensor::from_dense(&t.format, &t.shape, &want[n]);
                    let want =
                        want_t.map_or_else(|_| format!("{:?}", want[n]), |w| show_values(&w));
                    return Err(TestCaseError::fail(format!(
                        "tensor {n} is {} compiled but {want} by the evaluator",
                        show_values(t)
                    )));
                }
                t.validate(n)
                    .map_err(|e| TestCaseError::fail(format!("invalid result: {e}")))?;
            }
            Ok(Outcome::Agreed)
        }
        (Err(_), Err(_)) => Ok(Outcome::BothFailed),
        (Ok(_), Err(tessera::Error::Unsupported { .. })) => Ok(Outcome::Refused),
        (Ok(_), Err(e)) => Err(TestCaseError::fail(format!("compiled run failed: {e}"))),
        (Err(e), Ok(())) => Err(TestCaseError::fail(format!(
            "the evaluator failed ({e}) but the kernel ran"
        ))),
    }
}

/// Whether this is a long run (`PROPTEST_CASES` set) rather than CI's fixed set of cases.
pub fn long_run() -> bool {
    std::env::var_os("PROPTEST_CASES").is_some()
}

/// Kernels longer than this (in lines of C) take the JIT seconds each: Cranelift's register
/// allocator grows faster than linearly in the size of a function, and a few such cases
/// would take most of a test's time. CI passes over them (proptest draws other cases in their
/// place, so a test still runs its number of cases); long runs keep them.
pub const CI_MAX_KERNEL_LINES: usize = 20_000;

/// Rejects (on CI) a case whose kernel is longer than `CI_MAX_KERNEL_LINES`. Lowering costs a
/// small part of compiling; a program that does not lower is kept, for `compare` to judge.
pub fn skip_huge_kernels(case: &Case) -> TestCaseResult {
    if long_run() {
        return Ok(());
    }
    let lines = Runner::lower(&case.program, &formats_of(&case.tensors))
        .map_or(0, |(k, _, _)| CBackend::source(&k).lines().count());
    if lines > CI_MAX_KERNEL_LINES {
        return Err(TestCaseError::reject(format!("a kernel of {lines} lines")));
    }
    Ok(())
}

/// Counts of cases by outcome, for tests that allow refusals and double failures but only
/// rarely (or they would prove little).
#[derive(Default)]
pub struct Tally {
    cases: Cell<usize>,
    both_failed: Cell<usize>,
    refused: Cell<usize>,
}

impl Tally {
    pub fn count(&self, outcome: Outcome) {
        let bump = |c: &Cell<usize>| c.set(c.get() + 1);
        bump(&self.cases);
        match outcome {
            Outcome::Agreed => {}
            Outcome::BothFailed => bump(&self.both_failed),
            Outcome::Refused => bump(&self.refused),
        }
    }

    /// At most one case in `refused_one_in` refused and one in `both_one_in` rejected by both.
    pub fn assert_rare(&self, refused_one_in: usize, both_one_in: usize) {
        let (n, refused, both) = (self.cases.get(), self.refused.get(), self.both_failed.get());
        eprintln!("{n} cases: {refused} refused as too large, {both} rejected by both sides");
        assert!(
            refused * refused_one_in < n.max(1),
            "{refused} of {n} kernels were refused as too large"
        );
        assert!(
            both * both_one_in < n.max(1),
            "{both} of {n} programs were rejected by both sides"
        );
    }
}

/// The proptest configuration of the differential test `name`: `ci_cases` cases from a seed
/// fixed by the name (tests that share a strategy still see different cases), so that a CI
/// result never depends on the day's luck. `PROPTEST_CASES=N` runs N cases from a fresh seed,
/// printed so that `PROPTEST_RNG_SEED=seed` replays them. A failure's seed is saved in
/// `proptest-regressions/tests/NAME.txt` (commit it), and every run replays the saved seeds
/// before its own cases; a seed replays its case only while the strategy is unchanged, so a
/// bug found that way also joins a test as a `Case::from_text` of the shrunk case it prints.
pub fn config(name: &str, ci_cases: u32) -> Config {
    let file = format!(
        "{}/proptest-regressions/tests/{}.txt",
        env!("CARGO_MANIFEST_DIR"),
        name.replace(' ', "_")
    );
    let mut c = Config {
        // Proptest keeps the path for the whole run; one string per test is leaked.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file.leak()))),
        ..Config::default()
    };
    // Proptest's own limit (4 steps a case) stops CI-sized runs early; a shrinking step is one
    // compile and run, and a failure is worth a minute of them.
    if std::env::var_os("PROPTEST_MAX_SHRINK_ITERS").is_none() {
        c.max_shrink_iters = 2000;
    }
    let long_run = long_run();
    if !long_run {
        c.cases = ci_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(if long_run {
            let seed: u64 = rand::random();
            eprintln!("{name}: {} cases from PROPTEST_RNG_SEED={seed}", c.cases);
            seed
        } else {
            // FNV-1a of the name.
            name.bytes().fold(0xcbf29ce484222325, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
            })
        });
    }
    c
}

/// Runs the test `name` on cases drawn from `strategy` (see `config`); a failure panics with
/// its message and the case shrunk to a minimal one.
pub fn run_cases<S>(
    name: &str,
    ci_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> TestCaseResult,
) where
    S: Strategy,
{
    let mut runner = TestRunner::new(config(name, ci_cases));
    match runner.run(&strategy, test) {
        Ok(()) => {}
        Err(TestError::Fail(why, case)) => panic!("{why}\nminimal failing case:{case:?}"),
        Err(e) => panic!("{e}"),
    }
}

/// The C backend's samples keep to kernels of up to this many lines of C: each kernel is a
/// compiler run, and a large one takes the compiler seconds.
pub const C_MAX_LINES: usize = 1500;

/// The lines of C of `case`'s kernel (0 if it does not lower).
pub fn c_lines(case: &Case) -> usize {
    Runner::lower(&case.program, &formats_of(&case.tensors))
        .map_or(0, |(k, _, _)| CBackend::source(&k).lines().count())
}

/// A runner on the C backend caching in the shared test cache, or `None` (with a message
/// saying `test` is skipped) without a C compiler.
pub fn c_runner(test: &str) -> Option<Runner> {
    let c = CBackend::new().with_cache_dir(std::env::temp_dir().join("tessera-test-cache"));
    if c.compiler_available() {
        Some(Runner::new(Box::new(c)))
    } else {
        eprintln!("{test}: no C compiler (cc or $CC), skipped");
        None
    }
}

/// `ci_cases` cases of `strategy` (see `config`) compiled by the C backend against the
/// evaluator, each outcome judged by `accept` (which fails the case by returning an error);
/// refusals and double failures must be rare, as on the JIT, or the sample proves little.
/// Kernels over `C_MAX_LINES` lines are passed over (proptest draws others in their place)
/// and must stay fewer than those run. Skipped, with a message, without a C compiler.
pub fn c_matches_evaluator<S>(
    name: &str,
    ci_cases: u32,
    strategy: S,
    accept: impl Fn(Outcome) -> TestCaseResult,
) where
    S: Strategy<Value = Case>,
{
    let Some(c) = c_runner(name) else {
        return;
    };
    let run_c = |p: &Program, ts: &mut BTreeMap<String, Tensor>| {
        let k = c.compile(p, &formats_of(ts))?;
        c.execute(&k, ts)
    };
    let (ran, large, tally) = (Cell::new(0), Cell::new(0), Tally::default());
    run_cases(name, ci_cases, strategy, |case| {
        let lines = c_lines(&case);
        if lines > C_MAX_LINES {
            large.set(large.get() + 1);
            return Err(TestCaseError::reject(format!("a kernel of {lines} lines")));
        }
        let outcome = compare(&case, &run_c)?;
        accept(outcome)?;
        tally.count(outcome);
        ran.set(ran.get() + 1);
        Ok(())
    });
    tally.assert_rare(10, 4);
    let (ran, large) = (ran.get(), large.get());
    eprintln!("{name}: {ran} cases run on C, {large} with large kernels passed over");
    assert!(
        large < ran,
        "{large} large kernels passed over for {ran} run"
    );
}
