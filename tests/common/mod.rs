//! Helpers shared by the integration tests: running a program compiled and through the
//! reference evaluator, and finding the shared data folder.
#![allow(dead_code)]

pub mod cases;
pub mod cli;
pub mod data;
pub mod loops;
pub mod pieces;
pub mod random;
pub mod rows;
pub mod scipy;

use std::collections::BTreeMap;
use std::path::PathBuf;
use tessera::levels::Format;
use tessera::notation::ast::Program;
use tessera::notation::parse::parse_program;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;

pub fn parse(text: &str) -> Program {
    parse_program(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

pub fn formats_of(tensors: &BTreeMap<String, Tensor>) -> BTreeMap<String, Format> {
    tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect()
}

/// Compile and run with the JIT.
pub fn run_jit(program: &Program, tensors: &mut BTreeMap<String, Tensor>) -> tessera::Result<()> {
    let runner = Runner::jit();
    let c = runner.compile(program, &formats_of(tensors))?;
    runner.execute(&c, tensors)
}

/// Run the reference evaluator on dense copies; returns every tensor's dense values.
pub fn run_eval(
    program: &Program,
    tensors: &BTreeMap<String, Tensor>,
) -> tessera::Result<BTreeMap<String, Buffer>> {
    tessera::tensor::evaluate(program, tensors)
}

pub fn fmt(text: &str) -> Format {
    Format::parse(text, None).unwrap_or_else(|e| panic!("{e}"))
}

/// `../shared/data`, or None (with a message saying the test is skipped).
pub fn data_dir(test: &str) -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("skipping {test}: {} is absent", d.display());
        None
    }
}

/// A runner per backend: the JIT, the IR interpreter and, when a C compiler is present, the C
/// backend (else a message says it is not tested).
pub fn runners() -> Vec<(&'static str, Runner)> {
    let mut r = vec![
        ("jit", Runner::jit()),
        (
            "interp",
            Runner::new(Box::new(tessera::backend::Interpreter::new())),
        ),
    ];
    let c = tessera::backend::CBackend::new();
    if c.compiler_available() {
        r.push(("c", Runner::new(Box::new(c))));
    } else {
        eprintln!("no C compiler: the C backend is not tested");
    }
    r
}

/// [`runners`] and a JIT given every pass (`Jit::with_full_passes`: row interleaving,
/// which the default JIT, a first tier, leaves to the C backend).
pub fn runners_full() -> Vec<(&'static str, Runner)> {
    let mut r = runners();
    r.push((
        "jit-full",
        Runner::new(Box::new(tessera::backend::Jit::new().with_full_passes())),
    ));
    r
}

/// Run compiled and with the reference evaluator; every tensor must agree.
pub fn agree(program: &str, tensors: BTreeMap<String, Tensor>) -> BTreeMap<String, Tensor> {
    let p = parse(program);
    let want = run_eval(&p, &tensors).unwrap_or_else(|e| panic!("{e}\n{program}"));
    let mut got = tensors;
    run_jit(&p, &mut got).unwrap_or_else(|e| panic!("{e}\n{program}"));
    for (n, t) in &got {
        t.validate(n).unwrap();
        assert_eq!(t.to_dense(), want[n], "{n} in\n{program}");
    }
    got
}

/// README.md shows, as a `rust` block, the code between `// README example start` and
/// `// README example end` in the test source `source` (named `name`), so the example
/// cannot rot.
pub fn assert_readme_shows(source: &str, name: &str) {
    let start = source.find("// README example start\n").unwrap();
    let end = source.find("    // README example end").unwrap();
    let body: String = source[start..end]
        .lines()
        .skip(1)
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    let readme = include_str!("../../README.md");
    assert!(
        readme.contains(&format!("```rust\n{body}```")),
        "README.md's example differs from the one in tests/{name}:\n{body}"
    );
}

/// A fresh, empty folder `tessera-{kind}-{test}-{pid}` in the temporary directory, for one
/// test's files or kernel cache.
pub fn fresh_dir(kind: &str, test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-{kind}-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether a C compiler is here; without one, says that `test` is skipped.
pub fn has_c_compiler(test: &str) -> bool {
    let found = tessera::backend::CBackend::new().compiler_available();
    if !found {
        eprintln!("{test}: no C compiler (cc or $CC), skipped");
    }
    found
}
