//! Reconstruction kernels as piecewise polynomials (issue 15, Diderot's `tent`, `ctmr`,
//! `bspln3`, `bspln5`, `c4hexic`).
//!
//! A kernel `h` of support `s` is zero outside `[-s, s]` and a polynomial on each unit interval
//! `[m, m + 1)`, `m = -s .. s - 1`. Piece `j` covers `[-s + j, -s + j + 1)` and stores its
//! coefficients in the *local* variable `u = t - (-s + j)` in `[0, 1)`, lowest degree first.
//! That choice is what makes a probe cheap: at image position `x = n + f` the weight of tap
//! `n + i` is `h(f - i)`, and `f - i` lies in piece `j = s - i` with local variable exactly
//! `u = f`, so every tap's weight is a fixed polynomial in `f` (evaluated by Horner's rule).
//!
//! The derivative of a piecewise polynomial is one, so derivatives of any order are exact.
//! `continuity` is the order `k` of the class `Cᵏ`: derivatives up to `k` are continuous
//! everywhere (knots included); a field built with the kernel may be differentiated `k` times,
//! and asking for more where continuity matters is [`Error::Continuity`].

use crate::error::{Error, Result};

/// A piecewise-polynomial reconstruction kernel (or one of its derivatives).
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// The name a program or the command line calls it by (`bspln3`, or `bspln3'` for a
    /// derivative).
    pub name: String,
    /// Half-width: the kernel vanishes outside `[-support, support]`; a probe reads
    /// `2 * support` samples per axis.
    pub support: usize,
    /// `k` of the class `Cᵏ` (derivatives up to `k` continuous); `None` for a derivative
    /// taken past the kernel's continuity (it may jump at knots).
    pub continuity: Option<u32>,
    /// Highest degree of the polynomials the kernel reproduces exactly:
    /// `Σ_k q(k) h(x - k) = q(x)` for every polynomial `q` of at most this degree.
    pub reproduces: u32,
    /// Whether `h(0) = 1` and `h(k) = 0` at the other integers (samples are reproduced).
    pub interpolates: bool,
    /// `pieces[j]`: coefficients in `u = t + support - j`, lowest degree first.
    pub pieces: Vec<Vec<f64>>,
    /// How many times the original kernel was differentiated.
    pub order: u32,
}

/// The names of the kernels [`Kernel::named`] knows.
pub const NAMES: [&str; 5] = ["tent", "ctmr", "bspln3", "bspln5", "c4hexic"];

/// `p(a + sign·u)` as a polynomial in `u` (coefficients lowest first).
fn shift(p: &[f64], a: f64, sign: f64) -> Vec<f64> {
    // Horner over polynomials: r = r·(a + sign·u) + c.
    let mut r: Vec<f64> = vec![];
    for &c in p.iter().rev() {
        let mut next = vec![0.0; r.len() + 1];
        for (k, &rk) in r.iter().enumerate() {
            next[k] += rk * a;
            next[k + 1] += rk * sign;
        }
        next[0] += c;
        r = next;
    }
    r
}

/// The pieces of a symmetric kernel given by its polynomials in `|t|` on `[0,1), [1,2), ...`.
fn symmetric(abs_pieces: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let s = abs_pieces.len();
    (0..2 * s)
        .map(|j| {
            let m = j as i64 - s as i64;
            if m >= 0 {
                // t = m + u ≥ 0: h(t) = p_m(m + u).
                shift(&abs_pieces[m as usize], m as f64, 1.0)
            } else {
                // t = m + u < 0: h(t) = p_{-m-1}(-m - u).
                shift(&abs_pieces[(-m - 1) as usize], -m as f64, -1.0)
            }
        })
        .collect()
}

fn binomial(n: u32, k: u32) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * f64::from(n - i) / f64::from(i + 1))
}

/// The centred uniform B-spline of odd degree `n` (support `(n + 1) / 2`), from its
/// truncated-power form `(1/n!) Σ_k (-1)^k C(n+1, k) (t + (n+1)/2 - k)₊ⁿ`.
fn bspline(n: u32) -> Vec<Vec<f64>> {
    let s = (n as usize).div_ceil(2);
    let fact: f64 = (1..=n).map(f64::from).product();
    (0..2 * s)
        .map(|j| {
            let m = j as i64 - s as i64;
            let mut piece = vec![0.0; n as usize + 1];
            // On [m, m + 1) the terms with t + s - k > 0 are those with k <= m + s.
            for k in 0..=(m + s as i64).min(i64::from(n) + 1) {
                let c = if k % 2 == 0 { 1.0 } else { -1.0 } * binomial(n + 1, k as u32) / fact;
                // (t + s - k)^n with t = m + u: (u + (m + s - k))^n.
                let mut mono = vec![0.0; n as usize + 1];
                mono[n as usize] = 1.0;
                for (d, v) in shift(&mono, (m + s as i64 - k) as f64, 1.0)
                    .into_iter()
                    .enumerate()
                {
                    piece[d] += c * v;
                }
            }
            piece
        })
        .collect()
}

impl Kernel {
    /// The kernel called `name`.
    pub fn named(name: &str) -> Result<Kernel> {
        let k = |support, continuity, reproduces, interpolates, pieces| Kernel {
            name: name.to_string(),
            support,
            continuity: Some(continuity),
            reproduces,
            interpolates,
            pieces,
            order: 0,
        };
        Ok(match name {
            // 1 - |t|.
            "tent" => k(1, 0, 1, true, symmetric(&[vec![1.0, -1.0]])),
            // Catmull-Rom (the cubic cardinal spline with a = -1/2).
            "ctmr" => k(
                2,
                1,
                2,
                true,
                symmetric(&[vec![1.0, 0.0, -2.5, 1.5], vec![2.0, -4.0, 2.5, -0.5]]),
            ),
            "bspln3" => k(2, 2, 1, false, bspline(3)),
            "bspln5" => k(3, 4, 1, false, bspline(5)),
            // The C⁴ hexic of Teem and Diderot: support 3, not interpolating, exact on cubics.
            "c4hexic" => k(
                3,
                4,
                3,
                false,
                symmetric(&[
                    vec![
                        69.0 / 80.0,
                        0.0,
                        -23.0 / 16.0,
                        0.0,
                        19.0 / 16.0,
                        -7.0 / 12.0,
                        1.0 / 16.0,
                    ],
                    vec![
                        3.0 / 160.0,
                        35.0 / 8.0,
                        -341.0 / 32.0,
                        10.0,
                        -147.0 / 32.0,
                        25.0 / 24.0,
                        -3.0 / 32.0,
                    ],
                    vec![
                        1539.0 / 160.0,
                        -189.0 / 8.0,
                        747.0 / 32.0,
                        -12.0,
                        109.0 / 32.0,
                        -61.0 / 120.0,
                        1.0 / 32.0,
                    ],
                ]),
            ),
            _ => {
                return Err(Error::Usage(format!(
                    "unknown kernel `{name}` (one of {})",
                    NAMES.join(", ")
                )));
            }
        })
    }

    /// The `k`-th derivative, exact (a piecewise polynomial again), whatever the continuity.
    pub fn derivative(&self, k: u32) -> Kernel {
        let mut pieces = self.pieces.clone();
        for _ in 0..k {
            for p in &mut pieces {
                *p = p
                    .iter()
                    .enumerate()
                    .skip(1)
                    .map(|(d, c)| d as f64 * c)
                    .collect();
                if p.is_empty() {
                    p.push(0.0);
                }
            }
        }
        Kernel {
            name: format!("{}{}", self.name, "'".repeat(k as usize)),
            support: self.support,
            continuity: self.continuity.and_then(|c| c.checked_sub(k)),
            reproduces: self.reproduces.saturating_sub(k),
            interpolates: self.interpolates && k == 0,
            pieces,
            order: self.order + k,
        }
    }

    /// [`Kernel::derivative`] where a field's derivative of order `k` is asked for: the
    /// kernel must be at least `Cᵏ` (`∇` of a `C⁰` field is an error, as in Diderot).
    pub fn checked_derivative(&self, k: u32) -> Result<Kernel> {
        match self.continuity {
            Some(c) if k <= c => Ok(self.derivative(k)),
            c => Err(Error::Continuity {
                kernel: self.name.clone(),
                continuity: c,
                order: k,
                place: None,
            }),
        }
    }

    /// `h(t)`: zero outside the support.
    pub fn eval(&self, t: f64) -> f64 {
        let s = self.support as f64;
        if !(t >= -s && t < s) {
            return 0.0;
        }
        let m = t.floor();
        let j = (m + s) as usize;
        horner(&self.pieces[j], t - m)
    }

    /// The polynomial (in `f = x - ⌊x⌋`) giving the weight of tap `n + i`, `i` in
    /// `1 - support ..= support`.
    pub fn tap(&self, i: i64) -> &[f64] {
        &self.pieces[(self.support as i64 - i) as usize]
    }
}

/// `p(u)` by Horner's rule.
pub fn horner(p: &[f64], u: f64) -> f64 {
    p.iter().rev().fold(0.0, |acc, &c| acc * u + c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Kernel> {
        NAMES.iter().map(|n| Kernel::named(n).unwrap()).collect()
    }

    #[test]
    fn known_values() {
        let b3 = Kernel::named("bspln3").unwrap();
        assert!((b3.eval(0.0) - 2.0 / 3.0).abs() < 1e-15);
        assert!((b3.eval(1.0) - 1.0 / 6.0).abs() < 1e-15);
        assert!((b3.eval(-1.0) - 1.0 / 6.0).abs() < 1e-15);
        assert!((b3.eval(0.5) - 23.0 / 48.0).abs() < 1e-15);
        let b5 = Kernel::named("bspln5").unwrap();
        assert!((b5.eval(0.0) - 66.0 / 120.0).abs() < 1e-15);
        assert!((b5.eval(1.0) - 26.0 / 120.0).abs() < 1e-15);
        assert!((b5.eval(2.0) - 1.0 / 120.0).abs() < 1e-14);
        let c4 = Kernel::named("c4hexic").unwrap();
        assert!((c4.eval(0.0) - 69.0 / 80.0).abs() < 1e-15);
        let ct = Kernel::named("ctmr").unwrap();
        assert!((ct.eval(0.5) - 0.5625).abs() < 1e-15);
        assert!((ct.eval(1.5) + 0.0625).abs() < 1e-15);
        assert_eq!(Kernel::named("tent").unwrap().eval(-0.25), 0.75);
        assert!(matches!(Kernel::named("box"), Err(Error::Usage(_))));
    }

    #[test]
    fn partition_of_unity_and_interpolation() {
        for k in all() {
            for step in 0..=64 {
                let f = f64::from(step) / 64.0;
                let sum: f64 = (1 - k.support as i64..=k.support as i64)
                    .map(|i| k.eval(f - i as f64))
                    .sum();
                assert!((sum - 1.0).abs() < 1e-13, "{} at {f}: {sum}", k.name);
                // Each derivative of a partition of unity sums to zero.
                for d in 1..=k.continuity.unwrap() {
                    let dk = k.derivative(d);
                    let s: f64 = (1 - k.support as i64..=k.support as i64)
                        .map(|i| dk.eval(f - i as f64))
                        .sum();
                    assert!(s.abs() < 1e-11, "{} order {d} at {f}: {s}", k.name);
                }
            }
            if k.interpolates {
                for i in -(k.support as i64)..=k.support as i64 {
                    let want = if i == 0 { 1.0 } else { 0.0 };
                    assert!((k.eval(i as f64) - want).abs() < 1e-15, "{} at {i}", k.name);
                }
            }
        }
    }

    #[test]
    fn polynomial_reproduction_to_each_order() {
        for k in all() {
            let s = k.support as i64;
            // Σ_k q(k) h(x - k) over the taps around x, for q(t) = t^deg.
            let recon = |deg: i32, x: f64| -> f64 {
                let n = x.floor() as i64;
                (n + 1 - s..=n + s)
                    .map(|t| (t as f64).powi(deg) * k.eval(x - t as f64))
                    .sum()
            };
            for deg in 0..=k.reproduces as i32 {
                for x in [0.0, 0.3, 1.75, -2.4, 5.5] {
                    let got = recon(deg, x);
                    assert!(
                        (got - x.powi(deg)).abs() < 1e-11,
                        "{} degree {deg} at {x}: {got}",
                        k.name
                    );
                }
            }
            // One degree more is not reproduced (the stated order is the exact one).
            let deg = k.reproduces as i32 + 1;
            let miss = [0.3, 1.75, 0.5]
                .iter()
                .any(|&x| (recon(deg, x) - f64::powi(x, deg)).abs() > 1e-6);
            assert!(miss, "{} reproduces degree {deg} too", k.name);
        }
    }

    #[test]
    fn derivatives_are_continuous_at_the_knots_up_to_the_class() {
        for k in all() {
            let c = k.continuity.unwrap();
            for d in 0..=c {
                let dk = k.derivative(d);
                let s = k.support as i64;
                for knot in -s..=s {
                    let t = knot as f64;
                    // The left limit is the previous piece at u = 1, the right one this piece at 0.
                    let left = if knot > -s {
                        horner(&dk.pieces[(knot + s - 1) as usize], 1.0)
                    } else {
                        0.0
                    };
                    let right = if knot < s {
                        horner(&dk.pieces[(knot + s) as usize], 0.0)
                    } else {
                        0.0
                    };
                    assert!(
                        (left - right).abs() < 1e-12,
                        "{} order {d} jumps at {t}: {left} vs {right}",
                        k.name
                    );
                }
            }
            // One order more jumps somewhere (the class is exact).
            let dk = k.derivative(c + 1);
            let s = k.support as i64;
            let jumps = (-s..=s).any(|knot| {
                let left = if knot > -s {
                    horner(&dk.pieces[(knot + s - 1) as usize], 1.0)
                } else {
                    0.0
                };
                let right = if knot < s {
                    horner(&dk.pieces[(knot + s) as usize], 0.0)
                } else {
                    0.0
                };
                (left - right).abs() > 1e-9
            });
            assert!(jumps, "{} is smoother than C{c}", k.name);
        }
    }

    #[test]
    fn derivatives_match_finite_differences() {
        for k in all() {
            for d in 1..=k.continuity.unwrap().max(1) + 1 {
                let (lo, hi) = (k.derivative(d - 1), k.derivative(d));
                for step in 0..40 {
                    let t = -(k.support as f64) + 0.0731 + f64::from(step) * 0.1437;
                    // Stay away from knots, where a derivative past the class may jump.
                    if (t - t.round()).abs() < 1e-3 {
                        continue;
                    }
                    let e = 1e-6;
                    let fd = (lo.eval(t + e) - lo.eval(t - e)) / (2.0 * e);
                    assert!(
                        (fd - hi.eval(t)).abs() < 1e-5 * (1.0 + hi.eval(t).abs()),
                        "{} order {d} at {t}: {fd} vs {}",
                        k.name,
                        hi.eval(t)
                    );
                }
            }
        }
    }

    #[test]
    fn differentiating_past_the_class_is_a_typed_error() {
        let tent = Kernel::named("tent").unwrap();
        assert!(tent.checked_derivative(0).is_ok());
        match tent.checked_derivative(1) {
            Err(Error::Continuity {
                kernel,
                continuity,
                order,
                ..
            }) => {
                assert_eq!((kernel.as_str(), continuity, order), ("tent", Some(0), 1));
            }
            other => panic!("expected a continuity error, got {other:?}"),
        }
        let b3 = Kernel::named("bspln3").unwrap();
        assert_eq!(b3.checked_derivative(2).unwrap().continuity, Some(0));
        assert!(b3.checked_derivative(3).is_err());
        // The derivative of a derivative counts from the original class.
        assert!(b3.derivative(2).checked_derivative(1).is_err());
    }
}
