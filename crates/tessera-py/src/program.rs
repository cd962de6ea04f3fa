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

pub fn runner(backend: &str) -> Result<Rc<Runner>> {
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

/// What a program needs before it compiles, besides its tensors (`prepare` adds the outputs
/// and workspaces it creates to them): the program with the outputs' declarations added.
pub struct Prepared {
    pub program: Program,
    pub formats: BTreeMap<String, Format>,
    /// The outputs and workspaces the call creates (not given as tensors).
    pub created: Vec<String>,
    /// What shape inference starts from for each created tensor: its given shape, `[]` for
    /// a 0-d one, or nothing (inferred from the program).
    pub created_known: HashMap<String, Option<Vec<usize>>>,
}

thread_local! {
    /// Parsed programs by their text: a program called again (a loop over new data) is not
    /// parsed again. Bounded: cleared when it reaches `PARSED_MAX` programs.
    static PARSED: RefCell<HashMap<String, Program>> = RefCell::new(HashMap::new());
}

const PARSED_MAX: usize = 256;

/// Program text as the command line reads it, positions relative to the text.
pub fn parse(text: &str) -> Result<Program> {
    if let Some(p) = PARSED.with(|c| c.borrow().get(text).cloned()) {
        return Ok(p);
    }
    let program = tessera::notation::parse::parse_program(text)?;
    let program = tessera::transforms::ein::lower(&program)?;
    PARSED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= PARSED_MAX {
            c.clear();
        }
        c.insert(text.to_string(), program.clone());
    });
    Ok(program)
}

pub fn prepare(
    text: &str,
    tensors: &mut BTreeMap<String, Tensor>,
    outs: &BTreeMap<String, Option<String>>,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<Prepared> {
    let mut program = parse(text)?;
    for name in tensors.keys().chain(outs.keys()) {
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
    let created_known: HashMap<String, Option<Vec<usize>>> = created
        .iter()
        .map(|n| {
            let shape = match shapes.get(n) {
                Some(s) => Some(s.clone()),
                None if !ranks.contains_key(n) => Some(vec![]),
                None => None,
            };
            (n.clone(), shape)
        })
        .collect();
    let inferred = created_shapes(&program, tensors, &created_known)?;
    create(tensors, &created, &formats, &inferred)?;
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
    let formats = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect();
    Ok(Prepared {
        program,
        formats,
        created,
        created_known,
    })
}

/// The shapes of every tensor of `program`, from the given tensors' shapes and the created
/// ones' known shapes (`Prepared::created_known`).
pub fn created_shapes(
    program: &Program,
    tensors: &BTreeMap<String, Tensor>,
    created_known: &HashMap<String, Option<Vec<usize>>>,
) -> Result<HashMap<String, Vec<usize>>> {
    let mut known: HashMap<String, Option<Vec<usize>>> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), Some(t.shape.clone())))
        .collect();
    known.extend(created_known.iter().map(|(n, s)| (n.clone(), s.clone())));
    let values = tessera::run::scalar_values(program, tensors);
    tessera::transforms::infer_shapes_with(program, &known, &values)
}

/// Adds the created tensors, empty, of their formats and shapes.
pub fn create(
    tensors: &mut BTreeMap<String, Tensor>,
    created: &[String],
    formats: &BTreeMap<String, Format>,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<()> {
    for n in created {
        // Empty, so valid; the inputs were checked when they were built (`asarray`, or a
        // kernel's output), and Python cannot change them since.
        let t = Tensor::empty(&formats[n], &shapes[n]).map_err(|e| e.named(n))?;
        tensors.insert(n.clone(), t);
    }
    Ok(())
}

/// The tensors of one call, as the core's by-value API takes them: copies of the Python
/// tensors that share their reference-counted arrays (`PyTensor`), so nothing is copied
/// unless the kernel writes it, and the Python tensors never change.
pub struct CallTensors {
    pub tensors: BTreeMap<String, Tensor>,
}

impl CallTensors {
    pub fn new(shared: BTreeMap<String, Arc<Tensor>>) -> CallTensors {
        CallTensors {
            tensors: shared.into_iter().map(|(n, t)| (n, (*t).clone())).collect(),
        }
    }
}

pub fn shared_of(tensors: BTreeMap<String, PyRef<'_, PyTensor>>) -> BTreeMap<String, Arc<Tensor>> {
    tensors.into_iter().map(|(n, t)| (n, t.shared())).collect()
}

/// Run `program` on the tensors; returns the outputs named in `out` (name → format or None).
/// The kernel, with the preparation around it, is kept per call signature (`kernel::run`).
/// `outs` (name → NumPy array) are outputs written in place into those arrays, and not
/// returned.
#[pyfunction]
#[pyo3(signature = (program, tensors, out, shapes, backend="tiered", outs=None))]
pub fn run(
    py: Python<'_>,
    program: String,
    tensors: BTreeMap<String, PyRef<'_, PyTensor>>,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: &str,
    outs: Option<BTreeMap<String, Bound<'_, PyAny>>>,
) -> PyResult<BTreeMap<String, PyTensor>> {
    let shared = shared_of(tensors);
    let lent = match outs {
        Some(outs) if !outs.is_empty() => crate::kernel::lend_outs(&out, &shared, outs)?,
        _ => vec![],
    };
    let backend = backend.to_string();
    let outputs =
        py.detach(move || crate::kernel::run(program, shared, out, shapes, backend, lent))?;
    crate::kernel::finish(py, outputs)
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
    let mut inputs: BTreeMap<String, Tensor> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), (*t.arc(py)).clone()))
        .collect();
    let backend = backend.to_string();
    let result = py.detach(move || -> Result<String> {
        let p = prepare(&program, &mut inputs, &out, &shapes)?;
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

/// The foreign position arrays (a SciPy matrix's `indptr`) the last kernel run on this
/// thread's `backend` runner read as checked private copies: `(tensor, level, buffer, bound)`,
/// the bound `None` when the copy failed its check (for the tests of `Runner::execute`'s
/// snapshots).
#[pyfunction]
#[pyo3(signature = (backend="tiered"))]
pub fn last_snapshots(backend: &str) -> PyResult<Vec<tessera::run::Snapshot>> {
    Ok(runner(backend).py_err()?.last_snapshots().copied)
}

/// How many out= arrays had their values copied in instead of written in place (for the
/// tests of zero-copy `out=`).
#[pyfunction]
pub fn out_copies() -> usize {
    crate::convert::OUT_COPIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// How many kernel calls ran with their tensors by position through a call site or an
/// einsum's kept slots (for the tests of `Kernel(out=array)`'s and `einsum`/`matmul(...,
/// out=array)`'s fast paths).
#[pyfunction]
pub fn site_calls() -> u64 {
    crate::kernel::SITE_CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

/// How many `BoundKernel` calls ran on their kept slots (for the tests of `Kernel.bind`).
#[pyfunction]
pub fn bound_calls() -> u64 {
    crate::bound::BOUND_CALLS.load(std::sync::atomic::Ordering::Relaxed)
}
