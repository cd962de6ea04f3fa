//! The algebra below the lowering engine: the properties of reducers and operators (identity,
//! annihilator, idempotence) in [`algebra`], and the small prover of extent facts in
//! [`bounds`]. Both work on plain values and IR expressions, so levels, looplets and the
//! engine can all use them; the rewriting simplifier over the lowering's nodes lives in
//! `lower::simplify`.

pub mod algebra;
pub mod bounds;
