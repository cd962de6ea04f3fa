//! Helpers shared by the integration tests: running a program compiled and through the
//! reference evaluator, and finding the shared data folder.
#![allow(dead_code)]

pub mod data;
pub mod random;
pub mod scipy;

use std::collections::BTreeMap;
use std::path::PathBuf;
use tessera::eval::{DenseTensor, Env};
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
    let mut env = Env::new();
    for (n, t) in tensors {
        env.insert(
            n,
            DenseTensor {
                shape: t.shape.clone(),
                fill: t.fill(),
                values: t.to_dense(),
            },
        );
    }
    tessera::eval::run(program, &mut env)?;
    Ok(env
        .tensors
        .into_iter()
        .map(|(n, t)| (n, t.values))
        .collect())
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
