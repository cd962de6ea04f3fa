//! Format descriptions (`Dense(SparseList(Element(0.0)))`) and their parser.

use super::registry::{self, Args, Arity, Caps, LevelSpec, Param, Role};
use crate::error::{Error, Result};
use crate::types::{ElemType, Scalar};
use std::fmt;

/// One level of a format: a chain from the root (first index) to a leaf.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LevelKind {
    Dense,
    SparseList {
        coord: Coord,
    },
    /// Sliced ELLPACK: the fibers of 8 neighbouring positions interleaved, entry by entry.
    SparseSliceList {
        coord: Coord,
    },
    /// At most one stored coordinate per fiber (the paper's SparsePinpoint).
    SparsePoint {
        coord: Coord,
    },
    /// Runs of consecutive stored coordinates ("blocks"; the paper's SparseVBL).
    SparseBlockList,
    /// One contiguous band of stored coordinates per fiber.
    SparseBand,
    /// Dense flags plus a list of set slots: random-access writes, sparse reads.
    SparseByteMap,
    /// A hash map from (position, coordinate) to child position: random-access writes.
    SparseDict,
    /// `SparseCOO{N}`: N dimensions at once, one coordinate array per dimension.
    SparseCOO(usize),
    /// Runs covering every coordinate, one child per run; adjacent runs with equal sub-fibers
    /// are merged after writes when `merge` (the default; `RunList(child, merge=false)`).
    RunList {
        merge: bool,
        coord: Coord,
    },
    /// Stored runs `left..=right` with fill in the gaps, one child per run; `merge` as above.
    SparseRunList {
        merge: bool,
        coord: Coord,
    },
    /// At most one stored run per fiber; the child position is the fiber's position.
    SparseInterval {
        coord: Coord,
        /// Every stored run is `[left, right)` (`halfopen=true`, real coordinates only).
        half_open: bool,
    },
    /// Leaf: one value per position, `fill` outside the stored structure.
    Element(Scalar),
    /// Leaf: stored positions are `true`, everything else `false`.
    Pattern,
    /// A 0-d format on its own (paper §1.9): `SparseScalar(fill)` keeps a dirty flag and reads
    /// as `fill` until written; `ShortCircuitScalar(fill)` makes loops that reduce into it stop
    /// once it holds the reducer's annihilator; `SparseShortCircuitScalar(fill)` does both. A
    /// plain `Scalar(fill)` is `Element(fill)` used as a whole format.
    Scalar {
        fill: Scalar,
        sparse: bool,
        short_circuit: bool,
    },
}

/// The type of a level's stored coordinates, `coord=` in format text: 8-byte integer
/// coordinates (the default), 4-byte ones (`coord=i32`: the level's position array is 4 bytes
/// too, so a CSR matrix moves 12 bytes per entry as SciPy's does; a dimension or a stored count
/// beyond `i32::MAX` is a typed error, never a wrap), or real ones (`coord=f64`), which make the
/// dimension the level indexes real-valued: its pieces are pinpoints and intervals with
/// [`crate::limit::Limit`] endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Coord {
    #[default]
    I64,
    I32,
    F64,
}

impl Coord {
    pub fn name(self) -> &'static str {
        match self {
            Coord::I64 => "i64",
            Coord::I32 => "i32",
            Coord::F64 => "f64",
        }
    }
    pub fn from_name(s: &str) -> Option<Coord> {
        match s {
            "i64" => Some(Coord::I64),
            "i32" => Some(Coord::I32),
            "f64" => Some(Coord::F64),
            _ => None,
        }
    }
    pub fn is_real(self) -> bool {
        self == Coord::F64
    }
    /// The element type of the level's stored coordinates, and of its position (offset)
    /// array, which follows the coordinates' width for integer levels.
    pub fn elem(self) -> ElemType {
        match self {
            Coord::I64 => ElemType::I64,
            Coord::I32 => ElemType::I32,
            Coord::F64 => ElemType::F64,
        }
    }
    /// The element type of the level's position arrays (`ptr`): 4 bytes under `coord=i32`.
    pub fn pos_elem(self) -> ElemType {
        match self {
            Coord::I32 => ElemType::I32,
            Coord::I64 | Coord::F64 => ElemType::I64,
        }
    }
}

impl LevelKind {
    pub const SPARSE_LIST: LevelKind = LevelKind::SparseList { coord: Coord::I64 };
    pub const SPARSE_POINT: LevelKind = LevelKind::SparsePoint { coord: Coord::I64 };
    pub const SPARSE_INTERVAL: LevelKind = LevelKind::SparseInterval {
        coord: Coord::I64,
        half_open: false,
    };

    /// The type of the coordinates this level stores (`I64` for levels without `coord=`).
    pub fn coord(&self) -> Coord {
        let spec = self.spec();
        match spec.params.contains(&Param::Coord) {
            true => (spec.args)(self).coord,
            false => Coord::I64,
        }
    }
    /// Whether this level indexes a real-valued dimension.
    pub fn is_real(&self) -> bool {
        self.coord().is_real()
    }

    /// What the registry says about this level.
    pub fn spec(&self) -> &'static LevelSpec {
        registry::spec_of(self)
    }
    /// What the level can do.
    pub fn caps(&self) -> Caps {
        self.spec().caps
    }
    pub fn is_leaf(&self) -> bool {
        self.spec().role != Role::Level
    }
    /// How many indices this level consumes.
    pub fn rank(&self) -> usize {
        let spec = self.spec();
        match spec.arity {
            Arity::Fixed(n) => n,
            Arity::Dims => (spec.args)(self).dims,
        }
    }
    /// The level's constructor name with its parameters but without its child or fill
    /// (`SparseList`, `SparseCOO{2}`, `Element`).
    pub fn name(&self) -> String {
        let spec = self.spec();
        match spec.arity {
            Arity::Dims => format!("{}{{{}}}", spec.name, self.rank()),
            Arity::Fixed(_) => spec.name.to_string(),
        }
    }
    pub fn is_sparse(&self) -> bool {
        self.caps().sparse
    }
    /// Whether adjacent runs are merged after writes (run-length levels with `merge` on).
    pub fn merges(&self) -> bool {
        let spec = self.spec();
        spec.caps.merges_runs && (spec.args)(self).flag("merge")
    }
}

/// A whole tensor format: non-leaf levels followed by exactly one leaf.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    pub levels: Vec<LevelKind>,
}

impl Format {
    pub fn new(levels: Vec<LevelKind>) -> Result<Format> {
        let f = Format { levels };
        f.validate()?;
        Ok(f)
    }

    fn validate(&self) -> Result<()> {
        let err = |msg: &str| Error::Format {
            format: self.to_string(),
            msg: msg.to_string(),
        };
        match self.levels.last() {
            Some(l) if l.is_leaf() => {}
            _ => {
                return Err(err(
                    "a format must end in a leaf level (Element or Pattern)",
                ));
            }
        }
        if self.levels[..self.levels.len() - 1]
            .iter()
            .any(|l| l.is_leaf())
        {
            return Err(err(
                "a leaf level (Element or Pattern) can only be the innermost level",
            ));
        }
        if self.levels.len() > 1 && self.leaf().spec().role == Role::Whole {
            return Err(err(
                "scalar formats (SparseScalar, ShortCircuitScalar) are whole 0-d formats, not levels",
            ));
        }
        for (k, l) in self.levels.iter().enumerate() {
            if let Some(msg) = (l.spec().check_below)(&self.levels[k + 1..]) {
                return Err(err(msg));
            }
            if l.is_real() && !l.caps().real_coords {
                return Err(err(&format!(
                    "{} stores integer coordinates only: `coord=i64` or `coord=i32`",
                    l.name()
                )));
            }
            if (l.spec().args)(l).half_open && !l.is_real() {
                return Err(err(
                    "`halfopen=true` describes real endpoints: it needs `coord=f64`",
                ));
            }
        }
        // A 0-d format stores its one position, which a Pattern leaf reads as `true`.
        if let [LevelKind::Pattern] = self.levels.as_slice() {
            return Err(err(
                "a 0-d Pattern() always holds `true` and cannot hold `false`: use Element(false)",
            ));
        }
        Ok(())
    }

    /// All-dense format of the given rank.
    pub fn dense(rank: usize, fill: Scalar) -> Format {
        let mut levels = vec![LevelKind::Dense; rank];
        levels.push(LevelKind::Element(fill));
        Format { levels }
    }

    pub fn rank(&self) -> usize {
        self.levels.iter().map(|l| l.rank()).sum()
    }

    pub fn leaf(&self) -> &LevelKind {
        self.levels.last().expect("validated formats have a leaf")
    }

    /// The leaf's fill value (`false` for a leaf without one: Pattern).
    pub fn fill(&self) -> Scalar {
        let leaf = self.leaf();
        let spec = leaf.spec();
        match spec.params.contains(&Param::Fill) {
            true => (spec.args)(leaf).fill,
            false => Scalar::Bool(false),
        }
    }

    pub fn elem(&self) -> ElemType {
        self.fill().ty()
    }

    /// Whether each dimension is real-valued (indexed by a level with `coord=f64`).
    pub fn real_dims(&self) -> Vec<bool> {
        self.levels
            .iter()
            .flat_map(|l| std::iter::repeat_n(l.is_real(), if l.is_leaf() { 0 } else { l.rank() }))
            .collect()
    }
    /// Whether some dimension is real-valued.
    pub fn is_real(&self) -> bool {
        self.levels.iter().any(|l| l.is_real())
    }

    /// Whether every non-leaf level is `Dense`.
    pub fn is_dense(&self) -> bool {
        self.levels
            .iter()
            .all(|l| matches!(l, LevelKind::Dense) || l.is_leaf())
    }

    /// Parse a constructor expression such as `Dense(SparseList(Element(0.0)))`, or a
    /// shorthand (`csr`, `dcsr`, `dense`, `sparse`) given the rank it is used at.
    pub fn parse(text: &str, rank: Option<usize>) -> Result<Format> {
        let s = text.trim();
        let f64z = LevelKind::Element(Scalar::F64(0.0));
        let need_rank = |name: &str| {
            rank.ok_or_else(|| Error::Format {
                format: text.to_string(),
                msg: format!("the shorthand `{name}` needs a known rank here"),
            })
        };
        let levels = match s {
            "csr" => vec![LevelKind::Dense, LevelKind::SPARSE_LIST, f64z],
            "dcsr" => vec![LevelKind::SPARSE_LIST, LevelKind::SPARSE_LIST, f64z],
            "dense" => Format::dense(need_rank("dense")?, Scalar::F64(0.0)).levels,
            "coo" => vec![LevelKind::SparseCOO(need_rank("coo")?), f64z],
            "sparse" => {
                let r = need_rank("sparse")?;
                let mut levels = vec![LevelKind::Dense; r.saturating_sub(1)];
                if r > 0 {
                    levels.push(LevelKind::SPARSE_LIST);
                }
                levels.push(f64z);
                levels
            }
            _ => {
                let mut p = FormatParser {
                    text,
                    s: s.as_bytes(),
                    pos: 0,
                };
                let levels = p.level_chain()?;
                p.skip_ws();
                if p.pos != p.s.len() {
                    return Err(p.error("unexpected text after the format"));
                }
                levels
            }
        };
        let f = Format::new(levels)?;
        if let Some(r) = rank
            && f.rank() != r
        {
            return Err(Error::Format {
                format: text.to_string(),
                msg: format!("format has {} dimensions but the tensor has {r}", f.rank()),
            });
        }
        Ok(f)
    }
}

struct FormatParser<'a> {
    text: &'a str,
    s: &'a [u8],
    pos: usize,
}

impl FormatParser<'_> {
    fn error(&self, msg: &str) -> Error {
        Error::Format {
            format: self.text.to_string(),
            msg: format!("{msg} (at character {})", self.pos + 1),
        }
    }
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.pos < self.s.len() && self.s[self.pos] == c {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", c as char)))
        }
    }
    fn word(&mut self) -> String {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric()
                || matches!(self.s[self.pos], b'_' | b'.' | b'-' | b'+'))
        {
            self.pos += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.pos]).into_owned()
    }

    /// `Name{N}(child, flag=value)`, `Name(fill[, type])` or `Name()`, as the level's
    /// registered parameters say.
    fn level_chain(&mut self) -> Result<Vec<LevelKind>> {
        let name = self.word();
        if name.is_empty() {
            return Err(self.error("expected a level name"));
        }
        let Some(spec) = registry::lookup(&name) else {
            return Err(Error::Format {
                format: self.text.to_string(),
                msg: format!(
                    "unknown level `{name}` (known: {})",
                    registry::known_names()
                ),
            });
        };
        let mut args = Args::default();
        for p in spec.params {
            if let Param::Dims { max } = *p {
                self.expect(b'{')?;
                let n = self.word();
                args.dims = n
                    .parse()
                    .ok()
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| {
                        self.error(&format!(
                            "{}{{N}} needs N in 1..={max}, got `{n}`",
                            spec.name
                        ))
                    })?;
                self.expect(b'}')?;
            }
        }
        self.expect(b'(')?;
        let mut rest = match spec.role {
            Role::Level => self.level_chain()?,
            Role::Leaf | Role::Whole => vec![],
        };
        if spec.params.contains(&Param::Fill) {
            args.fill = self.fill_arg()?;
        }
        args.flags = spec.flags().collect();
        let takes_coord = spec.params.contains(&Param::Coord);
        let takes_half_open = spec.params.contains(&Param::HalfOpen);
        while self.eat(b',') {
            let key = self.word();
            if key == "coord" && takes_coord {
                self.expect(b'=')?;
                let ty = self.word();
                args.coord = Coord::from_name(&ty).ok_or_else(|| {
                    self.error(&format!("`coord` is i64, i32 or f64, not `{ty}`"))
                })?;
                continue;
            }
            if key == "halfopen" && takes_half_open {
                self.expect(b'=')?;
                args.half_open = match self.word().as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(
                            self.error(&format!("`halfopen` is true or false, not `{other}`"))
                        );
                    }
                };
                continue;
            }
            let Some(flag) = args.flags.iter_mut().find(|(k, _)| *k == key) else {
                let mut options: Vec<String> = spec
                    .flags()
                    .map(|(k, _)| format!("`{k}=true|false`"))
                    .collect();
                if takes_coord {
                    options.push("`coord=i64|i32|f64`".to_string());
                }
                if takes_half_open {
                    options.push("`halfopen=true|false`".to_string());
                }
                let only = match options.is_empty() {
                    true => "it takes none".to_string(),
                    false => format!("only {}", options.join(", ")),
                };
                return Err(
                    self.error(&format!("unknown option `{key}` of {} ({only})", spec.name))
                );
            };
            self.expect(b'=')?;
            flag.1 = match self.word().as_str() {
                "true" => true,
                "false" => false,
                other => {
                    return Err(self.error(&format!("`{key}` is true or false, not `{other}`")));
                }
            };
        }
        self.expect(b')')?;
        rest.insert(0, (spec.make)(&args));
        Ok(rest)
    }

    /// `value[, type]` (inside the level's parentheses).
    fn fill_arg(&mut self) -> Result<Scalar> {
        let v = self.word();
        let ty = if self.eat(b',') {
            Some(self.word())
        } else {
            None
        };
        self.fill_literal(&v, ty.as_deref())
    }

    fn fill_literal(&self, v: &str, ty: Option<&str>) -> Result<Scalar> {
        let bad = || self.error(&format!("bad fill value `{v}`"));
        let value = match v {
            "true" => Scalar::Bool(true),
            "false" => Scalar::Bool(false),
            "Inf" | "+Inf" => Scalar::F64(f64::INFINITY),
            "-Inf" => Scalar::F64(f64::NEG_INFINITY),
            "NaN" => Scalar::F64(f64::NAN),
            _ if v.starts_with("0x") => {
                Scalar::U8(u8::from_str_radix(&v[2..], 16).map_err(|_| bad())?)
            }
            _ if v.contains(['.', 'e', 'E']) => Scalar::F64(v.parse().map_err(|_| bad())?),
            // A u64 fill at or above 2^63 (NumPy's `~np.uint64(0)`) has no i64 spelling in
            // decimal: read it as the u64 it names.
            _ if ty == Some("u64") && v.parse::<i64>().is_err() => {
                Scalar::U64(v.parse().map_err(|_| bad())?)
            }
            _ => Scalar::I64(v.parse().map_err(|_| bad())?),
        };
        match ty {
            None => Ok(value),
            Some(t) => {
                let ty = ElemType::from_name(t)
                    .ok_or_else(|| self.error(&format!("unknown element type `{t}`")))?;
                Ok(value.cast(ty))
            }
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // What closes each level: `)`, after the flags that are not at their defaults.
        let mut close = vec![];
        for l in &self.levels {
            let spec = l.spec();
            let args = (spec.args)(l);
            let mut end = String::new();
            for (key, default) in spec.flags() {
                let v = args.flag(key);
                if v != default {
                    end.push_str(&format!(", {key}={v}"));
                }
            }
            if spec.params.contains(&Param::Coord) && args.coord != Coord::I64 {
                end.push_str(&format!(", coord={}", args.coord.name()));
            }
            if args.half_open {
                end.push_str(", halfopen=true");
            }
            end.push(')');
            close.push(end);
            f.write_str(spec.name)?;
            if spec.arity == Arity::Dims {
                write!(f, "{{{}}}", args.dims)?;
            }
            match spec.params.contains(&Param::Fill) {
                true => write_fill(f, &args.fill)?,
                false => f.write_str("(")?,
            }
        }
        for c in close.iter().rev() {
            f.write_str(c)?;
        }
        Ok(())
    }
}

/// `(fill` after a leaf's name (the caller closes the parenthesis).
fn write_fill(f: &mut fmt::Formatter<'_>, v: &Scalar) -> fmt::Result {
    match v {
        Scalar::F64(_) | Scalar::I64(_) | Scalar::Bool(_) => write!(f, "({v}"),
        Scalar::U8(x) => write!(f, "(0x{x:02x}"),
        other => write!(f, "({}, {}", other.widen(), other.ty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in [
            "Dense(SparseList(Element(0.0)))",
            "SparseList(Pattern())",
            "Dense(SparseByteMap(Element(0.0)))",
            "SparseDict(SparseDict(Element(0.0)))",
            "Dense(Dense(Element(0)))",
            "Dense(Element(false))",
            "Dense(Element(0x00))",
            "Dense(Element(1.5, f32))",
            "Dense(Element(Inf))",
            "SparseScalar(0.0)",
            "ShortCircuitScalar(1)",
            "SparseShortCircuitScalar(false)",
            "SparseScalar(2.5, f32)",
            "SparsePoint(Element(false))",
            "Dense(SparseBlockList(Element(0.0)))",
            "SparseBand(SparseList(Pattern()))",
            "RunList(Element(0.0))",
            "RunList(Element(0.0), merge=false)",
            "SparseRunList(Element(0), merge=false)",
            "Dense(SparseRunList(Pattern()))",
            "RunList(SparseList(Element(0.0)), merge=false)",
            "RunList(RunList(Element(0.0), merge=false))",
            "SparseInterval(Element(false))",
            "SparseInterval(Pattern())",
        ] {
            let f = Format::parse(s, None).unwrap();
            assert_eq!(f.to_string(), s);
            assert_eq!(Format::parse(&f.to_string(), None).unwrap(), f);
        }
        assert_eq!(
            Format::parse("Dense(Element(0, i32))", None)
                .unwrap()
                .elem(),
            ElemType::I32
        );
        // A u64 fill above i64's range, in decimal, is that u64 (printed as its i64 bits).
        let big = Format::parse("Dense(Element(18446744073709551615, u64))", None).unwrap();
        assert_eq!(big, Format::parse("Dense(Element(-1, u64))", None).unwrap());
        assert_eq!(big.elem(), ElemType::U64);
        assert!(Format::parse("Dense(Element(18446744073709551616, u64))", None).is_err());
        assert!(Format::parse("Dense(Element(18446744073709551615))", None).is_err());
        assert_eq!(
            Format::parse("csr", None).unwrap().to_string(),
            "Dense(SparseList(Element(0.0)))"
        );
        assert_eq!(Format::parse("dense", Some(3)).unwrap().rank(), 3);
        // A plain Scalar is a 0-d Element.
        assert_eq!(
            Format::parse("Scalar(1.0)", Some(0)).unwrap().to_string(),
            "Element(1.0)"
        );
        assert_eq!(
            Format::parse("ShortCircuitScalar(0.0)", None)
                .unwrap()
                .rank(),
            0
        );
    }

    #[test]
    fn bad_formats_are_errors() {
        for s in [
            "Dense(",
            "Foo(Element(0))",
            "Dense(SparseList())",
            "Element(0)x",
            "Dense(Element(zz))",
            "dense",
            "Dense(SparseScalar(0.0))",
            "SparseScalar()",
            "SparseBand(Pattern())",
            "Dense(SparseBand(Dense(Pattern())))",
            "RunList(Pattern())",
            // Found by fuzzing: these read every position as `true`.
            "Pattern()",
            "Dense(Pattern())",
            "SparseList(Dense(Pattern()))",
            "SparseCOO{1}(Dense(Dense(Pattern())))",
            "RunList(Element(0), merge=maybe)",
            "RunList(Element(0), fuse=false)",
            "SparseInterval(Element(0), merge=false)",
        ] {
            let e = Format::parse(s, None).unwrap_err();
            assert!(matches!(e, Error::Format { .. }), "{s}: {e}");
        }
        assert!(Format::parse("csr", Some(3)).is_err());
    }
}
