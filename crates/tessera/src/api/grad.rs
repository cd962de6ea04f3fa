//! Running a gradient program (`transforms::grad`) on tensors: its mask inputs (each masked
//! input's structure with a `Pattern()` leaf), its seeds, and every tensor it creates
//! (forward outputs and workspaces, gradient accumulators, gradients, tapes), with formats
//! chosen here and shapes inferred from the inputs.

use crate::error::{Error, Result};
use crate::levels::registry::Writes;
use crate::levels::{Format, LevelKind, level_impl};
use crate::notation::ast::{ExprKind, Program, Stmt, StmtKind};
use crate::run::Runner;
use crate::runtime::Buffer;
use crate::tensor::Tensor;
use crate::transforms::grad::{GradOptions, GradProgram, Tape, Tapes, grad_with};
use crate::types::{ElemType, Scalar};
use std::collections::{BTreeMap, HashMap};

/// How [`backward`] differentiates and which gradients it returns.
#[derive(Clone, Debug, Default)]
pub struct BackwardOptions {
    pub tapes: Tapes,
    /// Dense gradients for sparse inputs (every coordinate), instead of masked ones (their
    /// stored entries only, in their format).
    pub dense: bool,
    /// Formats of gradient tensors by gradient name (`dA`); by default a masked gradient has
    /// its input's format (see [`gradient_format`]) and a dense one is dense.
    pub formats: BTreeMap<String, Format>,
    /// Schedule commands applied to the gradient program itself (see
    /// [`GradProgram::scheduled`]), after differentiation: `None` runs it as `grad` builds it.
    pub schedule: Option<String>,
}

/// Whether a sparse input's gradient is masked by default: its format has a level other than
/// `Dense`.
pub fn is_structured(t: &Tensor) -> bool {
    !t.format.is_dense()
}

/// `t`'s structure with a `Pattern()` leaf: `true` exactly at its stored entries (stored
/// zeros included), `false` elsewhere. The arrays are copied, not recomputed, except over
/// run-length levels (a stored run covers several coordinates, each of which gets a gradient)
/// and levels that store fill inside their structure (a band), where the mask is built from the stored coordinates in [`gradient_format`]'s levels with a bool leaf.
pub fn pattern_of(t: &Tensor) -> Result<Tensor> {
    let runs = t.format.levels.iter().any(|l| {
        matches!(
            l,
            LevelKind::RunList { .. }
                | LevelKind::SparseRunList { .. }
                | LevelKind::SparseInterval { .. }
        )
    });
    let mut pattern = t.format.levels.clone();
    let last = pattern.len() - 1;
    pattern[last] = LevelKind::Pattern;
    // A level that stores fill inside its structure (a band) takes no Pattern leaf either.
    let pattern = Format::new(pattern);
    if runs || pattern.is_err() {
        let mut levels = gradient_format(&t.format)?.levels;
        let last = levels.len() - 1;
        levels[last] = LevelKind::Element(Scalar::Bool(false));
        let format = Format::new(levels)?;
        let mut coords = vec![vec![]; t.rank()];
        let mut n = 0;
        t.for_each_stored(&mut |c, _| {
            for (d, &x) in c.iter().enumerate() {
                coords[d].push(x as i64);
            }
            n += 1;
        });
        let vals = Buffer::Bool(vec![true; n].into());
        return Tensor::from_coo(&format, &t.shape, &coords, &vals, |a, _| a);
    }
    let format = pattern?;
    let mut arrays = t.levels.clone();
    arrays[last] = level_impl(&LevelKind::Pattern)
        .buffers(&LevelKind::Pattern, format.elem())
        .into_iter()
        .map(|(_, ty)| Buffer::new(ty))
        .collect();
    let m = Tensor {
        shape: t.shape.clone(),
        format,
        levels: arrays,
    };
    m.validate("mask")?;
    Ok(m)
}

/// The format of a masked gradient of an input in `format`: the same levels with an f64
/// leaf, except that run-length levels, which take one write per run, become their
/// per-coordinate counterparts (`RunList` → `Dense`, `SparseRunList` and `SparseInterval` →
/// `SparseList`): a gradient differs from coordinate to coordinate inside a run.
pub fn gradient_format(format: &Format) -> Result<Format> {
    let mut levels: Vec<LevelKind> = format
        .levels
        .iter()
        .map(|l| match l {
            // A real dimension has no Dense counterpart: its per-point gradient is pinpoints,
            // as for SparseRunList.
            LevelKind::RunList { coord, .. } if coord.is_real() => {
                LevelKind::SparseList { coord: *coord }
            }
            LevelKind::RunList { .. } => LevelKind::Dense,
            LevelKind::SparseRunList { coord, .. } | LevelKind::SparseInterval { coord, .. } => {
                LevelKind::SparseList { coord: *coord }
            }
            l => l.clone(),
        })
        .collect();
    let last = levels.len() - 1;
    levels[last] = LevelKind::Element(Scalar::F64(0.0));
    Format::new(levels)
}

/// The format a masked gradient is accumulated in when the gradient program writes it in an
/// order its input's structure cannot take (`dx[j]` inside `for i, j` of SpMV, for a sparse
/// vector `x`): each level that takes writes only in order becomes a `SparseDict` (any order,
/// repeated coordinates combine), which stays O(stored entries). [`finish`] converts the
/// result into the input's structure.
fn any_order_format(f: &Format) -> Format {
    let levels = f
        .levels
        .iter()
        .map(|l| match l.spec().caps.writes {
            Writes::Random => l.clone(),
            _ if l.is_leaf() => l.clone(),
            _ => LevelKind::SparseDict,
        })
        .collect();
    Format { levels }
}

/// Whether every write to `tensor` in `body` comes in the order an in-order level takes:
/// its indices are the loop indices around it (plain: no protocol, window or `~`), outermost
/// first (loops further in repeat the same coordinate, which combines with the last entry),
/// and all writes sit in one loop per indexed depth (two sibling loops would write their
/// coordinates twice over).
fn writes_in_order(body: &[Stmt], tensor: &str) -> bool {
    fn walk<'a>(
        body: &'a [Stmt],
        tensor: &str,
        loops: &mut Vec<(&'a Stmt, &'a str)>,
        seen: &mut Vec<*const Stmt>,
    ) -> bool {
        body.iter().all(|s| match &s.kind {
            StmtKind::Assign { lhs, .. } if lhs.tensor == tensor => {
                let plain: Option<Vec<&str>> = lhs
                    .indices
                    .iter()
                    .map(|ix| match (&ix.expr.kind, &ix.window, &ix.protocol) {
                        // A protocol (`follow(k)`) writes by lookup, not by appending.
                        (ExprKind::Name(n), None, None) if !ix.permissive => Some(n.as_str()),
                        _ => None,
                    })
                    .collect();
                let Some(plain) = plain else { return false };
                if plain.len() > loops.len()
                    || plain.iter().zip(loops.iter()).any(|(i, (_, l))| i != l)
                {
                    return false;
                }
                loops[..plain.len()]
                    .iter()
                    .enumerate()
                    .all(|(depth, (l, _))| {
                        let l: *const Stmt = *l;
                        match seen.get(depth) {
                            Some(first) => *first == l,
                            None => {
                                seen.push(l);
                                true
                            }
                        }
                    })
            }
            StmtKind::Declare { tensor: t, .. } if t == tensor => loops.is_empty(),
            StmtKind::Loop { index, body, .. } => {
                loops.push((s, index.as_str()));
                let ok = walk(body, tensor, loops, seen);
                loops.pop();
                ok
            }
            StmtKind::If {
                then, otherwise, ..
            } => walk(then, tensor, loops, seen) && walk(otherwise, tensor, loops, seen),
            StmtKind::Let { body, .. } | StmtKind::Block(body) => walk(body, tensor, loops, seen),
            _ => true,
        })
    }
    walk(body, tensor, &mut vec![], &mut vec![])
}

/// After the gradient program ran: masked gradients accumulated in [`any_order_format`]
/// converted into their inputs' structure, as [`gradient_format`] gives it.
pub fn finish(gp: &GradProgram, tensors: &mut BTreeMap<String, Tensor>) -> Result<()> {
    for (input, _) in &gp.masks {
        let Some((_, d)) = gp.gradients.iter().find(|(i, _)| i == input) else {
            continue;
        };
        let want = gradient_format(&tensors[input].format)?;
        let got = &tensors[d];
        if got.format != want && got.format == any_order_format(&want) {
            let t = got.to_format(&want).map_err(|e| e.named(d))?;
            tensors.insert(d.clone(), t);
        }
    }
    Ok(())
}

/// Add to `tensors` (which hold the forward program's inputs) the gradient program's masks,
/// its seeds (by output name) and every tensor it creates.
pub fn bind(
    gp: &GradProgram,
    tensors: &mut BTreeMap<String, Tensor>,
    seeds: BTreeMap<String, Tensor>,
    formats: &BTreeMap<String, Format>,
) -> Result<()> {
    for (input, mask) in &gp.masks {
        let t = tensors
            .get(input)
            .ok_or_else(|| Error::tensor(input, "is differentiated but was not given"))?;
        let m = pattern_of(t)?;
        tensors.insert(mask.clone(), m);
    }
    let mut seeds = seeds;
    // A seeded output has its seed's shape: the forward program may index it only through
    // expressions (`y[i.0 * 4 + i.1, o]` after `split(i, 4)`), which size nothing.
    let mut known: HashMap<String, Vec<usize>> = HashMap::new();
    for (out, name) in &gp.seeds {
        let s = seeds
            .remove(out)
            .ok_or_else(|| Error::Usage(format!("grad: no seed for the output `{out}`")))?;
        if !tensors.contains_key(out) {
            known.insert(out.clone(), s.shape.clone());
        }
        tensors.insert(name.clone(), dense_f64(s).map_err(|e| e.named(name))?);
    }
    if let Some(extra) = seeds.keys().next() {
        return Err(Error::Usage(format!(
            "grad: a seed is given for `{extra}`, which is not a seeded output"
        )));
    }
    let masked: HashMap<&String, Format> = gp
        .masks
        .iter()
        .map(|(i, _)| {
            let f = gradient_format(&tensors[i].format)?;
            let d = gp.gradients.iter().find(|(input, _)| input == i);
            let f = match d {
                Some((_, d)) if !writes_in_order(&gp.program.body, d) => any_order_format(&f),
                _ => f,
            };
            Ok((i, f))
        })
        .collect::<Result<_>>()?;
    // A gradient has its input's shape, also when nothing contributes to it (an input read
    // only in conditions or indices) and the program never indexes it.
    for (input, d) in &gp.gradients {
        if tensors.contains_key(d) {
            continue;
        }
        let a = &tensors[input];
        let f = match (formats.get(d), masked.get(input)) {
            (Some(f), _) | (None, Some(f)) => f.clone(),
            (None, None) => Format::dense(a.rank(), Scalar::F64(0.0)),
        };
        let t = Tensor::empty(&f, &a.shape).map_err(|e| e.named(d))?;
        tensors.insert(d.clone(), t);
    }
    let tapes: HashMap<&str, Format> = gp
        .tapes
        .iter()
        .chain(&gp.partials)
        .map(|t| (t.name.as_str(), tape_format_in(gp, t, tensors)))
        .collect();
    let choose = |name: &str, rank: usize, fill: Scalar| {
        if let Some(f) = formats.get(name) {
            return f.clone();
        }
        if let Some(f) = tapes.get(name) {
            return f.clone();
        }
        Format::dense(rank, fill)
    };
    create_tensors_shaped(&gp.program, tensors, &choose, &known)
}

/// A seed as the gradient program reads it: dense f64, like the accumulator it stood for
/// (the backward pass may read the seed in place of its output's cotangent, in any order).
fn dense_f64(t: Tensor) -> Result<Tensor> {
    if t.format.is_dense() && t.format.elem() == ElemType::F64 {
        return Ok(t);
    }
    let values = t.to_dense().converted(ElemType::F64);
    Tensor::from_dense(
        &Format::dense(t.rank(), Scalar::F64(0.0)),
        &t.shape,
        &values,
    )
}

/// Create every tensor `program` uses that `tensors` lacks, empty, in the format `choose`
/// gives for its name, rank and declared fill (f64 zero for a tensor it never declares),
/// with the shape inferred from the given tensors.
pub fn create_tensors(
    program: &Program,
    tensors: &mut BTreeMap<String, Tensor>,
    choose: &dyn Fn(&str, usize, Scalar) -> Format,
) -> Result<()> {
    create_tensors_shaped(program, tensors, choose, &HashMap::new())
}

/// [`create_tensors`] where the tensors in `known` (not yet in `tensors`) have these shapes,
/// checked against the program like a given tensor's.
fn create_tensors_shaped(
    program: &Program,
    tensors: &mut BTreeMap<String, Tensor>,
    choose: &dyn Fn(&str, usize, Scalar) -> Format,
    known: &HashMap<String, Vec<usize>>,
) -> Result<()> {
    let inits = declarations(&program.body);
    let ranks = ranks(program);
    let mut created: BTreeMap<String, Format> = BTreeMap::new();
    let names = inits.keys().chain(ranks.keys());
    for name in names {
        if tensors.contains_key(name) || created.contains_key(name) {
            continue;
        }
        let rank = ranks.get(name).copied().unwrap_or(0);
        let fill = inits.get(name).copied().unwrap_or(Scalar::F64(0.0));
        created.insert(name.clone(), choose(name, rank, fill));
    }
    let mut shapes: HashMap<String, Option<Vec<usize>>> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), Some(t.shape.clone())))
        .collect();
    for n in created.keys() {
        let shape = match known.get(n) {
            Some(s) => Some(s.clone()),
            None => (!ranks.contains_key(n)).then(Vec::new),
        };
        shapes.insert(n.clone(), shape);
    }
    let values = crate::run::scalar_values(program, tensors);
    let shapes = crate::transforms::infer_shapes_with(program, &shapes, &values)?;
    for (n, f) in created {
        let t = Tensor::empty(&f, &shapes[&n]).map_err(|e| e.named(&n))?;
        tensors.insert(n, t);
    }
    Ok(())
}

/// A tape's format: versions indexed by the loops around the local, the first `Dense` and
/// the others `SparseList` (the loops visit only some coordinates, e.g. a CSR row's stored
/// columns, so a tape holds one entry per visited iteration, not the dense shape), then the
/// local's own dimensions dense. `bind` makes a version level `Dense` also where its loop
/// walks no sparse level (see `tape_format_in`).
pub fn tape_format(versions: usize, rank: usize, fill: Scalar) -> Format {
    let mut levels = vec![];
    for k in 0..rank {
        levels.push(if k == 0 || k >= versions {
            LevelKind::Dense
        } else {
            LevelKind::SPARSE_LIST
        });
    }
    levels.push(LevelKind::Element(fill));
    Format { levels }
}

/// The format of `tape` in `gp` run on `tensors`: [`tape_format`], except that a version
/// level is `Dense` when its loop walks no sparse level of a given tensor. Such a loop visits
/// every coordinate of its range, so a `SparseList` there saves nothing, and each `SparseList`
/// tape read back in a dense loop is one more operand to coiterate: the backward loop is
/// generated once per combination of the tapes' cases (SubdivNet's three taped sums per face
/// and feature made a 12,500-statement kernel instead of 700).
fn tape_format_in(gp: &GradProgram, tape: &Tape, tensors: &BTreeMap<String, Tensor>) -> Format {
    let mut stack = vec![];
    let loops = match enclosing_loops(&gp.program.body, &tape.name, &mut stack) {
        // A partial sum is written inside its inner loop too: its versions are the outer ones.
        Some(l) if l.len() >= tape.versions => l,
        _ => return tape_format(tape.versions, tape.rank, tape.fill),
    };
    let mut levels: Vec<LevelKind> = (0..tape.rank)
        .map(|k| {
            let sparse = k > 0 && k < tape.versions && walks_sparse_level(loops[k], tensors);
            if sparse {
                LevelKind::SPARSE_LIST
            } else {
                LevelKind::Dense
            }
        })
        .collect();
    levels.push(LevelKind::Element(tape.fill));
    Format { levels }
}

/// The loops around the (first) statement writing `tensor`, outermost first.
fn enclosing_loops<'a>(
    stmts: &'a [Stmt],
    tensor: &str,
    stack: &mut Vec<&'a Stmt>,
) -> Option<Vec<&'a Stmt>> {
    for s in stmts {
        let found = match &s.kind {
            StmtKind::Assign { lhs, .. } if lhs.tensor == tensor => Some(stack.clone()),
            StmtKind::Loop { body, .. } => {
                stack.push(s);
                let found = enclosing_loops(body, tensor, stack);
                stack.pop();
                found
            }
            StmtKind::Let { body, .. } | StmtKind::Block(body) => {
                enclosing_loops(body, tensor, stack)
            }
            StmtKind::If {
                then, otherwise, ..
            } => enclosing_loops(then, tensor, stack)
                .or_else(|| enclosing_loops(otherwise, tensor, stack)),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Does the loop `s` index, by its plain index, a non-`Dense` level of a given tensor (so
/// that it may walk only that level's stored coordinates)?
fn walks_sparse_level(s: &Stmt, tensors: &BTreeMap<String, Tensor>) -> bool {
    let StmtKind::Loop { index, body, .. } = &s.kind else {
        return true;
    };
    let mut sparse = false;
    crate::notation::visit::accesses(body, &mut |a| {
        let Some(t) = tensors.get(&a.tensor) else {
            return;
        };
        for (k, ix) in a.indices.iter().enumerate() {
            let plain = matches!(&ix.expr.kind, ExprKind::Name(n) if n == index);
            if plain && !matches!(t.format.levels.get(a.dim_of(k)), Some(LevelKind::Dense)) {
                sparse = true;
            }
        }
    });
    sparse
}

/// Every declared tensor and the fill its (first) declaration gives, f64 zero when it is not
/// a literal.
fn declarations(stmts: &[Stmt]) -> BTreeMap<String, Scalar> {
    let mut out = BTreeMap::new();
    crate::notation::visit::stmts(stmts, &mut |s| {
        if let StmtKind::Declare { tensor, init } = &s.kind {
            let fill = match &init.kind {
                ExprKind::Literal(v) => *v,
                _ => Scalar::F64(0.0),
            };
            out.entry(tensor.clone()).or_insert(fill);
        }
    });
    out
}

fn ranks(p: &Program) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    crate::notation::visit::accesses(&p.body, &mut |a| {
        out.entry(a.tensor.clone()).or_insert(a.indices.len());
    });
    out
}

/// Differentiate `program` with respect to `wrt` and run the gradient program: with `runner`
/// (compiled), or with the reference evaluator when `None`. `tensors` are the inputs;
/// `seeds` the outputs' cotangents by output name (empty: the 0-d output is the loss).
/// Returns the gradient program and every tensor after the run (forward outputs included);
/// the gradient of input `A` is `tensors[gp.gradients[k].1]`.
pub fn backward(
    program: &Program,
    tensors: &BTreeMap<String, Tensor>,
    wrt: &[&str],
    seeds: BTreeMap<String, Tensor>,
    opts: &BackwardOptions,
    runner: Option<&Runner>,
) -> Result<(GradProgram, BTreeMap<String, Tensor>)> {
    let masked = if opts.dense {
        vec![]
    } else {
        wrt.iter()
            .filter(|w| tensors.get(**w).is_some_and(is_structured))
            .map(|w| w.to_string())
            .collect()
    };
    let seed_names: Vec<&str> = seeds.keys().map(String::as_str).collect();
    let gp = grad_with(
        program,
        wrt,
        &seed_names,
        &GradOptions {
            tapes: opts.tapes,
            masked,
        },
    )?;
    let gp = match &opts.schedule {
        Some(text) => gp.scheduled(text)?,
        None => gp,
    };
    let mut all = tensors.clone();
    bind(&gp, &mut all, seeds, &opts.formats)?;
    match runner {
        Some(r) => {
            let formats = crate::api::formats_of(&all);
            let c = r.compile(&gp.program, &formats)?;
            r.execute(&c, &mut all)?;
        }
        None => {
            let values = crate::tensor::evaluate(&gp.program, &all)?;
            let (_, written) = crate::notation::visit::reads_writes(&gp.program.body);
            for (n, v) in values {
                if !written.contains(&n) {
                    continue;
                }
                let t = &all[&n];
                let fresh = Tensor::from_dense(&t.format, &t.shape, &v)?;
                all.insert(n, fresh);
            }
        }
    }
    finish(&gp, &mut all)?;
    Ok((gp, all))
}
