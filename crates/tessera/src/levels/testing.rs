//! Helpers for the level files' unit tests: parse a format, run a program on the JIT, or on
//! both backends with the results compared.

use crate::backend::{Interpreter, Jit};
use crate::levels::Format;
use crate::notation::parse::parse_program;
use crate::run::Runner;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

pub fn fmt(s: &str) -> Format {
    Format::parse(s, None).unwrap()
}

fn formats(tensors: &BTreeMap<String, Tensor>) -> BTreeMap<String, Format> {
    tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect()
}

/// Compile `text` for the tensors' formats and run it on the JIT.
pub fn run_jit(text: &str, tensors: &mut BTreeMap<String, Tensor>) -> crate::Result<()> {
    let runner = Runner::jit();
    let c = runner.compile(&parse_program(text).unwrap(), &formats(tensors))?;
    runner.execute(&c, tensors)
}

/// Run on both backends; the results (tensors or errors) must agree. Returns the JIT's.
pub fn run_both(
    text: &str,
    tensors: &BTreeMap<String, Tensor>,
) -> crate::Result<BTreeMap<String, Tensor>> {
    let program = parse_program(text).unwrap();
    let formats = formats(tensors);
    let mut out = vec![];
    for runner in [
        Runner::new(Box::new(Jit::new())),
        Runner::new(Box::new(Interpreter)),
    ] {
        let mut ts = tensors.clone();
        let r = runner
            .compile(&program, &formats)
            .and_then(|c| runner.execute(&c, &mut ts));
        out.push(r.map(|_| ts));
    }
    let interp = out.pop().unwrap();
    let jit = out.pop().unwrap();
    assert_eq!(jit, interp, "backends disagree on\n{text}");
    jit
}
