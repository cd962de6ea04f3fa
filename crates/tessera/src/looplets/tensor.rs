//! What the compiler knows about one tensor of a kernel: its format, the IR buffers of each
//! level, the level state variables and its dimensions.

use crate::ir::cx::Cx;
use crate::ir::{BufId, Expr, VarId, build};
use crate::levels::{Format, level_impl};
use crate::types::{ElemType, Scalar};

pub struct TensorInfo {
    pub name: String,
    pub format: Format,
    pub elem: ElemType,
    pub fill: Scalar,
    pub level_bufs: Vec<Vec<BufId>>,
    pub level_vars: Vec<Vec<VarId>>,
    /// One I64 variable per dimension, loaded from the kernel's dims buffer at entry.
    pub dims: Vec<VarId>,
    /// Slot of the first dimension in the dims buffer.
    pub dims_slot: usize,
}

impl TensorInfo {
    pub fn new(cx: &mut Cx, name: &str, format: &Format, dims_slot: usize) -> TensorInfo {
        let elem = format.elem();
        let mut level_bufs = vec![];
        let mut level_vars = vec![];
        // Names repeat only when a format has two levels of one kind: number the later ones.
        let mut seen = std::collections::HashMap::<String, usize>::new();
        let mut unique = |base: String| {
            let n = seen.entry(base.clone()).or_insert(0);
            *n += 1;
            if *n == 1 { base } else { format!("{base}{n}") }
        };
        for kind in &format.levels {
            let imp = level_impl(kind);
            level_bufs.push(
                imp.buffers(kind, elem)
                    .into_iter()
                    .map(|(n, t)| cx.tensor_buf(name, unique(format!("{name}_{n}")), t))
                    .collect(),
            );
            level_vars.push(
                imp.state(kind)
                    .into_iter()
                    .map(|(n, t)| cx.var(&unique(format!("{name}_{n}")), t))
                    .collect(),
            );
        }
        let dims = (0..format.rank())
            .map(|d| cx.var(&format!("{name}_dim{d}"), ElemType::I64))
            .collect();
        TensorInfo {
            name: name.to_string(),
            format: format.clone(),
            elem,
            fill: format.fill(),
            level_bufs,
            level_vars,
            dims,
            dims_slot,
        }
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The first dimension number indexed by `level`.
    pub fn first_dim_of_level(&self, level: usize) -> usize {
        self.format.levels[..level].iter().map(|l| l.rank()).sum()
    }

    pub fn dim_of_level(&self, level: usize, sub: usize) -> Expr {
        build::var(self.dims[self.first_dim_of_level(level) + sub])
    }

    pub fn dim(&self, d: usize) -> Expr {
        build::var(self.dims[d])
    }
}
