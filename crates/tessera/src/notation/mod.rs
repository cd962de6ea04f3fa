//! The language: AST, parser, printer and builder.

pub mod ast;
pub mod build;
pub mod parse;
pub mod print;
pub mod visit;
