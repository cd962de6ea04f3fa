//! Normalisation passes, each a function from AST to AST (or facts about it).

pub mod concordize;
pub mod dimensionalize;
pub mod lifecycle;
pub mod permissive;

pub use concordize::concordize;
pub use dimensionalize::infer_shapes;
pub use lifecycle::lifecycle;
pub use permissive::permissive;
