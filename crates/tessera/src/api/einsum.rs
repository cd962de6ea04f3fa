//! `einsum("C[i, j] += A[i, k] * B[k, j]", &[("A", &a), ("B", &b)])`: one index-notation
//! statement, planned from the inputs' formats (see [`super::plan`]), generated as a loop
//! program and run through a [`Runner`]'s kernel cache.
//!
//! The statement is `OUT[idx...] op= expression` where `op=` is `=`, `+=`, `-=`, `*=`, `&=`,
//! `|=`, `<<min>>=` or `<<max>>=`, and the expression combines accesses `T[idx...]` (plain
//! index names, each distinct within an access), literals, operators and built-in functions.
//! Every index not on the left is reduced with the operator (`=` allows none).
//!
//! Fill values: the output starts from the reducer's identity (`0` for `+=`, `-Inf` for
//! `<<max>>=` on floats...), whatever the inputs' fills; with `=` it starts from the value of
//! the right side where every input holds its fill. Reductions run over every coordinate, the
//! inputs' fills included, as in NumPy: `m[i] <<max>>= A[i, j]` over a sparse `A` with fill 0
//! is at least 0 in a row with a gap. An output dimension is stored sparsely only where that
//! starting value is what the right side gives wherever the sparse inputs store nothing; so
//! inputs whose fill is not 0 (or not the reducer's identity) give dense outputs, and all-dense
//! inputs always do.
//!
//! Sparse inputs read against their level order are copied transposed first (same format
//! kind, [`crate::tensor::Tensor::permute`]); the plan lists them in `transposes`.
//!
//! With a runner of several threads, the outermost loop is marked parallel when that is
//! legal ([`Plan::parallelize`]), and runs on the threads when it has enough work.

use super::plan::{Plan, plan};
use super::spec::parse_spec;
use crate::error::{Error, Result};
use crate::levels::Format;
use crate::run::Runner;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

thread_local! {
    /// The kernel cache [`einsum`] uses: repeated einsums of the same statement on inputs of
    /// the same formats compile once per thread.
    static RUNNER: Runner = Runner::tiered();
}

/// Evaluate an einsum statement on named inputs, choosing the output format.
///
/// ```
/// use tessera::api::einsum;
/// use tessera::runtime::Buffer;
/// use tessera::tensor::Tensor;
/// let a = Tensor::from_triplets("csr", &[2, 2], &[vec![0, 1], vec![1, 0]],
///                               &Buffer::F64(vec![2.0, 3.0].into())).unwrap();
/// let c = einsum("C[i, j] += A[i, k] * A[k, j]", &[("A", &a)]).unwrap();
/// assert_eq!(c.to_dense(), Buffer::F64(vec![6.0, 0.0, 0.0, 6.0].into()));
/// assert_eq!(c.format.to_string(), "Dense(SparseList(Element(0.0)))");
/// ```
pub fn einsum(spec: &str, inputs: &[(&str, &Tensor)]) -> Result<Tensor> {
    RUNNER.with(|r| einsum_with(r, spec, inputs, None))
}

/// [`einsum`] with a kernel cache of your own (its `last_compile_ms` is 0 after a cache hit)
/// and, optionally, the output format.
pub fn einsum_with(
    runner: &Runner,
    spec: &str,
    inputs: &[(&str, &Tensor)],
    output: Option<&Format>,
) -> Result<Tensor> {
    let formats: Vec<(&str, &Format)> = inputs.iter().map(|(n, t)| (*n, &t.format)).collect();
    let mut plan = plan_einsum(spec, &formats, output)?;
    let mut tensors = prepare(&plan, inputs)?;
    let formats = formats_of(&tensors);
    // The outermost loop runs on the runner's threads when that is legal (the same program,
    // hence the same cached kernel, for every call with these formats and thread count) and
    // the inputs hold enough to be worth it: below the runner's threshold the serial program
    // runs, without even the split's segments (a few µs per call).
    if input_work(inputs) >= runner.min_parallel_work() {
        plan.parallelize(&formats, runner.threads());
    }
    let compiled = runner.compile(&plan.program, &formats)?;
    runner.execute(&compiled, &mut tensors)?;
    Ok(tensors
        .remove(&plan.spec.output)
        .expect("prepare adds the output"))
}

/// A bound on the work of an einsum over `inputs` that costs nothing to compute: the length
/// of each input's longest array (its stored entries, or all its elements when dense),
/// summed. [`einsum_with`] leaves the program serial below the runner's
/// [`Runner::min_parallel_work`].
pub fn input_work(inputs: &[(&str, &Tensor)]) -> u64 {
    inputs
        .iter()
        .map(|(_, t)| {
            t.levels
                .iter()
                .flatten()
                .map(|b| b.len() as u64)
                .max()
                .unwrap_or(1)
        })
        .sum()
}

/// Parse and plan a statement for inputs of these formats, without running it.
pub fn plan_einsum(
    spec: &str,
    inputs: &[(&str, &Format)],
    output: Option<&Format>,
) -> Result<Plan> {
    plan(&parse_spec(spec)?, inputs, output)
}

pub fn formats_of(tensors: &BTreeMap<String, Tensor>) -> BTreeMap<String, Format> {
    tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect()
}

/// The tensors the plan's program runs on: the inputs it reads directly (copied), and the
/// tensors of [`prepare_created`].
pub fn prepare(plan: &Plan, inputs: &[(&str, &Tensor)]) -> Result<BTreeMap<String, Tensor>> {
    let mut tensors = prepare_created(plan, inputs)?;
    let mut used = vec![];
    crate::notation::visit::accesses(&plan.program.body, &mut |a| used.push(a.tensor.clone()));
    for (n, t) in inputs {
        // A created tensor of the same name (the output) takes the place of the input.
        if used.iter().any(|u| u == n) && !tensors.contains_key(*n) {
            tensors.insert(n.to_string(), (*t).clone());
        }
    }
    Ok(tensors)
}

/// The tensors the plan's program runs on besides the inputs: the transposed copies, and an
/// empty output and workspace sized from the inputs. Checks that every index has one extent.
/// (A caller that owns its inputs adds them itself, with no copy.)
pub fn prepare_created(
    plan: &Plan,
    inputs: &[(&str, &Tensor)],
) -> Result<BTreeMap<String, Tensor>> {
    let (mut tensors, shape) = prepare_created_but_output(plan, inputs)?;
    tensors.insert(
        plan.spec.output.clone(),
        Tensor::empty(&plan.output_format, &shape)?,
    );
    Ok(tensors)
}

/// [`prepare_created`] without the output: the transposed copies and the workspace, and the
/// output's shape, for a caller that brings the output's memory (Python's `out=`; the
/// program's declaration fills it, so any contents do).
pub fn prepare_created_but_output(
    plan: &Plan,
    inputs: &[(&str, &Tensor)],
) -> Result<(BTreeMap<String, Tensor>, Vec<usize>)> {
    let get = |n: &str| {
        inputs
            .iter()
            .find(|(m, _)| *m == n)
            .map(|(_, t)| *t)
            .ok_or_else(|| Error::tensor(n, "is read by the einsum but was not given"))
    };
    let mut extents: BTreeMap<String, (usize, String, usize)> = BTreeMap::new();
    for a in &plan.spec.reads {
        let t = get(&a.tensor)?;
        if t.rank() != a.indices.len() {
            return Err(Error::program(
                a.span,
                format!(
                    "`{}` has {} dimensions but is indexed with {}",
                    a.tensor,
                    t.rank(),
                    a.indices.len()
                ),
            ));
        }
        for (d, ix) in a.indices.iter().enumerate() {
            let v = ix.expr.to_string();
            let n = t.shape[d];
            match extents.get(&v) {
                Some((m, other, e)) if *m != n => {
                    return Err(Error::DimensionMismatch {
                        span: ix.expr.span,
                        msg: format!(
                            "index `{v}` is {n} in `{}` (dimension {d}) but {m} in `{other}` (dimension {e})",
                            a.tensor
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    extents.insert(v, (n, a.tensor.clone(), d));
                }
            }
        }
    }
    // An index only ε reads ranges over ε's order.
    for (n, ix) in &plan.spec.eps {
        for (d, v) in ix.iter().enumerate() {
            extents
                .entry(v.clone())
                .or_insert((*n, crate::transforms::ein::EPS.to_string(), d));
        }
    }
    // An index only δ reads takes its partner's extent (δ is square).
    for (x, y) in &plan.spec.delta {
        for (v, w) in [(x, y), (y, x)] {
            if !extents.contains_key(v)
                && let Some(e) = extents.get(w).cloned()
            {
                extents.insert(v.clone(), e);
            }
        }
    }
    let size = |v: &String| extents[v].0;
    let mut tensors = BTreeMap::new();
    for tr in &plan.transposes {
        let t = get(&tr.input)?.permute(&tr.perm)?;
        tensors.insert(tr.name.clone(), t);
    }
    let shape: Vec<usize> = plan.spec.out_indices.iter().map(size).collect();
    crate::memory::check_tensor(&plan.output_format, &shape, 0)?;
    if let Some(w) = &plan.workspace {
        let shape: Vec<usize> = w.indices.iter().map(size).collect();
        tensors.insert(w.name.clone(), Tensor::empty(&w.format, &shape)?);
    }
    Ok((tensors, shape))
}
