//! Tessera errors as Python exceptions. The classes live in `tessera/errors.py` (one per
//! kind of `tessera::Error`, all subclasses of `TesseraError`) so that Python code can
//! subclass and document them; this file picks the class by the variant and sets the
//! attributes that name the place (`line`, `column`, `tensor`, `path`).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tessera::Error;
use tessera::span::Span;

/// The `tessera.errors` class name of each variant.
fn class_name(e: &Error) -> &'static str {
    match e {
        Error::Syntax { .. } => "ParseError",
        Error::Program { .. } => "ProgramError",
        Error::DimensionMismatch { .. } => "DimensionMismatchError",
        Error::Lifecycle { .. } => "LifecycleError",
        Error::Format { .. } => "FormatError",
        Error::File { .. } => "FileError",
        Error::Io { .. } => "FileError",
        Error::Tensor { .. } => "TensorError",
        Error::Kernel(_) => "KernelError",
        Error::Race { .. } => "RaceError",
        Error::Unsupported { .. } => "UnsupportedError",
        Error::Memory { .. } => "MemoryLimitError",
        Error::Usage(_) => "UsageError",
        Error::Continuity { .. } => "ContinuityError",
        Error::Backend(_) => "BackendError",
        Error::Schedule { .. } => "ScheduleError",
    }
}

/// The program position an error names, if it names one.
fn span_of(e: &Error) -> Option<Span> {
    let span = match e {
        Error::Syntax { span, .. }
        | Error::Program { span, .. }
        | Error::DimensionMismatch { span, .. }
        | Error::Lifecycle { span, .. }
        | Error::Race { span, .. }
        | Error::Unsupported { span, .. } => *span,
        Error::Kernel(k) => k.span,
        _ => return None,
    };
    span.is_known().then_some(span)
}

fn tensor_of(e: &Error) -> Option<String> {
    match e {
        Error::Tensor { tensor, .. } if !tensor.is_empty() => Some(tensor.clone()),
        Error::Memory { tensor, .. } if !tensor.is_empty() => Some(tensor.clone()),
        Error::Kernel(k) => k.tensor.clone(),
        _ => None,
    }
}

/// The Python exception for a Tessera error: same message, class by kind, place attributes.
pub fn to_py(e: Error) -> PyErr {
    Python::attach(|py| match build(py, &e) {
        Ok(err) => err,
        // The package is broken if its own errors module is missing; still say what failed.
        Err(_) => PyRuntimeError::new_err(e.to_string()),
    })
}

fn build(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    let module = py.import("tessera.errors")?;
    let class = module.getattr(class_name(e))?;
    let exc = class.call1((e.to_string(),))?;
    let (line, column) = match span_of(e) {
        Some(s) => (Some(s.line), Some(s.col)),
        None => (None, None),
    };
    exc.setattr("line", line)?;
    exc.setattr("column", column)?;
    exc.setattr("tensor", tensor_of(e))?;
    let path = match e {
        Error::File { path, .. } | Error::Io { path, .. } => Some(path.clone()),
        _ => None,
    };
    exc.setattr("path", path)?;
    if let Error::Kernel(k) = e {
        // The variant's name (`OutOfBounds`), what Python code matches on.
        let kind = format!("{:?}", k.kind);
        let name = kind.split([' ', '{']).next().unwrap_or_default();
        exc.setattr("kernel_kind", name)?;
    }
    Ok(PyErr::from_value(exc))
}

/// `?` on a core result inside a Python-facing function.
pub trait IntoPy<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for tessera::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
