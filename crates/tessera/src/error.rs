//! The error type every user-facing operation returns. Each variant names the place of the
//! mistake: a program position, a file and line, or a tensor and index.

use crate::span::Span;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    /// Malformed program text.
    #[error("{span}: syntax error: {msg}")]
    Syntax { span: Span, msg: String },

    /// A well-formed program that is wrong: unknown name, reducer misuse, bad arity...
    #[error("{span}: {msg}")]
    Program { span: Span, msg: String },

    /// Extents that do not agree.
    #[error("{span}: dimension mismatch: {msg}")]
    DimensionMismatch { span: Span, msg: String },

    /// A tensor read and written in the same scope, or used in the wrong mode.
    #[error("{span}: lifecycle error: {msg}")]
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

    /// A runtime error raised by a compiled kernel (e.g. an out-of-order write to a SparseList).
    #[error("kernel error: {msg}")]
    Kernel { msg: String },

    /// Something the program asks for that this version of the compiler cannot generate.
    #[error("{span}: unsupported: {msg}")]
    Unsupported { span: Span, msg: String },

    /// Bad command-line usage.
    #[error("{0}")]
    Usage(String),

    /// The backend failed to compile generated code (a compiler bug, reported not hidden).
    #[error("backend error: {0}")]
    Backend(String),
}

pub type Result<T> = std::result::Result<T, Error>;

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
    pub fn unsupported(span: Span, msg: impl Into<String>) -> Error {
        Error::Unsupported {
            span,
            msg: msg.into(),
        }
    }
}
