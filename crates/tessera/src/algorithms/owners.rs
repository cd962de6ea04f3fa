//! Vertices dealt to parts, each part owning the distances of its vertices, so that a push
//! step split between threads writes only its own part: no indivisible update, no private
//! copy (see `examples/bellman_ford_owned.tess`).
//!
//! Vertex `v` of `n` goes to part `v % parts` (dealt round-robin: a wavefront of neighbouring
//! vertices, as on a mesh numbered by position, splits evenly) and becomes the owned vertex
//! `p = (v % parts) * block + v / parts`, with `block = ceil(n / parts)`: the parts are then
//! contiguous blocks of a vector of `parts * block` entries, one row each of its `[parts,
//! block]` view. Entries of a block past the last vertex are padding, reached by no edge.

use crate::error::Result;
use crate::levels::Format;
use crate::runtime::Buffer;
use crate::tensor::Tensor;

/// The weights with the destinations dealt to parts: `AO[t, p, i]` is the weight of the edge
/// from owned vertex `p` to owned vertex `t * block + i`.
pub const WEIGHTS: &str = "Dense(Dense(SparseList(Element(Inf))))";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owners {
    pub n: usize,
    pub parts: usize,
    pub block: usize,
}

impl Owners {
    pub fn new(n: usize, parts: usize) -> Owners {
        let parts = parts.max(1);
        Owners {
            n,
            parts,
            block: n.div_ceil(parts),
        }
    }

    /// Entries of an owned vector, padding included.
    pub fn len(&self) -> usize {
        self.parts * self.block
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The owned index of vertex `v`.
    pub fn owned(&self, v: usize) -> usize {
        (v % self.parts) * self.block + v / self.parts
    }

    /// The vertex at owned index `p`, `None` for padding.
    pub fn vertex(&self, p: usize) -> Option<usize> {
        let v = (p % self.block) * self.parts + p / self.block;
        (v < self.n).then_some(v)
    }

    /// `a` (an `n x n` matrix, edge j -> i weighing `a[j, i]`) as [`WEIGHTS`] of shape
    /// `[parts, len, block]`.
    pub fn weights(&self, a: &Tensor) -> Result<Tensor> {
        let (mut part, mut from, mut to, mut w) = (vec![], vec![], vec![], vec![]);
        a.for_each_stored(&mut |c, v| {
            let (j, i) = (self.owned(c[0]), self.owned(c[1]));
            part.push((i / self.block) as i64);
            from.push(j as i64);
            to.push((i % self.block) as i64);
            w.push(v.as_f64());
        });
        Tensor::from_coo(
            &Format::parse(WEIGHTS, None)?,
            &[self.parts, self.len(), self.block],
            &[part, from, to],
            &Buffer::F64(w.into()),
            |x, _| x,
        )
    }

    /// A vertex-indexed vector in owned order (padding holds `fill`). Part by part, vertex
    /// `i * parts + t` at `t * block + i`: no division per entry (two per entry made moving
    /// Bellman-Ford's 325,729 distances into owned order a millisecond).
    pub fn deal<T: Copy>(&self, by_vertex: &[T], fill: T) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        for t in 0..self.parts {
            out.extend((0..self.block).map(|i| {
                let v = i * self.parts + t;
                if v < self.n { by_vertex[v] } else { fill }
            }));
        }
        out
    }

    /// An owned vector back in vertex order.
    pub fn gather<T: Copy>(&self, owned: &[T]) -> Vec<T> {
        let mut out = Vec::with_capacity(self.n);
        for i in 0..self.block {
            for t in 0..self.parts {
                if i * self.parts + t < self.n {
                    out.push(owned[t * self.block + i]);
                }
            }
        }
        out
    }
}

/// `t`, a Dense vector or a matrix of Dense levels over one leaf, with `format` (Dense levels
/// over the same leaf) and `shape` instead: the values are moved, not copied.
pub fn reshaped(mut t: Tensor, format: &Format, shape: &[usize]) -> Tensor {
    debug_assert_eq!(
        t.shape.iter().product::<usize>(),
        shape.iter().product::<usize>()
    );
    let leaf = t.levels.pop().unwrap_or_default();
    let mut levels = vec![vec![]; format.levels.len() - 1];
    levels.push(leaf);
    Tensor {
        shape: shape.to_vec(),
        format: format.clone(),
        levels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_indices_are_a_bijection_onto_the_parts() {
        for (n, parts) in [(0, 2), (1, 2), (5, 2), (7, 3), (12, 4), (10, 1), (3, 5)] {
            let o = Owners::new(n, parts);
            let mut seen = vec![false; o.len()];
            for v in 0..n {
                let p = o.owned(v);
                assert!(!seen[p], "{n} {parts}: {p} twice");
                seen[p] = true;
                assert_eq!(o.vertex(p), Some(v));
                assert_eq!(p / o.block, v % parts, "part of {v}");
            }
            let padding = (0..o.len()).filter(|&p| o.vertex(p).is_none()).count();
            assert_eq!(padding, o.len() - n);
            let by_vertex: Vec<i64> = (0..n as i64).collect();
            let dealt = o.deal(&by_vertex, -1);
            for (p, &x) in dealt.iter().enumerate() {
                assert_eq!(
                    x,
                    o.vertex(p).map_or(-1, |v| v as i64),
                    "{n} {parts}: at {p}"
                );
            }
            assert_eq!(o.gather(&dealt), by_vertex);
        }
    }

    #[test]
    fn dealt_weights_hold_every_edge_once() {
        let f = Format::parse("Dense(SparseList(Element(Inf)))", None).unwrap();
        let edges = [
            (0, 1, 2.0),
            (1, 4, 3.0),
            (4, 0, 1.0),
            (2, 3, 5.0),
            (3, 3, 7.0),
        ];
        let coords = vec![
            edges.iter().map(|e| e.0).collect(),
            edges.iter().map(|e| e.1).collect(),
        ];
        let vals = Buffer::F64(edges.iter().map(|e| e.2).collect::<Vec<_>>().into());
        let a = Tensor::from_coo(&f, &[5, 5], &coords, &vals, |x, _| x).unwrap();
        let o = Owners::new(5, 2);
        let ao = o.weights(&a).unwrap();
        assert_eq!(ao.shape, [2, 6, 3]);
        let mut got = vec![];
        ao.for_each_stored(&mut |c, v| {
            let from = o.vertex(c[1]).unwrap();
            let to = o.vertex(c[0] * o.block + c[2]).unwrap();
            got.push((from as i64, to as i64, v.as_f64()));
        });
        got.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let mut want = edges.to_vec();
        want.sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert_eq!(got, want);
    }
}
