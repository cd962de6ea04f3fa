//! `tessera probe` (issue 15): fields reconstructed from .npy, PNG and NRRD images, probed at
//! the points of a .npy, checked against the whole-image convolution sum.

mod common;

use common::cli::{Dir, ok, tessera};
use std::io::Write;
use tessera::fields::kernel::Kernel;
use tessera::fields::probe::naive;
use tessera::io::DenseData;
use tessera::runtime::Buffer;

fn write_npy(path: &str, shape: Vec<usize>, values: Buffer) {
    let d = DenseData { shape, values };
    let mut bytes = vec![];
    tessera::io::npy::write_npy(&mut bytes, &d).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn read_npy(path: &str) -> DenseData {
    tessera::io::npy::read_npy(std::fs::File::open(path).unwrap(), path).unwrap()
}

fn f64s(d: &DenseData) -> &[f64] {
    match &d.values {
        Buffer::F64(v) => v,
        other => panic!("expected f64, got {}", other.elem()),
    }
}

#[test]
fn probe_values_gradients_and_hessians_of_an_npy_volume() {
    let dir = Dir::new("probe-cli");
    let shape = vec![6, 7, 8];
    let values: Vec<f64> = (0..6 * 7 * 8)
        .map(|k| ((k * 37 % 101) as f64 / 50.0) - 1.0)
        .collect();
    let img = dir.path("vol.npy");
    write_npy(&img, shape.clone(), Buffer::F64(values.clone().into()));
    let pts = [
        [2.5, 3.25, 4.75],
        [1.0, 2.0, 3.0],
        [0.2, 3.0, 3.0],
        [3.9, 3.1, 4.5],
    ];
    let at = dir.path("pts.npy");
    write_npy(
        &at,
        vec![4, 3],
        Buffer::F64(pts.iter().flatten().copied().collect()),
    );
    let out = dir.path("out.npy");
    for (deriv, per) in [(0u32, 1usize), (1, 3), (2, 9)] {
        let text = ok(&[
            "probe",
            &img,
            "--kernel",
            "bspln3",
            "--at",
            &at,
            "--deriv",
            &deriv.to_string(),
            "--out",
            &out,
        ]);
        // (0.2, ...) needs index -1 on the first axis: outside, NaN.
        assert_eq!(text, "points = 4\noutside = 1\n");
        let d = read_npy(&out);
        let want_shape: Vec<usize> = [vec![4], vec![3; deriv as usize]].concat();
        assert_eq!(d.shape, want_shape);
        let got = f64s(&d);
        let k = Kernel::named("bspln3").unwrap();
        for (p, x) in pts.iter().enumerate() {
            for e in 0..per {
                let v = got[p * per + e];
                if p == 2 {
                    assert!(v.is_nan());
                    continue;
                }
                let mut orders = vec![0u32; 3];
                if deriv >= 1 {
                    orders[e % 3] += 1;
                }
                if deriv == 2 {
                    orders[e / 3] += 1;
                }
                let want = naive(&k, &shape, &values, x, &orders);
                assert!(
                    (v - want).abs() < 1e-12,
                    "deriv {deriv} point {p} entry {e}: {v} vs {want}"
                );
            }
        }
    }
    // The C backend gives the same values.
    let c_out = dir.path("c.npy");
    let o = tessera(&[
        "probe",
        &img,
        "--kernel",
        "ctmr",
        "--at",
        &at,
        "--out",
        &c_out,
        "--backend",
        "c",
    ]);
    if o.status.success() {
        ok(&[
            "probe", &img, "--kernel", "ctmr", "--at", &at, "--out", &out,
        ]);
        let (a, b) = (read_npy(&out), read_npy(&c_out));
        for (x, y) in f64s(&a).iter().zip(f64s(&b)) {
            assert!(x == y || (x.is_nan() && y.is_nan()));
        }
    }
}

#[test]
fn probe_an_oriented_nrrd_in_world_space() {
    let dir = Dir::new("probe-nrrd");
    // A linear image v = 3 i + j (i rows, NRRD's slow axis) with spacing 2 along i and 0.5
    // along j, origin (20, 10): world gradient (1 / 0.5, 3 / 2).
    let (rows, cols) = (5usize, 6usize);
    let mut bytes = format!(
        "NRRD0004\ntype: double\ndimension: 2\nsizes: {cols} {rows}\nendian: little\nencoding: raw\nspace dimension: 2\nspace directions: (0.5,0) (0,2)\nspace origin: (20,10)\n\n"
    )
    .into_bytes();
    for i in 0..rows {
        for j in 0..cols {
            bytes.extend((3.0 * i as f64 + j as f64).to_le_bytes());
        }
    }
    let img = dir.path("lin.nrrd");
    std::fs::File::create(&img)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    // World (x, y) = (20 + 0.5 j, 10 + 2 i): Tessera's index axes are NRRD's reversed (i
    // first), world components keep their order.
    let at = dir.path("pts.npy");
    write_npy(
        &at,
        vec![1, 2],
        Buffer::F64(vec![20.0 + 0.5 * 2.25, 10.0 + 2.0 * 2.5].into()),
    );
    let out = dir.path("g.npy");
    ok(&[
        "probe", &img, "--kernel", "ctmr", "--at", &at, "--deriv", "1", "--out", &out,
    ]);
    let g = read_npy(&out);
    let g = f64s(&g);
    assert!(
        (g[0] - 2.0).abs() < 1e-12 && (g[1] - 1.5).abs() < 1e-12,
        "{g:?}"
    );
    ok(&[
        "probe", &img, "--kernel", "tent", "--at", &at, "--out", &out,
    ]);
    let v = read_npy(&out);
    assert!((f64s(&v)[0] - (3.0 * 2.5 + 2.25)).abs() < 1e-12);
}

#[test]
fn probe_refuses_bad_requests_with_typed_messages() {
    let dir = Dir::new("probe-bad");
    let img = dir.path("img.npy");
    write_npy(&img, vec![4, 4], Buffer::U8((0..16).collect()));
    let at = dir.path("pts.npy");
    write_npy(&at, vec![1, 2], Buffer::F64(vec![1.5, 1.5].into()));
    let out = dir.path("out.npy");
    let fails = |args: &[&str], needle: &str| {
        let o = tessera(args);
        assert!(!o.status.success(), "{args:?} should fail");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(needle), "{args:?}: {e}");
    };
    fails(
        &[
            "probe", &img, "--kernel", "tent", "--at", &at, "--deriv", "1", "--out", &out,
        ],
        "C0",
    );
    fails(
        &[
            "probe", &img, "--kernel", "lanczos", "--at", &at, "--out", &out,
        ],
        "unknown kernel",
    );
    let bad = dir.path("bad.npy");
    write_npy(&bad, vec![1, 3], Buffer::F64(vec![1.0, 1.0, 1.0].into()));
    fails(
        &[
            "probe", &img, "--kernel", "tent", "--at", &bad, "--out", &out,
        ],
        "N x 2",
    );
    let nrrd = dir.file(
        "bad.nrrd",
        "NRRD0004\ntype: float\ndimension: 2\nsizes: 2\nencoding: raw\nendian: little\n\n",
    );
    fails(
        &[
            "probe", &nrrd, "--kernel", "tent", "--at", &at, "--out", &out,
        ],
        "bad.nrrd:4",
    );
    assert!(
        !std::path::Path::new(&out).exists(),
        "nothing is written on failure"
    );
    // A PNG image is probed as gray values, rows first.
    ok(&[
        "probe", &img, "--kernel", "tent", "--at", &at, "--out", &out,
    ]);
    let v = read_npy(&out);
    assert_eq!(f64s(&v), &[(5.0 + 6.0 + 9.0 + 10.0) / 4.0]);
}

#[test]
fn run_reads_a_gzip_nrrd_and_probes_its_fields_in_world_space_as_probe_does() {
    use flate2::Compression;
    use flate2::write::GzEncoder;
    let dir = Dir::new("run-nrrd");
    // A 2-d image, rotated, anisotropic and offset; samples in Tessera's row-major order.
    let (rows, cols) = (9usize, 8usize);
    let values: Vec<f64> = (0..rows * cols)
        .map(|k| ((k * 7919) % 101) as f64 / 50.0 - 1.0)
        .collect();
    let (c, s) = (0.8f64, 0.6f64);
    let header = format!(
        "NRRD0004\ntype: double\ndimension: 2\nsizes: {cols} {rows}\nendian: little\nencoding: gzip\nspace dimension: 2\nspace directions: ({:?},{:?}) ({:?},{:?})\nspace origin: (-4.5,7.25)\n\n",
        0.5 * c,
        0.5 * s,
        -1.5 * s,
        1.5 * c
    );
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    for v in &values {
        gz.write_all(&v.to_le_bytes()).unwrap();
    }
    let mut bytes = header.into_bytes();
    bytes.extend(gz.finish().unwrap());
    let img = dir.path("rot.nrrd");
    std::fs::write(&img, bytes).unwrap();
    // World points of index positions (i, j): NRRD's fast axis j has direction 0.5 (c, s),
    // the slow axis i 1.5 (-s, c).
    let idx = [(3.2, 2.7), (4.9, 3.1), (2.05, 4.6), (6.4, 1.3), (0.2, 0.1)];
    let world: Vec<(f64, f64)> = idx
        .iter()
        .map(|&(i, j)| {
            (
                -4.5 + 0.5 * c * j - 1.5 * s * i,
                7.25 + 0.5 * s * j + 1.5 * c * i,
            )
        })
        .collect();
    let n = world.len();
    let pts = dir.path("pts.npy");
    write_npy(
        &pts,
        vec![n, 2],
        Buffer::F64(world.iter().flat_map(|&(x, y)| [x, y]).collect()),
    );
    let px = dir.path("px.npy");
    let py = dir.path("py.npy");
    write_npy(
        &px,
        vec![n],
        Buffer::F64(world.iter().map(|p| p.0).collect()),
    );
    write_npy(
        &py,
        vec![n],
        Buffer::F64(world.iter().map(|p| p.1).collect()),
    );
    let program = "field F = img (*) bspln3\nfor i = _\n  v[i] = F(px[i], py[i])\n  for c = _\n    g[i, c] = grad(F, px[i], py[i])[c]\n  end\nend\n";
    let (v_run, g_run) = (dir.path("v_run.npy"), dir.path("g_run.npy"));
    let (v_probe, g_probe) = (dir.path("v_probe.npy"), dir.path("g_probe.npy"));
    let (img_in, px_in, py_in) = (format!("img={img}"), format!("px={px}"), format!("py={py}"));
    let (v_out, g_out) = (format!("v={v_run}"), format!("g={g_run}"));
    let g_shape = format!("g={n}x2");
    for backend in ["jit", "c", "eval"] {
        ok(&[
            "run",
            program,
            "--in",
            &img_in,
            "--in",
            &px_in,
            "--in",
            &py_in,
            "--out",
            &v_out,
            "--out",
            &g_out,
            "--shape",
            &g_shape,
            "--backend",
            backend,
        ]);
        ok(&[
            "probe", &img, "--kernel", "bspln3", "--at", &pts, "--out", &v_probe,
        ]);
        ok(&[
            "probe", &img, "--kernel", "bspln3", "--at", &pts, "--deriv", "1", "--out", &g_probe,
        ]);
        for (run, probe) in [(&v_run, &v_probe), (&g_run, &g_probe)] {
            let (a, b) = (read_npy(run), read_npy(probe));
            let (a, b) = (f64s(&a), f64s(&b));
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
                    "{backend}: {x} vs {y} ({run})"
                );
            }
        }
    }
    // The last point's window is outside: NaN, as `tessera probe` gives.
    assert!(f64s(&read_npy(&v_probe))[n - 1].is_nan());
    assert!(
        f64s(&read_npy(&v_probe))[..n - 1]
            .iter()
            .all(|v| v.is_finite())
    );
}
