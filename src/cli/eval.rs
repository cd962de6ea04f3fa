//! The `--backend eval` path: the reference evaluator on dense copies of the tensors.

use std::collections::BTreeMap;
use tessera::error::Result;
use tessera::notation::ast::Program;
use tessera::tensor::Tensor;

/// Run the reference evaluator on dense copies and store the results back in each format.
pub fn run_eval(program: &Program, tensors: &mut BTreeMap<String, Tensor>) -> Result<()> {
    let mut env = tessera::eval::Env {
        tensors: BTreeMap::new(),
    };
    for (n, t) in tensors.iter() {
        env.tensors.insert(
            n.clone(),
            tessera::eval::DenseTensor {
                shape: t.shape.clone(),
                fill: t.fill(),
                // The evaluator works on dense copies: each must fit the memory limit.
                values: t.try_to_dense().map_err(|e| e.named(n))?,
            },
        );
    }
    tessera::eval::run(program, &mut env)?;
    for (n, t) in tensors.iter_mut() {
        let d = &env.tensors[n];
        *t = Tensor::from_dense(&t.format, &t.shape, &d.values)?;
    }
    Ok(())
}
