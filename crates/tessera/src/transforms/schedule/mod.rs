//! Schedule commands (FreeTensor's transactional schedules, issue 17): AST-to-AST loop
//! transformations whose legality comes from a dependence analysis.
//!
//! A schedule is a `;`-separated list of commands (`split(i, 64); reorder(j, i.1)`), applied
//! one after the other. Each command returns a new program or a typed [`Error::Schedule`]
//! naming the command (its text and byte offset in the schedule string) and, when the command
//! is refused for legality, the dependence it would break; the input program is never changed.
//!
//! - [`names`]: addressing loops (`i`, derived names `i.0`, occurrence suffixes `i#2`) and
//!   statements (`@LINE` or the tensor a statement writes), paths into the AST, substitution.
//! - [`deps`]: the instance-wise dependence analysis (direction vectors).
//! - [`loops`]: `split`, `merge`, `unroll` (order-preserving, always legal when they apply).
//! - [`jam`]: `unroll_jam` (unroll and fuse the copies' inner loops; checked).
//! - [`reorder`]: `reorder` (permutes a perfect nest; checked).
//! - [`order`]: `swap`, `fission`, `fuse` (move statements' instances; checked); [`expand`]:
//!   the scalar expansion `fission` makes of a body's declarations that cross its cut.
//! - [`cache`]: `cache` / `precompute` and `cache_reduce` (workspaces).
//! - [`parallel`]: `parallelize` and `vectorize` (loop marks; checked).
//!
//! The scheduled program is an ordinary program: it prints, parses back, lowers and runs on
//! every backend and the evaluator.

pub mod cache;
pub mod deps;
pub mod expand;
pub mod jam;
pub mod loops;
pub mod names;
pub mod order;
pub mod parallel;
pub mod reorder;

use crate::error::{Dependence, Error, Result};
use crate::notation::ast::{Folds, Program};

/// A loop: its index name (`i`, `i.0`) and, when several loops have that name, which one
/// (1-based, in program order: `i#2`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopRef {
    pub name: String,
    pub occurrence: Option<usize>,
}

/// A statement: the one that starts on a line of the program text (`@3`), the one
/// statement that writes or declares a tensor (`y`), or a loop (`for f#2`: a loop shares its
/// line with the loops of a `for i = _, f = _` header, and with the copies `fission` makes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StmtRef {
    Line(u32),
    Writes(String),
    Loop(LoopRef),
}

/// One schedule command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `split(i, F)`: `i` becomes `i.0` (outer, steps of F) and `i.1` (inner, 0:F-1).
    Split { target: LoopRef, factor: i64 },
    /// `merge(i, j)`: two perfectly nested loops become one loop `i.j`.
    Merge { outer: LoopRef, inner: LoopRef },
    /// `reorder(a, b, ...)`: the perfectly nested loops named take this order, outermost first.
    Reorder(Vec<LoopRef>),
    /// `swap(S1, S2)`: exchange two adjacent statements.
    Swap(StmtRef, StmtRef),
    /// `fission(i, after S)`: split loop `i`'s body after its statement `S` into two loops.
    Fission { target: LoopRef, after: StmtRef },
    /// `fuse(i, j)`: two adjacent loops of equal extents become one loop over `i`.
    Fuse { first: LoopRef, second: LoopRef },
    /// `unroll(i)`: replace a loop with a small constant extent by copies of its body.
    Unroll(LoopRef),
    /// `unroll_jam(i, T)`: `T` iterations of `i` per iteration of `i.0`, their inner loops
    /// fused (see [`jam`]), the remaining iterations in a loop `i` after it.
    UnrollJam { target: LoopRef, factor: i64 },
    /// `cache(i, T)` (also spelled `precompute`): a dense workspace `T.cache` for the part of
    /// `T` one iteration of `i` accesses, filled before the iteration's body and written back
    /// after it.
    Cache { target: LoopRef, tensor: String },
    /// `cache_reduce(i, T)`: a workspace initialised to the reducer's identity, reduced into
    /// by the iteration's body, then reduced into `T` once.
    CacheReduce { target: LoopRef, tensor: String },
    /// `parallelize(i)`: mark loop `i` parallel (see [`parallel::parallelize`]);
    /// `parallelize(i, atomics)` / `parallelize(i, copies)` also choose its folds.
    Parallelize(LoopRef, Folds),
    /// `vectorize(i)`: mark innermost loop `i` for SIMD lanes (see [`parallel::vectorize`]).
    Vectorize(LoopRef),
}

/// A command with where it is written: its text and byte offset in the schedule string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub command: Command,
    pub text: String,
    pub pos: usize,
}

impl Located {
    /// An error about this command.
    pub fn error(&self, msg: impl Into<String>) -> Error {
        Error::Schedule {
            command: self.text.clone(),
            pos: self.pos,
            msg: msg.into(),
            dependence: None,
        }
    }
    /// A refusal for legality: the dependence the command would break.
    pub fn broken(&self, msg: impl Into<String>, dep: Dependence) -> Error {
        Error::Schedule {
            command: self.text.clone(),
            pos: self.pos,
            msg: msg.into(),
            dependence: Some(Box::new(dep)),
        }
    }
}

/// Parse and apply a schedule: `schedule(&p, "split(i, 64); reorder(j, i.1)")`.
pub fn schedule(p: &Program, text: &str) -> Result<Program> {
    apply(p, &parse_schedule(text)?)
}

/// The first dependence carried by loop `target` of `p` (see [`deps::Analysis::carried_by`]):
/// `None` when its iterations are independent up to reductions of one kind.
pub fn carried_dependence(p: &Program, target: &str, private: bool) -> Result<Option<Dependence>> {
    let c = parse_command(&format!("unroll({target})"), 0)?;
    let Command::Unroll(r) = &c.command else {
        unreachable!("parsed as unroll")
    };
    let path = names::find_loop(&p.body, &c, r)?;
    Ok(deps::Analysis::new(p).carried_by(&path, private))
}

/// Apply parsed commands in order; the first refusal is returned and nothing is applied.
pub fn apply(p: &Program, commands: &[Located]) -> Result<Program> {
    let mut cur = p.clone();
    for c in commands {
        cur = apply_one(&cur, c)?;
    }
    Ok(cur)
}

/// Apply one command.
pub fn apply_one(p: &Program, c: &Located) -> Result<Program> {
    match &c.command {
        Command::Split { target, factor } => loops::split(p, c, target, *factor),
        Command::Merge { outer, inner } => loops::merge(p, c, outer, inner),
        Command::Unroll(target) => loops::unroll(p, c, target),
        Command::UnrollJam { target, factor } => jam::unroll_jam(p, c, target, *factor),
        Command::Reorder(list) => reorder::reorder(p, c, list),
        Command::Swap(a, b) => order::swap(p, c, a, b),
        Command::Fission { target, after } => order::fission(p, c, target, after),
        Command::Fuse { first, second } => order::fuse(p, c, first, second),
        Command::Cache { target, tensor } => cache::cache(p, c, target, tensor, false),
        Command::CacheReduce { target, tensor } => cache::cache(p, c, target, tensor, true),
        Command::Parallelize(target, folds) => parallel::parallelize(p, c, target, *folds),
        Command::Vectorize(target) => parallel::vectorize(p, c, target),
    }
}

/// Parse a schedule string into commands.
pub fn parse_schedule(text: &str) -> Result<Vec<Located>> {
    let mut out = vec![];
    let mut start = 0;
    for piece in text.split(';') {
        let pos = start + (piece.len() - piece.trim_start().len());
        start += piece.len() + 1;
        let t = piece.trim();
        if t.is_empty() {
            continue;
        }
        out.push(parse_command(t, pos)?);
    }
    Ok(out)
}

fn parse_command(t: &str, pos: usize) -> Result<Located> {
    let mut loc = Located {
        command: Command::Unroll(LoopRef {
            name: String::new(),
            occurrence: None,
        }),
        text: t.to_string(),
        pos,
    };
    let (name, args) = match (t.find('('), t.strip_suffix(')')) {
        (Some(k), Some(inner)) => (t[..k].trim(), &inner[k + 1..]),
        _ => return Err(loc.error("expected `command(arguments)`")),
    };
    let args: Vec<&str> = args.split(',').map(str::trim).collect();
    let want = |n: usize| -> Result<()> {
        if args.len() == n && args.iter().all(|a| !a.is_empty()) {
            Ok(())
        } else {
            Err(loc.error(format!("`{name}` takes {n} arguments")))
        }
    };
    let lp = |s: &str| -> Result<LoopRef> { parse_loop(s).map_err(|m| loc.error(m)) };
    let st = |s: &str| -> Result<StmtRef> { parse_stmt(s).map_err(|m| loc.error(m)) };
    let command = match name {
        "split" | "unroll_jam" => {
            want(2)?;
            let factor = args[1]
                .parse::<i64>()
                .ok()
                .filter(|f| *f >= 1)
                .ok_or_else(|| {
                    loc.error(format!(
                        "the factor `{}` is not a positive integer",
                        args[1]
                    ))
                })?;
            let target = lp(args[0])?;
            if name == "split" {
                Command::Split { target, factor }
            } else {
                Command::UnrollJam { target, factor }
            }
        }
        "merge" => {
            want(2)?;
            Command::Merge {
                outer: lp(args[0])?,
                inner: lp(args[1])?,
            }
        }
        "reorder" => {
            if args.len() < 2 || args.iter().any(|a| a.is_empty()) {
                return Err(loc.error("`reorder` takes two or more loops"));
            }
            Command::Reorder(args.iter().map(|a| lp(a)).collect::<Result<_>>()?)
        }
        "swap" => {
            want(2)?;
            Command::Swap(st(args[0])?, st(args[1])?)
        }
        "fission" => {
            want(2)?;
            let after = args[1]
                .strip_prefix("after")
                .filter(|r| r.starts_with(char::is_whitespace))
                .ok_or_else(|| loc.error("the second argument of `fission` is `after S`"))?;
            Command::Fission {
                target: lp(args[0])?,
                after: st(after.trim())?,
            }
        }
        "fuse" => {
            want(2)?;
            Command::Fuse {
                first: lp(args[0])?,
                second: lp(args[1])?,
            }
        }
        "unroll" => {
            want(1)?;
            Command::Unroll(lp(args[0])?)
        }
        "cache" | "precompute" | "cache_reduce" => {
            want(2)?;
            let tensor = args[1].to_string();
            if !is_name(&tensor) {
                return Err(loc.error(format!("`{tensor}` is not a tensor name")));
            }
            let target = lp(args[0])?;
            if name == "cache_reduce" {
                Command::CacheReduce { target, tensor }
            } else {
                Command::Cache { target, tensor }
            }
        }
        "parallelize" => {
            let folds = match args.get(1) {
                None => Folds::Auto,
                Some(&"atomics") if args.len() == 2 => Folds::Atomics,
                Some(&"copies") if args.len() == 2 => Folds::Copies,
                Some(_) => {
                    return Err(loc
                        .error("`parallelize` takes a loop and optionally `atomics` or `copies`"));
                }
            };
            if args[0].is_empty() {
                return Err(loc.error("`parallelize` takes a loop"));
            }
            Command::Parallelize(lp(args[0])?, folds)
        }
        "vectorize" => {
            want(1)?;
            Command::Vectorize(lp(args[0])?)
        }
        other => {
            return Err(loc.error(format!(
                "unknown command `{other}` (split, merge, reorder, swap, fission, fuse, unroll, unroll_jam, cache, precompute, cache_reduce, parallelize, vectorize)"
            )));
        }
    };
    loc.command = command;
    Ok(loc)
}

/// A name as the program lexer reads it: a letter or `_`, then letters, digits, `_`, and
/// `.` before a letter, digit or `_`.
fn is_name(s: &str) -> bool {
    let c: Vec<char> = s.chars().collect();
    let word = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
    !c.is_empty()
        && (c[0].is_ascii_alphabetic() || c[0] == '_')
        && (0..c.len()).all(|k| word(&c[k]) || (c[k] == '.' && c.get(k + 1).is_some_and(word)))
}

fn parse_loop(s: &str) -> std::result::Result<LoopRef, String> {
    let (name, occurrence) = match s.split_once('#') {
        Some((n, k)) => {
            let k = k
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|k| *k >= 1)
                .ok_or_else(|| format!("`{s}`: the occurrence after `#` counts from 1"))?;
            (n.trim(), Some(k))
        }
        None => (s, None),
    };
    if !is_name(name) {
        return Err(format!("`{s}` is not a loop name"));
    }
    Ok(LoopRef {
        name: name.to_string(),
        occurrence,
    })
}

fn parse_stmt(s: &str) -> std::result::Result<StmtRef, String> {
    if let Some(l) = s
        .strip_prefix("for")
        .filter(|r| r.starts_with(char::is_whitespace))
    {
        return parse_loop(l.trim()).map(StmtRef::Loop);
    }
    if let Some(l) = s.strip_prefix('@') {
        return l
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|l| *l >= 1)
            .map(StmtRef::Line)
            .ok_or_else(|| format!("`{s}`: a statement's line counts from 1"));
    }
    if is_name(s) {
        Ok(StmtRef::Writes(s.to_string()))
    } else {
        Err(format!(
            "`{s}` names no statement (`@LINE`, the tensor it writes or `for LOOP`)"
        ))
    }
}

impl std::fmt::Display for LoopRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.occurrence {
            Some(k) => write!(f, "{}#{k}", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

impl std::fmt::Display for StmtRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StmtRef::Line(l) => write!(f, "@{l}"),
            StmtRef::Writes(t) => write!(f, "{t}"),
            StmtRef::Loop(l) => write!(f, "for {l}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_positions() {
        let cs = parse_schedule("split(i, 64);  reorder(j, i.1); fission(k#2, after @4)").unwrap();
        assert_eq!(cs.len(), 3);
        assert_eq!(
            parse_schedule("fission(i, after for f#2)").unwrap()[0].command,
            Command::Fission {
                target: LoopRef {
                    name: "i".into(),
                    occurrence: None
                },
                after: StmtRef::Loop(LoopRef {
                    name: "f".into(),
                    occurrence: Some(2)
                })
            }
        );
        assert_eq!(cs[1].pos, 15);
        assert_eq!(cs[1].text, "reorder(j, i.1)");
        assert_eq!(
            cs[2].command,
            Command::Fission {
                target: LoopRef {
                    name: "k".into(),
                    occurrence: Some(2)
                },
                after: StmtRef::Line(4)
            }
        );
        let e = parse_schedule("split(i, 0)").unwrap_err();
        assert!(matches!(e, Error::Schedule { pos: 0, .. }), "{e}");
        assert_eq!(
            parse_schedule("vectorize(i)").unwrap()[0].command,
            Command::Vectorize(LoopRef {
                name: "i".into(),
                occurrence: None
            })
        );
        assert!(parse_schedule("vectorize(i, j)").is_err());
        assert!(parse_schedule("parallelize(i, j)").is_err());
        assert!(parse_schedule("parallelize(i, atomics, copies)").is_err());
        assert!(matches!(
            parse_schedule("parallelize(i, copies)").unwrap()[0].command,
            Command::Parallelize(_, Folds::Copies)
        ));
        assert!(parse_schedule("frobnicate(i)").is_err());
    }
}
