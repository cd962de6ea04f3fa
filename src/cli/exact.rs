//! Integer and bool outputs of float results. A kernel narrows a float stored into an integer
//! tensor by truncation (the language's rule, see `tessera::types`), which would make `--out
//! C@Dense(Element(0))` silently drop fractions. So an output whose kernel stores floats into
//! it is computed in a float copy of its format, and converted back afterwards only if every
//! value is exactly representable; otherwise the error names the tensor, the index and the
//! value.

use std::collections::{BTreeMap, HashSet};
use tessera::error::{Error, Result};
use tessera::ir::{Expr, Kernel, Stmt, VarId};
use tessera::levels::{Format, LevelKind};
use tessera::notation::ast::Program;
use tessera::run::Runner;
use tessera::tensor::Tensor;
use tessera::transforms::check::{Signature, Signatures, float_stores};
use tessera::types::{Class, ElemType, Scalar};

/// The outputs (among `outputs`) with an integer or bool element type that the program stores
/// float values into, switched to a float copy of their format in `tensors`; returns their
/// requested formats, for [`narrow_back`].
pub fn widen_float_outputs(
    program: &Program,
    outputs: &[String],
    tensors: &mut BTreeMap<String, Tensor>,
) -> Result<Vec<(String, Format)>> {
    let candidates: Vec<&String> = outputs
        .iter()
        .filter(|n| {
            tensors[*n].elem().class() != Class::Float && widened(&tensors[*n].format).is_some()
        })
        .collect();
    if candidates.is_empty() {
        return Ok(vec![]);
    }
    let mut out = vec![];
    // A float reduction into an integer tensor is an error of the library (it would round at
    // every step), and an overwrite a cast; here such an output is computed in floats and
    // checked whole afterwards. The kernel's stores are looked at too (below), but a constant
    // such as `y[] = 1 / 0` is already narrowed in the IR.
    let signatures: Signatures = tensors
        .iter()
        .map(|(n, t)| {
            let sig = Signature {
                rank: t.format.rank(),
                elem: t.format.elem(),
            };
            (n.clone(), sig)
        })
        .collect();
    let floats = float_stores(program, &signatures);
    let mut rest = vec![];
    for n in candidates {
        if floats.contains(n) {
            widen(n, tensors, &mut out)?;
        } else {
            rest.push(n);
        }
    }
    let formats: BTreeMap<String, Format> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.format.clone()))
        .collect();
    // A program that does not lower fails again, with its message, when it is compiled.
    let Ok((kernel, layout, _)) = Runner::lower(program, &formats) else {
        return Ok(out);
    };
    for n in rest {
        let Some(tl) = layout.tensors.iter().find(|t| t.name == *n) else {
            continue;
        };
        let Some(&val) = tl.bufs.last().and_then(|b| b.first()) else {
            continue;
        };
        if !stores_floats(&kernel, val as u32) {
            continue;
        }
        widen(n, tensors, &mut out)?;
    }
    Ok(out)
}

/// Switch `n` (a candidate: its format has a float copy) to that copy, noting its format.
fn widen(
    n: &str,
    tensors: &mut BTreeMap<String, Tensor>,
    out: &mut Vec<(String, Format)>,
) -> Result<()> {
    let t = &tensors[n];
    let wide = widened(&t.format).expect("a candidate has a float copy");
    let copy = t.to_format(&wide).map_err(|e| e.named(n))?;
    out.push((n.to_string(), t.format.clone()));
    tensors.insert(n.to_string(), copy);
    Ok(())
}

/// `format` with an f64 leaf, if its leaf holds values.
fn widened(format: &Format) -> Option<Format> {
    let mut f = format.clone();
    let leaf = f.levels.last_mut()?;
    match leaf {
        LevelKind::Element(fill) | LevelKind::Scalar { fill, .. } => {
            *fill = Scalar::F64(fill.as_f64());
            Some(f)
        }
        _ => None,
    }
}

/// Convert each widened output back to its requested format, refusing a value that format
/// cannot hold exactly.
pub fn narrow_back(
    narrowed: &[(String, Format)],
    tensors: &mut BTreeMap<String, Tensor>,
) -> Result<()> {
    for (n, format) in narrowed {
        let t = &tensors[n];
        let ty = format.elem();
        let mut bad = None;
        t.for_each_stored(&mut |c, v| {
            if bad.is_none() && v.cast(ty).cast(v.ty()) != v {
                bad = Some((c.to_vec(), v));
            }
        });
        if let Some((idx, v)) = bad {
            return Err(Error::tensor(
                n,
                format!(
                    "holds {ty}, but the program computes {v} at index {idx:?}, which {ty} \
                     cannot hold exactly (give `{n}` a float format such as Element(0.0), or \
                     round the value in the program)"
                ),
            ));
        }
        let back = t.to_format(format).map_err(|e| e.named(n))?;
        tensors.insert(n.clone(), back);
    }
    Ok(())
}

/// Whether the kernel stores into buffer `val` a value converted from a float to an integer
/// or bool (directly, or through a variable assigned one).
fn stores_floats(k: &Kernel, val: u32) -> bool {
    let mut vars = HashSet::new();
    collect_vars(k, &k.body, &mut vars);
    any_store(k, &k.body, val, &vars)
}

fn narrows(k: &Kernel, e: &Expr, vars: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.visit(&mut |x| match x {
        Expr::Cast(to, inner) if *to != ElemType::F64 && k.type_of(inner) == ElemType::F64 => {
            found = true
        }
        Expr::Var(v) if vars.contains(v) => found = true,
        _ => {}
    });
    found
}

/// Variables assigned a narrowed float, to a fixed point (a variable may feed another).
fn collect_vars(k: &Kernel, body: &[Stmt], vars: &mut HashSet<VarId>) {
    loop {
        let before = vars.len();
        walk(body, &mut |s| {
            if let Stmt::Assign(v, e) = s
                && narrows(k, e, vars)
            {
                vars.insert(*v);
            }
        });
        if vars.len() == before {
            return;
        }
    }
}

fn any_store(k: &Kernel, body: &[Stmt], val: u32, vars: &HashSet<VarId>) -> bool {
    let mut found = false;
    walk(body, &mut |s| match s {
        Stmt::Store { buf, value, .. } | Stmt::Fill { buf, value, .. }
            if buf.0 == val && narrows(k, value, vars) =>
        {
            found = true
        }
        _ => {}
    });
    found
}

fn walk(body: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
    for s in body {
        f(s);
        match s {
            Stmt::If {
                then, otherwise, ..
            } => {
                walk(then, f);
                walk(otherwise, f);
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => walk(body, f),
            _ => {}
        }
    }
}
