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

    /// Malformed input file (line is 1-based; 0 when the problem is not tied to one line).
    #[error("{path}:{line}: {msg}")]
    File {
        path: String,
        line: usize,
        msg: String,
    },

    /// An operating-system level I/O failure.
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },

    /// A tensor whose storage or values are invalid (e.g. an index out of bounds).
    #[error("tensor `{tensor}`: {msg}")]
    Tensor { tensor: String, msg: String },

    /// A runtime error raised by a compiled kernel (e.g. an out-of-order write to a SparseList);
    /// match on its `kind`.
    #[error("kernel error: {0}")]
    Kernel(Box<KernelError>),

    /// Something the program asks for that this version of the compiler cannot generate.
    #[error("{}unsupported: {msg}", at(span))]
    Unsupported { span: Span, msg: String },

    /// Bad command-line usage.
    #[error("{0}")]
    Usage(String),

    /// The backend failed to compile generated code (a compiler bug, reported not hidden).
    #[error("backend error: {0}")]
    Backend(String),
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
    pub fn unsupported(span: Span, msg: impl Into<String>) -> Error {
        Error::Unsupported {
            span,
            msg: msg.into(),
        }
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
