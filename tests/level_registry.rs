//! The level registry's answers against what the levels do: for every registered level (each
//! parameter variant), each capability the registry claims is checked by running or compiling
//! a tiny kernel, the README's format table is checked against the registry, and every format
//! the registry builds at ranks 1 and 2 runs a few kernels against the reference evaluator.
//! A new level is checked here through its registry line alone.

mod common;

use common::random::{random_tensor, registry_formats};
use common::{agree, fmt, formats_of, parse, run_jit};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::BTreeMap;
use tessera::KernelErrorKind;
use tessera::error::Error;
use tessera::levels::registry::{Args, LEVELS, LevelSpec, Param, Role, Writes};
use tessera::levels::{Format, LevelKind};
use tessera::notation::ast::Protocol;
use tessera::run::Runner;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

/// Every variant of every non-leaf level of one dimension, over an `f64` leaf.
fn vector_levels() -> Vec<(&'static LevelSpec, Format)> {
    let mut out = vec![];
    for spec in LEVELS.iter().filter(|s| s.role == Role::Level) {
        for kind in spec.variants(1, &[]) {
            let f = Format::new(vec![kind, LevelKind::Element(Scalar::F64(0.0))]).unwrap();
            out.push((*spec, f));
        }
    }
    assert!(out.len() >= LEVELS.iter().filter(|s| s.role == Role::Level).count());
    out
}

fn vector(f: &Format, values: &[f64]) -> tessera::Result<Tensor> {
    Tensor::from_dense(f, &[values.len()], &Buffer::F64(values.to_vec().into()))
}

fn tensors(list: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

fn i64s(values: &[i64]) -> Tensor {
    Tensor::from_dense(
        &fmt("Dense(Element(0))"),
        &[values.len()],
        &Buffer::I64(values.to_vec().into()),
    )
    .unwrap()
}

/// `y[P[i]] += x[i]` into an empty `y`: the result, or the kernel's error.
fn scatter(f: &Format, n: usize, p: &[i64], x: &[f64]) -> tessera::Result<Buffer> {
    let dense = fmt("Dense(Element(0.0))");
    let mut ts = tensors(vec![
        ("y", Tensor::empty(f, &[n]).unwrap()),
        ("P", i64s(p)),
        ("x", vector(&dense, x).unwrap()),
    ]);
    run_jit(
        &parse("y .= 0\nfor i = _\n  y[P[i]] += x[i]\nend\n"),
        &mut ts,
    )?;
    ts["y"].validate("y").unwrap();
    Ok(ts["y"].to_dense())
}

#[test]
fn write_orders_are_what_the_levels_take() {
    for (spec, f) in vector_levels() {
        let writes = spec.caps.writes;
        // In increasing order, each coordinate once: every level that holds any data.
        if spec.caps.holds_any {
            let got = scatter(&f, 4, &[0, 2, 3], &[1.0, 2.0, 3.0]);
            assert_eq!(
                got.unwrap_or_else(|e| panic!("{f}: {e}")),
                Buffer::F64(vec![1.0, 0.0, 2.0, 3.0].into()),
                "{f}"
            );
        }
        let permuted = scatter(&f, 4, &[3, 0, 2], &[1.0, 2.0, 3.0]);
        match writes {
            Writes::InOrder => assert!(permuted.is_err(), "{f} takes writes out of order"),
            _ => assert_eq!(
                permuted.unwrap_or_else(|e| panic!("{f}: {e}")),
                Buffer::F64(vec![2.0, 0.0, 3.0, 1.0].into()),
                "{f}"
            ),
        }
        let repeated = scatter(&f, 4, &[3, 0, 3, 2], &[1.0, 2.0, 3.0, 4.0]);
        match writes {
            Writes::Random => assert_eq!(
                repeated.unwrap_or_else(|e| panic!("{f}: {e}")),
                Buffer::F64(vec![2.0, 0.0, 4.0, 4.0].into()),
                "{f}"
            ),
            _ => assert!(
                repeated.is_err(),
                "{f} takes a coordinate twice, out of order"
            ),
        }
    }
}

#[test]
fn reopening_after_a_read_is_what_the_levels_do() {
    // One stored coordinate, which every level can hold.
    let data = [0.0, 0.0, 4.0, 0.0, 0.0];
    let z = vector(&fmt("SparseList(Element(0.0))"), &data).unwrap();
    let text = parse("for i = _\n  y[i] += z[i]\nend\n");
    for (spec, f) in vector_levels() {
        // Adding to an all-fill `y`, and (for levels that hold any data, so that a second
        // write to a fiber is no conflict) to one holding `z`'s entry.
        let mut starts = vec![(vec![0.0; 5], vec![0.0, 0.0, 4.0, 0.0, 0.0])];
        if spec.caps.holds_any {
            starts.push((data.to_vec(), vec![0.0, 0.0, 8.0, 0.0, 0.0]));
        }
        for (start, want) in starts {
            let y = vector(&f, &start).unwrap();
            let mut ts = tensors(vec![("y", y), ("z", z.clone())]);
            let r = run_jit(&text, &mut ts);
            let refilled = start.iter().any(|&v| v != 0.0);
            if spec.caps.reopen && refilled && spec.caps.writes != Writes::Random {
                // Reopened levels that do not take repeated writes keep their stored entries
                // and add new ones: writing a stored coordinate again is refused, by order
                // (append-only levels) or as a second write (SparseCOO).
                let e = r.expect_err(&f.to_string());
                let Error::Kernel(k) = &e else {
                    panic!("{f}: expected a kernel error, got {e}");
                };
                assert!(
                    matches!(
                        (spec.caps.writes, &k.kind),
                        (Writes::InOrder, KernelErrorKind::OutOfOrder { .. })
                            | (Writes::AnyOrderOnce, KernelErrorKind::Duplicate { .. })
                    ),
                    "{f}: {e}"
                );
            } else if spec.caps.reopen {
                r.unwrap_or_else(|e| panic!("{f}: {e}"));
                ts["y"].validate("y").unwrap();
                assert_eq!(ts["y"].to_dense(), Buffer::F64(want.into()), "{f}");
            } else {
                let e = r.expect_err(&f.to_string());
                assert!(matches!(e, Error::Lifecycle { .. }), "{f}: {e}");
                assert!(e.to_string().contains("cannot be reopened"), "{f}: {e}");
            }
        }
    }
    // 0-d formats (a leaf on its own) take writes again after a read.
    let text = parse("for i = _\n  s[] += z[i]\nend\n");
    for spec in LEVELS.iter().filter(|s| s.params.contains(&Param::Fill)) {
        assert!(spec.caps.reopen, "{}", spec.name);
        let f = Format::new(vec![(spec.make)(&Args::default())]).unwrap();
        let mut ts = tensors(vec![
            ("s", Tensor::empty(&f, &[]).unwrap()),
            ("z", z.clone()),
        ]);
        run_jit(&text, &mut ts).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(ts["s"].get(&[]).unwrap(), Scalar::F64(4.0), "{f}");
    }
}

#[test]
fn what_levels_hold_is_what_the_registry_says() {
    let one = [0.0, 0.0, 5.0, 0.0, 0.0, 0.0];
    let several = [0.0, 1.0, 0.0, 2.0, 3.0, 0.0];
    for (spec, f) in vector_levels() {
        let t = vector(&f, &one).unwrap_or_else(|e| panic!("{f}: {e}"));
        // Entries the structure holds (not `countstored`, which follows Finch in counting
        // every slot of a touched SparseByteMap fiber).
        let mut entries = 0;
        t.for_each_stored(&mut |_, _| entries += 1);
        assert_eq!(
            entries == 1,
            spec.caps.sparse,
            "{f} stores {entries} entries for one nonzero"
        );
        let t = vector(&f, &several);
        assert_eq!(t.is_ok(), spec.caps.holds_any, "{f}");
        if let Ok(t) = t {
            assert_eq!(t.to_dense(), Buffer::F64(several.to_vec().into()), "{f}");
        }
    }
}

/// The generated code, printed.
fn code(text: &str, ts: &BTreeMap<String, Tensor>) -> String {
    let (k, _, _) = Runner::lower(&parse(text), &formats_of(ts)).unwrap_or_else(|e| panic!("{e}"));
    k.to_string()
}

#[test]
fn protocols_a_level_honours_change_its_code() {
    let data = [0.0, 1.0, 0.0, 0.0, 3.0, 0.0];
    let x = vector(&fmt("SparseList(Element(0.0))"), &data).unwrap();
    let s = Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap();
    let read = |y: &str| format!("s .= 0\nfor i = _\n  s[] += x[i] * {y}\nend\n");
    for (spec, f) in vector_levels() {
        // One entry for levels that hold only one per fiber.
        let held = match spec.caps.holds_any {
            true => data,
            false => [0.0, 0.0, 0.0, 0.0, 3.0, 0.0],
        };
        let y = vector(&f, &held).unwrap();
        let ts = tensors(vec![("x", x.clone()), ("y", y), ("s", s.clone())]);
        let walk = code(&read("y[i]"), &ts);
        for p in [
            Protocol::Walk,
            Protocol::Gallop,
            Protocol::Follow,
            Protocol::Extrude,
        ] {
            let text = read(&format!("y[{}(i)]", p.name()));
            assert_eq!(
                code(&text, &ts) != walk,
                spec.honours(p),
                "{f} under {}",
                p.name()
            );
            agree(&text, ts.clone());
        }
    }
}

#[test]
fn run_merging_is_what_the_registry_says() {
    let x = vector(&fmt("Dense(Element(0.0))"), &[1.0, 1.0, 2.0, 2.0, 2.0, 0.0]).unwrap();
    let text = "y .= 0\nfor i = _\n  y[i] = x[i]\nend\n";
    for spec in LEVELS.iter().filter(|s| s.role == Role::Level) {
        let has_flag = spec.flags().any(|(k, _)| k == "merge");
        assert_eq!(has_flag, spec.caps.merges_runs, "{}", spec.name);
        if !has_flag {
            continue;
        }
        let stored = |merge: bool| {
            let kind = (spec.make)(&Args {
                flags: vec![("merge", merge)],
                ..Args::default()
            });
            assert_eq!(kind.merges(), merge, "{kind:?}");
            let f = Format::new(vec![kind, LevelKind::Element(Scalar::F64(0.0))]).unwrap();
            let ts = tensors(vec![
                ("x", x.clone()),
                ("y", Tensor::empty(&f, &[6]).unwrap()),
            ]);
            agree(text, ts)["y"].countstored()
        };
        assert!(stored(true) < stored(false), "{} merges runs", spec.name);
    }
}

#[test]
fn short_circuits_are_what_the_registry_says() {
    let text = "p .= 1\nfor i = _\n  p[] *= A[i]\nend\n";
    let a = vector(&fmt("Dense(Element(0.0))"), &[2.0, 0.0, 3.0]).unwrap();
    for spec in LEVELS.iter().filter(|s| s.role != Role::Level) {
        if !spec.params.contains(&Param::Fill) {
            continue;
        }
        let kind = (spec.make)(&Args {
            fill: Scalar::F64(1.0),
            ..Args::default()
        });
        let f = Format::new(vec![kind]).unwrap();
        let ts = tensors(vec![
            ("p", Tensor::empty(&f, &[]).unwrap()),
            ("A", a.clone()),
        ]);
        assert_eq!(
            code(text, &ts).contains("break"),
            spec.caps.short_circuit,
            "{f}"
        );
        agree(text, ts);
    }
}

/// README.md's format table agrees with the registry: every level has a row, a level takes
/// writes in any order where the table says so, and a read protocol is named (not "walk")
/// where the level honours it.
#[test]
fn readme_format_table_matches_the_registry() {
    let readme = include_str!("../README.md");
    let start = readme
        .find("| level | stores | writes | reads: `gallop` / `follow` |")
        .expect("README.md has the format table");
    let rows: Vec<Vec<&str>> = readme[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    for row in &rows {
        for name in row[0].split('`').skip(1).step_by(2) {
            let bare = name.split(['(', '{']).next().unwrap_or(name);
            assert!(
                LEVELS.iter().any(|s| s.name == bare),
                "README names `{name}`, which is not registered"
            );
        }
    }
    for spec in LEVELS {
        let row = rows
            .iter()
            .find(|r| r[0].contains(&format!("`{}", spec.syntax())))
            .unwrap_or_else(|| panic!("README's format table has no row for {}", spec.name));
        if spec.role != Role::Level {
            continue;
        }
        let writes = row[2];
        let any_order = writes.starts_with("any order");
        let once = writes.contains("written twice is an error");
        let want = match (any_order, once) {
            (false, _) => Writes::InOrder,
            (true, true) => Writes::AnyOrderOnce,
            (true, false) => Writes::Random,
        };
        assert_eq!(
            spec.caps.writes, want,
            "{}: README says `{writes}`",
            spec.name
        );
        let (gallop, follow) = row[3].split_once(" / ").unwrap_or((row[3], row[3]));
        for (p, text) in [(Protocol::Gallop, gallop), (Protocol::Follow, follow)] {
            assert_eq!(
                !text.contains("walk"),
                spec.honours(p),
                "{}: README says `{text}` for {}",
                spec.name,
                p.name()
            );
        }
    }
}

/// Every format the registry builds at ranks 1 and 2 (over data it can hold) reads, is
/// written in order, and reduces as the reference evaluator says.
#[test]
fn every_registry_format_agrees_with_the_evaluator() {
    let mut rng = StdRng::seed_from_u64(12);
    let dense = |shape: &[usize]| Format::dense(shape.len(), Scalar::F64(0.0));
    let programs: [(&str, &[usize]); 2] = [
        (
            "C .= 0\nfor i = _, j = _\n  C[i, j] = A[i, j]\nend\ns .= 0\nfor i = _, j = _\n  s[] += A[i, j] * B[i, j]\nend\ny .= 0\nfor i = _, j = _\n  y[i] += A[i, j]\nend\n",
            &[4, 5],
        ),
        (
            "C .= 0\nfor i = _\n  C[i] = A[i]\nend\ns .= 0\nfor i = _\n  s[] += A[i] * B[i]\nend\n",
            &[6],
        ),
    ];
    let mut checked = 0;
    for (text, shape) in programs {
        let formats = covering(registry_formats(shape.len()));
        let kinds: usize = LEVELS
            .iter()
            .filter(|s| s.role == Role::Level && s.caps.holds_any)
            .map(|s| s.variants(shape.len(), &[]).len())
            .sum();
        assert!(formats.len() >= kinds, "{} formats", formats.len());
        for f in formats {
            let a = random_tensor(&mut rng, &f, shape);
            let b = random_tensor(&mut rng, &dense(shape), shape);
            let mut ts = tensors(vec![
                ("A", a),
                ("B", b),
                ("C", Tensor::empty(&dense(shape), shape).unwrap()),
                ("D", Tensor::empty(&f, shape).unwrap()),
                ("s", Tensor::empty(&fmt("Element(0.0)"), &[]).unwrap()),
            ]);
            if shape.len() == 2 {
                ts.insert(
                    "y".into(),
                    Tensor::empty(&dense(&shape[..1]), &shape[..1]).unwrap(),
                );
            }
            // Copy A into its own format too, in order. A Pattern leaf records a write as the
            // presence its sparse ancestors keep, so under levels that store every
            // coordinate it cannot be written.
            let mut written = format!("{text}D .= 0\n{}", copy(shape.len()));
            if let Err(e) = Runner::lower(&parse(&written), &formats_of(&ts)) {
                assert!(matches!(e, Error::Unsupported { .. }), "{f}: {e}");
                assert_eq!(*f.leaf(), LevelKind::Pattern, "{f}: {e}");
                assert!(!f.levels.iter().any(|l| l.is_sparse()), "{f}: {e}");
                written = text.to_string();
            }
            let got = agree(&written, ts);
            if written != text {
                assert_eq!(got["D"].to_dense(), got["A"].to_dense(), "{f}");
            }
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked} formats");
}

/// The formats, in order, that put some level kind at a depth, or some level kind right above
/// some leaf, where no earlier one did: every registered level in every place, in a few
/// dozen kernels rather than hundreds.
fn covering(formats: Vec<&str>) -> Vec<Format> {
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    for f in formats {
        let f = fmt(f);
        let n = f.levels.len();
        let mut keys: Vec<(usize, LevelKind, Option<LevelKind>)> = f.levels[..n - 1]
            .iter()
            .enumerate()
            .map(|(d, k)| (d, k.clone(), None))
            .collect();
        keys.push((n, f.levels[n - 2].clone(), Some(f.leaf().clone())));
        let mut new = false;
        for k in keys {
            new |= seen.insert(k);
        }
        if new {
            out.push(f);
        }
    }
    out
}

fn copy(rank: usize) -> String {
    match rank {
        1 => "for i = _\n  D[i] = A[i]\nend\n".into(),
        _ => "for i = _, j = _\n  D[i, j] = A[i, j]\nend\n".into(),
    }
}
