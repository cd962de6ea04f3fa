//! The `--backend eval` path: the reference evaluator on dense copies of the tensors.

use std::collections::BTreeMap;
use tessera::error::Result;
use tessera::notation::ast::Program;
use tessera::tensor::Tensor;

/// Run the reference evaluator on dense copies and store the results back in each format.
pub fn run_eval(program: &Program, tensors: &mut BTreeMap<String, Tensor>) -> Result<()> {
    let values = tessera::tensor::evaluate(program, tensors)?;
    for (n, t) in tensors.iter_mut() {
        *t = Tensor::from_dense(&t.format, &t.shape, &values[n])?;
    }
    Ok(())
}
