//! The language: AST, parser, printer and builder.

pub mod ast;
pub mod visit;
