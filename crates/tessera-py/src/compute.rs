//! Computations on tensors: einsum, elementwise operations, reductions, matmul and the lazy
//! API. Each releases the GIL while its kernels compile and run (`Python::detach`), so other
//! Python threads go on meanwhile; kernels are cached per OS thread by the core
//! (`tessera::api`'s shared runner), so repeated calls from one thread compile once.

use crate::convert::{OutArray, check_overlaps, elem_of_dtype, lend_out, out_tensor, settle};
use crate::errors::IntoPy;
use crate::kernel::{CallError, scrub_tensor};
use crate::program::CallTensors;
use crate::tensor::{PyTensor, format_for};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use tessera::api::{self, Lazy, Op, Reduction};
use tessera::ir::math::{Math1, Math2};
use tessera::levels::{Format, LevelKind};
use tessera::run::Compiled;
use tessera::tensor::Tensor;
use tessera::{ElemType, Scalar};

fn op_named(name: &str) -> PyResult<Op> {
    Ok(match name {
        "add" => Op::Add,
        "sub" => Op::Sub,
        "mul" => Op::Mul,
        "div" => Op::Div,
        "minimum" => Op::Min,
        "maximum" => Op::Max,
        "lt" => Op::Lt,
        "le" => Op::Le,
        "gt" => Op::Gt,
        "ge" => Op::Ge,
        "eq" => Op::Eq,
        "ne" => Op::Ne,
        "and" => Op::And,
        "or" => Op::Or,
        "xor" => Op::Xor,
        "lshift" => Op::Lshift,
        "rshift" => Op::Rshift,
        "signbit" => Op::Signbit,
        "neg" => Op::Neg,
        "not" => Op::Not,
        "abs" => Op::Abs,
        "sqrt" => Op::Sqrt,
        "exp" => Op::Exp,
        "log" => Op::Log,
        "floor" => Op::Floor,
        "where" => Op::Where,
        other => {
            // The float functions (`sin`, ..., `pow`, `atan2`, `hypot`, `copysign`, ...) and
            // the floored `mod` and `fld`.
            if let Some(f) = Math1::ALL.into_iter().find(|f| f.name() == other) {
                return Ok(Op::Math(f));
            }
            if let Some(f) = Math2::ALL.into_iter().find(|f| f.name() == other) {
                return Ok(Op::Math2(f));
            }
            return Err(PyValueError::new_err(format!(
                "unknown operation `{other}`"
            )));
        }
    })
}

fn reduction_named(name: &str) -> PyResult<Reduction> {
    Ok(match name {
        "sum" => Reduction::Sum,
        "prod" => Reduction::Prod,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        "any" => Reduction::Any,
        "all" => Reduction::All,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown reduction `{other}`"
            )));
        }
    })
}

/// A planned einsum with its compiled kernel, for one statement, input formats and output
/// format.
struct Planned {
    plan: api::Plan,
    compiled: Rc<Compiled>,
    /// The inputs' shapes (in name order) of the last call that wrote into an `out=` array,
    /// and the output's shape they gave; only for plans without transposed copies or a
    /// workspace, where the output's shape is all that `prepare_created_but_output` makes
    /// (it formats each index expression to match extents by name: a tenth of a tiny
    /// `matmul(A, x, out=y)`).
    last_out_shape: RefCell<Option<OutShape>>,
    /// The kernel's tensors in parameter order for calls with `out=` ([`Slots`]); `None`
    /// until the first such call, or when the plan does not fit them.
    slots: RefCell<Option<Slots>>,
}

/// A plan's kernel tensors by position, kept between calls that write into an `out=` array
/// (the plan has no transposed copies, no workspace, and its output is not an input): the
/// inputs' slots are refilled with the call's arrays (a reference count each), the output's
/// slot gets the lent array, and `Runner::execute_at` runs them; no map is built and no name
/// compared. The arrays are dropped after each call.
struct Slots {
    slots: Vec<Tensor>,
    /// Each input's place, in the plan's input (name) order.
    inputs: Vec<usize>,
    out_at: usize,
}

/// The inputs' shapes in name order, and the output's shape they give.
type OutShape = (Vec<Vec<usize>>, Vec<usize>);

/// What an einsum's plan depends on: the statement, each input's name and format, and the
/// output format asked for.
type PlanKey = (String, Vec<(String, Format)>, Option<String>);

thread_local! {
    /// Plans by statement and formats: an einsum called again on new data of the same formats
    /// neither plans nor looks its kernel up again. Bounded: cleared at `PLANS_MAX` entries.
    static PLANS: RefCell<HashMap<PlanKey, Rc<Planned>>> = RefCell::new(HashMap::new());
}

const PLANS_MAX: usize = 256;

thread_local! {
    /// The plan of this thread's last einsum (or matmul), compared in place before `PLANS`
    /// is consulted: a loop calling one einsum then builds, hashes and drops no key (cloning
    /// the statement and every input's format was a tenth of a tiny SpMV's call).
    static LAST_PLAN: RefCell<Option<(PlanKey, Rc<Planned>)>> = const { RefCell::new(None) };
}

/// Whether `key` is the key of this statement, these inputs' names and formats, and this
/// output format.
fn same_plan_key(
    key: &PlanKey,
    spec: &str,
    tensors: &[(&str, &Tensor)],
    format: Option<&str>,
) -> bool {
    key.0 == spec
        && key.2.as_deref() == format
        && key.1.len() == tensors.len()
        && key
            .1
            .iter()
            .zip(tensors)
            .all(|((n, f), (m, t))| n == m && *f == t.format)
}

/// The einsum's plan and kernel for these inputs' formats and the output format asked for.
fn planned_for(
    spec: &str,
    tensors: &[(&str, &Tensor)],
    format: Option<String>,
) -> tessera::Result<Rc<Planned>> {
    let last = LAST_PLAN.with(|l| {
        l.borrow()
            .as_ref()
            .filter(|(key, _)| same_plan_key(key, spec, tensors, format.as_deref()))
            .map(|(_, planned)| planned.clone())
    });
    if let Some(planned) = last {
        return Ok(planned);
    }
    planned_by_key(spec, tensors, format)
}

/// [`planned_for`] through the table of plans (`PLANS`), remembered as the last plan.
fn planned_by_key(
    spec: &str,
    tensors: &[(&str, &Tensor)],
    format: Option<String>,
) -> tessera::Result<Rc<Planned>> {
    let key: PlanKey = (
        spec.to_string(),
        tensors
            .iter()
            .map(|(n, t)| (n.to_string(), t.format.clone()))
            .collect(),
        format.clone(),
    );
    let planned = match PLANS.with(|p| p.borrow().get(&key).cloned()) {
        Some(p) => p,
        None => {
            let output = match &format {
                Some(text) => {
                    let rank = api::spec::parse_spec(spec)?.out_indices.len();
                    Some(format_for(text, rank, None)?)
                }
                None => None,
            };
            let formats: Vec<(&str, &Format)> =
                key.1.iter().map(|(n, f)| (n.as_str(), f)).collect();
            let mut plan = api::plan_einsum(spec, &formats, output.as_ref())?;
            let mut formats = api::formats_of(&api::prepare_created(&plan, tensors)?);
            tessera::notation::visit::accesses(&plan.program.body, &mut |a| {
                if let Some((_, t)) = tensors.iter().find(|(n, _)| *n == a.tensor) {
                    formats
                        .entry(a.tensor.clone())
                        .or_insert_with(|| t.format.clone());
                }
            });
            // As `api::einsum_with`: the outermost loop runs on the runner's threads when legal.
            // The plan is cached for these formats whatever the sizes: parallelise it when
            // legal, and let the runner's threshold keep small calls on one thread.
            let compiled = crate::program::with_runner(|r| {
                plan.parallelize(&formats, r.threads());
                r.compile(&plan.program, &formats)
            })?;
            let planned = Rc::new(Planned {
                plan,
                compiled,
                last_out_shape: RefCell::new(None),
                slots: RefCell::new(None),
            });
            PLANS.with(|p| {
                let mut p = p.borrow_mut();
                if p.len() >= PLANS_MAX {
                    p.clear();
                }
                p.insert(key.clone(), planned.clone());
            });
            planned
        }
    };
    LAST_PLAN.with(|l| *l.borrow_mut() = Some((key, planned.clone())));
    Ok(planned)
}

/// `api::prepare_created_but_output`, its output shape remembered per plan: a call whose
/// inputs have the shapes of the last one reuses the shape they gave (the extents were
/// checked against each other then, and depend on nothing else); any other shape is checked
/// again. The memory limit is checked on every call (it may have changed).
fn created_but_output(
    planned: &Planned,
    refs: &[(&str, &Tensor)],
) -> tessera::Result<(BTreeMap<String, Tensor>, Vec<usize>)> {
    let plan = &planned.plan;
    let reusable = plan.transposes.is_empty() && plan.workspace.is_none();
    if reusable {
        let last = planned.last_out_shape.borrow();
        if let Some((shapes, out)) = last.as_ref()
            && shapes.len() == refs.len()
            && shapes.iter().zip(refs).all(|(s, (_, t))| *s == t.shape)
        {
            tessera::memory::check_tensor(&plan.output_format, out, 0)?;
            return Ok((BTreeMap::new(), out.clone()));
        }
    }
    let (created, shape) = api::prepare_created_but_output(plan, refs)?;
    if reusable {
        let shapes = refs.iter().map(|(_, t)| t.shape.clone()).collect();
        *planned.last_out_shape.borrow_mut() = Some((shapes, shape.clone()));
    }
    Ok((created, shape))
}

/// The plan for these inputs; with `out` (a NumPy array, always dense), one whose output is
/// dense (an output planned sparse is planned dense instead).
fn planned_out(
    spec: &str,
    refs: &[(&str, &Tensor)],
    format: Option<String>,
    out: bool,
) -> tessera::Result<Rc<Planned>> {
    let planned = planned_for(spec, refs, format)?;
    let f = &planned.plan.output_format;
    if out
        && !f.levels[..f.levels.len() - 1]
            .iter()
            .all(|l| matches!(l, LevelKind::Dense))
    {
        let dense = Format::dense(f.rank(), f.fill()).to_string();
        return planned_for(spec, refs, Some(dense));
    }
    Ok(planned)
}

/// The einsum written into the `out=` array through the plan's [`Slots`] (`execute_at`),
/// on the inputs in place; `Ok(None)` when the plan does not fit them (transposed copies, a
/// workspace, the output also an input): nothing was run and the array was not taken, and
/// the caller takes the map path ([`einsum_on`]).
fn einsum_at(
    spec: &str,
    refs: &[(&str, &Tensor)],
    format: Option<String>,
    out: &mut OutArray,
) -> Result<Option<Tensor>, CallError> {
    let planned = planned_out(spec, refs, format, true)?;
    let plan = &planned.plan;
    if !plan.transposes.is_empty()
        || plan.workspace.is_some()
        || refs.iter().any(|(n, _)| *n == plan.spec.output)
    {
        return Ok(None);
    }
    let (created, shape) = created_but_output(&planned, refs)?;
    // A call made while another runs on this thread takes the map path.
    let Ok(mut kept) = planned.slots.try_borrow_mut() else {
        return Ok(None);
    };
    if !created.is_empty() {
        return Ok(None);
    }
    if kept.is_none() {
        *kept = Slots::make(&planned, refs);
    }
    let Some(slots) = kept.as_mut() else {
        return Ok(None);
    };
    let t = out_tensor(out, &plan.output_format, &shape)?;
    // The plan is this one for these names and formats (its key), so only the arrays and
    // shapes change; `execute_at` checks the rest.
    for ((_, t), &at) in refs.iter().zip(&slots.inputs) {
        let slot = &mut slots.slots[at];
        slot.levels.clone_from(&t.levels);
        slot.shape.clone_from(&t.shape);
    }
    let placeholder = std::mem::replace(&mut slots.slots[slots.out_at], t);
    let ran = crate::program::with_runner(|r| r.execute_at(&planned.compiled, &mut slots.slots));
    let t = std::mem::replace(&mut slots.slots[slots.out_at], placeholder);
    for &at in &slots.inputs {
        scrub_tensor(&mut slots.slots[at]);
    }
    ran?;
    crate::kernel::SITE_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Some(t))
}

impl Slots {
    /// The slots of `planned`'s kernel for inputs named as `refs` (in their order), or `None`
    /// when the kernel's tensors are not exactly these inputs and the output.
    fn make(planned: &Planned, refs: &[(&str, &Tensor)]) -> Option<Slots> {
        let c = &planned.compiled;
        let plan = &planned.plan;
        let n = c.layout.tensors.len();
        if refs.len() + 1 != n {
            return None;
        }
        let out_at = c.param(&plan.spec.output)?;
        let mut slots: Vec<Option<Tensor>> = vec![None; n];
        let mut inputs = Vec::with_capacity(refs.len());
        for (name, t) in refs {
            let at = c.param(name)?;
            if at == out_at || slots[at].is_some() {
                return None;
            }
            let mut kept = (*t).clone();
            scrub_tensor(&mut kept);
            slots[at] = Some(kept);
            inputs.push(at);
        }
        let f = &plan.output_format;
        slots[out_at] = Some(Tensor {
            shape: vec![],
            format: f.clone(),
            levels: vec![vec![]; f.levels.len()],
        });
        Some(Slots {
            slots: slots.into_iter().collect::<Option<_>>()?,
            inputs,
            out_at,
        })
    }
}

/// The einsum on tensors the call owns (lent by their Python objects): the inputs are read
/// where they are, only transposed operands are copies. With `out`, the output is that
/// NumPy array, written in place (dense: an output planned sparse is planned dense instead),
/// and the tensor returned holds its memory.
fn einsum_on(
    spec: &str,
    tensors: &mut BTreeMap<String, Tensor>,
    format: Option<String>,
    out: Option<&mut OutArray>,
) -> Result<Tensor, CallError> {
    let (planned, created) = {
        let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let planned = planned_out(spec, &refs, format, out.is_some())?;
        let created = match out {
            None => api::prepare_created(&planned.plan, &refs)?,
            Some(out) => {
                let (mut created, shape) = created_but_output(&planned, &refs)?;
                let t = out_tensor(out, &planned.plan.output_format, &shape)?;
                created.insert(planned.plan.spec.output.clone(), t);
                created
            }
        };
        (planned, created)
    };
    // The output may reuse an input's name: it then stands in for it, as in `api::einsum`.
    let mut replaced = vec![];
    for (n, t) in created {
        if let Some(old) = tensors.insert(n.clone(), t) {
            replaced.push((n, old));
        }
    }
    let ran = crate::program::with_runner(|r| r.execute(&planned.compiled, tensors));
    let out = tensors.remove(&planned.plan.spec.output);
    // Transposed copies and the workspace go; replaced inputs come back into the map.
    for name in planned.plan.transposes.iter().map(|t| &t.name) {
        tensors.remove(name);
    }
    if let Some(w) = &planned.plan.workspace {
        tensors.remove(&w.name);
    }
    for (n, old) in replaced {
        tensors.insert(n, old);
    }
    ran?;
    Ok(out.expect("prepare_created adds the output"))
}

/// An einsum's `out=` array: lent after the same checks as a kernel's.
fn lend_einsum_out(
    shared: &BTreeMap<String, Arc<Tensor>>,
    out: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<OutArray>> {
    let Some(out) = out else { return Ok(None) };
    let lent = vec![lend_out("", out)?];
    check_overlaps(&lent, shared.iter().map(|(n, t)| (n, &**t)))?;
    Ok(lent.into_iter().next())
}

/// The result of an einsum or matmul: a new tensor, or (with `out=`) the array, its values
/// in place.
fn einsum_result(
    py: Python<'_>,
    ran: Result<(Tensor, Option<OutArray>), CallError>,
) -> PyResult<Option<PyTensor>> {
    let (t, out) = ran?;
    match out {
        None => Ok(Some(PyTensor::new(t))),
        Some(o) => {
            settle(py, &o, &t)?;
            Ok(None)
        }
    }
}

/// `OUT[...] op= expression` over the named tensors, with an optional output format; with
/// `out` (a NumPy array), the output is written into it and `None` returned.
#[pyfunction]
#[pyo3(signature = (spec, names, tensors, format=None, out=None))]
pub fn einsum(
    py: Python<'_>,
    spec: &str,
    names: Vec<String>,
    tensors: Vec<PyRef<'_, PyTensor>>,
    format: Option<&str>,
    out: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<PyTensor>> {
    let shared: BTreeMap<String, Arc<Tensor>> = names
        .into_iter()
        .zip(tensors.iter().map(|t| t.shared()))
        .collect();
    let mut out = lend_einsum_out(&shared, out)?;
    let spec = spec.to_string();
    let format = format.map(str::to_string);
    let ran = py.detach(move || {
        if let Some(o) = out.as_mut()
            && let Some(t) = einsum_at(&spec, &refs_of(&shared), format.clone(), o)?
        {
            return Ok((t, out));
        }
        // The inputs are only read: their arrays are shared, none copied.
        let mut call = CallTensors::new(shared);
        let t = einsum_on(&spec, &mut call.tensors, format, out.as_mut())?;
        Ok((t, out))
    });
    einsum_result(py, ran)
}

/// The shared inputs by name, as the plans take them.
fn refs_of(shared: &BTreeMap<String, Arc<Tensor>>) -> Vec<(&str, &Tensor)> {
    shared.iter().map(|(n, t)| (n.as_str(), &**t)).collect()
}

/// An elementwise operation with NumPy broadcasting.
#[pyfunction]
pub fn elementwise(
    py: Python<'_>,
    op: &str,
    tensors: Vec<PyRef<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let op = op_named(op)?;
    if tensors.len() != op.arity() {
        return Err(PyTypeError::new_err(format!(
            "{op:?} takes {} operands, not {}",
            op.arity(),
            tensors.len()
        )));
    }
    let inputs: Vec<Arc<Tensor>> = tensors.iter().map(|t| t.arc(py)).collect();
    let out = py.detach(move || {
        let refs: Vec<&Tensor> = inputs.iter().map(|t| &**t).collect();
        api::map(op, &refs)
    });
    Ok(PyTensor::new(out.py_err()?))
}

/// A reduction over `axes` (none: every axis, giving a 0-d tensor).
#[pyfunction]
pub fn reduce(
    py: Python<'_>,
    how: &str,
    tensor: PyRef<'_, PyTensor>,
    axes: Vec<usize>,
) -> PyResult<PyTensor> {
    let how = reduction_named(how)?;
    let t = tensor.arc(py);
    let out = py.detach(move || api::reduce(how, &t, &axes));
    Ok(PyTensor::new(out.py_err()?))
}

/// The core's `matmul` (1-d and 2-d operands); with `out` (a NumPy array), the product is
/// written into it (the same einsum, through the Python einsum's plan cache) and `None`
/// returned.
#[pyfunction]
#[pyo3(signature = (a, b, out=None))]
pub fn matmul(
    py: Python<'_>,
    a: PyRef<'_, PyTensor>,
    b: PyRef<'_, PyTensor>,
    out: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<PyTensor>> {
    let (a, b) = (a.arc(py), b.arc(py));
    let Some(out) = out else {
        let t = py.detach(move || api::matmul(&a, &b)).py_err()?;
        return Ok(Some(PyTensor::new(t)));
    };
    let spec = api::matmul_spec(&a, &b).py_err()?;
    let shared = BTreeMap::from([("A".to_string(), a), ("B".to_string(), b)]);
    let mut out = lend_einsum_out(&shared, Some(out))?;
    let ran = py.detach(move || {
        if let Some(o) = out.as_mut()
            && let Some(t) = einsum_at(spec, &refs_of(&shared), None, o)?
        {
            return Ok((t, out));
        }
        let mut call = CallTensors::new(shared);
        let t = einsum_on(spec, &mut call.tensors, None, out.as_mut())?;
        Ok((t, out))
    });
    einsum_result(py, ran)
}

#[pyfunction]
pub fn permute_dims(
    py: Python<'_>,
    a: PyRef<'_, PyTensor>,
    perm: Vec<usize>,
) -> PyResult<PyTensor> {
    let a = a.arc(py);
    let out = py.detach(move || api::permute_dims(&a, &perm));
    Ok(PyTensor::new(out.py_err()?))
}

/// A 0-d tensor holding a Python number as `dtype`.
#[pyfunction]
pub fn scalar(value: &Bound<'_, PyAny>, dtype: &str) -> PyResult<PyTensor> {
    let s = match elem_of_dtype(dtype)? {
        ElemType::Bool => Scalar::Bool(value.extract()?),
        ElemType::F64 | ElemType::F32 => Scalar::F64(value.extract()?).cast(elem_of_dtype(dtype)?),
        ElemType::U64 => Scalar::U64(value.extract()?),
        ty => Scalar::I64(value.extract()?).cast(ty),
    };
    Ok(PyTensor::new(api::scalar(s)))
}

/// A lazy expression as the Python side describes it, with its tensors shared: it crosses
/// into the GIL-free closure, where it becomes a `tessera::api::Lazy` (which is not `Send`).
enum Tree {
    Input(Arc<Tensor>),
    Map(Op, Vec<Tree>),
    Reduce(Reduction, Box<Tree>, Vec<usize>),
    Permute(Box<Tree>, Vec<usize>),
    ExpandDims(Box<Tree>, usize),
    MatMul(Box<Tree>, Box<Tree>),
}

fn tree_of(node: &Bound<'_, PyAny>) -> PyResult<Tree> {
    let py = node.py();
    let tuple = node.cast::<PyTuple>()?;
    let tag: String = tuple.get_item(0)?.extract()?;
    let item = |k: usize| tuple.get_item(k);
    Ok(match tag.as_str() {
        "input" => Tree::Input(item(1)?.extract::<PyRef<'_, PyTensor>>()?.arc(py)),
        "map" => {
            let op = op_named(&item(1)?.extract::<String>()?)?;
            let args = item(2)?;
            let args = args.cast::<PyList>()?;
            Tree::Map(
                op,
                args.iter().map(|a| tree_of(&a)).collect::<PyResult<_>>()?,
            )
        }
        "reduce" => Tree::Reduce(
            reduction_named(&item(1)?.extract::<String>()?)?,
            Box::new(tree_of(&item(2)?)?),
            item(3)?.extract()?,
        ),
        "permute" => Tree::Permute(Box::new(tree_of(&item(1)?)?), item(2)?.extract()?),
        "expand_dims" => Tree::ExpandDims(Box::new(tree_of(&item(1)?)?), item(2)?.extract()?),
        "matmul" => Tree::MatMul(Box::new(tree_of(&item(1)?)?), Box::new(tree_of(&item(2)?)?)),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown lazy node `{other}`"
            )));
        }
    })
}

fn build(t: &Tree) -> Lazy {
    match t {
        // The core's lazy inputs own their tensors: one copy per input per `compute`.
        Tree::Input(t) => Lazy::from((**t).clone()),
        Tree::Map(op, args) => {
            let built: Vec<Lazy> = args.iter().map(build).collect();
            let others: Vec<&Lazy> = built[1..].iter().collect();
            built[0].map(*op, &others)
        }
        Tree::Reduce(how, a, axes) => build(a).reduce(*how, axes),
        Tree::Permute(a, perm) => build(a).permute(perm),
        Tree::ExpandDims(a, axis) => build(a).expand_dims(*axis),
        Tree::MatMul(a, b) => build(a).matmul(&build(b)),
    }
}

/// Compute a lazy expression in as few kernels as the core's fuser manages; returns the
/// result and the einsum statements that ran.
#[pyfunction]
pub fn lazy_compute(py: Python<'_>, tree: &Bound<'_, PyAny>) -> PyResult<(PyTensor, Vec<String>)> {
    let tree = tree_of(tree)?;
    let out = py.detach(move || build(&tree).compute_explained());
    let (t, statements) = out.py_err()?;
    Ok((PyTensor::new(t), statements))
}
