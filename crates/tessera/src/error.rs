//! The error type every user-facing operation returns. Each variant names the place of the
//! mistake: a program position, a file and line, or a tensor and index. A program position is
//! shown only when known: built programs (the API, conversions) have no text, and their
//! messages name the tensors instead.

use crate::kernel_error::KernelError;
use crate::span::Span;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    /// Malformed program text.
    #[error("{}syntax error: {msg}", at(span))]
    Syntax { span: Span, msg: String },

    /// A well-formed program that is wrong: unknown name, reducer misuse, bad arity...
    #[error("{}{msg}", at(span))]
    Program { span: Span, msg: String },

    /// Extents that do not agree.
    #[error("{}dimension mismatch: {msg}", at(span))]
    DimensionMismatch { span: Span, msg: String },

    /// A tensor read and written in the same scope, or used in the wrong mode.
    #[error("{}lifecycle error: {msg}", at(span))]
    Lifecycle { span: Span, msg: String },

    /// A format string that does not parse or names an unknown level.
    #[error("bad format `{format}`: {msg}")]
    Format { format: String, msg: String },

    /// Malformed input file (line is 1-based; 0 when the problem is not tied to one line, and
    /// then only the path is shown).
    #[error("{path}{}: {msg}", line_suffix(*line))]
    File {
        path: String,
        line: usize,
        msg: String,
    },

    /// An operating-system level I/O failure.
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },

    /// A tensor whose storage or values are invalid (e.g. an index out of bounds). Raised by
    /// `Tensor` methods without a name (they do not know it) until [`Error::named`] gives one.
    #[error("{}{msg}", tensor_prefix(tensor))]
    Tensor { tensor: String, msg: String },

    /// A runtime error raised by a compiled kernel (e.g. an out-of-order write to a SparseList);
    /// match on its `kind`.
    #[error("kernel error: {0}")]
    Kernel(Box<KernelError>),

    /// Writes in a parallel loop that several iterations could make to one location without a
    /// commutative and associative reduction (a data race), refused before any code runs. The
    /// place is the write's; the message names the parallel loop.
    #[error("{}race: {msg}", at(span))]
    Race { span: Span, msg: String },

    /// Something the program asks for that this version of the compiler cannot generate.
    #[error("{}unsupported: {msg}", at(span))]
    Unsupported { span: Span, msg: String },

    /// A tensor too large for the memory limit, refused before anything was allocated
    /// (`bytes` is `None` when the size does not even fit in 64 bits; `limit` is `None` when
    /// there was no limit to compare with).
    #[error("{}", memory_message(tensor, shape, format, *bytes, *limit, *set_by_user))]
    Memory {
        tensor: String,
        shape: Vec<usize>,
        format: String,
        bytes: Option<u64>,
        limit: Option<u64>,
        set_by_user: bool,
    },

    /// Bad command-line usage.
    #[error("{0}")]
    Usage(String),

    /// A derivative of order `order` of a field reconstructed with `kernel`, which is only
    /// `C^continuity` (`None`: already differentiated past its class): ∇ of a C⁰ field.
    /// `place`: where a program asks for the derivative (`None` from the library API).
    #[error("{}{}", place.as_ref().map(at).unwrap_or_default(), continuity_message(kernel, *continuity, *order))]
    Continuity {
        kernel: String,
        continuity: Option<u32>,
        order: u32,
        place: Option<Span>,
    },

    /// The backend failed to compile generated code (a compiler bug, reported not hidden).
    #[error("backend error: {0}")]
    Backend(String),

    /// A schedule command (`transforms::schedule`) that does not apply to the program or would
    /// change its results: `command` is the command's text and `pos` its byte offset in the
    /// schedule string; `dependence`, when set, is the dependence it would break.
    #[error(
        "schedule command `{command}` (at {pos} in the schedule): {msg}{}",
        dependence_text(dependence)
    )]
    Schedule {
        command: String,
        pos: usize,
        msg: String,
        dependence: Option<Box<Dependence>>,
    },
}

/// A dependence between two accesses that a schedule command would reverse: `source` runs
/// first in the unscheduled program, `sink` second; `direction` gives, for each loop the two
/// share (outermost first), how the source's iteration relates to the sink's (`<` earlier,
/// `=` the same, `>` later).
#[derive(Debug, Clone, PartialEq)]
pub struct Dependence {
    /// `read after write`, `write after read` or `write after write`.
    pub kind: String,
    pub source: String,
    pub source_span: Span,
    pub sink: String,
    pub sink_span: Span,
    pub direction: Vec<(String, char)>,
}

fn dependence_text(d: &Option<Box<Dependence>>) -> String {
    let Some(d) = d else {
        return String::new();
    };
    let place = |s: &Span| {
        if s.is_known() {
            format!(" at {s}")
        } else {
            String::new()
        }
    };
    let dirs: Vec<String> = d
        .direction
        .iter()
        .map(|(l, c)| format!("{l}: {c}"))
        .collect();
    format!(
        "; it would break the {} dependence from `{}`{} to `{}`{} (direction {})",
        d.kind,
        d.source,
        place(&d.source_span),
        d.sink,
        place(&d.sink_span),
        if dirs.is_empty() {
            "loop-independent".to_string()
        } else {
            format!("({})", dirs.join(", "))
        }
    )
}

pub type Result<T> = std::result::Result<T, Error>;

/// `line:col: ` for a known span, nothing for a built node's.
fn at(span: &Span) -> String {
    if span.is_known() {
        format!("{span}: ")
    } else {
        String::new()
    }
}

fn continuity_message(kernel: &str, continuity: Option<u32>, order: u32) -> String {
    match continuity {
        Some(c) => format!(
            "kernel `{kernel}` is C{c}: a field built with it has no continuous derivative of order {order} (at most {c})"
        ),
        None => format!(
            "kernel `{kernel}` is already differentiated past its continuity: no derivative of order {order}"
        ),
    }
}

fn tensor_prefix(tensor: &str) -> String {
    if tensor.is_empty() {
        String::new()
    } else {
        format!("tensor `{tensor}`: ")
    }
}

fn line_suffix(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}")
    }
}

/// `1000x1000`, or `()` for a 0-d shape.
pub fn shape_text(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "()".into();
    }
    let dims: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
    dims.join("x")
}

fn memory_message(
    tensor: &str,
    shape: &[usize],
    format: &str,
    bytes: Option<u64>,
    limit: Option<u64>,
    set_by_user: bool,
) -> String {
    let what = if tensor.is_empty() {
        "a tensor".to_string()
    } else {
        format!("tensor `{tensor}`")
    };
    let need = match bytes {
        Some(b) => human(b),
        None => "more than 2^64 bytes".into(),
    };
    let over = match (limit, set_by_user) {
        (Some(l), true) => format!(", over the limit of {} set by --max-memory", human(l)),
        (Some(l), false) => format!(
            ", over the {} of memory available (see --max-memory)",
            human(l)
        ),
        (None, _) => String::new(),
    };
    format!(
        "{what} of shape {} in {format} needs {need}{over}",
        shape_text(shape)
    )
}

impl Error {
    pub fn syntax(span: Span, msg: impl Into<String>) -> Error {
        Error::Syntax {
            span,
            msg: msg.into(),
        }
    }
    pub fn program(span: Span, msg: impl Into<String>) -> Error {
        Error::Program {
            span,
            msg: msg.into(),
        }
    }
    pub fn file(path: impl Into<String>, line: usize, msg: impl Into<String>) -> Error {
        Error::File {
            path: path.into(),
            line,
            msg: msg.into(),
        }
    }
    pub fn io(path: impl Into<String>, err: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            msg: err.to_string(),
        }
    }
    pub fn tensor(tensor: impl Into<String>, msg: impl Into<String>) -> Error {
        Error::Tensor {
            tensor: tensor.into(),
            msg: msg.into(),
        }
    }
    pub fn kernel(err: KernelError) -> Error {
        Error::Kernel(Box::new(err))
    }
    /// `self` placed at `span` if it is about a program position it does not know yet (an
    /// error raised deep in the lowering, which only the enclosing statement can place).
    pub fn or_at(mut self, place: Span) -> Error {
        match &mut self {
            Error::Syntax { span, .. }
            | Error::Program { span, .. }
            | Error::DimensionMismatch { span, .. }
            | Error::Lifecycle { span, .. }
            | Error::Unsupported { span, .. }
                if !span.is_known() =>
            {
                *span = place
            }
            _ => {}
        }
        self
    }
    /// Give a tensor error raised without a name (by `Tensor` constructors, which do not know
    /// it) the name of the tensor it is about.
    pub fn named(self, name: &str) -> Error {
        match self {
            Error::Tensor { tensor, msg } if tensor.is_empty() => Error::Tensor {
                tensor: name.to_string(),
                msg,
            },
            Error::Memory {
                tensor,
                shape,
                format,
                bytes,
                limit,
                set_by_user,
            } if tensor.is_empty() => Error::Memory {
                tensor: name.to_string(),
                shape,
                format,
                bytes,
                limit,
                set_by_user,
            },
            e => e,
        }
    }
    pub fn unsupported(span: Span, msg: impl Into<String>) -> Error {
        Error::Unsupported {
            span,
            msg: msg.into(),
        }
    }
}

/// A byte count as a person reads it: `8.0 TiB (8796093022208 bytes)`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = bytes as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{x:.1} {} ({bytes} bytes)", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_places_are_left_out_and_filled_in_by_or_at() {
        let built = Error::program(Span::default(), "`x` is not defined");
        assert_eq!(built.to_string(), "`x` is not defined");
        let placed = built.or_at(Span::new(2, 7));
        assert_eq!(placed.to_string(), "2:7: `x` is not defined");
        // A known place stays.
        assert_eq!(
            placed.or_at(Span::new(9, 9)).to_string(),
            "2:7: `x` is not defined"
        );
        let m = Error::DimensionMismatch {
            span: Span::default(),
            msg: "shapes differ".into(),
        };
        assert_eq!(m.to_string(), "dimension mismatch: shapes differ");
    }
}
