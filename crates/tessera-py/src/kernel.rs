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

use crate::convert::{OutArray, check_overlaps, lend_out, out_fits, out_tensor, settle};
use crate::errors::IntoPy;
use crate::program::{CallTensors, Prepared, create, created_shapes, prepare, runner, shared_of};
use crate::tensor::PyTensor;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tessera::error::Result;
use tessera::levels::Format;
use tessera::run::{Compiled, Runner};
use tessera::runtime::buffer::Buffer;
use tessera::tensor::Tensor;

/// What `tessera.compile` was given: enough to prepare the kernel again on any thread.
struct Spec {
    program: String,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: String,
}

/// A kernel's compiled state on one thread.
pub(crate) struct Ready {
    /// A number no other compiled state of any kernel has (a bound call's slots are
    /// filled for one: `crate::bound`).
    pub(crate) serial: u64,
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
    /// The tensor map of the last call on `tessera.Tensor`s, its arrays dropped (`scrub`):
    /// a call with the same names refills it in place ([`fill_given`]), so its nodes, name
    /// strings, shapes, formats and level vectors are not allocated and freed on every call
    /// (they were a third of a tiny SpMV's call). Taken out for a call, put back after.
    spare: RefCell<Spare>,
    /// The positional call site of `Kernel(...)` ([`Site`]), its outputs returned or
    /// written into arrays, made after a call through the map path; `None` until then, or
    /// when the kernel does not fit one.
    site: RefCell<Option<Site>>,
}

/// A call site by position: the keyword `str` objects of the last call (held, so an
/// identical object is the same name), each with its tensor's place in the kernel's
/// parameters ([`tessera::run::Compiled::params`]), the format and shape it had, and the
/// kernel's tensors in parameter order, their arrays dropped between calls. A call whose
/// keywords are those objects, whose tensors have those formats and shapes (and whose
/// `out=` array, if any, fits the output) refills the slots in place and runs
/// [`tessera::run::Runner::execute_at`]: no map, no name compared, nothing allocated for the
/// tensors. Any difference takes the map path (which checks and reports everything) and the
/// site is made again from that call.
pub(crate) struct Site {
    keys: Vec<SiteKey>,
    pub(crate) slots: Vec<Tensor>,
    /// The outputs in the kernel's order ([`Spec::out`]): each one's place in `slots` and
    /// its shape (the one the map path inferred for these input shapes). A kernel with a
    /// workspace declared as an output (erosion's row `tmp`) has several.
    pub(crate) outs: Vec<SiteOut>,
    /// How many elements the inputs hold: a run over fewer than [`INLINE_WORK`] keeps the
    /// GIL (releasing and taking it back costs more than such a kernel).
    work: usize,
}

/// One output of a [`Site`].
pub(crate) struct SiteOut {
    pub(crate) at: usize,
    pub(crate) shape: Vec<usize>,
}

/// One keyword of a [`Site`].
struct SiteKey {
    key: Py<PyString>,
    name: String,
    at: usize,
    format: Format,
    shape: Vec<usize>,
}

/// Below this many stored elements in a call's inputs a kernel runs without releasing the
/// GIL: it takes a few microseconds at most, about what the release and re-acquire cost.
const INLINE_WORK: usize = 4096;

/// A kept call map (`Ready::spare`) and the dict keys it was filled from, in the dict's
/// order: the Python `str` objects (held, so an identical object is the same text) with
/// their text. The map's names are exactly these texts after a fill.
#[derive(Default)]
struct Spare {
    keys: Vec<(Py<PyString>, String)>,
    map: BTreeMap<String, Tensor>,
}

/// The given tensors' shapes in name order, and the integer scalars in name order.
type ShapeKey = (Vec<Vec<usize>>, Vec<(String, i64)>);

/// Shapes by tensor name.
type Shapes = HashMap<String, Vec<usize>>;

thread_local! {
    /// Each thread's compiled kernels, by kernel number; an entry lives as long as its
    /// Python object (`Drop` of `PyKernel` removes it from the dropping thread's table).
    pub(crate) static READY: RefCell<HashMap<u64, Rc<Ready>>> = RefCell::new(HashMap::new());
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The next [`Ready::serial`].
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// `tessera.compile(...)`'s object: the Python `tessera.Kernel` is a subclass, so a call
/// (`__call__`, below) enters Rust directly, without a Python frame.
#[pyclass(name = "RawKernel", module = "tessera._tessera", frozen, subclass)]
pub struct PyKernel {
    pub(crate) id: u64,
    spec: Arc<Spec>,
    /// A call returns the one output itself (`out="y"`), not a tuple or a dict: the case
    /// `__call__` serves in Rust.
    pub(crate) one: bool,
    /// How a call of a kernel with several outputs returns them, when `__call__` may do it
    /// in Rust (`None`: the Python side's `_call` does).
    several: Option<Several>,
}

/// The return of a kernel called with `out=` a dict (or nothing: `tessera.run`'s default)
/// or a list of names: the Python side's `_shaped`.
#[derive(Clone)]
enum Several {
    /// A dict: the new outputs by name (in name order), then the `out=` arrays.
    Dict,
    /// A tuple in this order of output names.
    Tuple(Vec<String>),
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
        serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
        sizing: tessera::run::sizing_scalars(&prepared.program),
        runner,
        compiled,
        prepared,
        given,
        last: RefCell::new(None),
        spare: RefCell::new(Spare::default()),
        site: RefCell::new(None),
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
    call_on(id, spec, &mut CallTensors::new(shared).tensors, outs)
}

/// [`call_with`] on the call's own copies of the tensors (the outputs are taken out of
/// `call`; the given tensors stay).
fn call_on(
    id: u64,
    spec: &Spec,
    call: &mut BTreeMap<String, Tensor>,
    mut outs: Vec<OutArray>,
) -> std::result::Result<Outputs, CallError> {
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

/// Fills `spare.map` with the tensors of a call's keyword dict of `tessera.Tensor`s (their
/// arrays shared, nothing copied); `false` when a value is not a Tensor (then the map holds
/// anything: the caller drops it). When the dict's keys are the very `str` objects of the
/// last fill (a call site's keywords are the same interned objects every time; compared by
/// identity, which needs no text) and the map still has exactly their names, every entry is
/// overwritten in place, reusing its allocations; else the map is built anew. Either way
/// every value is the given tensor's, never a stale one.
fn fill_given(py: Python<'_>, spare: &mut Spare, tensors: &Bound<'_, PyDict>) -> PyResult<bool> {
    let raw = intern!(py, "_raw");
    let n = tensors.len();
    let refill = spare.keys.len() == n
        && spare.map.len() == n
        && tensors
            .iter()
            .zip(&spare.keys)
            .all(|((k, _), (kept, _))| k.is(kept));
    if refill {
        for ((_, value), (_, name)) in tensors.iter().zip(&spare.keys) {
            let Some(src) = raw_tensor(&value, raw) else {
                return Ok(false);
            };
            match spare.map.get_mut(name) {
                Some(dst) => refill_tensor(dst, src.get().tensor()),
                // Not reached (the map's names are the keys' texts); refused rather than
                // trusted: the map is rebuilt below.
                None => return fill_anew(spare, tensors, raw),
            }
        }
        return Ok(true);
    }
    fill_anew(spare, tensors, raw)
}

/// [`fill_given`] without reuse: the keys and the map made from the dict.
fn fill_anew(
    spare: &mut Spare,
    tensors: &Bound<'_, PyDict>,
    raw: &Bound<'_, PyString>,
) -> PyResult<bool> {
    spare.keys.clear();
    spare.map.clear();
    for (key, value) in tensors.iter() {
        let Some(src) = raw_tensor(&value, raw) else {
            return Ok(false);
        };
        let name: String = key.extract()?;
        spare.map.insert(name.clone(), src.get().tensor().clone());
        spare
            .keys
            .push((key.cast_into::<PyString>()?.unbind(), name));
    }
    Ok(true)
}

/// The `RawTensor` of a `tessera.Tensor` (its `_raw`), or `None` for any other value.
fn raw_tensor<'py>(
    value: &Bound<'py, PyAny>,
    raw: &Bound<'py, PyString>,
) -> Option<Bound<'py, PyTensor>> {
    let inner = value.getattr(raw).ok()?;
    inner.cast_into::<PyTensor>().ok()
}

/// `*dst = src.clone()`, reusing `dst`'s vectors (the arrays themselves are shared: a
/// reference count each).
fn refill_tensor(dst: &mut Tensor, src: &Tensor) {
    let Tensor {
        shape,
        format,
        levels,
    } = dst;
    shape.clone_from(&src.shape);
    format.levels.clone_from(&src.format.levels);
    levels.clone_from(&src.levels);
}

/// Drops the arrays of every tensor in `map`, keeping its names, shapes, formats and level
/// vectors for the next call: a kept map must not keep a call's memory alive.
fn scrub(map: &mut BTreeMap<String, Tensor>) {
    for b in map.values_mut().flat_map(|t| t.levels.iter_mut().flatten()) {
        *b = Buffer::I64(Vec::new().into());
    }
}

/// Drops the arrays of `t`, keeping its shape, format and level vectors ([`scrub`]).
pub(crate) fn scrub_tensor(t: &mut Tensor) {
    for b in t.levels.iter_mut().flatten() {
        *b = Buffer::I64(Vec::new().into());
    }
}

/// The kept call map of kernel `id` on this thread (empty when it has none).
fn spare_of(id: u64) -> Spare {
    READY.with(|r| {
        r.borrow()
            .get(&id)
            .and_then(|ready| {
                ready
                    .spare
                    .try_borrow_mut()
                    .ok()
                    .map(|mut s| std::mem::take(&mut *s))
            })
            .unwrap_or_default()
    })
}

/// Keeps `spare` (its map scrubbed) for the next call of kernel `id` on this thread: in its
/// current compiled state, which the call may have replaced.
fn put_back(id: u64, spare: Spare) {
    READY.with(|r| {
        if let Some(ready) = r.borrow().get(&id)
            && let Ok(mut kept) = ready.spare.try_borrow_mut()
        {
            *kept = spare;
        }
    });
}

/// [`call_on`] on a call's keyword dict of `tessera.Tensor`s, in the kept map of the
/// kernel; `check` sees the given tensors first (the `out=` checks) and returns the arrays
/// to write. `None` when a value is not a Tensor (nothing ran or was checked).
fn call_given(
    py: Python<'_>,
    id: u64,
    spec: &Arc<Spec>,
    tensors: &Bound<'_, PyDict>,
    check: impl FnOnce(&BTreeMap<String, Tensor>) -> PyResult<Vec<OutArray>>,
) -> PyResult<Option<Outputs>> {
    let mut spare = spare_of(id);
    if !fill_given(py, &mut spare, tensors)? {
        return Ok(None);
    }
    let lent = match check(&spare.map) {
        Ok(lent) => lent,
        Err(e) => {
            scrub(&mut spare.map);
            put_back(id, spare);
            return Err(e);
        }
    };
    let (spec, mut map) = (spec.clone(), std::mem::take(&mut spare.map));
    let (map, outputs) = py.detach(move || {
        let outputs = call_on(id, &spec, &mut map, lent);
        scrub(&mut map);
        (map, outputs)
    });
    spare.map = map;
    put_back(id, spare);
    Ok(Some(outputs?))
}

impl Site {
    /// The site of a call with these keywords and tensors and these outputs (each returned
    /// or written into an array), after the map path ran it (so `ready.last` holds its
    /// shapes); `None` when the kernel does not fit a site: it creates other tensors than
    /// the outputs, a keyword is not one of the tensors it was compiled for or not a Tensor,
    /// or an output's shape may depend on an integer scalar's value.
    pub(crate) fn make(
        ready: &Ready,
        tensors: &Bound<'_, PyDict>,
        outputs: &[&String],
    ) -> Option<Site> {
        let raw = intern!(tensors.py(), "_raw");
        let created = &ready.prepared.created;
        if created.len() != outputs.len() || !outputs.iter().all(|o| created.contains(*o)) {
            return None;
        }
        let c = &ready.compiled;
        let n = c.layout.tensors.len();
        if tensors.len() != ready.given.len() || tensors.len() + outputs.len() != n {
            return None;
        }
        let last = ready.last.borrow();
        let ((_, scalars), shapes) = last.as_ref()?;
        if !scalars.is_empty() {
            return None;
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for o in outputs {
            outs.push(SiteOut {
                at: c.param(o)?,
                shape: shapes.get(*o)?.clone(),
            });
        }
        let mut slots: Vec<Option<Tensor>> = vec![None; n];
        let mut keys = Vec::with_capacity(tensors.len());
        let mut work = 0;
        for (key, value) in tensors.iter() {
            let name: String = key.extract().ok()?;
            if ready.sizing.contains(&name) || !ready.given.contains_key(&name) {
                return None;
            }
            let at = c.param(&name)?;
            if outs.iter().any(|o| o.at == at) {
                return None;
            }
            let src = raw_tensor(&value, raw)?;
            let t = src.get().tensor();
            work += t.levels.iter().flatten().map(Buffer::len).sum::<usize>();
            keys.push(SiteKey {
                key: key.cast_into::<PyString>().ok()?.unbind(),
                name,
                at,
                format: t.format.clone(),
                shape: t.shape.clone(),
            });
            let mut kept = t.clone();
            scrub_tensor(&mut kept);
            slots[at] = Some(kept);
        }
        for (o, name) in outs.iter().zip(outputs) {
            let format = ready.prepared.formats.get(*name)?;
            let levels = format.levels.len();
            let mut bufs = vec![vec![]; levels];
            bufs[levels - 1] = vec![Buffer::I64(Vec::new().into())];
            slots[o.at] = Some(Tensor {
                shape: o.shape.clone(),
                format: format.clone(),
                levels: bufs,
            });
        }
        Some(Site {
            keys,
            slots: slots.into_iter().collect::<Option<_>>()?,
            outs,
            work,
        })
    }

    /// Refills the slots from a call's keyword dict when it is this site's call (the same
    /// keyword objects, Tensors of the same formats and shapes); `false` leaves the slots
    /// holding no call's arrays.
    pub(crate) fn fill(&mut self, tensors: &Bound<'_, PyDict>) -> bool {
        let raw = intern!(tensors.py(), "_raw");
        if tensors.len() != self.keys.len() {
            return false;
        }
        for ((key, value), k) in tensors.iter().zip(&self.keys) {
            let src = match raw_tensor(&value, raw) {
                Some(src) if key.is(&k.key) => src,
                _ => {
                    self.scrub();
                    return false;
                }
            };
            let t = src.get().tensor();
            if t.format != k.format || t.shape != k.shape {
                self.scrub();
                return false;
            }
            // Shape and format are the kept ones (compared above): only the arrays change,
            // a reference count each.
            self.slots[k.at].levels.clone_from(&t.levels);
        }
        true
    }

    /// Drops every array the slots hold (a kept site must not keep a call's memory alive).
    fn scrub(&mut self) {
        for t in &mut self.slots {
            scrub_tensor(t);
        }
    }
}

/// How many calls ran through a [`Site`], or an einsum's kept slots (`compute::einsum_at`)
/// (for the tests: that the positional path is the one they exercise).
pub static SITE_CALLS: AtomicU64 = AtomicU64::new(0);

/// Makes (or drops) the [`Site`] of kernel `id` on this thread from a call that just ran
/// through the map path.
fn make_site(id: u64, tensors: &Bound<'_, PyDict>, outputs: &[&String]) {
    if let Some(ready) = READY.with(|r| r.borrow().get(&id).cloned())
        && let Ok(mut site) = ready.site.try_borrow_mut()
    {
        *site = Site::make(&ready, tensors, outputs);
    }
}

/// `Kernel(...)` through the kernel's [`Site`] on this thread: output `outputs[k]` written
/// into the NumPy array `arrays[k]` when it is given (`None` in the result), else made new
/// (`Some(output)`); `None` when the call is not the site's (nothing checked, run or kept:
/// the caller takes the map path). An array is checked as on the map path (writable, the
/// output's dtype and shape, no memory shared with an input or another array); every other
/// check is `execute_at`'s.
fn call_site(
    py: Python<'_>,
    id: u64,
    tensors: &Bound<'_, PyDict>,
    outputs: &[&String],
    arrays: &[Option<&Bound<'_, PyAny>>],
) -> PyResult<Option<Vec<Option<Tensor>>>> {
    let Some(ready) = READY.with(|r| r.borrow().get(&id).cloned()) else {
        return Ok(None);
    };
    // A call made while another runs on this thread (a `__del__` during the call, say)
    // takes the map path.
    let Ok(mut site) = ready.site.try_borrow_mut() else {
        return Ok(None);
    };
    let Some(site) = site.as_mut() else {
        return Ok(None);
    };
    if site.outs.len() != outputs.len() || !site.fill(tensors) {
        return Ok(None);
    }
    let result = run_site(py, id, &ready, site, outputs, arrays);
    site.scrub();
    SITE_CALLS.fetch_add(1, Ordering::Relaxed);
    result.map(Some)
}

/// The run of [`call_site`], the inputs' slots filled: the arrays checked and lent into
/// their outputs' slots, the other outputs made (empty, of the kernel's output format and
/// the shape the site's input shapes gave) and returned; every output slot gets its
/// placeholder back.
fn run_site(
    py: Python<'_>,
    id: u64,
    ready: &Ready,
    site: &mut Site,
    outputs: &[&String],
    arrays: &[Option<&Bound<'_, PyAny>>],
) -> PyResult<Vec<Option<Tensor>>> {
    let mut lent = Vec::new();
    for ((o, name), array) in site.outs.iter().zip(outputs).zip(arrays) {
        if let Some(array) = array {
            let l = lend_out(name, array)?;
            out_fits(&l, &site.slots[o.at].format, &o.shape)?;
            lent.push(l);
        }
    }
    if !lent.is_empty() {
        check_overlaps(
            &lent,
            site.keys.iter().map(|k| (&k.name, &site.slots[k.at])),
        )?;
    }
    // Every check passed: from here on, each output slot holds a lent array or a new tensor.
    let mut kept = Vec::with_capacity(site.outs.len());
    let mut next = lent.iter_mut();
    for (k, array) in arrays.iter().enumerate() {
        let (at, shape) = (site.outs[k].at, &site.outs[k].shape);
        let slot = &mut site.slots[at];
        if array.is_some() {
            let l = next.next().expect("one lent array per given array");
            let values = slot.levels.last_mut().and_then(|l| l.first_mut());
            match (values, l.buffer.take()) {
                (Some(v), Some(b)) => *v = b,
                _ => {
                    // Not reached (`Site::make` gave every output a values buffer; `lend_out`
                    // a buffer): the placeholders already taken are put back.
                    restore(site, kept);
                    return Err(PyValueError::new_err(format!(
                        "internal error: {}: no values to lend",
                        l.label
                    )));
                }
            }
            kept.push(None);
        } else {
            let made = match Tensor::empty(&slot.format, shape) {
                Ok(made) => made,
                Err(e) => {
                    restore(site, kept);
                    return Err(crate::errors::to_py(e.named(outputs[k])));
                }
            };
            kept.push(Some(std::mem::replace(slot, made)));
        }
    }
    let mut ran = run_slots(py, id, ready, site);
    let mut result = Vec::with_capacity(site.outs.len());
    let mut next = lent.iter();
    for (o, placeholder) in site.outs.iter().zip(kept) {
        match placeholder {
            Some(p) => result.push(Some(std::mem::replace(&mut site.slots[o.at], p))),
            None => {
                result.push(None);
                let l = next.next().expect("one lent array per given array");
                if ran.is_ok() {
                    // Every placeholder goes back first: the error is returned after the loop.
                    ran = settle(py, l, &site.slots[o.at]);
                }
            }
        }
    }
    ran.map(|()| result)
}

/// Puts back the placeholders [`run_site`] took out of the output slots so far (`None`: a
/// lent array's slot, which `Site::scrub` empties).
fn restore(site: &mut Site, kept: Vec<Option<Tensor>>) {
    for (o, placeholder) in site.outs.iter().zip(kept) {
        if let Some(p) = placeholder {
            site.slots[o.at] = p;
        }
    }
}

/// `execute_at` on the site's slots: on this thread with the GIL held for small inputs
/// ([`INLINE_WORK`]), else with the GIL released.
pub(crate) fn run_slots(py: Python<'_>, id: u64, ready: &Ready, site: &mut Site) -> PyResult<()> {
    let slots = &mut site.slots;
    let result = if site.work < INLINE_WORK {
        ready.runner.execute_at(&ready.compiled, slots)
    } else {
        let mut taken = std::mem::take(slots);
        // The runner and the kernel are this thread's (`Rc`, not `Send`): the closure, which
        // runs on this thread without the GIL, finds them again by the kernel's number.
        let (back, result) = py.detach(move || {
            let result = match READY.with(|r| r.borrow().get(&id).cloned()) {
                Some(ready) => ready.runner.execute_at(&ready.compiled, &mut taken),
                None => Err(tessera::Error::Usage(
                    "internal error: the kernel's compiled state is gone".into(),
                )),
            };
            (taken, result)
        });
        *slots = back;
        result
    };
    result.py_err()
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
    compile_kernel(py, program, tensors, out, shapes, backend, (false, None))
}

/// [`compile`], with how a call returns its outputs: the one output itself ([`PyKernel::one`]),
/// or several as a dict or tuple built in Rust ([`PyKernel::several`]).
fn compile_kernel(
    py: Python<'_>,
    program: String,
    tensors: BTreeMap<String, PyRef<'_, PyTensor>>,
    out: BTreeMap<String, Option<String>>,
    shapes: HashMap<String, Vec<usize>>,
    backend: &str,
    (one, several): (bool, Option<Several>),
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
        one,
        several,
    })
}

/// The outputs a call site made (`None` for those written into arrays), by name.
fn made_by_name(names: &[&String], made: Vec<Option<Tensor>>) -> BTreeMap<String, PyTensor> {
    names
        .iter()
        .zip(made)
        .filter_map(|(n, t)| Some(((*n).clone(), PyTensor::new(t?))))
        .collect()
}

/// The Python class `tessera.Tensor`, looked up once.
pub(crate) fn tensor_class(py: Python<'_>) -> PyResult<&Bound<'_, pyo3::types::PyType>> {
    static CLASS: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();
    CLASS.import(py, "tessera._tensor", "Tensor")
}

impl PyKernel {
    /// `__call__` of a kernel with several outputs in one crossing, returned as `several`
    /// says, with `out=` nothing, a dict or a tuple of NumPy arrays (or `None`s) as the
    /// Python side reads them (`_out_arrays`); `None` (nothing run or checked) for any other
    /// call: a value not a Tensor, another `out=`, an array subclass, a tuple of the wrong
    /// length. The Python side then takes it, with its messages.
    fn call_several(
        &self,
        py: Python<'_>,
        tensors: &Bound<'_, PyDict>,
        out: Option<&Bound<'_, PyAny>>,
        several: &Several,
    ) -> PyResult<Option<Py<PyAny>>> {
        let arrays = PyDict::new(py);
        match out {
            None => {}
            Some(out) if out.is_none() => {}
            Some(out) => {
                let pairs: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> =
                    if let Ok(d) = out.cast::<PyDict>() {
                        d.iter().collect()
                    } else if let Ok(t) = out.cast::<pyo3::types::PyTuple>() {
                        let order: Vec<&String> = match several {
                            Several::Tuple(names) => names.iter().collect(),
                            Several::Dict => self.spec.out.keys().collect(),
                        };
                        if t.len() != order.len() {
                            return Ok(None);
                        }
                        order
                            .iter()
                            .zip(t.iter())
                            .map(|(n, a)| (PyString::new(py, n).into_any(), a))
                            .collect()
                    } else {
                        return Ok(None);
                    };
                for (n, a) in pairs {
                    if a.is_none() {
                        continue;
                    }
                    if !a.is_exact_instance_of::<numpy::PyUntypedArray>() {
                        return Ok(None);
                    }
                    arrays.set_item(n, a)?;
                }
            }
        }
        let made = if arrays.is_empty() {
            self.call_tensors(py, tensors)?
        } else {
            self.call_arrays(py, tensors, &arrays)?
        };
        let Some(made) = made else {
            return Ok(None);
        };
        let class = tensor_class(py)?;
        let result = PyDict::new(py);
        for (n, t) in made {
            result.set_item(n, class.call1((t,))?)?;
        }
        for (n, a) in arrays.iter() {
            result.set_item(n, a)?;
        }
        Ok(Some(match several {
            Several::Dict => result.into_any().unbind(),
            Several::Tuple(names) => {
                let mut items = Vec::with_capacity(names.len());
                for n in names {
                    match result.get_item(n)? {
                        Some(v) => items.push(v),
                        // Not reached: every output is made or given an array.
                        None => {
                            return Err(PyValueError::new_err(format!(
                                "internal error: output `{n}` neither made nor given"
                            )));
                        }
                    }
                }
                pyo3::types::PyTuple::new(py, items)?.into_any().unbind()
            }
        }))
    }

    /// The kernel's output name when it has exactly one.
    pub(crate) fn single_output(&self) -> Option<&String> {
        self.spec
            .out
            .keys()
            .next()
            .filter(|_| self.spec.out.len() == 1)
    }
}

#[pymethods]
impl PyKernel {
    /// `tessera.Kernel(program, tensors, out, shapes, backend, kind)`: [`compile`]'s kernel;
    /// `kind` is how the Python side returns the outputs (`"one"`: the output itself).
    #[new]
    #[pyo3(signature = (program, tensors, out, shapes, backend="tiered", kind=None))]
    fn new(
        py: Python<'_>,
        program: String,
        tensors: BTreeMap<String, PyRef<'_, PyTensor>>,
        out: BTreeMap<String, Option<String>>,
        shapes: HashMap<String, Vec<usize>>,
        backend: &str,
        kind: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyKernel> {
        let text = kind.and_then(|k| k.extract::<String>().ok());
        let one = text.as_deref() == Some("one");
        let several = match (kind, text.as_deref()) {
            (None, _) | (_, Some("dict")) => Some(Several::Dict),
            (Some(k), None) if k.is_none() => Some(Several::Dict),
            (Some(k), None) => k.extract::<Vec<String>>().ok().map(Several::Tuple),
            _ => None,
        };
        compile_kernel(py, program, tensors, out, shapes, backend, (one, several))
    }

    /// `kernel(out=None, **tensors)`: the common cases in Rust (one output returned, or
    /// written into one NumPy array, on `tessera.Tensor`s: [`call_site`] when the call is
    /// like the last one, else the map path); any other call goes to the Python side's
    /// `_call` (conversions, `out=` tuples and dicts, several outputs).
    #[pyo3(signature = (out=None, **tensors))]
    fn __call__(
        slf: &Bound<'_, Self>,
        out: Option<&Bound<'_, PyAny>>,
        tensors: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let empty;
        let tensors = match tensors {
            Some(t) => t,
            None => {
                empty = PyDict::new(py);
                &empty
            }
        };
        if me.one {
            match out {
                None => {
                    if let Some(t) = me.call_single(py, tensors)? {
                        return Ok(tensor_class(py)?.call1((t,))?.unbind());
                    }
                }
                // `np.ndarray` itself (a subclass may have its own `out=` ideas: the Python
                // side's general path).
                Some(out) if out.is_exact_instance_of::<numpy::PyUntypedArray>() => {
                    if me.call_out(py, tensors, out)? {
                        return Ok(out.clone().unbind());
                    }
                }
                Some(_) => {}
            }
        } else if let Some(several) = &me.several
            && let Some(made) = me.call_several(py, tensors, out, several)?
        {
            return Ok(made);
        }
        let out = match out {
            Some(o) => o.clone(),
            None => py.None().into_bound(py),
        };
        Ok(slf
            .call_method1(intern!(py, "_call"), (tensors, out))?
            .unbind())
    }

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
        let Some(single) = self.single_output() else {
            return Ok(None);
        };
        if let Some(mut made) = call_site(py, self.id, tensors, &[single], &[None])?
            && let Some(Some(made)) = made.pop()
        {
            return Ok(Some(PyTensor::new(made)));
        }
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
        let names: Vec<&String> = self.spec.out.keys().collect();
        let none = vec![None; names.len()];
        if let Some(made) = call_site(py, self.id, tensors, &names, &none)? {
            return Ok(Some(made_by_name(&names, made)));
        }
        let outputs = call_given(py, self.id, &self.spec, tensors, |_| Ok(vec![]))?;
        if outputs.is_some() {
            // The next call like this one runs by position.
            make_site(self.id, tensors, &names);
        }
        Ok(outputs.map(|o| o.made))
    }

    /// `Kernel.__call__(out=...)` with arrays for some of the outputs (`arrays`: output name
    /// → NumPy array, the Python side's reading of a tuple or dict), on `tessera.Tensor`s:
    /// the other outputs by name, or `None` without running or checking anything when a
    /// value of `tensors` is not a Tensor (the Python side then takes the general path,
    /// `call`). The arrays are checked as `call`'s `outs` are. A call like the last one runs
    /// by position: a kernel with a workspace declared as an output (a row buffer) then
    /// writes every output into reused arrays without a map or an allocation.
    fn call_arrays(
        &self,
        py: Python<'_>,
        tensors: &Bound<'_, PyDict>,
        arrays: &Bound<'_, PyDict>,
    ) -> PyResult<Option<BTreeMap<String, PyTensor>>> {
        let names: Vec<&String> = self.spec.out.keys().collect();
        let mut given: Vec<Option<Bound<'_, PyAny>>> = vec![None; names.len()];
        for (n, array) in arrays.iter() {
            let n: String = n.extract()?;
            match names.iter().position(|m| **m == n) {
                Some(k) => given[k] = Some(array),
                None => {
                    return Err(PyValueError::new_err(format!(
                        "out={n}: `{n}` is not an output of this call (outputs: {names:?})"
                    )));
                }
            }
        }
        let refs: Vec<Option<&Bound<'_, PyAny>>> = given.iter().map(Option::as_ref).collect();
        if let Some(made) = call_site(py, self.id, tensors, &names, &refs)? {
            return Ok(Some(made_by_name(&names, made)));
        }
        let outputs = call_given(py, self.id, &self.spec, tensors, |inputs| {
            let mut lent = vec![];
            for (n, array) in names.iter().zip(&given) {
                if let Some(array) = array {
                    if inputs.contains_key(*n) {
                        return Err(also_input(n));
                    }
                    lent.push(lend_out(n, array)?);
                }
            }
            check_overlaps(&lent, inputs.iter())?;
            Ok(lent)
        })?;
        match outputs {
            Some(outputs) => {
                let made = finish(py, outputs)?;
                // The next call like this one runs by position.
                make_site(self.id, tensors, &names);
                Ok(Some(made))
            }
            None => Ok(None),
        }
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
        let Some(single) = self.single_output() else {
            return Ok(false);
        };
        if call_site(py, self.id, tensors, &[single], &[Some(out)])?.is_some() {
            return Ok(true);
        }
        let outputs = call_given(py, self.id, &self.spec, tensors, |given| {
            if given.contains_key(single) {
                return Err(also_input(single));
            }
            let lent = vec![lend_out(single, out)?];
            check_overlaps(&lent, given.iter())?;
            Ok(lent)
        })?;
        match outputs {
            Some(outputs) => {
                finish(py, outputs)?;
                // The next call like this one runs by position.
                make_site(self.id, tensors, &[single]);
                Ok(true)
            }
            None => Ok(false),
        }
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
