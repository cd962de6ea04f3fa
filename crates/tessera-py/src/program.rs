//! `tessera.run` and `tessera.code`: a loop program over named tensors, as the command line's
//! `run` and `code` take it, with the tensors given as Python keyword arguments instead of
//! files. Outputs the caller names but does not give are created (dense `f64` unless a
//! format is named; shapes inferred from the program, or given); an output also given as an
//! input starts from that tensor's contents (a copy: the caller's tensor never changes).

use crate::errors::IntoPy;
use crate::tensor::{PyTensor, format_for};
use pyo3::prelude::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use tessera::Scalar;
use tessera::error::{Error, Result};
use tessera::levels::Format;
use tessera::notation::ast::{Expr, Program, Stmt, StmtKind};
use tessera::run::Runner;
use tessera::tensor::Tensor;

thread_local! {
    /// One kernel cache per backend and OS thread, kept for the life of the thread: a second
    /// call with tensors of the same formats compiles nothing.
    static RUNNERS: RefCell<HashMap<String, Rc<Runner>>> = RefCell::new(HashMap::new());
}

fn runner(backend: &str) -> Result<Rc<Runner>> {
    RUNNERS.with(|r| {
        if let Some(runner) = r.borrow().get(backend) {
            return Ok(runner.clone());
        }
        let runner = Rc::new(match backend {
            "tiered" => Runner::tiered(),
            "jit" => Runner::jit(),
            "c" => Runner::new(Box::new(tessera::backend::CBackend::new())),
            other => {
                return Err(Error::Usage(format!(
                    "unknown backend `{other}` (tiered, jit or c)"
                )));
            }
        });
        r.borrow_mut().insert(backend.to_string(), runner.clone());
        Ok(runner)
    })
}

/// The default (tiered) runner of this thread, shared by `run` and `einsum` with a format.
pub fn with_runner<T>(f: impl FnOnce(&Runner) -> Result<T>) -> Result<T> {
    let r = runner("tiered")?;
    f(&r)
}

/// What a program needs before it compiles: the tensors (inputs copied, outputs created)
/// and the program with the outputs' declarations added.
struct Prepared {
    program: Program,
    tensors: BTreeMap<String, Tensor>,
    formats: BTreeMap<String, Format>,
}

/// Program text as the command line reads it, positions relative to the text.
fn parse(text: &str) -> Result<Program> {
    let program = tessera::notation::parse::parse_program(text)?;
    tessera::transforms::ein::lower(&program)
}

fn prepare(
    text: &str,
    inputs: &BTreeMap<String, Arc<Tensor>>,
    outs: &BTreeMap<String, Option<String>>,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<Prepared> {
    let mut program = parse(text)?;
    for name in inputs.keys().chain(outs.keys()) {
        if tessera::transforms::ein::is_reserved(name) {
            return Err(tessera::transforms::ein::reserved_error(name));
        }
    }
    let mut ranks: HashMap<String, usize> = HashMap::new();
    tessera::notation::visit::accesses(&program.body, &mut |a| {
        ranks.entry(a.tensor.clone()).or_insert(a.indices.len());
    });
    let mut declared = HashSet::new();
    tessera::notation::visit::stmts(&program.body, &mut |s| {
        if let StmtKind::Declare { tensor, .. } = &s.kind {
            declared.insert(tensor.clone());
        }
    });
    let mut tensors: BTreeMap<String, Tensor> = inputs
        .iter()
        .map(|(n, t)| (n.clone(), (**t).clone()))
        .collect();
    let mut created: Vec<String> = outs
        .keys()
        .filter(|n| !tensors.contains_key(*n))
        .cloned()
        .collect();
    for n in &declared {
        if !tensors.contains_key(n) && !outs.contains_key(n) {
            created.push(n.clone());
        }
    }
    for n in shapes.keys() {
        if !created.contains(n) {
            return Err(Error::Usage(format!(
                "shapes[{n:?}]: `{n}` is not an output or workspace the program creates"
            )));
        }
    }
    let mut unknown = None;
    tessera::notation::visit::accesses(&program.body, &mut |a| {
        if unknown.is_none() && !tensors.contains_key(&a.tensor) && !created.contains(&a.tensor) {
            unknown = Some(Error::program(
                a.span,
                format!(
                    "unknown tensor `{}`: pass it as {}=... or name it in out=",
                    a.tensor, a.tensor
                ),
            ));
        }
    });
    if let Some(e) = unknown {
        return Err(e);
    }
    let mut formats: BTreeMap<String, Format> = BTreeMap::new();
    for n in &created {
        let rank = ranks
            .get(n)
            .copied()
            .or_else(|| shapes.get(n).map(|s| s.len()))
            .or_else(|| declared.contains(n).then_some(0))
            .ok_or_else(|| Error::Usage(format!("out={n:?}: the program never uses `{n}`")))?;
        let f = match outs.get(n).and_then(|f| f.as_deref()) {
            Some(text) => format_for(text, rank, None)?,
            None => Format::dense(rank, Scalar::F64(0.0)),
        };
        formats.insert(n.clone(), f);
    }
    let mut known: HashMap<String, Option<Vec<usize>>> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), Some(t.shape.clone())))
        .collect();
    for n in &created {
        let shape = match shapes.get(n) {
            Some(s) => Some(s.clone()),
            None if !ranks.contains_key(n) => Some(vec![]),
            None => None,
        };
        known.insert(n.clone(), shape);
    }
    let values = tessera::run::scalar_values(&program, &tensors);
    let inferred = tessera::transforms::infer_shapes_with(&program, &known, &values)?;
    for n in &created {
        let t = Tensor::empty(&formats[n], &inferred[n]).map_err(|e| e.named(n))?;
        tensors.insert(n.clone(), t);
    }
    // Outputs the program does not declare start from their fill value, as on the command line.
    let global: HashSet<String> = program
        .body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Declare { tensor, .. } => Some(tensor.clone()),
            _ => None,
        })
        .collect();
    for n in outs.keys() {
        if !global.contains(n) && created.contains(n) {
            let init = Expr::lit(tensors[n].fill());
            let kind = StmtKind::Declare {
                tensor: n.clone(),
                init,
            };
            program.body.insert(0, Stmt::new(kind, Default::default()));
        }
    }
    for (n, t) in &tensors {
        t.validate(n)?;
    }
    let formats = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect();
    Ok(Prepared {
        program,
        tensors,
        formats,
    })
}

type Inputs = BTreeMap<String, Arc<Tensor>>;

fn inputs_of(tensors: BTreeMap<String, PyRef<'_, PyTensor>>) -> Inputs {
    tensors.into_iter().map(|(n, t)| (n, t.t.clone())).collect()
}

/// Run `program` on the tensors; returns the outputs named in `out` (name → format or None).
#[pyfunction]
#[pyo3(signature = (program, tensors, out, shapes, backend="tiered"))]
pub fn run(
    py: Python<'_>,
    program: String,
    tensors: BTreeMap<String, PyRef<'_, PyTensor>>,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: &str,
) -> PyResult<BTreeMap<String, PyTensor>> {
    let inputs = inputs_of(tensors);
    let backend = backend.to_string();
    let result = py.detach(move || -> Result<BTreeMap<String, PyTensor>> {
        let runner = runner(&backend)?;
        let mut p = prepare(&program, &inputs, &out, &shapes)?;
        let compiled = runner.compile(&p.program, &p.formats)?;
        runner.execute(&compiled, &mut p.tensors)?;
        Ok(out
            .keys()
            .map(|n| {
                (
                    n.clone(),
                    PyTensor::new(p.tensors.remove(n).expect("outputs are created")),
                )
            })
            .collect())
    });
    result.py_err()
}

/// The loop IR (or, with `backend="c"`, the C source) `run` would compile for these tensors.
#[pyfunction]
#[pyo3(signature = (program, tensors, out, shapes, backend="jit"))]
pub fn code(
    py: Python<'_>,
    program: String,
    tensors: BTreeMap<String, PyRef<'_, PyTensor>>,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: &str,
) -> PyResult<String> {
    let inputs = inputs_of(tensors);
    let backend = backend.to_string();
    let result = py.detach(move || -> Result<String> {
        let p = prepare(&program, &inputs, &out, &shapes)?;
        let (mut k, _, _) = Runner::lower(&p.program, &p.formats)?;
        tessera::ir::promote::promote_scalars(&mut k);
        tessera::ir::ieee_mul::ieee_products(&mut k);
        tessera::ir::hoist::hoist_invariants(&mut k);
        match backend.as_str() {
            "c" => Ok(tessera::backend::CBackend::source(&k)),
            "jit" | "tiered" => Ok(k.to_string()),
            other => Err(Error::Usage(format!(
                "unknown backend `{other}` (jit, tiered or c)"
            ))),
        }
    });
    result.py_err()
}

/// Kernels in this thread's cache of `backend` (for tests of the cache).
#[pyfunction]
#[pyo3(signature = (backend="tiered"))]
pub fn kernel_cache_len(backend: &str) -> PyResult<usize> {
    Ok(runner(backend).py_err()?.cache_len())
}
