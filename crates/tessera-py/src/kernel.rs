//! `tessera.compile`: a program bound to its outputs and to the formats of example tensors,
//! called again and again on new data. `tessera.run` parses, prepares and looks its kernel
//! up by program and formats on every call (about 14 µs for a tiny kernel); a kernel object
//! does that once, and a call only checks that the tensors have the formats it was compiled
//! for, makes the outputs (shapes inferred again only when the inputs' shapes or integer
//! scalars change) and runs the compiled code.
//!
//! Compiled code lives in a per-OS-thread runner (`program::runner`), which is not `Send`;
//! so the Python object holds a number, and each thread keeps the compiled state of the
//! kernels it has called. A call from another thread, or with tensors of other formats,
//! prepares and compiles again (the runner's cache makes the second time cheap) and becomes
//! that thread's state.

use crate::convert::{OutArray, check_overlaps, lend_out, out_tensor, settle};
use crate::errors::IntoPy;
use crate::program::{CallTensors, Prepared, create, created_shapes, prepare, runner, shared_of};
use crate::tensor::PyTensor;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tessera::error::Result;
use tessera::levels::Format;
use tessera::run::{Compiled, Runner};
use tessera::tensor::Tensor;

/// What `tessera.compile` was given: enough to prepare the kernel again on any thread.
struct Spec {
    program: String,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: String,
}

/// A kernel's compiled state on one thread.
struct Ready {
    runner: Rc<Runner>,
    compiled: Rc<Compiled>,
    prepared: Prepared,
    /// The formats of the given tensors it was compiled for, by name.
    given: BTreeMap<String, Format>,
    /// The integer scalars the created tensors' shapes may depend on
    /// (`tessera::run::sizing_scalars` of the prepared program).
    sizing: HashSet<String>,
    /// The given tensors' shapes and integer scalars of the last call, and the created
    /// tensors' shapes inferred from them.
    last: RefCell<Option<(ShapeKey, Shapes)>>,
}

/// The given tensors' shapes in name order, and the integer scalars in name order.
type ShapeKey = (Vec<Vec<usize>>, Vec<(String, i64)>);

/// Shapes by tensor name.
type Shapes = HashMap<String, Vec<usize>>;

thread_local! {
    /// Each thread's compiled kernels, by kernel number; an entry lives as long as its
    /// Python object (`Drop` of `PyKernel` removes it from the dropping thread's table).
    static READY: RefCell<HashMap<u64, Rc<Ready>>> = RefCell::new(HashMap::new());
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// `tessera.compile(...)`'s object (the Python `tessera.Kernel` wraps it).
#[pyclass(name = "RawKernel", module = "tessera._tessera", frozen)]
pub struct PyKernel {
    id: u64,
    spec: Arc<Spec>,
}

impl Drop for PyKernel {
    fn drop(&mut self) {
        // Only this thread's entry can be reached; other threads' entries go with them.
        let _ = READY.try_with(|r| r.borrow_mut().remove(&self.id));
    }
}

/// Prepares and compiles the kernel for `tensors` (the given ones; the created are added).
fn build(spec: &Spec, tensors: &mut BTreeMap<String, Tensor>) -> Result<Ready> {
    let given = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect();
    let runner = runner(&spec.backend)?;
    let prepared = prepare(&spec.program, tensors, &spec.out, &spec.shapes)?;
    let compiled = runner.compile(&prepared.program, &prepared.formats)?;
    Ok(Ready {
        sizing: tessera::run::sizing_scalars(&prepared.program),
        runner,
        compiled,
        prepared,
        given,
        last: RefCell::new(None),
    })
}

impl Ready {
    /// Whether the tensors are the ones this state was compiled for (names and formats).
    fn fits(&self, tensors: &BTreeMap<String, Tensor>) -> bool {
        tensors.len() == self.given.len()
            && tensors
                .iter()
                .zip(&self.given)
                .all(|((n, t), (m, f))| n == m && t.format == *f)
    }

    /// Adds the created tensors for these given ones, their shapes remembered per call; the
    /// outputs given as `out=` arrays are those arrays, not new tensors.
    fn create(
        &self,
        tensors: &mut BTreeMap<String, Tensor>,
        outs: &mut [OutArray],
    ) -> std::result::Result<(), CallError> {
        // Compared in place: a call with the shapes and scalars of the last one (a loop over
        // images of one size) allocates nothing here.
        let mut last = self.last.borrow_mut();
        let scalars = tessera::run::scalars_if_changed(
            last.as_ref().map(|((_, s), _)| s.as_slice()),
            &self.sizing,
            tensors,
        );
        let same_shapes = last.as_ref().is_some_and(|((shapes, _), _)| {
            shapes.len() == tensors.len()
                && shapes
                    .iter()
                    .zip(tensors.values())
                    .all(|(s, t)| *s == t.shape)
        });
        if scalars.is_some() || !same_shapes {
            let shapes = created_shapes(
                &self.prepared.program,
                tensors,
                &self.prepared.created_known,
            )?;
            let scalars = match scalars {
                Some(s) => s,
                None => last
                    .as_ref()
                    .map(|((_, s), _)| s.clone())
                    .unwrap_or_default(),
            };
            let key: ShapeKey = (tensors.values().map(|t| t.shape.clone()).collect(), scalars);
            *last = Some((key, shapes));
        }
        let (_, shapes) = last.as_ref().expect("set above");
        if outs.is_empty() {
            return Ok(create(
                tensors,
                &self.prepared.created,
                &self.prepared.formats,
                shapes,
            )?);
        }
        let created: Vec<String> = self
            .prepared
            .created
            .iter()
            .filter(|n| !outs.iter().any(|o| &o.name == *n))
            .cloned()
            .collect();
        create(tensors, &created, &self.prepared.formats, shapes)?;
        for o in outs.iter_mut() {
            let t = out_tensor(o, &self.prepared.formats[&o.name], &shapes[&o.name])?;
            tensors.insert(o.name.clone(), t);
        }
        Ok(())
    }
}

/// A call's error: the core's, or an `out=` array's (a `TypeError` or `ValueError`).
pub enum CallError {
    Core(tessera::Error),
    Py(PyErr),
}

impl From<tessera::Error> for CallError {
    fn from(e: tessera::Error) -> CallError {
        CallError::Core(e)
    }
}

impl From<PyErr> for CallError {
    fn from(e: PyErr) -> CallError {
        CallError::Py(e)
    }
}

impl From<CallError> for PyErr {
    fn from(e: CallError) -> PyErr {
        match e {
            CallError::Core(e) => crate::errors::to_py(e),
            CallError::Py(e) => e,
        }
    }
}

fn run_on(
    id: u64,
    spec: &Spec,
    tensors: &mut BTreeMap<String, Tensor>,
    outs: &mut [OutArray],
) -> std::result::Result<(), CallError> {
    let ready = READY.with(|r| r.borrow().get(&id).cloned());
    let ready = match ready {
        Some(ready) if ready.fits(tensors) => {
            ready.create(tensors, outs)?;
            ready
        }
        _ => {
            // `build` adds the created tensors itself; the out= arrays replace them.
            let ready = Rc::new(build(spec, tensors)?);
            READY.with(|r| r.borrow_mut().insert(id, ready.clone()));
            for o in outs.iter_mut() {
                let made = &tensors[&o.name];
                let t = out_tensor(o, &made.format, &made.shape.clone())?;
                tensors.insert(o.name.clone(), t);
            }
            ready
        }
    };
    Ok(ready.runner.execute(&ready.compiled, tensors)?)
}

/// The `Spec` of a program and its outputs (the program is parsed here, so a syntax error is
/// raised by `tessera.compile`, not by the first call).
fn spec_of(
    program: String,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: String,
) -> Result<Spec> {
    crate::program::parse(&program)?;
    Ok(Spec {
        program,
        out,
        shapes,
        backend,
    })
}

/// A call's outputs: the new tensors, and the `out=` arrays with the tensors that wrote them
/// (for [`finish`]).
pub struct Outputs {
    made: BTreeMap<String, PyTensor>,
    lent: Vec<(OutArray, Tensor)>,
}

/// Runs kernel `id` on the tensors in `shared` and returns its outputs, writing those given
/// in `outs` into their arrays.
fn call_with(
    id: u64,
    spec: &Spec,
    shared: BTreeMap<String, Arc<Tensor>>,
    outs: Vec<OutArray>,
) -> std::result::Result<Outputs, CallError> {
    call_on(id, spec, CallTensors::new(shared).tensors, outs)
}

/// [`call_with`] on the call's own copies of the tensors.
fn call_on(
    id: u64,
    spec: &Spec,
    mut tensors: BTreeMap<String, Tensor>,
    mut outs: Vec<OutArray>,
) -> std::result::Result<Outputs, CallError> {
    let call = &mut tensors;
    run_on(id, spec, call, &mut outs)?;
    let mut made = BTreeMap::new();
    let mut lent = Vec::with_capacity(outs.len());
    for n in spec.out.keys() {
        let t = call.remove(n).expect("outputs are created");
        // A linear search: a call has a few outputs, and a map of them cost more than the
        // tiny kernel it ran (their names are distinct: they came from a map).
        match outs.iter().position(|o| &o.name == n) {
            Some(k) => lent.push((outs.swap_remove(k), t)),
            None => {
                made.insert(n.clone(), PyTensor::new(t));
            }
        }
    }
    Ok(Outputs { made, lent })
}

/// Checks the `out=` arrays of a call (names, and no memory shared with an input or each
/// other) and lends their memory.
pub fn lend_outs(
    spec_out: &BTreeMap<String, Option<String>>,
    shared: &BTreeMap<String, Arc<Tensor>>,
    outs: BTreeMap<String, Bound<'_, PyAny>>,
) -> PyResult<Vec<OutArray>> {
    let mut lent = vec![];
    for (n, array) in &outs {
        if !spec_out.contains_key(n) {
            let names: Vec<&String> = spec_out.keys().collect();
            return Err(PyValueError::new_err(format!(
                "out={n}: `{n}` is not an output of this call (outputs: {names:?})"
            )));
        }
        if shared.contains_key(n) {
            return Err(also_input(n));
        }
        lent.push(lend_out(n, array)?);
    }
    check_overlaps(&lent, shared.iter().map(|(n, t)| (n, &**t)))?;
    Ok(lent)
}

/// The outputs as Python wants them: the new tensors; the `out=` arrays hold their values.
pub fn finish(py: Python<'_>, outputs: Outputs) -> PyResult<BTreeMap<String, PyTensor>> {
    for (o, t) in &outputs.lent {
        settle(py, o, t)?;
    }
    Ok(outputs.made)
}

/// What `tessera.run` is called with, besides the tensors: its implicit kernel's key.
type RunKey = (
    String,
    Vec<(String, Option<String>)>,
    Vec<(String, Vec<usize>)>,
    String,
);

thread_local! {
    /// `tessera.run`'s kernels, by call: a program run again (a loop over new data) is one
    /// lookup of its text from the second call on. Bounded: cleared at `RUNS_MAX` entries.
    static RUNS: RefCell<HashMap<RunKey, (u64, Arc<Spec>)>> = RefCell::new(HashMap::new());
}

const RUNS_MAX: usize = 256;

/// `tessera.run`: the kernel for this program, outputs and backend (made on first use), run
/// on the tensors.
pub fn run(
    program: String,
    shared: BTreeMap<String, Arc<Tensor>>,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: String,
    outs: Vec<OutArray>,
) -> std::result::Result<Outputs, CallError> {
    let mut sorted_shapes: Vec<(String, Vec<usize>)> =
        shapes.iter().map(|(n, s)| (n.clone(), s.clone())).collect();
    sorted_shapes.sort();
    let key: RunKey = (
        program,
        out.iter().map(|(n, f)| (n.clone(), f.clone())).collect(),
        sorted_shapes,
        backend,
    );
    let found = RUNS.with(|r| r.borrow().get(&key).cloned());
    let (id, spec) = match found {
        Some(found) => found,
        None => {
            let spec = Arc::new(spec_of(key.0.clone(), out, shapes, key.3.clone())?);
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            RUNS.with(|r| {
                let mut r = r.borrow_mut();
                if r.len() >= RUNS_MAX {
                    // Their compiled states go too; the runner's cache keeps the code.
                    READY.with(|ready| {
                        let mut ready = ready.borrow_mut();
                        for (id, _) in r.values() {
                            ready.remove(id);
                        }
                    });
                    r.clear();
                }
                r.insert(key, (id, spec.clone()));
            });
            (id, spec)
        }
    };
    call_with(id, &spec, shared, outs)
}

/// The core's by-value tensor map straight from a call's keyword dict of `tessera.Tensor`s
/// (their arrays shared, nothing copied), or `None` when a value is not a Tensor.
fn given_of(
    py: Python<'_>,
    tensors: &Bound<'_, PyDict>,
) -> PyResult<Option<BTreeMap<String, Tensor>>> {
    let raw = intern!(py, "_raw");
    let mut given = BTreeMap::new();
    for (name, value) in tensors.iter() {
        let Ok(inner) = value.getattr(raw) else {
            return Ok(None);
        };
        let Ok(t) = inner.cast::<PyTensor>() else {
            return Ok(None);
        };
        given.insert(name.extract::<String>()?, (*t.get().shared()).clone());
    }
    Ok(Some(given))
}

/// The error of an output given both as an input and as an `out=` array.
fn also_input(n: &str) -> PyErr {
    PyValueError::new_err(format!(
        "out={n}: `{n}` is also given as an input (an output given as an input starts from its contents; give one or the other)"
    ))
}

/// Compile `program` for tensors like `tensors` (`run`'s arguments); the kernel object runs
/// it on new tensors of the same formats.
#[pyfunction]
#[pyo3(signature = (program, tensors, out, shapes, backend="tiered"))]
pub fn compile(
    py: Python<'_>,
    program: String,
    tensors: BTreeMap<String, PyRef<'_, PyTensor>>,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: &str,
) -> PyResult<PyKernel> {
    let shared = shared_of(tensors);
    let backend = backend.to_string();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let spec = py.detach(move || -> Result<Spec> {
        let spec = spec_of(program, out, shapes, backend)?;
        let mut call = CallTensors::new(shared);
        let ready = build(&spec, &mut call.tensors)?;
        READY.with(|r| r.borrow_mut().insert(id, Rc::new(ready)));
        Ok(spec)
    });
    Ok(PyKernel {
        id,
        spec: Arc::new(spec.py_err()?),
    })
}

#[pymethods]
impl PyKernel {
    /// Run on `tensors` (name → tensor); returns the outputs named at compile time but not
    /// given in `outs` (name → NumPy array written in place).
    #[pyo3(signature = (tensors, outs=None))]
    fn call(
        &self,
        py: Python<'_>,
        tensors: BTreeMap<String, PyRef<'_, PyTensor>>,
        outs: Option<BTreeMap<String, Bound<'_, PyAny>>>,
    ) -> PyResult<BTreeMap<String, PyTensor>> {
        let shared = shared_of(tensors);
        let lent = match outs {
            Some(outs) if !outs.is_empty() => lend_outs(&self.spec.out, &shared, outs)?,
            _ => vec![],
        };
        let (id, spec) = (self.id, self.spec.clone());
        let outputs = py.detach(move || call_with(id, &spec, shared, lent))?;
        finish(py, outputs)
    }

    /// `Kernel.__call__`'s common case in one crossing: a kernel with one output, called
    /// without `out=`, on `tessera.Tensor`s (`tensors` is the call's keyword dict; each
    /// value's `_raw` is read here). Returns the output, or `None` without running anything
    /// when a value is not a Tensor (the Python side converts it and calls `call`). On a
    /// 28x28 image the Python-side dict building and result wrapping of `call` cost as much
    /// as the kernel.
    fn call_single(
        &self,
        py: Python<'_>,
        tensors: &Bound<'_, PyDict>,
    ) -> PyResult<Option<PyTensor>> {
        let Some(single) = self
            .spec
            .out
            .keys()
            .next()
            .filter(|_| self.spec.out.len() == 1)
        else {
            return Ok(None);
        };
        Ok(self
            .call_tensors(py, tensors)?
            .and_then(|mut made| made.remove(single)))
    }

    /// [`PyKernel::call_single`] for any number of outputs: the outputs by name, or `None`
    /// when a value of `tensors` is not a `tessera.Tensor`.
    fn call_tensors(
        &self,
        py: Python<'_>,
        tensors: &Bound<'_, PyDict>,
    ) -> PyResult<Option<BTreeMap<String, PyTensor>>> {
        let Some(given) = given_of(py, tensors)? else {
            return Ok(None);
        };
        let (id, spec) = (self.id, self.spec.clone());
        let outputs = py.detach(move || call_on(id, &spec, given, vec![]))?;
        Ok(Some(outputs.made))
    }

    /// `Kernel.__call__(out=array)`'s common case in one crossing: a kernel with one output
    /// written into the NumPy array `out`, on `tessera.Tensor`s. Returns `False` without
    /// running or checking anything when a value of `tensors` is not a Tensor or the kernel
    /// has several outputs (the Python side then takes the general path, `call`). The array
    /// is checked as `call`'s `outs` are: writable, of the output's dtype and shape, sharing
    /// no memory with an input, and the output not also given as an input.
    fn call_out(
        &self,
        py: Python<'_>,
        tensors: &Bound<'_, PyDict>,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let Some(single) = self
            .spec
            .out
            .keys()
            .next()
            .filter(|_| self.spec.out.len() == 1)
        else {
            return Ok(false);
        };
        let Some(given) = given_of(py, tensors)? else {
            return Ok(false);
        };
        if given.contains_key(single) {
            return Err(also_input(single));
        }
        let lent = vec![lend_out(single, out)?];
        check_overlaps(&lent, given.iter())?;
        let (id, spec) = (self.id, self.spec.clone());
        let outputs = py.detach(move || call_on(id, &spec, given, lent))?;
        finish(py, outputs)?;
        Ok(true)
    }

    /// The program text the kernel was compiled from.
    #[getter]
    fn program(&self) -> String {
        self.spec.program.clone()
    }

    /// The outputs a call returns, in order.
    #[getter]
    fn outputs(&self) -> Vec<String> {
        self.spec.out.keys().cloned().collect()
    }
}
