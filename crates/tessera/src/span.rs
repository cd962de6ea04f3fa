//! Positions in program text, for error messages. Below every other module, so errors and
//! every pass can name a place without depending on the notation.

use std::fmt;

/// A position in the program text (1-based). `Span::default()` (0:0) marks built nodes.
#[derive(Clone, Copy, Debug, Default, Eq)]
pub struct Span {
    pub line: u32,
    pub col: u32,
}

impl PartialEq for Span {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::hash::Hash for Span {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl Span {
    pub fn new(line: u32, col: u32) -> Span {
        Span { line, col }
    }
    pub fn is_known(&self) -> bool {
        self.line > 0
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}
