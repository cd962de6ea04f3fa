//! Normalisation passes, each a function from AST to AST (or facts about it).

pub mod affine;
pub mod check;
pub mod concordize;
pub mod dimensionalize;
pub mod ein;
pub mod extents;
pub mod fields;
pub mod grad;
pub mod lifecycle;
pub mod linear;
pub mod parallel;
pub mod permissive;
pub mod real;
pub mod reducers;
pub mod schedule;
pub mod stack;
pub mod wrapperize;

pub use concordize::concordize;
pub use dimensionalize::{infer_shapes, infer_shapes_with};
pub use extents::resolve_auto_extents;
pub use lifecycle::lifecycle;
pub use permissive::permissive;
pub use reducers::resolve_reducers;
pub use wrapperize::wrapperize;
