//! Typed, growable arrays: the storage of every level and the data a kernel reads and writes.

use super::largest::{self, Largest};
use super::store::Store;
use crate::types::{ElemType, Scalar};

/// One typed array. Its elements are a copy-on-write [`Store`]: owned, or memory shared with
/// NumPy or another tensor and copied on the first write.
#[derive(Clone, Debug, PartialEq)]
pub enum Buffer {
    Bool(Store<bool>),
    U8(Store<u8>),
    I8(Store<i8>),
    I32(Store<i32>),
    I64(Store<i64>),
    U64(Store<u64>),
    F32(Store<f32>),
    F64(Store<f64>),
}

macro_rules! each_buffer {
    ($self:expr, $v:ident => $body:expr) => {
        match $self {
            Buffer::Bool($v) => $body,
            Buffer::U8($v) => $body,
            Buffer::I8($v) => $body,
            Buffer::I32($v) => $body,
            Buffer::I64($v) => $body,
            Buffer::U64($v) => $body,
            Buffer::F32($v) => $body,
            Buffer::F64($v) => $body,
        }
    };
}

/// `Buffer::from(vec![1.0, 2.0])`: a buffer owning a `Vec` of any element type.
macro_rules! from_vec {
    ($($t:ty => $v:ident),*) => {$(
        impl From<Vec<$t>> for Buffer {
            fn from(v: Vec<$t>) -> Buffer {
                Buffer::$v(v.into())
            }
        }
    )*};
}
from_vec!(bool => Bool, u8 => U8, i8 => I8, i32 => I32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

impl Buffer {
    pub fn new(ty: ElemType) -> Buffer {
        Buffer::filled(ty, 0, Scalar::zero(ty))
    }

    /// `len` copies of `value` (converted to `ty`).
    pub fn filled(ty: ElemType, len: usize, value: Scalar) -> Buffer {
        let v = value.cast(ty);
        match (ty, v) {
            (ElemType::Bool, Scalar::Bool(x)) => Buffer::Bool(vec![x; len].into()),
            (ElemType::U8, Scalar::U8(x)) => Buffer::U8(vec![x; len].into()),
            (ElemType::I8, Scalar::I8(x)) => Buffer::I8(vec![x; len].into()),
            (ElemType::I32, Scalar::I32(x)) => Buffer::I32(vec![x; len].into()),
            (ElemType::I64, Scalar::I64(x)) => Buffer::I64(vec![x; len].into()),
            (ElemType::U64, Scalar::U64(x)) => Buffer::U64(vec![x; len].into()),
            (ElemType::F32, Scalar::F32(x)) => Buffer::F32(vec![x; len].into()),
            (ElemType::F64, Scalar::F64(x)) => Buffer::F64(vec![x; len].into()),
            _ => unreachable!("Scalar::cast returns the requested type"),
        }
    }

    pub fn from_i64s(v: Vec<i64>) -> Buffer {
        Buffer::I64(v.into())
    }

    pub fn elem(&self) -> ElemType {
        match self {
            Buffer::Bool(_) => ElemType::Bool,
            Buffer::U8(_) => ElemType::U8,
            Buffer::I8(_) => ElemType::I8,
            Buffer::I32(_) => ElemType::I32,
            Buffer::I64(_) => ElemType::I64,
            Buffer::U64(_) => ElemType::U64,
            Buffer::F32(_) => ElemType::F32,
            Buffer::F64(_) => ElemType::F64,
        }
    }

    pub fn len(&self) -> usize {
        each_buffer!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> Scalar {
        match self {
            Buffer::Bool(v) => Scalar::Bool(v[i]),
            Buffer::U8(v) => Scalar::U8(v[i]),
            Buffer::I8(v) => Scalar::I8(v[i]),
            Buffer::I32(v) => Scalar::I32(v[i]),
            Buffer::I64(v) => Scalar::I64(v[i]),
            Buffer::U64(v) => Scalar::U64(v[i]),
            Buffer::F32(v) => Scalar::F32(v[i]),
            Buffer::F64(v) => Scalar::F64(v[i]),
        }
    }

    /// Store `value`, converted to the element type.
    pub fn set(&mut self, i: usize, value: Scalar) {
        let ty = self.elem();
        match (self, value.cast(ty)) {
            (Buffer::Bool(v), Scalar::Bool(x)) => v[i] = x,
            (Buffer::U8(v), Scalar::U8(x)) => v[i] = x,
            (Buffer::I8(v), Scalar::I8(x)) => v[i] = x,
            (Buffer::I32(v), Scalar::I32(x)) => v[i] = x,
            (Buffer::I64(v), Scalar::I64(x)) => v[i] = x,
            (Buffer::U64(v), Scalar::U64(x)) => v[i] = x,
            (Buffer::F32(v), Scalar::F32(x)) => v[i] = x,
            (Buffer::F64(v), Scalar::F64(x)) => v[i] = x,
            _ => unreachable!("Scalar::cast returns the requested type"),
        }
    }

    pub fn push(&mut self, value: Scalar) {
        let n = self.len();
        self.resize(n + 1, value);
    }

    /// Resize to `len`, new elements equal to `value`.
    pub fn resize(&mut self, len: usize, value: Scalar) {
        let ty = self.elem();
        match (self, value.cast(ty)) {
            (Buffer::Bool(v), Scalar::Bool(x)) => v.resize(len, x),
            (Buffer::U8(v), Scalar::U8(x)) => v.resize(len, x),
            (Buffer::I8(v), Scalar::I8(x)) => v.resize(len, x),
            (Buffer::I32(v), Scalar::I32(x)) => v.resize(len, x),
            (Buffer::I64(v), Scalar::I64(x)) => v.resize(len, x),
            (Buffer::U64(v), Scalar::U64(x)) => v.resize(len, x),
            (Buffer::F32(v), Scalar::F32(x)) => v.resize(len, x),
            (Buffer::F64(v), Scalar::F64(x)) => v.resize(len, x),
            _ => unreachable!("Scalar::cast returns the requested type"),
        }
    }

    /// Grow to `len` elements (new ones zero) without aborting when memory runs out: `false`
    /// (and the buffer unchanged) if `len` elements are over the memory limit
    /// ([`crate::memory`]) or cannot be allocated.
    pub fn try_grow(&mut self, len: usize) -> bool {
        let n = self.len();
        if len <= n {
            return true;
        }
        let bytes = (len as u64).checked_mul(self.elem().size() as u64);
        if !bytes.is_some_and(super::memory::allows) {
            return false;
        }
        let reserved = each_buffer!(self, v => v.try_reserve_exact(len - n).is_ok());
        if reserved {
            self.resize(len, Scalar::zero(self.elem()));
        }
        reserved
    }

    /// A copy converted to element type `ty` (a clone when it already has that type).
    pub fn converted(&self, ty: ElemType) -> Buffer {
        if self.elem() == ty {
            return self.clone();
        }
        let mut out = Buffer::new(ty);
        out.reserve(self.len());
        for k in 0..self.len() {
            out.push(self.get(k));
        }
        out
    }

    pub fn truncate(&mut self, len: usize) {
        each_buffer!(self, v => v.truncate(len))
    }

    pub fn clear(&mut self) {
        self.truncate(0)
    }

    /// Capacity in elements.
    pub fn capacity(&self) -> usize {
        each_buffer!(self, v => v.capacity())
    }

    /// Reserve so that `capacity() >= additional + len()`.
    pub fn reserve(&mut self, additional: usize) {
        each_buffer!(self, v => v.reserve(additional))
    }

    /// Raw pointer to the first element, for writing: shared memory is copied first.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        each_buffer!(self, v => v.as_mut_ptr().cast::<u8>())
    }

    /// Raw pointer to the first element for a kernel's view, without copying shared memory:
    /// writes through it are allowed only on an owned buffer (`backend::check_buffers` makes
    /// every buffer a kernel writes owned first).
    pub fn view_ptr(&mut self) -> *mut u8 {
        each_buffer!(self, v => v.view_ptr().cast::<u8>())
    }

    /// Address of the first element, for reading (shared memory's own address).
    pub fn as_ptr(&self) -> *const u8 {
        each_buffer!(self, v => v.as_ptr().cast::<u8>())
    }

    /// Whether the elements are memory shared with someone else (see [`Store`]).
    pub fn is_shared(&self) -> bool {
        each_buffer!(self, v => v.is_shared())
    }

    /// Whether the elements are memory someone else owns and may change ([`Store::is_foreign`]).
    pub fn is_foreign(&self) -> bool {
        each_buffer!(self, v => v.is_foreign())
    }

    /// Make `into` an owned copy of the elements, reusing its allocation when it has the
    /// same element type (a kernel's private snapshot of a foreign array, taken on every
    /// call: `run::Runner::execute`). The copy carries no bound until checked.
    pub fn copy_into(&self, into: &mut Buffer) {
        macro_rules! same {
            ($($v:ident),*) => {
                match (self, &mut *into) {
                    $((Buffer::$v(s), Buffer::$v(d)) => {
                        let d = d.to_mut();
                        d.clear();
                        d.extend_from_slice(s);
                    })*
                    (s, d) => *d = each_buffer!(s, v => Buffer::from(v.to_vec())),
                }
            };
        }
        same!(Bool, U8, I8, I32, I64, U64, F32, F64)
    }

    /// Copy shared elements into memory of the buffer's own (nothing if already owned, or
    /// lent to be written in place: [`Store::lent`]).
    pub fn make_owned(&mut self) {
        each_buffer!(self, v => v.make_writable())
    }

    /// The address of the lent memory the elements are still in ([`Store::lent_at`]).
    pub fn lent_at(&self) -> Option<*const u8> {
        each_buffer!(self, v => v.lent_at().map(|p| p.cast::<u8>()))
    }

    /// Make the elements shareable without copying them, so clones of the buffer are free
    /// until one of them is written ([`Store::share`]).
    pub fn share(&mut self) {
        each_buffer!(self, v => v.share())
    }

    /// Own the elements again once no clone shares them ([`Store::unshare`]): no copy.
    pub fn unshare(&mut self) {
        each_buffer!(self, v => v.unshare())
    }

    /// Check that every element is an integer in `0..below` and record it ([`Store::below`]);
    /// `false` (nothing recorded) when one is not, for a float or bool array, or for memory
    /// someone else owns.
    pub fn check_below(&mut self, below: u64) -> bool {
        let fits = match self.largest() {
            Some(Largest::Empty) => true,
            Some(Largest::Max(m)) => m < below,
            Some(Largest::Negative) | None => false,
        };
        fits && each_buffer!(self, v => v.set_below(below))
    }

    /// Check that every element is a non-negative integer and record the tightest bound,
    /// the largest element plus one ([`Buffer::check_below`]); `false` when nothing is
    /// recorded: a negative element, an empty array (no bound above 0 to record), a float or
    /// bool array, foreign memory.
    pub fn check_bounded(&mut self) -> bool {
        match self.largest() {
            Some(Largest::Max(m)) if m < u64::MAX => {
                each_buffer!(self, v => v.set_below(m + 1))
            }
            _ => false,
        }
    }

    /// The largest element of an integer array and whether one is negative, in one pass
    /// ([`super::largest`]); `None` for other element types.
    fn largest(&self) -> Option<Largest> {
        match self {
            Buffer::I32(v) => Some(largest::of_i32(v)),
            Buffer::I64(v) => Some(largest::of_i64(v)),
            Buffer::U8(v) => Some(largest::of_u8(v)),
            Buffer::I8(v) => Some(largest::of_i8(v)),
            Buffer::U64(v) => Some(largest::of_u64(v)),
            _ => None,
        }
    }

    /// The checked bound of the elements, if they have not changed since ([`Store::below`]).
    pub fn below(&self) -> Option<u64> {
        each_buffer!(self, v => v.below())
    }

    /// Forget the checked bound ([`Store::unmark`]).
    pub fn unmark(&mut self) {
        each_buffer!(self, v => v.unmark())
    }

    pub fn as_i64(&self) -> Option<&[i64]> {
        match self {
            Buffer::I64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_i64_mut(&mut self) -> Option<&mut [i64]> {
        match self {
            Buffer::I64(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<&[f64]> {
        match self {
            Buffer::F64(v) => Some(v),
            _ => None,
        }
    }

    /// All elements as scalars (slow; for tests, printing and I/O).
    pub fn to_scalars(&self) -> Vec<Scalar> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}

/// The length a `Grow` to `want` gives a buffer of length `len`: at least double, so a kernel
/// that appends one element at a time calls the runtime O(log n) times.
pub(crate) fn grown_len(len: usize, want: usize) -> usize {
    if want <= len {
        len
    } else {
        want.max(len.saturating_mul(2)).max(4)
    }
}

/// Grow `b` to at least `want` elements for a kernel's `Grow`: doubling, or exactly `want` when
/// doubling is over the memory limit; `false` when even `want` cannot be had (the kernel then
/// stops with a grow fault instead of the process aborting).
pub(crate) fn grow(b: &mut Buffer, want: usize) -> bool {
    b.try_grow(grown_len(b.len(), want)) || b.try_grow(want)
}

/// Largest length a `Grow` may ask for (guards against runaway sizes from corrupt inputs).
pub(crate) const MAX_GROW: i64 = 1 << 40;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_converts_to_element_type() {
        let mut b = Buffer::filled(ElemType::I32, 3, Scalar::I64(7));
        b.set(1, Scalar::F64(-2.9));
        assert_eq!(b, Buffer::I32(vec![7, -2, 7].into()));
        b.resize(4, Scalar::Bool(true));
        assert_eq!(b.get(3), Scalar::I32(1));
    }

    #[test]
    fn try_grow_refuses_what_cannot_be_allocated() {
        let mut b = Buffer::I64(vec![1, 2].into());
        assert!(b.try_grow(4));
        assert_eq!(b, Buffer::I64(vec![1, 2, 0, 0].into()));
        assert!(
            b.try_grow(3),
            "shrinking is not asked for; a smaller length is a no-op"
        );
        assert_eq!(b.len(), 4);
        // More than any machine has (and than 64-bit sizes for some types): refused, unchanged.
        assert!(!b.try_grow(usize::MAX / 2));
        assert!(!b.try_grow(1 << 60));
        assert_eq!(b, Buffer::I64(vec![1, 2, 0, 0].into()));
    }
}
