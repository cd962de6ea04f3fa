//! Continuous programs compiled and in the piecewise evaluator, compared piece by piece.

use super::runners;
use std::collections::BTreeMap;
use tessera::eval::continuous::{self, PieceTensor};
use tessera::levels::Format;
use tessera::notation::parse::parse_program;
use tessera::tensor::Tensor;

/// Run `program` (output `o`, of `out_format`) compiled on every backend and in the
/// evaluator; every backend's output must match the evaluator's. Returns the evaluator's.
pub fn compare_pieces(
    program: &str,
    inputs: &[(&str, &Tensor)],
    out_format: &str,
    out_shape: &[usize],
) -> PieceTensor {
    let p = parse_program(program).unwrap();
    let out = Tensor::empty(&Format::parse(out_format, None).unwrap(), out_shape).unwrap();
    let mut env: BTreeMap<String, PieceTensor> = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_piece_tensor()))
        .collect();
    env.insert("o".to_string(), out.to_piece_tensor());
    continuous::run(&p, &mut env).unwrap_or_else(|e| panic!("evaluator: {e}\n{program}"));
    let want = env["o"].canonical();
    for (name, r) in runners() {
        let mut ts: BTreeMap<String, Tensor> = inputs
            .iter()
            .map(|(n, t)| (n.to_string(), (*t).clone()))
            .collect();
        ts.insert("o".to_string(), out.clone());
        let formats = ts
            .iter()
            .map(|(n, t)| (n.clone(), t.format.clone()))
            .collect();
        let c = r
            .compile(&p, &formats)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        r.execute(&c, &mut ts)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{program}"));
        let got = ts["o"].to_piece_tensor().canonical();
        let close = got.pieces.len() == want.pieces.len()
            && got
                .pieces
                .iter()
                .zip(&want.pieces)
                .all(|((c1, v1), (c2, v2))| {
                    let (a, b) = (v1.as_f64(), v2.as_f64());
                    c1 == c2
                        && (a == b
                            || (a.is_nan() && b.is_nan())
                            || (a - b).abs() <= 1e-9 * b.abs().max(1.0))
                });
        assert!(
            close,
            "{name} disagrees on\n{program}\ngot  {got:?}\nwant {want:?}"
        );
    }
    want
}
