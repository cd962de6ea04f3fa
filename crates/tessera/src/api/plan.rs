//! Planning an einsum from its inputs' formats (never their data, so new data of the same
//! formats gets the same program and hits the kernel cache): the loop order, which sparse
//! inputs are read through a transposed copy, the output format, and whether the output is
//! accumulated in a workspace (Gustavson's algorithm for a sparse product).
//!
//! Every loop order is scored with a rough cost model and the cheapest wins, ties going to the
//! order closest to "output indices in output order, then the reduced ones":
//! - a sparse input (one with a sparse level) whose level order disagrees with the loop order
//!   is transposed into a copy of the same format (cost: sorting its entries). Dense inputs are
//!   never copied: the compiler reads them by random access in any order, at the cost of a
//!   strided load per access when the order disagrees with theirs;
//! - a loop costs a factor `N` per iteration of its enclosing loops, or `D << N` when some
//!   sparse input stores only some coordinates of its index and the right side is the
//!   reducer's identity wherever those inputs store nothing (then only stored coordinates are
//!   visited);
//! - an output level that takes writes only in order (`SparseList`...) must see its
//!   coordinates in order: when reduced indices come before some output index, the output's
//!   remaining dimensions are accumulated in a workspace (`SparseByteMap` for sparse levels,
//!   `Dense` for dense ones) re-declared for each prefix, then copied out; its cost is its
//!   size `N^rank` plus the copy.

use super::fills::{absent_value, class_of, same_in};
use super::spec::Spec;
use crate::error::{Error, Result};
use crate::levels::registry::Writes;
use crate::levels::{Format, LevelKind};
use crate::notation::ast::{Access, Expr, ExprKind, Program};
use crate::notation::build::*;
use crate::semantics::{class_type, reducer_classes};
use crate::symbolic::algebra::identity;
use crate::types::{Class, ElemType, Scalar};

/// Loop orders of more indices than this are not all scored (8! orders took the planner a
/// third of a second, the einsum fuzz target's timeout): the preferred order is improved by
/// swapping pairs of loops while a swap lowers the cost.
const MAX_SCORED_INDICES: usize = 7;
/// The cost model's extent of a dense loop, and of a loop over stored coordinates only.
const N: f64 = 1e4;
const D: f64 = 10.0;
/// Cost per entry of transposing a copy (a sort).
const SORT: f64 = 20.0;
/// Cost per access of a dense input read against its level order (a strided, cache-missing
/// load), relative to one loop iteration.
const STRIDED: f64 = 1.0;

/// A sparse input read through a transposed copy: dimension `d` of `name` is dimension
/// `perm[d]` of `input` (see [`crate::tensor::Tensor::permute`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Transpose {
    pub input: String,
    pub name: String,
    pub perm: Vec<usize>,
}

/// Where the output is accumulated before it is copied out, and over which output indices.
#[derive(Clone, Debug, PartialEq)]
pub struct Workspace {
    pub name: String,
    pub format: Format,
    pub indices: Vec<String>,
}

/// What [`plan`] decided, and the program that carries it out.
#[derive(Clone, Debug)]
pub struct Plan {
    pub spec: Spec,
    pub loop_order: Vec<String>,
    pub transposes: Vec<Transpose>,
    pub output_format: Format,
    pub workspace: Option<Workspace>,
    pub program: Program,
    /// The index of the outermost loop when [`Plan::parallelize`] marked it parallel.
    pub parallel: Option<String>,
}

impl Plan {
    /// Mark the program's outermost loop parallel when that is legal, for the tensors it runs
    /// on (`formats`: inputs, transposed copies, output and workspace, as
    /// [`super::prepare`] makes them) and a runner with `threads` threads; otherwise (one
    /// thread, or a loop that may not run in parallel) leave the program serial. Says whether
    /// it did.
    ///
    /// Legality is the schedule command `parallelize` (no dependence carried by the loop but
    /// reductions of one kind) followed by the race check lowering runs
    /// ([`crate::run::race_check`]: dense outputs written at the loop's index or privatised
    /// with a commutative reducer, sparse outputs whose rows the loop's index appends,
    /// workspaces each iteration declares). A sparse output with a sparse root level, or
    /// `-=` into a location several iterations reach, keeps the serial program. Whether a legal loop then runs on several threads is
    /// decided per call from the work it has (`backend::parallel::useful_threads`).
    pub fn parallelize(
        &mut self,
        formats: &std::collections::BTreeMap<String, Format>,
        threads: usize,
    ) -> bool {
        if threads <= 1 || self.parallel.is_some() {
            return false;
        }
        // Repeated einsums of one statement on inputs of the same formats decide once: the
        // dependence analysis costs microseconds, as much as a small kernel's run.
        type Key = (
            Program,
            Vec<(u32, u32)>,
            std::collections::BTreeMap<String, Format>,
        );
        type Decided = Option<(Program, String)>;
        thread_local! {
            static DECIDED: std::cell::RefCell<std::collections::HashMap<Key, Decided>> =
                Default::default();
        }
        const DECIDED_MAX: usize = 256;
        let spans = crate::notation::visit::spans(&self.program)
            .into_iter()
            .map(|s| (s.line, s.col))
            .collect();
        let key = (self.program.clone(), spans, formats.clone());
        let decided = DECIDED.with(|d| d.borrow().get(&key).cloned());
        let decided = decided.unwrap_or_else(|| {
            let d = outer_parallel(&self.program, formats);
            DECIDED.with(|m| {
                let mut m = m.borrow_mut();
                if m.len() >= DECIDED_MAX {
                    m.clear();
                }
                m.insert(key, d.clone());
            });
            d
        });
        match decided {
            Some((marked, index)) => {
                self.program = marked;
                self.parallel = Some(index);
                true
            }
            None => false,
        }
    }
}

/// `program` with its one top-level loop marked parallel, and that loop's index, when the
/// `parallelize` command and the race check accept it.
fn outer_parallel(
    program: &Program,
    formats: &std::collections::BTreeMap<String, Format>,
) -> Option<(Program, String)> {
    let mut loops = program.body.iter().filter_map(|s| match &s.kind {
        crate::notation::ast::StmtKind::Loop { index, .. } => Some(index.clone()),
        _ => None,
    });
    let (Some(index), None) = (loops.next(), loops.next()) else {
        return None;
    };
    let command = format!("parallelize({index})");
    let marked = crate::transforms::schedule::schedule(program, &command).ok()?;
    crate::run::race_check(&marked, formats).ok()?;
    Some((marked, index))
}

/// One read's format, as the planner sees it.
struct Read {
    indices: Vec<String>,
    /// The level kind indexing each dimension (a `SparseCOO{2}` level indexes two).
    dim_kinds: Vec<LevelKind>,
    sparse: bool,
    fill: Scalar,
}

fn dim_kinds(f: &Format) -> Vec<LevelKind> {
    f.levels
        .iter()
        .flat_map(|l| std::iter::repeat_n(l.clone(), l.rank()))
        .collect()
}

/// Levels that take writes in any order, repeated ones included (a reduction's).
fn random_write(k: &LevelKind) -> bool {
    k.caps().writes == Writes::Random
}

/// The workspace level for one output dimension: it takes writes in any order; a sparse one
/// (SparseByteMap) re-declares in the time of what was written, which is Gustavson's trick.
fn workspace_kind(out: &LevelKind) -> LevelKind {
    if out.is_sparse() {
        LevelKind::SparseByteMap
    } else {
        LevelKind::Dense
    }
}

/// The scored shape of one loop order.
struct Candidate {
    cost: f64,
    inversions: usize,
    order: Vec<String>,
    /// Per read: the permutation of its transposed copy, if it needs one.
    perms: Vec<Option<Vec<usize>>>,
    out_kinds: Vec<LevelKind>,
    /// How many leading loops are the output's leading indices (written directly).
    prefix: usize,
    workspace: bool,
}

struct Planner<'a> {
    spec: &'a Spec,
    reads: Vec<Read>,
    class: Class,
    out_fill: Scalar,
    given: Option<&'a Format>,
    preferred: Vec<String>,
}

impl Planner<'_> {
    fn score(&self, order: &[String]) -> Candidate {
        let pos = |v: &String| {
            order
                .iter()
                .position(|o| o == v)
                .expect("every index loops")
        };
        let mut cost = 0.0;
        let mut perms = vec![];
        // The level kind each read uses for each index, after any transpose.
        let mut kind_at: Vec<Vec<(String, LevelKind)>> = vec![];
        for r in &self.reads {
            let p: Vec<usize> = r.indices.iter().map(pos).collect();
            let concordant = p.windows(2).all(|w| w[0] < w[1]);
            let perm = (!concordant && r.sparse).then(|| {
                let mut perm: Vec<usize> = (0..p.len()).collect();
                perm.sort_by_key(|&d| p[d]);
                perm
            });
            let indices: Vec<String> = match &perm {
                Some(perm) => perm.iter().map(|&d| r.indices[d].clone()).collect(),
                None => r.indices.clone(),
            };
            if perm.is_some() {
                let entries: f64 = r
                    .dim_kinds
                    .iter()
                    .map(|k| if k.is_sparse() { D } else { N })
                    .product();
                cost += SORT * entries;
            }
            kind_at.push(indices.into_iter().zip(r.dim_kinds.clone()).collect());
            perms.push(perm);
        }
        let fills: Vec<Scalar> = self.reads.iter().map(|r| r.fill).collect();
        // Whether the right side is the output fill wherever the reads sparse in `v` store
        // nothing: then only their stored coordinates of `v` matter.
        let driven = |v: &String| {
            let absent: Vec<bool> = kind_at
                .iter()
                .map(|ks| ks.iter().any(|(i, k)| i == v && k.is_sparse()))
                .collect();
            absent.iter().any(|&a| a)
                && absent_value(&self.spec.rhs, &fills, &absent)
                    .is_some_and(|x| same_in(self.class, x, self.out_fill))
        };
        let mut iterations = 1.0;
        let mut at_depth = vec![];
        for v in order {
            iterations *= if driven(v) { D } else { N };
            cost += iterations;
            at_depth.push(iterations);
        }
        // Dense reads are never copied, but one read against its level order misses the
        // cache on every access of its deepest loop.
        for (r, perm) in self.reads.iter().zip(&perms) {
            let p: Vec<usize> = r.indices.iter().map(pos).collect();
            let strided = perm.is_none() && p.windows(2).any(|w| w[0] > w[1]);
            if let Some(&deepest) = p.iter().max().filter(|_| strided) {
                cost += STRIDED * at_depth[deepest];
            }
        }
        let out_kinds: Vec<LevelKind> = match self.given {
            Some(f) => dim_kinds(f),
            None => self
                .spec
                .out_indices
                .iter()
                .map(|v| {
                    if driven(v) {
                        LevelKind::SPARSE_LIST
                    } else {
                        LevelKind::Dense
                    }
                })
                .collect(),
        };
        let outs = &self.spec.out_indices;
        let prefix = order.iter().zip(outs).take_while(|(a, b)| a == b).count();
        let workspace = out_kinds[prefix..].iter().any(|k| !random_write(k));
        if workspace {
            let rank = (outs.len() - prefix) as i32;
            let outer: f64 = order[..prefix]
                .iter()
                .map(|v| if driven(v) { D } else { N })
                .product();
            cost += N.powi(rank) + outer * D.powi(rank);
        }
        let inversions = order
            .iter()
            .enumerate()
            .flat_map(|(a, x)| order[a + 1..].iter().map(move |y| (x, y)))
            .filter(|(x, y)| {
                let rank = |v: &String| self.preferred.iter().position(|p| p == v);
                rank(x) > rank(y)
            })
            .count();
        Candidate {
            cost,
            inversions,
            order: order.to_vec(),
            perms,
            out_kinds,
            prefix,
            workspace,
        }
    }
}

fn permutations(items: &[String]) -> Vec<Vec<String>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = vec![];
    for k in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(k);
        for mut p in permutations(&rest) {
            p.insert(0, first.clone());
            out.push(p);
        }
    }
    out
}

/// A name not among `taken`, starting from `base`.
fn fresh(base: &str, taken: &mut Vec<String>) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}{n}");
        n += 1;
    }
    taken.push(name.clone());
    name
}

/// Plan `spec` for inputs of these formats (`inputs[k]` is a tensor name and its format);
/// `output` fixes the output format instead of choosing one.
pub fn plan(spec: &Spec, inputs: &[(&str, &Format)], output: Option<&Format>) -> Result<Plan> {
    let mut reads = vec![];
    for (k, a) in spec.reads.iter().enumerate() {
        let f = inputs
            .iter()
            .find(|(n, _)| *n == a.tensor)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                Error::program(
                    a.span,
                    format!("unknown tensor `{}`: it is not among the inputs", a.tensor),
                )
            })?;
        if f.rank() != a.indices.len() {
            return Err(Error::program(
                a.span,
                format!(
                    "`{}` has {} dimensions but is indexed with {}",
                    a.tensor,
                    f.rank(),
                    a.indices.len()
                ),
            ));
        }
        let kinds = dim_kinds(f);
        reads.push(Read {
            indices: spec.read_indices(k),
            sparse: kinds.iter().any(|k| k.is_sparse()),
            dim_kinds: kinds,
            fill: f.fill(),
        });
    }
    if let Some((n, _)) = inputs
        .iter()
        .find(|(n, _)| !spec.reads.iter().any(|a| a.tensor == *n))
    {
        return Err(Error::Usage(format!(
            "input `{n}` is not read by the einsum `{}[...]`",
            spec.output
        )));
    }
    if let Some(v) = spec.out_indices.iter().find(|v| {
        let read = |v: &String| reads.iter().any(|r| r.indices.contains(v));
        !read(v)
            && !spec.eps.iter().any(|(_, ix)| ix.contains(v))
            && !spec
                .delta
                .iter()
                .any(|(x, y)| (x == *v && read(y)) || (y == *v && read(x)))
    }) {
        return Err(Error::program(
            spec.span,
            format!("output index `{v}` appears in no input, so its extent is unknown"),
        ));
    }
    let read_classes: Vec<Class> = inputs_classes(spec, inputs);
    let rhs_class = class_of(&spec.rhs, &read_classes)?;
    let (class, out_fill) = match spec.reducer() {
        Some(r) => {
            let (_, c) = reducer_classes(r, rhs_class, rhs_class)
                .map_err(|m| Error::program(spec.span, m))?;
            let id = identity(r, c).ok_or_else(|| {
                Error::program(spec.span, format!("`{r:?}` has no identity in {c:?}"))
            })?;
            (c, id)
        }
        None => {
            let fills: Vec<Scalar> = reads.iter().map(|r| r.fill).collect();
            let all = vec![true; reads.len()];
            let f = absent_value(&spec.rhs, &fills, &all)
                .unwrap_or(Scalar::zero(class_type(rhs_class)));
            (rhs_class, f)
        }
    };
    let elem = match output {
        Some(f) => f.elem(),
        None => class_type(class),
    };
    let out_fill = out_fill.cast(elem);
    if let Some(f) = output {
        check_given(spec, f, out_fill, elem)?;
    }
    let all = spec.all_indices();
    let planner = Planner {
        spec,
        reads,
        class,
        out_fill,
        given: output,
        preferred: all.clone(),
    };
    let better = |a: &Candidate, b: &Candidate| {
        a.cost
            .total_cmp(&b.cost)
            .then(a.inversions.cmp(&b.inversions))
            .is_lt()
    };
    let best = if all.len() <= MAX_SCORED_INDICES {
        permutations(&all)
            .iter()
            .map(|o| planner.score(o))
            .reduce(|a, b| if better(&b, &a) { b } else { a })
            .expect("at least one order")
    } else {
        // Hill climbing over transpositions: each round scores n(n-1)/2 orders.
        let mut best = planner.score(&all);
        loop {
            let mut improved = false;
            for x in 0..all.len() {
                for y in x + 1..all.len() {
                    let mut o = best.order.clone();
                    o.swap(x, y);
                    let c = planner.score(&o);
                    if better(&c, &best) {
                        best = c;
                        improved = true;
                    }
                }
            }
            if !improved {
                break best;
            }
        }
    };
    Ok(build(spec, inputs, &planner, best, output, elem))
}

fn inputs_classes(spec: &Spec, inputs: &[(&str, &Format)]) -> Vec<Class> {
    spec.reads
        .iter()
        .map(|a| {
            inputs
                .iter()
                .find(|(n, _)| *n == a.tensor)
                .map(|(_, f)| f.elem().class())
                .expect("checked by plan")
        })
        .collect()
}

/// A given output format must have the output's rank, and a sparse one the fill einsum
/// starts from (a dense one is simply filled with it).
fn check_given(spec: &Spec, f: &Format, fill: Scalar, elem: ElemType) -> Result<()> {
    if f.rank() != spec.out_indices.len() {
        return Err(Error::Format {
            format: f.to_string(),
            msg: format!(
                "the output `{}` has {} dimensions",
                spec.output,
                spec.out_indices.len()
            ),
        });
    }
    if !f.is_dense() && !same_in(elem.class(), f.fill(), fill) {
        return Err(Error::Format {
            format: f.to_string(),
            msg: format!(
                "the output `{}` starts from {fill} (the reducer's identity or the right side's fill), so a sparse output format needs that fill",
                spec.output
            ),
        });
    }
    Ok(())
}

fn format_of(kinds: &[LevelKind], elem: ElemType, fill: Scalar) -> Format {
    let mut levels = kinds.to_vec();
    // Element(false) rather than Pattern for booleans: einsum may store explicit `false`s.
    levels.push(LevelKind::Element(fill.cast(elem)));
    Format { levels }
}

fn build(
    spec: &Spec,
    inputs: &[(&str, &Format)],
    planner: &Planner,
    best: Candidate,
    output: Option<&Format>,
    elem: ElemType,
) -> Plan {
    let mut taken: Vec<String> = inputs.iter().map(|(n, _)| n.to_string()).collect();
    taken.push(spec.output.clone());
    taken.extend(best.order.iter().cloned());
    let mut transposes: Vec<Transpose> = vec![];
    let mut names = vec![];
    for (a, perm) in spec.reads.iter().zip(&best.perms) {
        names.push(perm.as_ref().map(|perm| {
            match transposes
                .iter()
                .find(|t| t.input == a.tensor && &t.perm == perm)
            {
                Some(t) => t.name.clone(),
                None => {
                    let suffix: String = perm.iter().map(|d| d.to_string()).collect();
                    let name = fresh(&format!("{}_t{suffix}", a.tensor), &mut taken);
                    transposes.push(Transpose {
                        input: a.tensor.clone(),
                        name: name.clone(),
                        perm: perm.clone(),
                    });
                    name
                }
            }
        }));
    }
    let mut rhs = spec.rhs.clone();
    rename_reads(&mut rhs, &best.perms, &names);
    follow_reads(&mut rhs, &rewalked(planner, &best));
    let output_format = match output {
        Some(f) => f.clone(),
        None => format_of(&best.out_kinds, elem, planner.out_fill),
    };
    let fill = Expr::lit(planner.out_fill.widen());
    let outs = &spec.out_indices;
    let out_access = || access(&spec.output, outs.iter().map(|v| idx(v.as_str())));
    let nest = |loops: &[String], body| loops.iter().rev().fold(body, |b, v| for_(v, auto(), [b]));
    let (body, workspace) = if best.workspace {
        let rest = &outs[best.prefix..];
        let name = fresh("w", &mut taken);
        let kinds: Vec<LevelKind> = best.out_kinds[best.prefix..]
            .iter()
            .map(workspace_kind)
            .collect();
        let w_access = || access(&name, rest.iter().map(|v| idx(v.as_str())));
        let update = assign(w_access(), spec.op.clone(), rhs);
        let copy = overwrite(out_access(), read(w_access()));
        let inner = block([
            declare(&name, fill.clone()),
            nest(&best.order[best.prefix..], update),
            nest(rest, copy),
        ]);
        let ws = Workspace {
            name: name.clone(),
            format: format_of(&kinds, elem, planner.out_fill),
            indices: rest.to_vec(),
        };
        (nest(&best.order[..best.prefix], inner), Some(ws))
    } else {
        let update = assign(out_access(), spec.op.clone(), rhs);
        (nest(&best.order, update), None)
    };
    let program = program([declare(&spec.output, fill), body]);
    Plan {
        spec: spec.clone(),
        loop_order: best.order,
        transposes,
        output_format,
        workspace,
        program,
        parallel: None,
    }
}

/// Per read (after its transpose), the dimensions to read with `follow`: the root level, if
/// it has a lookup faster than its walk (a sparse or run-length one), of a read that does
/// not depend on the outermost loop, where a read that does depends on the same index through
/// a sparse level below its root (a row of a matrix, say). Such a read's stored entries would otherwise be walked again, from the
/// start, at every iteration of the loops outside it, merged with the driving read's: an SpMV
/// with a sparse vector `x` (`y[i] += A[i, j] * x[j]`) walked all of `x` once per row, so its
/// time grew as rows x stored entries of `x` (150 ms for a 20 000-row matrix with 5 entries a
/// row and a 6 000-entry `x`, where looking `x[j]` up at each of `A`'s entries takes 12 ms).
/// Looking up costs a search per entry of the driving fiber, and the root level's fiber (all
/// of `x`) is the long one against a row. Where both are rows (inner products of sparse rows,
/// `B[j, k]` under loops `i, j, k`) the merge of two short lists stays. Only levels that have
/// a faster lookup than their walk (`honours`) and index one dimension are changed.
fn rewalked(planner: &Planner, best: &Candidate) -> Vec<Vec<bool>> {
    let Some(outer) = best.order.first() else {
        return vec![];
    };
    // Per read: its (index, level kind) per dimension, after its transpose.
    let dims: Vec<Vec<(String, LevelKind)>> = planner
        .reads
        .iter()
        .zip(&best.perms)
        .map(|(r, perm)| {
            let indices: Vec<String> = match perm {
                Some(perm) => perm.iter().map(|&d| r.indices[d].clone()).collect(),
                None => r.indices.clone(),
            };
            indices.into_iter().zip(r.dim_kinds.clone()).collect()
        })
        .collect();
    let anchored = |d: &Vec<(String, LevelKind)>| d.iter().any(|(i, _)| i == outer);
    dims.iter()
        .map(|d| {
            d.iter()
                .enumerate()
                .map(|(at, (index, kind))| {
                    at == 0
                        && !anchored(d)
                        && kind.rank() == 1
                        && crate::levels::registry::spec_of(kind)
                            .honours(crate::notation::ast::Protocol::Follow)
                        && dims.iter().any(|other| {
                            anchored(other)
                                && other
                                    .iter()
                                    .skip(1)
                                    .any(|(i, k)| i == index && k.is_sparse())
                        })
                })
                .collect()
        })
        .collect()
}

/// Each read of the right side with its number in the order of `Spec::reads` (δ and ε are
/// not reads, and are skipped).
fn for_each_read(e: &mut Expr, next: &mut usize, f: &mut impl FnMut(usize, &mut Access)) {
    match &mut e.kind {
        ExprKind::Access(a) if crate::transforms::ein::is_reserved(&a.tensor) => {}
        ExprKind::Access(a) => {
            f(*next, a);
            *next += 1;
        }
        ExprKind::Unary(_, x) => for_each_read(x, next, f),
        ExprKind::Binary(_, a, b) => {
            for_each_read(a, next, f);
            for_each_read(b, next, f);
        }
        ExprKind::Call(_, args) => args.iter_mut().for_each(|a| for_each_read(a, next, f)),
        ExprKind::Literal(_) | ExprKind::Missing | ExprKind::Name(_) => {}
    }
}

/// Point the reads that go through a transposed copy at it, their indices permuted.
fn rename_reads(e: &mut Expr, perms: &[Option<Vec<usize>>], names: &[Option<String>]) {
    for_each_read(e, &mut 0, &mut |k, a| {
        if let (Some(perm), Some(name)) = (&perms[k], &names[k]) {
            a.tensor = name.clone();
            a.indices = perm.iter().map(|&d| a.indices[d].clone()).collect();
        }
    });
}

/// Mark the dimensions [`rewalked`] chose as read by `follow`.
fn follow_reads(e: &mut Expr, follows: &[Vec<bool>]) {
    for_each_read(e, &mut 0, &mut |k, a| {
        if let Some(f) = follows.get(k) {
            for (ix, &follow) in a.indices.iter_mut().zip(f) {
                if follow {
                    ix.protocol = Some(crate::notation::ast::Protocol::Follow);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::levels::registry::{LEVELS, Role};

    /// Whatever the output's levels, its workspace takes writes in any order, repeated ones
    /// included, and is sparse where the output is.
    #[test]
    fn workspaces_take_writes_in_any_order() {
        for spec in LEVELS.iter().filter(|s| s.role == Role::Level) {
            for k in spec.variants(1, &[]) {
                let w = workspace_kind(&k);
                assert!(random_write(&w), "{k:?} -> {w:?}");
                assert_eq!(w.is_sparse(), k.is_sparse(), "{k:?} -> {w:?}");
            }
        }
    }
}
