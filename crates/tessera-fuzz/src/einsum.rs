//! Einsum statements: a statement is either refused with an error, or it is planned for inputs
//! of some formats, the plan's tensors are prepared, and its program lowers (or is refused)
//! without panicking. Nothing is compiled, so a run stays fast.

use crate::split_text;
use std::collections::BTreeMap;
use tessera::api::plan::plan;
use tessera::api::spec::parse_spec;
use tessera::api::{formats_of, prepare};
use tessera::levels::Format;
use tessera::run::Runner;
use tessera::tensor::Tensor;

/// Inputs of a higher rank are not built: planning many dimensions is what costs, and eight
/// is where the planner stops scoring every loop order.
const MAX_RANK: usize = 8;

/// The level of each dimension and the leaf a parameter byte picks.
const LEVELS: &[&str] = &[
    "Dense",
    "SparseList",
    "SparseBand",
    "RunList",
    "SparseByteMap",
];
const LEAVES: &[&str] = &["Element(0.0)", "Element(0)", "Element(1.0)", "Pattern()"];

/// `data` is `STATEMENT \0 PARAMETERS`: the parameter bytes pick each input's level formats,
/// leaf and extents (1 or 2).
pub fn einsum(data: &[u8]) {
    let Some((text, params)) = split_text(data) else {
        return;
    };
    let Ok(spec) = parse_spec(text) else {
        return;
    };
    let mut params = params.iter().copied();
    let mut byte = || params.next().unwrap_or(0);
    let mut inputs: BTreeMap<String, Tensor> = BTreeMap::new();
    for a in &spec.reads {
        if inputs.contains_key(&a.tensor) {
            continue;
        }
        let rank = a.indices.len();
        if rank > MAX_RANK {
            return;
        }
        let mut text = String::new();
        for _ in 0..rank {
            text.push_str(LEVELS[usize::from(byte()) % LEVELS.len()]);
            text.push('(');
        }
        text.push_str(LEAVES[usize::from(byte()) % LEAVES.len()]);
        text.push_str(&")".repeat(rank));
        // Some combinations are not formats (a Pattern leaf under RunList): skip those.
        let Ok(f) = Format::parse(&text, Some(rank)) else {
            return;
        };
        let shape: Vec<usize> = (0..rank).map(|_| usize::from(byte() % 2) + 1).collect();
        let Ok(t) = Tensor::empty(&f, &shape) else {
            return;
        };
        inputs.insert(a.tensor.clone(), t);
    }
    let formats: Vec<(&str, &Format)> = inputs
        .iter()
        .map(|(n, t)| (n.as_str(), &t.format))
        .collect();
    let Ok(p) = plan(&spec, &formats, None) else {
        return;
    };
    let printed = p.program.to_string();
    if let Err(e) = tessera::notation::parse::parse_program(&printed) {
        panic!("the plan of `{text}` prints as a program that does not parse: {e}\n{printed}");
    }
    let given: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let Ok(tensors) = prepare(&p, &given) else {
        return;
    };
    let _ = Runner::lower(&p.program, &formats_of(&tensors));
}
