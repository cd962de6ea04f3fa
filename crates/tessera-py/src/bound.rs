//! `Kernel.bind(out=None, **tensors)`: a call kept with its arguments, run again by `bound()`
//! on their current contents (an iterative solver's `y = A @ x`, a training step). A
//! `Kernel(...)` call, even by position ([`crate::kernel`]'s call site), looks at its keyword
//! dict, each value's tensor and the `out=` array on every call: about 0.8 µs above the Rust
//! call, 5-10% of a 10-20 µs SpMV. The tensors of a bound call cannot change (a
//! `tessera.Tensor` is immutable), so after its first run the kernel's slots stay filled and
//! the `out=` array stays lent; a later call only checks that the array is still the one it
//! lent (address, shape, dtype, writable, contiguous: NumPy lets its owner change those in
//! place) and that this thread's compiled state is still the one the slots were filled for.
//! Anything else — another thread, a kernel compiled again for other formats, an array
//! changed in place, a failed call — takes the keyword call, which checks and reports
//! everything, and the next good call keeps its arguments again.

use crate::convert::{Lendable, out_fits, settle};
use crate::errors::IntoPy;
use crate::kernel::{PyKernel, READY, Site, run_slots, tensor_class};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tessera::runtime::buffer::Buffer;
use tessera::tensor::Tensor;

/// How many bound calls ran on kept slots (for the tests: that the fast path is taken).
pub static BOUND_CALLS: AtomicU64 = AtomicU64::new(0);

/// `Kernel.bind(...)`'s object: the Python `tessera.BoundKernel` is a subclass, and its call
/// (`__call__`, below) enters Rust directly.
#[pyclass(name = "RawBound", module = "tessera._tessera", frozen, subclass)]
pub struct PyBound {
    kernel: Py<PyKernel>,
    /// The call's keywords: name → `tessera.Tensor` (a private dict: the caller's cannot be
    /// changed under us).
    tensors: Py<PyDict>,
    out: Option<Py<PyAny>>,
    /// The kept run, once a keyword call succeeded; a call made while another holds it (a
    /// second thread, or a `__del__` during the run) takes the keyword call.
    kept: Mutex<Option<Kept>>,
}

/// What a bound call keeps between runs.
struct Kept {
    /// The serial number of the compiled state the slots were filled for
    /// ([`crate::kernel::Ready::serial`]); another number (another thread's state, or this
    /// thread's compiled again) means the keyword call.
    serial: u64,
    site: Site,
    /// The `out=` array's memory, lent again for each run; `None`: a new output per call.
    out: Option<Lendable>,
}

#[pymethods]
impl PyBound {
    /// `BoundKernel(kernel, tensors, out)`: `tensors` are `tessera.Tensor`s by name (the
    /// Python side converted the rest); nothing runs until the first call.
    #[new]
    #[pyo3(signature = (kernel, tensors, out=None))]
    fn new(
        kernel: Py<PyKernel>,
        tensors: &Bound<'_, PyDict>,
        out: Option<Py<PyAny>>,
    ) -> PyResult<PyBound> {
        Ok(PyBound {
            kernel,
            tensors: tensors.copy()?.unbind(),
            out,
            kept: Mutex::new(None),
        })
    }

    /// Runs the kernel on the bound tensors: what `kernel(out=out, **tensors)` returns.
    fn __call__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let Ok(mut kept) = me.kept.try_lock() else {
            return me.keyword_call(py);
        };
        if let Some(k) = kept.as_mut() {
            match me.run_kept(py, k) {
                Ok(Some(result)) => return Ok(result),
                // Something changed: the keyword call checks it all.
                Ok(None) => *kept = None,
                Err(e) => {
                    *kept = None;
                    return Err(e);
                }
            }
        }
        let result = me.keyword_call(py)?;
        *kept = me.keep(py);
        Ok(result)
    }

    /// The kernel this call runs.
    #[getter]
    fn kernel(&self, py: Python<'_>) -> Py<PyKernel> {
        self.kernel.clone_ref(py)
    }

    /// The bound tensors, by name (a copy).
    #[getter]
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.tensors.bind(py).copy()
    }

    /// The bound `out=` argument, or `None`.
    #[getter]
    fn out(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.out.as_ref().map(|o| o.clone_ref(py))
    }
}

impl PyBound {
    /// `kernel(out=out, **tensors)`, through the kernel's own call.
    fn keyword_call(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let kwargs = self.tensors.bind(py).copy()?;
        if let Some(out) = &self.out {
            kwargs.set_item(pyo3::intern!(py, "out"), out.bind(py))?;
        }
        Ok(self.kernel.bind(py).call((), Some(&kwargs))?.unbind())
    }

    /// After a keyword call that succeeded: the slots to run again, if the call is one the
    /// kernel serves by position (one output, returned or written into a NumPy array of a
    /// dtype lent as is) on this thread's compiled state.
    fn keep(&self, py: Python<'_>) -> Option<Kept> {
        let kernel = self.kernel.get();
        let single = kernel.single_output()?;
        if !kernel.one {
            return None;
        }
        let out = match &self.out {
            Some(out) => Some(Lendable::keep(single, out.bind(py))?),
            None => None,
        };
        let ready = READY.with(|r| r.borrow().get(&kernel.id).cloned())?;
        let tensors = self.tensors.bind(py);
        let mut site = Site::make(&ready, tensors, &[single])?;
        if !site.fill(tensors) {
            return None;
        }
        if let Some(out) = &out {
            let o = &site.outs[0];
            out_fits(&out.out, &site.slots[o.at].format, &o.shape).ok()?;
        }
        Some(Kept {
            serial: ready.serial,
            site,
            out,
        })
    }

    /// The kept run: `Ok(None)` when it no longer applies (nothing ran).
    fn run_kept(&self, py: Python<'_>, kept: &mut Kept) -> PyResult<Option<Py<PyAny>>> {
        let kernel = self.kernel.get();
        let Some(ready) = READY.with(|r| r.borrow().get(&kernel.id).cloned()) else {
            return Ok(None);
        };
        if ready.serial != kept.serial {
            return Ok(None);
        }
        let site = &mut kept.site;
        let out_at = site.outs[0].at;
        let result = match (&kept.out, &self.out) {
            (Some(lendable), Some(array)) => {
                let array = array.bind(py);
                if !lendable.still(array) {
                    return Ok(None);
                }
                let Some(values) = site.slots[out_at]
                    .levels
                    .last_mut()
                    .and_then(|l| l.first_mut())
                else {
                    return Ok(None);
                };
                let Some(buffer) = lendable.lend() else {
                    return Ok(None);
                };
                *values = buffer;
                let ran = run_slots(py, kernel.id, &ready, site);
                let settled = ran.and_then(|()| settle(py, &lendable.out, &site.slots[out_at]));
                // The slot lets go of the array's memory between runs.
                if let Some(v) = site.slots[out_at]
                    .levels
                    .last_mut()
                    .and_then(|l| l.first_mut())
                {
                    *v = Buffer::I64(Vec::new().into());
                }
                settled.map(|()| array.clone().unbind())
            }
            (None, None) => {
                let format = &site.slots[out_at].format;
                let single = kernel.single_output().map_or("", String::as_str);
                let made = Tensor::empty(format, &site.outs[0].shape)
                    .map_err(|e| e.named(single))
                    .py_err()?;
                let kept_slot = std::mem::replace(&mut site.slots[out_at], made);
                let ran = run_slots(py, kernel.id, &ready, site);
                let made = std::mem::replace(&mut site.slots[out_at], kept_slot);
                ran?;
                let t = crate::tensor::PyTensor::new(made);
                tensor_class(py)?.call1((t,)).map(Bound::unbind)
            }
            _ => return Ok(None),
        };
        BOUND_CALLS.fetch_add(1, Ordering::Relaxed);
        result.map(Some)
    }
}
