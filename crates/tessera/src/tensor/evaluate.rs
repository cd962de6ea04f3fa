//! The reference evaluator on tensors of any format: it runs on dense copies (the evaluator is
//! format-agnostic on purpose), shared by `--backend eval`, the tests' oracle and the
//! differential fuzz target.

use super::Tensor;
use crate::error::Result;
use crate::eval::{DenseTensor, Env};
use crate::notation::ast::Program;
use crate::runtime::Buffer;
use std::collections::BTreeMap;

/// Run `program` by the evaluator on dense copies of `tensors`; every tensor's dense values
/// afterwards. Each copy must fit the memory limit (an error naming the tensor otherwise).
pub fn evaluate(
    program: &Program,
    tensors: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Buffer>> {
    let mut env = Env::new();
    for (n, t) in tensors {
        env.insert(
            n,
            DenseTensor {
                shape: t.shape.clone(),
                fill: t.fill(),
                values: t.try_to_dense().map_err(|e| e.named(n))?,
            },
        );
    }
    crate::eval::run(program, &mut env)?;
    Ok(env
        .tensors
        .into_iter()
        .map(|(n, t)| (n, t.values))
        .collect())
}
