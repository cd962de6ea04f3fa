//! Lifecycle automation: tensors are either being read or being updated. A declaration leaves
//! a tensor in update mode; this pass inserts `@freeze` before the first read after updates,
//! `@thaw` before the first write after reads (both in the scope that owns the tensor), and
//! freezes at the end of that scope. Reading and writing one tensor inside a single child scope
//! has no meaning under the dense semantics' loop order guarantees and is an error, except for
//! *state variables*: a 0-d tensor the program declares (`x .= 0.0`), always accesses as `x[]`
//! and only ever overwrites (`=`, no `+=`) may be read and overwritten in any order below its
//! declaration (`x[] = x[] - s * g` in a fixed-count loop, the position a Newton iteration or
//! a streamline carries), and the reads see the last write in program order. That is the evaluator's semantics, and a 0-d
//! tensor has no iteration order for a loop to disagree with: one element, whose freeze and
//! thaw are no code, read by a load and written by a store the IR passes order by their
//! effects.

use crate::error::{Error, Result};
use crate::notation::ast::{
    Access, AssignOp, Expr, ExprKind, Extent, Program, Span, Stmt, StmtKind,
};
use crate::notation::visit;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Read,
    Update,
}

/// `tensors`: every tensor of the kernel (names not listed are indices or let variables).
pub fn lifecycle(p: &Program, tensors: &HashSet<String>) -> Result<Program> {
    let mut modes: HashMap<String, Mode> =
        tensors.iter().map(|t| (t.clone(), Mode::Read)).collect();
    let mut memo = Memo::default();
    let state = state_variables(&p.body);
    let body = scope(&p.body, tensors, &state, &mut modes, &mut memo)?;
    Ok(p.with_body(body))
}

/// The state variables of `body` (see the module comment): declared 0-d tensors never
/// accessed with an index.
fn state_variables(body: &[Stmt]) -> HashSet<String> {
    let mut declared = HashSet::new();
    visit::stmts(body, &mut |s: &Stmt| {
        if let StmtKind::Declare { tensor, .. } = &s.kind {
            declared.insert(tensor.clone());
        }
    });
    let mut excluded = HashSet::new();
    visit::accesses(body, &mut |a| {
        if !a.indices.is_empty() {
            excluded.insert(a.tensor.clone());
        }
    });
    // A reduction (`s[] += ...`) combines with a value the loop order decides, as for any
    // tensor; only overwrites are assignments in program order.
    visit::stmts(body, &mut |s: &Stmt| {
        if let StmtKind::Assign {
            lhs,
            op: AssignOp::Reduce(_),
            ..
        } = &s.kind
        {
            excluded.insert(lhs.tensor.clone());
        }
    });
    declared.retain(|t| !excluded.contains(t));
    declared
}

/// What a statement (with everything nested in it) reads, writes and declares.
#[derive(Default)]
struct Summary {
    reads: HashSet<String>,
    writes: HashSet<String>,
    declared: HashSet<String>,
}

/// Summaries by statement, built bottom-up once: each scope asks for its statements' and the
/// nested scopes ask again for theirs, which walked a deep tree (the permissive pass's nested
/// splits) once per level of nesting.
#[derive(Default)]
struct Memo(HashMap<*const Stmt, Rc<Summary>>);

impl Memo {
    fn summary(&mut self, s: &Stmt) -> Rc<Summary> {
        if let Some(got) = self.0.get(&(s as *const Stmt)) {
            return got.clone();
        }
        let mut sum = Summary::default();
        let mut read = |e: &Expr| {
            visit::expr(e, &mut |x| match &x.kind {
                ExprKind::Access(a) => {
                    sum.reads.insert(a.tensor.clone());
                }
                ExprKind::Name(n) => {
                    sum.reads.insert(n.clone());
                }
                _ => {}
            })
        };
        let children: Vec<&Stmt> = match &s.kind {
            StmtKind::Declare { tensor, init } => {
                read(init);
                sum.writes.insert(tensor.clone());
                sum.declared.insert(tensor.clone());
                vec![]
            }
            StmtKind::Assign { lhs, rhs, .. } => {
                for ix in &lhs.indices {
                    visit::index(ix, &mut |x| read(x));
                }
                read(rhs);
                sum.writes.insert(lhs.tensor.clone());
                vec![]
            }
            StmtKind::Loop { extent, body, .. } => {
                if let Extent::Range(a, b) = extent {
                    read(a);
                    read(b);
                }
                body.iter().collect()
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                read(cond);
                then.iter().chain(otherwise).collect()
            }
            StmtKind::Let { value, body, .. } => {
                read(value);
                body.iter().collect()
            }
            StmtKind::Block(body) => body.iter().collect(),
            StmtKind::Freeze { .. } | StmtKind::Thaw { .. } => vec![],
        };
        for c in children {
            let cs = self.summary(c);
            sum.reads.extend(cs.reads.iter().cloned());
            sum.writes.extend(cs.writes.iter().cloned());
            sum.declared.extend(cs.declared.iter().cloned());
        }
        let sum = Rc::new(sum);
        self.0.insert(s as *const Stmt, sum.clone());
        sum
    }
}

/// Process one scope. `modes` holds the tensors this scope owns.
fn scope(
    stmts: &[Stmt],
    tensors: &HashSet<String>,
    state: &HashSet<String>,
    modes: &mut HashMap<String, Mode>,
    memo: &mut Memo,
) -> Result<Vec<Stmt>> {
    let mut out = vec![];
    let mut touched: Vec<String> = vec![];
    for s in stmts {
        if let StmtKind::Declare { tensor, .. } = &s.kind {
            modes.insert(tensor.clone(), Mode::Update);
            touched.push(tensor.clone());
            out.push(s.clone());
            continue;
        }
        let one = std::slice::from_ref(s);
        let sum = memo.summary(s);
        let owned =
            |t: &String| tensors.contains(t) && !sum.declared.contains(t) && modes.contains_key(t);
        let reads: HashSet<&String> = sum.reads.iter().filter(|t| owned(t)).collect();
        let writes: HashSet<&String> = sum.writes.iter().filter(|t| owned(t)).collect();
        let mut both: Vec<&&String> = reads
            .intersection(&writes)
            .filter(|t| !state.contains(**t))
            .collect();
        both.sort();
        if let Some(t) = both.first() {
            return Err(read_and_written(s, t));
        }
        let mut sorted_reads: Vec<&&String> = reads.iter().collect();
        sorted_reads.sort();
        for t in sorted_reads {
            if modes[*t] == Mode::Update {
                // At the read itself, so a later error about reopening `t` can name it.
                out.push(Stmt::new(
                    StmtKind::Freeze {
                        tensor: (*t).clone(),
                    },
                    first_read(one, t).unwrap_or(s.span),
                ));
                modes.insert((*t).clone(), Mode::Read);
            }
        }
        let mut sorted_writes: Vec<&&String> = writes.iter().collect();
        sorted_writes.sort();
        for t in sorted_writes {
            if modes[*t] == Mode::Read {
                out.push(Stmt::new(
                    StmtKind::Thaw {
                        tensor: (*t).clone(),
                    },
                    first_write(one, t).unwrap_or(s.span),
                ));
                modes.insert((*t).clone(), Mode::Update);
                touched.push((*t).clone());
            }
        }
        out.push(nested(s, tensors, state, memo)?);
    }
    // Leave the scope with everything it updated readable again.
    let mut done = HashSet::new();
    for t in touched {
        if done.insert(t.clone()) && modes.get(&t) == Some(&Mode::Update) {
            out.push(Stmt::new(
                StmtKind::Freeze { tensor: t.clone() },
                Default::default(),
            ));
            modes.insert(t, Mode::Read);
        }
    }
    Ok(out)
}

/// Recurse into a statement's bodies; each body owns the tensors declared directly in it.
fn nested(
    s: &Stmt,
    tensors: &HashSet<String>,
    state: &HashSet<String>,
    memo: &mut Memo,
) -> Result<Stmt> {
    let mut body = |b: &[Stmt]| -> Result<Vec<Stmt>> {
        let mut modes = HashMap::new();
        scope(b, tensors, state, &mut modes, memo)
    };
    let kind = match &s.kind {
        StmtKind::Loop {
            index,
            extent,
            body: b,
            parallel,
        } => StmtKind::Loop {
            index: index.clone(),
            extent: extent.clone(),
            body: body(b)?,
            parallel: *parallel,
        },
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => StmtKind::If {
            cond: cond.clone(),
            then: body(then)?,
            otherwise: body(otherwise)?,
        },
        StmtKind::Let {
            name,
            value,
            body: b,
        } => StmtKind::Let {
            name: name.clone(),
            value: value.clone(),
            body: body(b)?,
        },
        StmtKind::Block(b) => StmtKind::Block(body(b)?),
        other => other.clone(),
    };
    Ok(Stmt::new(kind, s.span))
}

/// Where `t` is first written (assigned or declared) in `stmts`.
fn first_write(stmts: &[Stmt], t: &str) -> Option<Span> {
    let mut write = None;
    visit::accesses(stmts, &mut |a| {
        if a.tensor == t && write.is_none() {
            write = Some(a.span);
        }
    });
    write
}

/// Where `t` is first read in `stmts` (its first use in an expression).
fn first_read(stmts: &[Stmt], t: &str) -> Option<Span> {
    let mut read = None;
    visit::exprs(stmts, &mut |e| {
        let name = match &e.kind {
            ExprKind::Access(a) => Some((&a.tensor, a.span)),
            ExprKind::Name(n) => Some((n, e.span)),
            _ => None,
        };
        if let Some((n, span)) = name
            && n == t
            && read.is_none()
        {
            read = Some(span);
        }
    });
    read
}

/// The error for tensor `t` read and written inside `s`: where, and what to write instead.
fn read_and_written(s: &Stmt, t: &str) -> Error {
    let one = std::slice::from_ref(s);
    let mut write: Option<&Access> = None;
    visit::accesses(one, &mut |a| {
        if a.tensor == t && write.is_none() {
            write = Some(a);
        }
    });
    // `accesses` visits written accesses first; the first read is the first expression use.
    let read = first_read(one, t);
    let at = |what: &str, span: Option<Span>| span.map(|p| format!("{what} at {p}"));
    let places: Vec<String> = [at("read", read), at("written", write.map(|a| a.span))]
        .into_iter()
        .flatten()
        .collect();
    let update = match write {
        Some(a) => format!("{a} +="),
        None => format!("{t}[...] +="),
    };
    Error::Lifecycle {
        span: s.span,
        msg: format!(
            "`{t}` is read and written inside the {} ({}): what the reads see would depend on the loop order. Hint: accumulate with an updating operator (`{update} ...`) instead of reading `{t}`, write the result to another tensor, or, to use `{t}` as a workspace, declare it (`{t} .= 0`) inside the {} before the statements that write and then read it",
            stmt_name(s),
            places.join(", "),
            stmt_name(s)
        ),
    }
}

fn stmt_name(s: &Stmt) -> String {
    match &s.kind {
        StmtKind::Loop { index, .. } => format!("loop over `{index}`"),
        StmtKind::If { .. } => "`if`".into(),
        StmtKind::Let { .. } => "`let`".into(),
        _ => "statement".into(),
    }
}
