//! Computations on tensors: einsum, elementwise operations, reductions, matmul and the lazy
//! API. Each releases the GIL while its kernels compile and run (`Python::detach`), so other
//! Python threads go on meanwhile; kernels are cached per OS thread by the core
//! (`tessera::api`'s shared runner), so repeated calls from one thread compile once.

use crate::convert::elem_of_dtype;
use crate::errors::IntoPy;
use crate::tensor::{PyTensor, format_for};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::sync::Arc;
use tessera::api::{self, Lazy, Op, Reduction};
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
        "neg" => Op::Neg,
        "not" => Op::Not,
        "abs" => Op::Abs,
        "sqrt" => Op::Sqrt,
        "exp" => Op::Exp,
        "log" => Op::Log,
        other => {
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

/// `OUT[...] op= expression` over the named tensors, with an optional output format.
#[pyfunction]
#[pyo3(signature = (spec, names, tensors, format=None))]
pub fn einsum(
    py: Python<'_>,
    spec: &str,
    names: Vec<String>,
    tensors: Vec<PyRef<'_, PyTensor>>,
    format: Option<&str>,
) -> PyResult<PyTensor> {
    let inputs: Vec<(String, Arc<Tensor>)> = names
        .into_iter()
        .zip(tensors.iter().map(|t| t.arc(py)))
        .collect();
    let spec = spec.to_string();
    let format = format.map(str::to_string);
    let out = py.detach(move || {
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), &**t)).collect();
        match format {
            None => api::einsum(&spec, &refs),
            Some(text) => {
                let rank = api::spec::parse_spec(&spec)?.out_indices.len();
                let f = format_for(&text, rank, None)?;
                crate::program::with_runner(|r| api::einsum_with(r, &spec, &refs, Some(&f)))
            }
        }
    });
    Ok(PyTensor::new(out.py_err()?))
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

#[pyfunction]
pub fn matmul(
    py: Python<'_>,
    a: PyRef<'_, PyTensor>,
    b: PyRef<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let (a, b) = (a.arc(py), b.arc(py));
    let out = py.detach(move || api::matmul(&a, &b));
    Ok(PyTensor::new(out.py_err()?))
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
