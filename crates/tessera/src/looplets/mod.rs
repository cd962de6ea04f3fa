//! The looplet vocabulary: how a level describes the structure of one fiber dimension to the
//! lowering engine. Levels build looplets (`levels/`); each kind's file here holds its type
//! and its lowering rule; the engine (`lower::engine`) drives the rules one loop at a time in
//! the priority order of [`Style`], through the [`Lowerer`] interface.
//!
//! The rules rewrite the program form of [`node`] (statements whose accesses point at
//! [`Target`]s): it is the vocabulary shared by the rules and the engine, so it lives here,
//! below both.

use crate::ir::{Expr, Stmt, VarId};

pub mod accept_run;
pub mod extent;
pub mod jumper;
pub mod lookup;
pub mod lowerer;
pub mod node;
pub mod rewrite;
pub mod run;
pub mod sequence;
pub mod spike;
pub mod stepper;
pub mod switch;
pub mod tensor;
pub mod thunk;

pub use accept_run::AcceptRunFn;
pub use extent::{Ext, Extent, IndexKind, Integer, Kind, Real};
pub use jumper::Jumper;
pub use lookup::LookupFn;
pub use lowerer::Lowerer;
pub use sequence::Phase;
pub use stepper::{Positions, Stepper};

use crate::types::Scalar;
use std::rc::Rc;
use tensor::TensorInfo;

/// What an access currently points at.
#[derive(Clone)]
pub enum Target {
    /// A (sub)fiber of a tensor: level `level` at position `pos`. For updates, `dirty` is the
    /// flag a write below must raise so a sparse parent records the coordinate.
    Fiber(Fiber),
    /// Every remaining entry equals this value (reads).
    Fill(Scalar),
    /// Writes are discarded.
    Null,
    /// The fiber unfurled for the access's next index.
    Looplet(Looplet),
}

#[derive(Clone)]
pub struct Fiber {
    pub tensor: Rc<TensorInfo>,
    pub level: usize,
    pub pos: Expr,
    /// For multi-dimensional levels (SparseCOO): the end of the position range and how many of
    /// the level's dimensions are already consumed.
    pub pos_hi: Option<Expr>,
    pub sub: usize,
    pub dirty: Option<VarId>,
    /// For updates of multi-dimensional levels (SparseCOO): the coordinates of the dimensions
    /// already consumed, held by this access alone, so that several writes in one body (each
    /// its own access) cannot mix up each other's coordinates.
    pub coords: Vec<Expr>,
}

impl Fiber {
    pub fn root(tensor: Rc<TensorInfo>) -> Fiber {
        Fiber {
            tensor,
            level: 0,
            pos: crate::ir::build::int(0),
            pos_hi: None,
            sub: 0,
            dirty: None,
            coords: vec![],
        }
    }
    pub fn child(&self, pos: Expr) -> Fiber {
        Fiber {
            tensor: self.tensor.clone(),
            level: self.level + 1,
            pos,
            pos_hi: None,
            sub: 0,
            dirty: self.dirty,
            coords: vec![],
        }
    }
}

/// Move a stepper's or jumper's state to the chunk containing a coordinate.
pub type SeekFn = Rc<dyn Fn(&Expr) -> Vec<Stmt>>;

/// A looplet: the structure of a fiber over the extent of the loop being lowered. Coordinates
/// inside looplets are absolute (not relative to the extent).
#[derive(Clone)]
pub enum Looplet {
    /// The same target over the whole extent.
    Run(Box<Target>),
    /// Random access: the target at each coordinate.
    Lookup(LookupFn),
    /// `body` everywhere before coordinate `at`, `tail` at `at` (which is the chunk's end when
    /// the spike comes from a stepper).
    Spike {
        at: Expr,
        body: Box<Target>,
        tail: Box<Target>,
    },
    /// Consecutive phases; phase k covers (stop of phase k-1, stop_k]; `None` runs to the end.
    Sequence(Vec<Phase>),
    /// A variable number of chunks, each ending at `stop`.
    Stepper(Rc<Stepper>),
    /// Like a stepper, but when several jumpers coiterate each chunk runs to the *largest* of
    /// their stops (leapfrogging, the `gallop` protocol); the others walk their entries in it.
    Jumper(Rc<Jumper>),
    /// Runtime specialisation: the first case whose condition holds.
    Switch(Vec<(Expr, Looplet)>),
    /// Output side of run-length levels: `body(start, stop)` is the target that receives one
    /// value for every coordinate of the extent (one stored run). When the statement's body does
    /// not depend on the index once every other looplet is lowered, it is written once for the
    /// whole extent; otherwise once per coordinate (runs of length 1).
    AcceptRun(AcceptRunFn),
    /// Code to run before (and after) the loop that lowers `body`.
    Thunk {
        preamble: Vec<Stmt>,
        body: Box<Target>,
        epilogue: Vec<Stmt>,
    },
}

/// The looplet styles in their explicit total priority order (highest first), as in the Finch
/// paper's Fig. 15: a statement is lowered by the rule of the highest style present.
///
/// `AcceptRun` comes last, after `Lookup` (the paper's order, Lookup > AcceptRun): a run
/// writer must see the extent that is left once every read's structure has been lowered.
/// Steppers, sequences and spikes of the inputs cut the loop into the chunks over which the
/// right-hand side is constant, and then one run per chunk is written; a lookup among the
/// inputs (a dense read) makes the loop per coordinate first, so the writer sees points. Below
/// `AcceptRun` there is only the plain loop (no looplet left on the index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Style {
    Thunk,
    Switch,
    Sequence,
    Spike,
    Run,
    Jumper,
    Stepper,
    Lookup,
    AcceptRun,
}

impl Looplet {
    pub fn style(&self) -> Style {
        match self {
            Looplet::Thunk { .. } => Style::Thunk,
            Looplet::Switch(_) => Style::Switch,
            Looplet::Sequence(_) => Style::Sequence,
            Looplet::Spike { .. } => Style::Spike,
            Looplet::Run(_) => Style::Run,
            Looplet::Jumper(_) => Style::Jumper,
            Looplet::Stepper(_) => Style::Stepper,
            Looplet::Lookup(_) => Style::Lookup,
            Looplet::AcceptRun(_) => Style::AcceptRun,
        }
    }
}
