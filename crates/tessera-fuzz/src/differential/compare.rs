//! When a compiled run and the evaluator agree.

use std::collections::BTreeMap;
use tessera::Error;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

/// Floats agree within this relative difference (summation orders differ between the
/// evaluator and kernels that skip fill values).
const TOLERANCE: f64 = 1e-9;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Both ran and every tensor holds the same values.
    Agree,
    /// Both failed (with whatever errors).
    BothFailed,
    /// The evaluator ran; the compiler refused with `Unsupported`.
    Refused,
}

/// Compare the evaluator's result with a compiled run's tensors; `Err` says how they differ.
pub fn compare(
    expected: &tessera::Result<BTreeMap<String, Buffer>>,
    got: tessera::Result<&BTreeMap<String, Tensor>>,
) -> Result<Verdict, String> {
    match (expected, got) {
        (Err(_), Err(_)) => Ok(Verdict::BothFailed),
        (Ok(_), Err(Error::Unsupported { .. })) => Ok(Verdict::Refused),
        (Ok(_), Err(e)) => Err(format!("the compiled run failed: {e}")),
        (Err(e), Ok(_)) => Err(format!(
            "the evaluator failed, the compiled run did not: {e}"
        )),
        (Ok(want), Ok(tensors)) => {
            for (n, t) in tensors {
                t.validate(n)
                    .map_err(|e| format!("the compiled run left invalid storage: {e}"))?;
                let Some(w) = want.get(n) else {
                    return Err(format!("the evaluator has no tensor `{n}`"));
                };
                let g = t.to_dense();
                if let Some(k) = first_difference(&g, w) {
                    return Err(format!(
                        "tensor `{n}` differs at entry {k}:\n  compiled  {:?}\n  evaluator {:?}",
                        g.to_scalars(),
                        w.to_scalars()
                    ));
                }
            }
            Ok(Verdict::Agree)
        }
    }
}

/// The first entry where two buffers of values differ (a length or type difference is one
/// at entry 0).
pub fn first_difference(a: &Buffer, b: &Buffer) -> Option<usize> {
    if a.len() != b.len() || a.elem() != b.elem() {
        return Some(0);
    }
    (0..a.len()).find(|&k| !close(a.get(k), b.get(k)))
}

fn close(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F64(x), Scalar::F64(y)) => close_f64(x, y),
        (Scalar::F32(x), Scalar::F32(y)) => close_f64(f64::from(x), f64::from(y)),
        _ => a == b,
    }
}

fn close_f64(x: f64, y: f64) -> bool {
    if x.is_nan() || y.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    if x.is_infinite() || y.is_infinite() {
        return x == y;
    }
    // 0.0 and -0.0 are equal.
    x == y || (x - y).abs() <= TOLERANCE * x.abs().max(y.abs()).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_agree_within_tolerance_and_nan_equals_nan() {
        let a = Buffer::F64(vec![1.0, f64::NAN, 0.0, f64::INFINITY, 1e12].into());
        let b = Buffer::F64(vec![1.0 + 1e-12, f64::NAN, -0.0, f64::INFINITY, 1e12 + 1.0].into());
        assert_eq!(first_difference(&a, &b), None);
        let c = Buffer::F64(vec![1.0, 1.0, 0.0, f64::INFINITY, 1e12].into());
        assert_eq!(first_difference(&a, &c), Some(1));
        let d = Buffer::F64(vec![1.0, f64::NAN, 0.0, f64::NEG_INFINITY, 1e12].into());
        assert_eq!(first_difference(&a, &d), Some(3));
    }

    #[test]
    fn types_and_lengths_must_match() {
        assert_eq!(
            first_difference(&Buffer::I64(vec![1].into()), &Buffer::F64(vec![1.0].into())),
            Some(0)
        );
        assert_eq!(
            first_difference(
                &Buffer::I64(vec![1].into()),
                &Buffer::I64(vec![1, 2].into())
            ),
            Some(0)
        );
        assert_eq!(
            first_difference(
                &Buffer::I64(vec![1, 2].into()),
                &Buffer::I64(vec![1, 3].into())
            ),
            Some(1)
        );
    }

    #[test]
    fn errors_on_both_sides_agree_but_one_sided_ones_do_not() {
        let ok: tessera::Result<BTreeMap<String, Buffer>> = Ok(BTreeMap::new());
        let err: tessera::Result<BTreeMap<String, Buffer>> = Err(Error::Usage("x".into()));
        let none = BTreeMap::new();
        assert_eq!(
            compare(&err, Err(Error::Usage("y".into()))),
            Ok(Verdict::BothFailed)
        );
        assert!(compare(&err, Ok(&none)).is_err());
        assert!(
            compare(
                &ok,
                Err(Error::Kernel(Box::new(tessera::KernelError::new(
                    "k",
                    tessera::KernelErrorKind::Duplicate { level: "SparseCOO" }
                ))))
            )
            .is_err()
        );
        assert_eq!(
            compare(
                &ok,
                Err(Error::Unsupported {
                    span: Default::default(),
                    msg: "u".into()
                })
            ),
            Ok(Verdict::Refused)
        );
    }
}
