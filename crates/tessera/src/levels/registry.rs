//! The level registry: what each level format is — its name, the dimensions it indexes, the
//! parameters its constructor takes, the read protocols it has a faster way for, and what it
//! can do — declared once, as a [`LevelSpec`] in the level's own file, and listed here, one
//! line per level. The format parser and printer, the einsum planner, the error hints, the
//! lowering engine and the tests' format generators ask the registry, never a level's name: a
//! new level is its file, its [`LevelKind`] variant and one line in [`LEVELS`].

use super::format::{Format, LevelKind};
use super::{Level, dense, element, pattern, run_list, scalar, sparse_band, sparse_block_list};
use super::{sparse_bytemap, sparse_coo, sparse_dict, sparse_interval, sparse_list};
use super::{sparse_point, sparse_run_list, sparse_slice_list};
use crate::error::Error;
use crate::notation::ast::Protocol;
use crate::types::Scalar;

/// Every level format, in the order error messages and generators list them.
pub static LEVELS: &[&LevelSpec] = &[
    &dense::SPEC,
    &sparse_list::SPEC,
    &sparse_slice_list::SPEC,
    &sparse_point::SPEC,
    &sparse_block_list::SPEC,
    &sparse_band::SPEC,
    &sparse_bytemap::SPEC,
    &sparse_dict::SPEC,
    &sparse_coo::SPEC,
    &run_list::SPEC,
    &sparse_run_list::SPEC,
    &sparse_interval::SPEC,
    &element::SPEC,
    &pattern::SPEC,
    &scalar::SCALAR,
    &scalar::SPARSE_SCALAR,
    &scalar::SHORT_CIRCUIT_SCALAR,
    &scalar::SPARSE_SHORT_CIRCUIT_SCALAR,
];

/// Where a level may stand in a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Indexes dimensions and has a child level: `Name(child)`.
    Level,
    /// The innermost level, holding values: `Element(fill)`, `Pattern()`.
    Leaf,
    /// A whole 0-d format on its own, never under another level (`SparseScalar(fill)`).
    Whole,
}

/// How many dimensions a level indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Fixed(usize),
    /// As many as its [`Param::Dims`] says (`SparseCOO{2}`).
    Dims,
}

/// One parameter of a level's constructor, as the format syntax takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// `{N}` right after the name: the number of dimensions, in `1..=max`.
    Dims { max: usize },
    /// `key=true|false` after the child (`RunList(child, merge=false)`); printed only when it
    /// is not the default.
    Flag { key: &'static str, default: bool },
    /// A leaf's fill value: `(value)` or `(value, type)`.
    Fill,
    /// `coord=i64|i32|f64` after the child: the type of the stored coordinates; printed only when
    /// it is not `i64`. The tests' format generators keep the default (a real dimension needs
    /// a program over real loops).
    Coord,
    /// `halfopen=true` after the child, with `coord=f64`: every stored run is `[left, right)`
    /// (a closed start, an open end: BED intervals), so reads compare plain numbers rather
    /// than `Limit` keys with signs loaded from arrays. Printed only when set; the format
    /// generators keep the default, as for `coord=`.
    HalfOpen,
}

/// The values of a level's parameters (only those its [`Param`]s name are meaningful).
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    pub dims: usize,
    pub fill: Scalar,
    /// Every flag of the level, with its value.
    pub flags: Vec<(&'static str, bool)>,
    pub coord: super::format::Coord,
    /// [`Param::HalfOpen`].
    pub half_open: bool,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            dims: 1,
            fill: Scalar::F64(0.0),
            flags: vec![],
            coord: super::format::Coord::I64,
            half_open: false,
        }
    }
}

impl Args {
    /// The flag's value; `false` for a flag the level does not have.
    pub fn flag(&self, key: &str) -> bool {
        self.flags.iter().any(|&(k, v)| k == key && v)
    }
}

/// In what order a level takes writes between its declaration and its freeze.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// In increasing coordinate order within a fiber, fibers in increasing position order (a
    /// repeat of the last coordinate combines with it).
    InOrder,
    /// In any order, but each coordinate at most once (`SparseCOO`: entries sorted at freeze).
    AnyOrderOnce,
    /// In any order and any number of times, each write combining with what is stored.
    Random,
}

/// What a level can do, as the planner, the engine and the hints ask it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Stores only some coordinates of a fiber; the rest read as fill.
    pub sparse: bool,
    pub writes: Writes,
    /// Can be reopened for updates after a kernel read it (thaw).
    pub reopen: bool,
    /// Merges neighbouring runs with equal sub-fibers after a kernel wrote it (while its
    /// `merge` flag is on).
    pub merges_runs: bool,
    /// Stores any set of coordinates (`SparsePoint` holds one per fiber, `SparseInterval` one
    /// run per fiber).
    pub holds_any: bool,
    /// Loops reducing into it stop once it holds the reducer's annihilator.
    pub short_circuit: bool,
    /// Takes `coord=f64` (for levels with [`Param::Coord`]).
    pub real_coords: bool,
}

impl Caps {
    /// What most non-leaf levels can do: stores every coordinate, in-order writes, no
    /// reopening; fields are overridden per level.
    pub const LEVEL: Caps = Caps {
        sparse: false,
        writes: Writes::InOrder,
        reopen: false,
        merges_runs: false,
        holds_any: true,
        short_circuit: false,
        real_coords: true,
    };
    /// Leaves: a position's value is written in whatever order the parent level allows, and
    /// a reopened leaf just takes writes again.
    pub const LEAF: Caps = Caps {
        sparse: false,
        writes: Writes::Random,
        reopen: true,
        merges_runs: false,
        holds_any: true,
        short_circuit: false,
        real_coords: true,
    };
}

/// Everything about one level format except its code (that is [`LevelSpec::imp`]).
pub struct LevelSpec {
    /// The constructor's name in format text.
    pub name: &'static str,
    pub role: Role,
    pub arity: Arity,
    pub params: &'static [Param],
    /// Read protocols the level has a faster way for than its walk (others read by the walk).
    pub protocols: &'static [Protocol],
    pub caps: Caps,
    /// Whether a [`LevelKind`] is this level.
    pub is: fn(&LevelKind) -> bool,
    /// The kind with these parameter values.
    pub make: fn(&Args) -> LevelKind,
    /// A kind's parameter values (called only on kinds that are this level).
    pub args: fn(&LevelKind) -> Args,
    /// A rule on the levels below this one (its child first, the leaf last): why this level
    /// cannot sit above them, if it cannot.
    pub check_below: fn(&[LevelKind]) -> Option<&'static str>,
    pub imp: &'static dyn Level,
}

/// For [`LevelSpec::args`] of levels without parameters.
pub fn no_args(_: &LevelKind) -> Args {
    Args::default()
}

/// For [`LevelSpec::check_below`] of levels that sit above anything.
pub fn any_below(_: &[LevelKind]) -> Option<&'static str> {
    None
}

impl LevelSpec {
    /// The syntax of the name with its `{N}`, as error messages list it (`SparseCOO{N}`).
    pub fn syntax(&self) -> String {
        let dims = self.params.iter().any(|p| matches!(p, Param::Dims { .. }));
        format!("{}{}", self.name, if dims { "{N}" } else { "" })
    }

    pub fn flags(&self) -> impl Iterator<Item = (&'static str, bool)> + '_ {
        self.params.iter().filter_map(|p| match *p {
            Param::Flag { key, default } => Some((key, default)),
            _ => None,
        })
    }

    /// Whether the level has a faster way to read under `p` than its walk.
    pub fn honours(&self, p: Protocol) -> bool {
        self.protocols.contains(&p)
    }

    /// Every kind of this level: each flag both ways and, for a level of [`Arity::Dims`],
    /// each number of dimensions up to `max_dims`. Leaves get each of `fills`. (A level whose
    /// constructor is another's under a second name, `Scalar` for `Element`, gives that one's.)
    pub fn variants(&self, max_dims: usize, fills: &[Scalar]) -> Vec<LevelKind> {
        let mut args = vec![Args::default()];
        for p in self.params {
            args = match *p {
                Param::Dims { max } => (1..=max.min(max_dims))
                    .flat_map(|n| {
                        args.iter().map(move |a| Args {
                            dims: n,
                            ..a.clone()
                        })
                    })
                    .collect(),
                Param::Flag { key, default } => [default, !default]
                    .into_iter()
                    .flat_map(|v| {
                        args.iter().map(move |a| {
                            let mut a = a.clone();
                            a.flags.push((key, v));
                            a
                        })
                    })
                    .collect(),
                Param::Fill => fills
                    .iter()
                    .flat_map(|&fill| args.iter().map(move |a| Args { fill, ..a.clone() }))
                    .collect(),
                // 4-byte integer coordinates are a variant of their own (real ones change the
                // dimension's kind and are generated by the continuous tests).
                Param::Coord => [super::format::Coord::I64, super::format::Coord::I32]
                    .into_iter()
                    .flat_map(|coord| args.iter().map(move |a| Args { coord, ..a.clone() }))
                    .collect(),
                // Only with real coordinates, which the generators leave to the continuous tests.
                Param::HalfOpen => args,
            };
        }
        let mut out: Vec<LevelKind> = vec![];
        for a in &args {
            let k = (self.make)(a);
            if k.rank() <= max_dims && !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }
}

/// Why a tensor with a level that cannot be reopened (`!caps.reopen`) cannot take updates
/// after a read.
pub fn reopen_error(tensor: &str, kind: &LevelKind) -> Error {
    Error::tensor(
        tensor,
        format!(
            "a {} level cannot be reopened for updates after it was read",
            kind.name()
        ),
    )
}

/// The level a constructor name denotes.
pub fn lookup(name: &str) -> Option<&'static LevelSpec> {
    LEVELS.iter().copied().find(|s| s.name == name)
}

/// The level a kind is.
pub fn spec_of(kind: &LevelKind) -> &'static LevelSpec {
    LEVELS
        .iter()
        .copied()
        .find(|s| (s.is)(kind))
        .expect("every LevelKind has a spec in levels::registry::LEVELS")
}

/// The names the parser knows, for its error message: levels and leaves, then the 0-d formats.
pub fn known_names() -> String {
    let list = |whole: bool| {
        LEVELS
            .iter()
            .filter(|s| (s.role == Role::Whole) == whole)
            .map(|s| s.syntax())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("{}; 0-d: {}", list(false), list(true))
}

/// The non-leaf levels that take writes in any order (each coordinate at most once, or any
/// number of times when `repeated`), as a list for messages: "Dense, SparseByteMap or ...".
pub fn any_order_levels(repeated: bool) -> String {
    let names: Vec<String> = LEVELS
        .iter()
        .filter(|s| s.role == Role::Level)
        .filter(|s| match s.caps.writes {
            Writes::Random => true,
            Writes::AnyOrderOnce => !repeated,
            Writes::InOrder => false,
        })
        .map(|s| s.syntax())
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Every valid format of `rank` dimensions that chains registered levels (each variant of
/// each, see [`LevelSpec::variants`]) over one of `leaves`: the formats the tests' random
/// generators draw from, so a newly registered level joins them with no edit there.
pub fn example_formats(rank: usize, leaves: &[LevelKind]) -> Vec<Format> {
    let mut chains: Vec<Vec<LevelKind>> = vec![];
    let mut partial: Vec<(Vec<LevelKind>, usize)> = vec![(vec![], 0)];
    while let Some((chain, dims)) = partial.pop() {
        if dims == rank {
            chains.push(chain);
            continue;
        }
        for spec in LEVELS.iter().filter(|s| s.role == Role::Level) {
            for kind in spec.variants(rank - dims, &[]) {
                let mut longer = chain.clone();
                let d = dims + kind.rank();
                longer.push(kind);
                partial.push((longer, d));
            }
        }
    }
    chains.reverse();
    let mut out = vec![];
    for chain in chains {
        for leaf in leaves {
            let mut levels = chain.clone();
            levels.push(leaf.clone());
            if let Ok(f) = Format::new(levels) {
                out.push(f);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::format::Coord;
    use super::*;

    /// One kind per `LevelKind` variant. The match has no wildcard, so a new variant fails to
    /// compile here until it is added, and the test then checks it is registered.
    fn one_of_each() -> Vec<LevelKind> {
        let all = vec![
            LevelKind::Dense,
            LevelKind::SPARSE_LIST,
            LevelKind::SparseSliceList { coord: Coord::I32 },
            LevelKind::SPARSE_POINT,
            LevelKind::SparseBlockList,
            LevelKind::SparseBand,
            LevelKind::SparseByteMap,
            LevelKind::SparseDict,
            LevelKind::SparseCOO(2),
            LevelKind::RunList {
                merge: false,
                coord: Coord::I64,
            },
            LevelKind::SparseRunList {
                merge: true,
                coord: Coord::F64,
            },
            LevelKind::SPARSE_INTERVAL,
            LevelKind::Element(Scalar::F64(0.0)),
            LevelKind::Pattern,
            LevelKind::Scalar {
                fill: Scalar::I64(0),
                sparse: true,
                short_circuit: false,
            },
        ];
        for k in &all {
            match k {
                LevelKind::Dense
                | LevelKind::SparseList { .. }
                | LevelKind::SparseSliceList { .. }
                | LevelKind::SparsePoint { .. }
                | LevelKind::SparseBlockList
                | LevelKind::SparseBand
                | LevelKind::SparseByteMap
                | LevelKind::SparseDict
                | LevelKind::SparseCOO(_)
                | LevelKind::RunList { .. }
                | LevelKind::SparseRunList { .. }
                | LevelKind::SparseInterval { .. }
                | LevelKind::Element(_)
                | LevelKind::Pattern
                | LevelKind::Scalar { .. } => {}
            }
        }
        all
    }

    #[test]
    fn every_kind_has_exactly_one_spec() {
        for k in one_of_each() {
            let n = LEVELS.iter().filter(|s| (s.is)(&k)).count();
            assert_eq!(n, 1, "{k:?} is claimed by {n} specs");
        }
        let mut names: Vec<&str> = LEVELS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LEVELS.len(), "level names are unique");
    }

    /// A small chain around a kind, so it can be parsed and printed as a whole format.
    fn around(kind: &LevelKind, spec: &LevelSpec) -> Format {
        let levels = match spec.role {
            Role::Level => {
                let leaf = match (spec.check_below)(&[LevelKind::Pattern]) {
                    None => LevelKind::Pattern,
                    Some(_) => LevelKind::Element(Scalar::F64(0.0)),
                };
                vec![LevelKind::Dense, kind.clone(), leaf]
            }
            // Under a sparse level: Dense refuses a Pattern leaf (it would read all `true`).
            Role::Leaf => vec![LevelKind::SPARSE_LIST, kind.clone()],
            Role::Whole => vec![kind.clone()],
        };
        Format::new(levels).unwrap_or_else(|e| panic!("{}: {e}", spec.name))
    }

    const FILLS: [Scalar; 6] = [
        Scalar::F64(0.0),
        Scalar::F64(-1.5),
        Scalar::I64(3),
        Scalar::Bool(true),
        Scalar::U8(7),
        Scalar::F32(2.5),
    ];

    #[test]
    fn every_variant_of_every_level_round_trips() {
        let mut seen = 0;
        for spec in LEVELS {
            let variants = spec.variants(3, &FILLS);
            assert!(!variants.is_empty(), "{} has no variant", spec.name);
            for kind in variants {
                let spec = spec_of(&kind);
                let f = around(&kind, spec);
                let text = f.to_string();
                assert!(text.contains(spec.name), "{text} names {}", spec.name);
                let back = Format::parse(&text, None).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(back, f, "{text}");
                assert_eq!(back.to_string(), text);
                let rank = match spec.arity {
                    Arity::Fixed(n) => n,
                    Arity::Dims => (spec.args)(&kind).dims,
                };
                assert_eq!(kind.rank(), rank, "{text}");
                assert_eq!(kind.is_leaf(), spec.role != Role::Level, "{text}");
                seen += 1;
            }
        }
        assert!(
            seen > LEVELS.len(),
            "flags and fills give more than one variant"
        );
    }

    #[test]
    fn parameters_are_checked() {
        let bad = [
            ("Fooo(Element(0.0))", "unknown level `Fooo`"),
            (
                "Dense(Element(0.0), merge=false)",
                "unknown option `merge` of Dense",
            ),
            (
                "RunList(Element(0.0), fuse=true)",
                "only `merge=true|false`",
            ),
            ("RunList(Element(0.0), merge=1)", "`merge` is true or false"),
            ("SparseCOO{0}(Element(0.0))", "SparseCOO{N} needs N in 1..="),
            ("SparseCOO{x}(Element(0.0))", "got `x`"),
            ("SparseCOO(Element(0.0))", "expected `{`"),
            ("Element(zz)", "bad fill value `zz`"),
            ("Element(1, i33)", "unknown element type `i33`"),
            ("Dense(SparseScalar(0.0))", "whole 0-d formats"),
            ("Dense(Dense(Element(0.0)), Element(0.0))", "unknown option"),
            ("Dense", "expected `(`"),
            ("Pattern(1)", "expected `)`"),
        ];
        for (text, want) in bad {
            let e = Format::parse(text, None).unwrap_err();
            assert!(matches!(e, Error::Format { .. }), "{text}: {e}");
            assert!(e.to_string().contains(want), "{text}: {e} (wanted {want})");
        }
        // The unknown-level message lists every registered name.
        let e = Format::parse("Fooo(Element(0.0))", None)
            .unwrap_err()
            .to_string();
        for spec in LEVELS {
            assert!(e.contains(&spec.syntax()), "{e} lists {}", spec.syntax());
        }
        // Arity: a format's rank is the sum of its levels'.
        assert!(Format::parse("SparseCOO{2}(Element(0.0))", Some(3)).is_err());
        assert!(Format::parse("Dense(SparseCOO{2}(Element(0.0)))", Some(3)).is_ok());
    }

    #[test]
    fn random_write_names_come_from_the_registry() {
        assert_eq!(any_order_levels(true), "Dense, SparseByteMap or SparseDict");
        assert_eq!(
            any_order_levels(false),
            "Dense, SparseByteMap, SparseDict or SparseCOO{N}"
        );
    }

    #[test]
    fn examples_cover_every_level_variant() {
        let leaves = [LevelKind::Element(Scalar::F64(0.0)), LevelKind::Pattern];
        for rank in 1..=2 {
            let formats = example_formats(rank, &leaves);
            assert!(formats.iter().all(|f| f.rank() == rank));
            for spec in LEVELS.iter().filter(|s| s.role == Role::Level) {
                for kind in spec.variants(rank, &[]) {
                    assert!(
                        formats.iter().any(|f| f.levels.contains(&kind)),
                        "{kind:?} at rank {rank}"
                    );
                }
            }
        }
    }
}
