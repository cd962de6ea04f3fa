//! User reducers: checks the program's `reducer` definitions and attaches each one to the
//! statements that use it (`Reducer::Named(f)` becomes `Reducer::User(def)`), so that the
//! typing rules, the simplifier's algebra and the lowering all see the definition without a
//! registry to consult. Runs first in normalisation and in the reference evaluator.

use crate::error::{Error, Result};
use crate::notation::ast::{
    AssignOp, BUILTIN_REDUCERS, Expr, ExprKind, Program, Reducer, ReducerDef, Stmt, StmtKind,
};
use crate::semantics::Builtin;
use std::collections::HashMap;
use std::sync::Arc;

/// Check the definitions and resolve every `<<f>>=` of the program to its definition.
pub fn resolve_reducers(p: &Program) -> Result<Program> {
    let mut defs: HashMap<&str, Arc<ReducerDef>> = HashMap::new();
    for def in &p.reducers {
        check_definition(def)?;
        if let Some(first) = defs.get(def.name.as_str()) {
            return Err(Error::program(
                def.span,
                format!(
                    "reducer `{}` is defined twice (first at {})",
                    def.name, first.span
                ),
            ));
        }
        defs.insert(&def.name, Arc::new(def.clone()));
    }
    Ok(p.with_body(stmts(&p.body, &defs)?))
}

fn check_definition(def: &ReducerDef) -> Result<()> {
    if BUILTIN_REDUCERS.contains(&def.name.as_str()) {
        return Err(Error::program(
            def.span,
            format!(
                "`{}` is a built-in reducer (`<<{}>>=`); a user reducer needs another name",
                def.name, def.name
            ),
        ));
    }
    let [a, b] = &def.params;
    if a == b {
        return Err(Error::program(
            def.span,
            format!(
                "the two parameters of reducer `{}` are both named `{a}`",
                def.name
            ),
        ));
    }
    check_body(def, &def.body)?;
    if let Some(d) = &def.derivative {
        if !(def.commutative && def.associative) {
            return Err(Error::program(
                d.span,
                format!(
                    "reducer `{}` declares a derivative but is not `commutative associative`: the derivative of a result in one element is defined only when the order of the elements does not matter",
                    def.name
                ),
            ));
        }
        check_body(def, d)?;
    }
    Ok(())
}

/// The body may use the two parameters, literals, operators and built-in functions only.
fn check_body(def: &ReducerDef, e: &Expr) -> Result<()> {
    let bad = |e: &Expr| {
        Err(Error::program(
            e.span,
            crate::semantics::body_misuse(def, e),
        ))
    };
    match &e.kind {
        ExprKind::Literal(_) => Ok(()),
        ExprKind::Name(n) if def.params.contains(n) => Ok(()),
        ExprKind::Unary(_, x) => check_body(def, x),
        ExprKind::Binary(_, x, y) => {
            check_body(def, x)?;
            check_body(def, y)
        }
        ExprKind::Call(name, args) if name != Builtin::Size.name() => {
            let Some(f) = Builtin::from_name(name) else {
                return Err(Error::program(
                    e.span,
                    format!("unknown function `{name}` in reducer `{}`", def.name),
                ));
            };
            f.check_arity(args.len())
                .map_err(|m| Error::program(e.span, m))?;
            args.iter().try_for_each(|x| check_body(def, x))
        }
        _ => bad(e),
    }
}

fn stmts(body: &[Stmt], defs: &HashMap<&str, Arc<ReducerDef>>) -> Result<Vec<Stmt>> {
    body.iter().map(|s| stmt(s, defs)).collect()
}

fn stmt(s: &Stmt, defs: &HashMap<&str, Arc<ReducerDef>>) -> Result<Stmt> {
    let kind = match &s.kind {
        StmtKind::Assign { lhs, op, rhs } => {
            let op = match op {
                AssignOp::Reduce(Reducer::Named(n)) => match defs.get(n.as_str()) {
                    Some(def) => AssignOp::Reduce(Reducer::User(def.clone())),
                    None => {
                        return Err(Error::program(s.span, format!("unknown reducer `{n}`")));
                    }
                },
                op => op.clone(),
            };
            StmtKind::Assign {
                lhs: lhs.clone(),
                op,
                rhs: rhs.clone(),
            }
        }
        StmtKind::Loop {
            index,
            extent,
            body,
            parallel,
        } => StmtKind::Loop {
            index: index.clone(),
            extent: extent.clone(),
            body: stmts(body, defs)?,
            parallel: *parallel,
        },
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => StmtKind::If {
            cond: cond.clone(),
            then: stmts(then, defs)?,
            otherwise: stmts(otherwise, defs)?,
        },
        StmtKind::Let { name, value, body } => StmtKind::Let {
            name: name.clone(),
            value: value.clone(),
            body: stmts(body, defs)?,
        },
        StmtKind::Block(body) => StmtKind::Block(stmts(body, defs)?),
        k => k.clone(),
    };
    Ok(Stmt::new(kind, s.span))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse::parse_program;

    fn resolve(text: &str) -> Result<Program> {
        resolve_reducers(&parse_program(text).unwrap())
    }

    fn err(text: &str) -> String {
        resolve(text).unwrap_err().to_string()
    }

    #[test]
    fn uses_get_their_definition() {
        let p = resolve(
            "reducer absmax(a, b) = max(abs(a), abs(b)) identity 0 idempotent\nfor i = _\n  if x[i] > 0\n    s[] <<absmax>>= x[i]\n  end\nend",
        )
        .unwrap();
        let StmtKind::Loop { body, .. } = &p.body[0].kind else {
            panic!()
        };
        let StmtKind::If { then, .. } = &body[0].kind else {
            panic!()
        };
        let StmtKind::Assign {
            op: AssignOp::Reduce(Reducer::User(def)),
            ..
        } = &then[0].kind
        else {
            panic!("{:?}", then[0])
        };
        assert_eq!(**def, p.reducers[0]);
        assert!(def.idempotent);
    }

    #[test]
    fn bad_definitions_name_their_place() {
        let cases = [
            (
                "reducer f(a, b) = a + c\ns[] <<f>>= 1",
                "1:23: `c` is not a parameter of `f` (`a`, `b`)",
            ),
            (
                "reducer f(a, b) = a\nreducer f(x, y) = y",
                "2:1: reducer `f` is defined twice (first at 1:1)",
            ),
            (
                "\nreducer min(a, b) = a",
                "2:1: `min` is a built-in reducer (`<<min>>=`); a user reducer needs another name",
            ),
            (
                "reducer choose(a, b) = a",
                "1:1: `choose` is a built-in reducer (`<<choose>>=`); a user reducer needs another name",
            ),
            (
                "reducer f(a, a) = a",
                "1:1: the two parameters of reducer `f` are both named `a`",
            ),
            (
                "reducer f(a, b) = a + b commutative derivative(1.0)",
                "1:48: reducer `f` declares a derivative but is not `commutative associative`: the derivative of a result in one element is defined only when the order of the elements does not matter",
            ),
            (
                "reducer f(a, b) = a + b commutative associative derivative(c)",
                "1:60: `c` is not a parameter of `f` (`a`, `b`)",
            ),
            (
                "reducer f(a, b) = a + x[0]",
                "1:23: a reducer body cannot read tensors (`x[...]` in `f`)",
            ),
            (
                "reducer f(a, b) = frob(a, b)",
                "1:19: unknown function `frob` in reducer `f`",
            ),
            (
                "reducer f(a, b) = max(a)",
                "1:19: `max` takes 2 argument(s), got 1",
            ),
            (
                "reducer f(a, b) = size(a, 0)",
                "1:19: a reducer body cannot call `size` (in `f`)",
            ),
            (
                "reducer f(a, b) = coalesce(a, missing)",
                "1:31: a reducer body cannot use `missing` (in `f`)",
            ),
            (
                "reducer f(a, b) = a\nfor i = _\n  s[] <<g>>= x[i]\nend",
                "3:3: unknown reducer `g`",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "{text}");
        }
    }

    #[test]
    fn programs_without_reducers_are_unchanged() {
        let text = "s .= 0\nfor i = _\n  s[] <<max>>= x[i]\nend\n";
        let p = parse_program(text).unwrap();
        assert_eq!(resolve_reducers(&p).unwrap(), p);
    }
}
