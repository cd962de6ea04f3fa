//! The schedule target: a random program of the differential generator ([`generate`]), then
//! up to four random schedule commands over its loops and the tensors its statements write
//! (`split`, `merge`, `reorder`, `swap`, `fission`, `fuse`, `unroll`, `vectorize`), each applied when
//! accepted. The promise checked: an accepted schedule never changes a result. The scheduled
//! program's evaluator run must equal the unscheduled one's (floats within the differential
//! tolerance: reordered sums round differently), and the JIT (and C, when asked) must agree
//! with the evaluator on the scheduled program. A scheduled program may fail where the
//! original ran — the lifecycle pass refuses a fused producer and consumer, a sparse output
//! refuses writes out of order — with an error, never a different value.

use crate::differential::compare::{Verdict, compare, first_difference};
use crate::differential::generate::{self, Case};
use crate::differential::{Shapes, describe};
use arbitrary::Unstructured;
use std::collections::BTreeMap;
use tessera::notation::ast::{Program, StmtKind};
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::transforms::schedule::schedule as apply_schedule;

/// The fuzz target: the JIT on every case, C too on one case in
/// `differential::c_every()` (as the differential target samples it).
pub fn schedule(data: &[u8]) {
    let with_c = crate::differential::sampled(data, crate::differential::c_every());
    check(data, with_c);
}

/// Loop references of a program (`i`, or `i#2` when several loops are named `i`) and the
/// tensors statements write, in program order.
fn names(p: &Program) -> (Vec<String>, Vec<String>) {
    let mut loops: Vec<String> = vec![];
    let mut writes = vec![];
    tessera::notation::visit::stmts(&p.body, &mut |s| match &s.kind {
        StmtKind::Loop { index, .. } => loops.push(index.clone()),
        StmtKind::Assign { lhs, .. } => writes.push(lhs.tensor.clone()),
        _ => {}
    });
    let refs = loops
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let same = loops.iter().filter(|m| *m == n).count();
            if same == 1 {
                n.clone()
            } else {
                let occ = loops[..=k].iter().filter(|m| *m == n).count();
                format!("{n}#{occ}")
            }
        })
        .collect();
    (refs, writes)
}

fn pick<'a>(u: &mut Unstructured<'_>, xs: &'a [String]) -> Option<&'a String> {
    if xs.is_empty() {
        return None;
    }
    Some(&xs[u.choose_index(xs.len()).unwrap_or(0)])
}

/// One random command over the program's current loops and statements.
fn command(u: &mut Unstructured<'_>, p: &Program) -> Option<String> {
    let (loops, writes) = names(p);
    let l = pick(u, &loops)?.clone();
    let l2 = pick(u, &loops)?.clone();
    Some(match u.choose_index(9).unwrap_or(0) {
        0 | 7 => format!("split({l}, {})", 1 + u.choose_index(3).unwrap_or(1)),
        1 => format!("merge({l}, {l2})"),
        2 => format!("reorder({l}, {l2})"),
        3 => format!("swap({}, {})", pick(u, &writes)?, pick(u, &writes)?),
        4 => format!("fission({l}, after {})", pick(u, &writes)?),
        5 => format!("fuse({l}, {l2})"),
        // Over a sparse level: lanes of its stored entries, or serial where they would scatter.
        8 => format!("vectorize({l})"),
        _ => format!("unroll({l})"),
    })
}

fn run_compiled(
    runner: &Runner,
    p: &Program,
    ts: &mut BTreeMap<String, Tensor>,
) -> tessera::Result<()> {
    let k = runner.compile(p, &tessera::api::formats_of(ts))?;
    runner.execute(&k, ts)
}

/// Decode a case and commands from `data`, schedule, and check; panics on a finding. Returns
/// whether a command was accepted and the scheduled program's values were compared.
pub fn check(data: &[u8], with_c: bool) -> bool {
    let mut u = Unstructured::new(data);
    let case = generate::case(&mut u, &Shapes::AGREED);
    let mut q = case.program.clone();
    let mut applied = vec![];
    for _ in 0..1 + u.choose_index(4).unwrap_or(0) {
        let Some(c) = command(&mut u, &q) else { break };
        if let Ok(next) = apply_schedule(&q, &c) {
            q = next;
            applied.push(c);
        }
    }
    if applied.is_empty() {
        return false;
    }
    let report = |why: String| -> ! {
        panic!(
            "schedule `{}`: {why}\n--- scheduled\n{q}{}",
            applied.join("; "),
            describe(&case)
        )
    };
    let text = q.to_string();
    if tessera::notation::parse::parse_program(&text).ok().as_ref() != Some(&q) {
        report("the scheduled program does not print back".into());
    }
    let before = tessera::tensor::evaluate(&case.program, &case.tensors);
    let after = tessera::tensor::evaluate(&q, &case.tensors);
    let (Ok(want), Ok(got)) = (&before, &after) else {
        // Failing where the original failed, or with an error where it ran: no wrong value.
        return false;
    };
    // A loop-body local that `fission` expanded into one per iteration (`t.i`) is no longer
    // written: the value its last iteration left is not the program's result.
    let (reads, writes) = tessera::notation::visit::reads_writes(&q.body);
    for (n, w) in want {
        if !reads.contains(n) && !writes.contains(n) {
            continue;
        }
        let Some(g) = got.get(n) else {
            continue;
        };
        let g: &Buffer = g;
        if let Some(k) = first_difference(w, g) {
            report(format!(
                "`{n}` differs at entry {k} on the evaluator:\n  unscheduled {:?}\n  scheduled   {:?}",
                w.to_scalars(),
                g.to_scalars()
            ));
        }
    }
    let scheduled = Case {
        program: q.clone(),
        tensors: case.tensors.clone(),
    };
    let mut runners = vec![("jit", Runner::jit())];
    if with_c {
        let c = tessera::backend::CBackend::new()
            .with_cache_dir(std::env::temp_dir().join("tessera-fuzz-c-cache"));
        if c.compiler_available() {
            runners.push(("c", Runner::new(Box::new(c))));
        }
    }
    for (name, r) in runners {
        let mut ts = scheduled.tensors.clone();
        let res = run_compiled(&r, &scheduled.program, &mut ts);
        // A new loop order may write a sparse output out of order (a kernel error the
        // evaluator, which writes densely, does not raise): an error, not a wrong value.
        if matches!(res, Err(tessera::Error::Kernel(_))) {
            continue;
        }
        match compare(&after, res.map(|()| &ts)) {
            Ok(Verdict::Agree | Verdict::BothFailed | Verdict::Refused) => {}
            Err(why) => report(format!("{name} and the evaluator disagree: {why}")),
        }
    }
    true
}
