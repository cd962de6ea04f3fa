//! Rewriting the looplets at the head of a loop's accesses: the moves every rule makes
//! (replace each looplet of a kind by what it means on the current extent, pick one looplet
//! and split the body on it).

use super::node::{self, LStmt};
use super::{Looplet, Target};

/// Replace the looplet of every access headed by `index` for which `f` returns a target;
/// a replacement that is not a looplet consumes the index.
pub fn replace_head(
    body: &mut [LStmt],
    index: &str,
    f: &mut dyn FnMut(&Looplet) -> Option<Target>,
) {
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if a.head() == Some(index)
            && let Target::Looplet(l) = &a.target
            && let Some(t) = f(l)
        {
            if consumes_index(&t) {
                a.advance(t);
            } else {
                a.target = t;
            }
        }
        Ok(())
    });
}

/// Whether a replacement is the value at the index (a fiber, or a thunk around one) rather
/// than another looplet over the same index.
fn consumes_index(t: &Target) -> bool {
    match t {
        Target::Looplet(Looplet::Thunk { body, .. }) => consumes_index(body),
        Target::Looplet(_) => false,
        _ => true,
    }
}

/// The position (in visiting order) and looplet of the first access headed by `index` whose
/// looplet satisfies `pred`.
pub fn take_first(
    body: &mut [LStmt],
    index: &str,
    pred: impl Fn(&Looplet) -> bool,
) -> Option<(usize, Looplet)> {
    let mut k = 0;
    let mut found = None;
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if found.is_none()
            && a.head() == Some(index)
            && let Target::Looplet(l) = &a.target
            && pred(l)
        {
            found = Some((k, l.clone()));
        }
        k += 1;
        Ok(())
    });
    found
}

/// Set the target of the access at visiting position `path`.
pub fn set_at(body: &mut [LStmt], path: &usize, t: Target) {
    let mut k = 0;
    let mut t = Some(t);
    let _ = node::visit_accesses_mut(body, &mut |a| {
        if k == *path {
            match t.take() {
                Some(Target::Looplet(l)) => a.target = Target::Looplet(l),
                Some(other) => a.advance(other),
                None => {}
            }
        }
        k += 1;
        Ok(())
    });
}
