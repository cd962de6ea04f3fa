//! Copy-on-write storage of one typed array: the elements of a [`super::Buffer`].
//!
//! A store either owns its elements (a `Vec`) or shares memory that something else owns — a
//! NumPy array handed to `tessera.asarray`, or another store made shareable with
//! [`Store::share`] — kept alive by a reference-counted handle. Reading a shared store reads
//! that memory in place; the first write (or growth) copies it into a `Vec` of the store's
//! own, so the owner's memory is never written. That is what lets a 10⁷-entry SciPy matrix
//! become a tensor without a copy, and a tensor be lent to several calls at once.
//!
//! A store may also be *lent* an array to write in place ([`Store::lent`]): the output array a
//! Python caller passes with `out=`, which a kernel fills without a copy. Only growing it (or
//! [`Store::to_mut`]) copies it into a `Vec`, so after a run the caller checks with
//! [`Store::lent_at`] that the elements are still in its array.
//!
//! A store of integers may also carry a checked bound ([`Store::below`]): the note that every
//! element was found in `0..n`, kept until the elements change. Memory someone else owns takes
//! none, since its owner may change it at any time. A kernel reading a coordinate array with
//! such a bound gathers through its elements without bounds checks (`backend::versioning`).
//! A foreign *position* array (a SciPy matrix's `indptr`, O(rows)) is instead copied for each
//! run and the copy checked (`run::Runner::execute`), so the loops over its fibers' entries
//! run unchecked all the same.

use std::any::Any;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The elements of one array, owned or shared (see the module documentation).
pub struct Store<T> {
    repr: Repr<T>,
    /// Every element is in `0..below` (checked; dropped by any change to the elements).
    below: Option<u64>,
}

enum Repr<T> {
    Owned(Vec<T>),
    /// `len` elements at `ptr`, valid while `owner` lives and never written through this store.
    Shared {
        ptr: *const T,
        len: usize,
        owner: Arc<dyn Any + Send + Sync>,
        /// Whether the memory is someone else's, who may change it (`Store::shared`), rather
        /// than a `Vec` this crate moved behind the count and never writes (`Store::share`).
        foreign: bool,
    },
    /// `len` elements at `ptr`, lent for writing in place: valid while `owner` lives, and
    /// reached only through this store while it lives (its lender does not touch it; clones
    /// copy it).
    Lent {
        ptr: *mut T,
        len: usize,
        /// Held only to keep the memory alive.
        _owner: Arc<dyn Any + Send + Sync>,
    },
}

// SAFETY: an owned store is a `Vec`; a shared one only reads its memory, which its owner (a
// `Send + Sync` handle) keeps alive, so sending or sharing it across threads is as safe as
// sending or sharing a `&[T]` with that lifetime; a lent one is the only way to its memory
// (`Store::lent`'s contract), as a `&mut [T]` with that lifetime is.
unsafe impl<T: Send + Sync> Send for Store<T> {}
// SAFETY: as for `Send`: `&Store` gives only `&[T]` access to shared or lent memory.
unsafe impl<T: Send + Sync> Sync for Store<T> {}

impl<T: Copy> Store<T> {
    pub const fn new() -> Store<T> {
        Store {
            repr: Repr::Owned(Vec::new()),
            below: None,
        }
    }

    /// A store reading `len` elements at `ptr`, which `owner` keeps alive.
    ///
    /// # Safety
    /// `ptr` must be non-null, aligned for `T`, and valid for reads of `len` initialised
    /// elements for as long as `owner` (or any clone of the store) lives. The memory may be
    /// changed by its owner meanwhile (a NumPy array the user writes to): readers then see
    /// either value of an element, as with any memory shared with foreign code.
    pub unsafe fn shared(ptr: *const T, len: usize, owner: Arc<dyn Any + Send + Sync>) -> Store<T> {
        Store {
            repr: Repr::Shared {
                ptr,
                len,
                owner,
                foreign: true,
            },
            below: None,
        }
    }

    /// A store writing `len` elements at `ptr` in place, which `owner` keeps alive: a kernel's
    /// output array given by the caller. Growing it copies the elements into a `Vec` of the
    /// store's own ([`Store::lent_at`] then returns `None`); a clone is a copy.
    ///
    /// # Safety
    /// `ptr` must be non-null, aligned for `T`, and valid for reads and writes of `len`
    /// initialised elements for as long as `owner` (or the store) lives, and nothing else may
    /// read or write that memory while the store lives.
    pub unsafe fn lent(ptr: *mut T, len: usize, owner: Arc<dyn Any + Send + Sync>) -> Store<T> {
        Store {
            repr: Repr::Lent {
                ptr,
                len,
                _owner: owner,
            },
            below: None,
        }
    }

    /// The address of the lent memory ([`Store::lent`]) the elements still are in, if they
    /// are (not copied out by growth or [`Store::to_mut`]).
    pub fn lent_at(&self) -> Option<*const T> {
        match &self.repr {
            Repr::Lent { ptr, .. } => Some(ptr.cast_const()),
            _ => None,
        }
    }

    /// Whether the elements are someone else's memory (the next write copies them).
    pub fn is_shared(&self) -> bool {
        matches!(self.repr, Repr::Shared { .. })
    }

    /// Whether the elements are memory someone else owns and may change at any time
    /// ([`Store::shared`]): such a store never carries a checked bound.
    pub fn is_foreign(&self) -> bool {
        matches!(self.repr, Repr::Shared { foreign: true, .. })
    }

    /// Make the elements writable in place: shared memory is copied into a `Vec` of the
    /// store's own; owned and lent memory stay where they are.
    pub fn make_writable(&mut self) {
        if let Repr::Shared { .. } = self.repr {
            self.to_mut();
        }
    }

    /// The elements for writing in place (shared memory copied first, [`Store::make_writable`]).
    fn writable(&mut self) -> &mut [T] {
        self.below = None;
        match &mut self.repr {
            // SAFETY: `Store::lent`'s contract: `len` initialised elements at `ptr`, alive
            // while `owner` (held here) lives and reached only through this store, which is
            // borrowed mutably for the slice's lifetime.
            Repr::Lent { ptr, len, .. } => unsafe { std::slice::from_raw_parts_mut(*ptr, *len) },
            _ => self.to_mut(),
        }
    }

    /// The elements as a `Vec` this store owns, copying shared or lent memory first. The
    /// caller may change them, so the checked bound goes.
    pub fn to_mut(&mut self) -> &mut Vec<T> {
        self.below = None;
        if let Repr::Shared { .. } | Repr::Lent { .. } = self.repr {
            let v = self.deref().to_vec();
            self.repr = Repr::Owned(v);
        }
        match &mut self.repr {
            Repr::Owned(v) => v,
            Repr::Shared { .. } | Repr::Lent { .. } => unreachable!("made owned above"),
        }
    }

    /// The elements as a `Vec` (a copy of shared memory).
    pub fn into_vec(self) -> Vec<T> {
        match self.repr {
            Repr::Owned(v) => v,
            Repr::Shared { .. } | Repr::Lent { .. } => self.deref().to_vec(),
        }
    }

    /// Turn an owned store into a shared one without copying (the `Vec` moves behind a
    /// reference count), so that clones of it are free until one of them is written.
    pub fn share(&mut self)
    where
        T: Send + Sync + 'static,
    {
        if let Repr::Owned(v) = &mut self.repr {
            let v = Arc::new(std::mem::take(v));
            let (ptr, len) = (v.as_ptr(), v.len());
            self.repr = Repr::Shared {
                ptr,
                len,
                owner: v,
                foreign: false,
            };
        }
    }

    /// Undo [`Store::share`] once no clone is left: the `Vec` comes back from behind its
    /// count without a copy, so that writing the store copies nothing. Memory someone else
    /// owns, or still shared with a clone, stays shared (a write then copies it, as before).
    pub fn unshare(&mut self)
    where
        T: Send + Sync + 'static,
    {
        let Repr::Shared {
            owner,
            foreign: false,
            ..
        } = &self.repr
        else {
            return;
        };
        if Arc::strong_count(owner) != 1 || !owner.is::<Vec<T>>() {
            return;
        }
        let Repr::Shared { owner, .. } = std::mem::replace(&mut self.repr, Repr::Owned(vec![]))
        else {
            unreachable!("matched above")
        };
        let v = owner
            .downcast::<Vec<T>>()
            .map(|v| Arc::try_unwrap(v).unwrap_or_else(|v| v.as_ref().clone()));
        self.repr = Repr::Owned(v.unwrap_or_else(|_| unreachable!("checked above")));
    }

    /// A pointer to the first element for a kernel's view, without copying shared memory:
    /// the kernel may write through it only if the store is owned or lent (the backends make
    /// every buffer a kernel writes writable before it runs, `backend::check_buffers`).
    pub fn view_ptr(&mut self) -> *mut T {
        match &mut self.repr {
            Repr::Owned(v) => v.as_mut_ptr(),
            Repr::Shared { ptr, .. } => ptr.cast_mut(),
            Repr::Lent { ptr, .. } => *ptr,
        }
    }

    /// Shorten to `len` elements; shared memory stays shared (only fewer of it is read).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.below = None;
        }
        match &mut self.repr {
            Repr::Owned(v) => v.truncate(len),
            Repr::Shared { len: n, .. } | Repr::Lent { len: n, .. } => *n = (*n).min(len),
        }
    }

    pub fn clear(&mut self) {
        self.truncate(0)
    }

    /// Record that every element is in `0..below`, which the caller has checked (module
    /// documentation). Refused, returning `false`, for memory someone else owns.
    pub fn set_below(&mut self, below: u64) -> bool {
        if matches!(
            self.repr,
            Repr::Shared { foreign: true, .. } | Repr::Lent { .. }
        ) {
            return false;
        }
        self.below = Some(below);
        true
    }

    /// The checked bound, if the elements have not changed since it was recorded.
    pub fn below(&self) -> Option<u64> {
        self.below
    }

    /// Forget the checked bound.
    pub fn unmark(&mut self) {
        self.below = None;
    }

    /// Capacity in elements (a shared or lent store has exactly its length).
    pub fn capacity(&self) -> usize {
        match &self.repr {
            Repr::Owned(v) => v.capacity(),
            Repr::Shared { len, .. } | Repr::Lent { len, .. } => *len,
        }
    }

    pub fn push(&mut self, x: T) {
        self.to_mut().push(x)
    }

    pub fn pop(&mut self) -> Option<T> {
        self.to_mut().pop()
    }

    pub fn resize(&mut self, len: usize, x: T) {
        if len <= self.len() {
            self.truncate(len)
        } else {
            self.to_mut().resize(len, x)
        }
    }

    pub fn reserve(&mut self, additional: usize) {
        self.to_mut().reserve(additional)
    }

    pub fn try_reserve_exact(
        &mut self,
        additional: usize,
    ) -> Result<(), std::collections::TryReserveError> {
        self.to_mut().try_reserve_exact(additional)
    }

    pub fn extend_from_slice(&mut self, xs: &[T]) {
        self.to_mut().extend_from_slice(xs)
    }

    pub fn insert(&mut self, k: usize, x: T) {
        self.to_mut().insert(k, x)
    }

    pub fn remove(&mut self, k: usize) -> T {
        self.to_mut().remove(k)
    }

    /// A pointer to the first element for writing in place (shared memory copied first).
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.writable().as_mut_ptr()
    }
}

impl<T: Copy> Default for Store<T> {
    fn default() -> Self {
        Store::new()
    }
}

impl<T: Copy> Deref for Store<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.repr {
            Repr::Owned(v) => v,
            // SAFETY: the constructor's contract: `len` initialised elements at `ptr`, alive
            // while `owner` (held here) lives.
            Repr::Shared { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            // SAFETY: `Store::lent`'s contract: `len` initialised elements at `ptr`, alive while
            // `owner` (held here) lives, written only through this store (not while `&self`
            // is borrowed).
            Repr::Lent { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

/// Mutable access copies shared memory first (copy-on-write); lent memory is written in place.
impl<T: Copy> DerefMut for Store<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.writable()
    }
}

impl<T: Copy> Clone for Store<T> {
    /// An owned or lent store is copied; a shared one shares the same memory (a reference
    /// count).
    fn clone(&self) -> Self {
        Store {
            repr: match &self.repr {
                Repr::Owned(v) => Repr::Owned(v.clone()),
                Repr::Lent { .. } => Repr::Owned(self.deref().to_vec()),
                Repr::Shared {
                    ptr,
                    len,
                    owner,
                    foreign,
                } => Repr::Shared {
                    ptr: *ptr,
                    len: *len,
                    owner: owner.clone(),
                    foreign: *foreign,
                },
            },
            // The copy holds the same elements, so the same check holds for it.
            below: self.below,
        }
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: Copy + PartialEq> PartialEq for Store<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy> From<Vec<T>> for Store<T> {
    fn from(v: Vec<T>) -> Self {
        Store {
            repr: Repr::Owned(v),
            below: None,
        }
    }
}

impl<T: Copy> From<&[T]> for Store<T> {
    fn from(v: &[T]) -> Self {
        Store::from(v.to_vec())
    }
}

impl<T: Copy> FromIterator<T> for Store<T> {
    fn from_iter<I: IntoIterator<Item = T>>(it: I) -> Self {
        Store::from(it.into_iter().collect::<Vec<T>>())
    }
}

impl<T: Copy> Extend<T> for Store<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, it: I) {
        self.to_mut().extend(it)
    }
}

impl<'a, T: Copy> IntoIterator for &'a Store<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Copy> IntoIterator for Store<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<T: Copy> From<Store<T>> for Vec<T> {
    fn from(s: Store<T>) -> Vec<T> {
        s.into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_copy_of(v: Vec<i64>) -> (Store<i64>, Arc<Vec<i64>>) {
        let owner = Arc::new(v);
        // SAFETY: the Arc'd Vec owns the elements and is never mutated.
        let s = unsafe { Store::shared(owner.as_ptr(), owner.len(), owner.clone()) };
        (s, owner)
    }

    #[test]
    fn shared_memory_is_read_in_place_and_copied_on_write() {
        let (mut s, owner) = shared_copy_of(vec![1, 2, 3]);
        assert!(s.is_shared());
        assert_eq!(s.as_ptr(), owner.as_ptr(), "no copy to read");
        assert_eq!(&s[..], &[1, 2, 3]);
        let c = s.clone();
        assert_eq!(c.as_ptr(), owner.as_ptr(), "clones share too");
        s[1] = 20;
        assert!(!s.is_shared());
        assert_ne!(s.as_ptr(), owner.as_ptr());
        assert_eq!(&s[..], &[1, 20, 3]);
        assert_eq!(
            &owner[..],
            &[1, 2, 3],
            "the owner's memory is never written"
        );
        assert_eq!(&c[..], &[1, 2, 3]);
    }

    #[test]
    fn truncation_keeps_sharing_and_growth_copies() {
        let (mut s, owner) = shared_copy_of(vec![5, 6, 7, 8]);
        s.truncate(2);
        assert!(s.is_shared());
        assert_eq!(s.capacity(), 2);
        s.resize(1, 0);
        assert!(s.is_shared());
        s.resize(3, 9);
        assert!(!s.is_shared());
        assert_eq!(&s[..], &[5, 9, 9]);
        assert_eq!(owner.len(), 4);
    }

    #[test]
    fn share_moves_an_owned_vec_behind_a_count() {
        let mut s = Store::from(vec![1.5f64, 2.5]);
        let p = s.as_ptr();
        s.share();
        assert!(s.is_shared());
        assert_eq!(s.as_ptr(), p, "sharing moves no elements");
        let mut c = s.clone();
        assert_eq!(c.as_ptr(), p);
        c.push(3.5);
        assert_eq!(&c[..], &[1.5, 2.5, 3.5]);
        assert_eq!(&s[..], &[1.5, 2.5]);
        assert_eq!(s.into_vec(), vec![1.5, 2.5]);
    }

    #[test]
    fn lent_memory_is_written_in_place_and_copied_only_to_grow() {
        let mut array = vec![7.0f64; 3];
        let ptr = array.as_mut_ptr();
        // SAFETY: `array` outlives the store and is not touched while it lives (the owner is
        // a stand-in: the test keeps the memory alive itself).
        let mut s = unsafe { Store::lent(ptr, 3, Arc::new(())) };
        assert!(!s.is_shared());
        assert_eq!(s.lent_at(), Some(ptr.cast_const()));
        s[1] = 2.5;
        s.make_writable();
        assert_eq!(s.view_ptr(), ptr, "written in place, not copied");
        assert_eq!(s.as_mut_ptr(), ptr);
        assert!(
            !s.set_below(4),
            "the lender's memory takes no checked bound"
        );
        let c = s.clone();
        assert_ne!(c.as_ptr(), ptr.cast_const(), "a clone is a copy");
        assert_eq!(&c[..], &[7.0, 2.5, 7.0]);
        s.push(1.0);
        assert_eq!(s.lent_at(), None, "growth copies out of the lent memory");
        assert_eq!(&s[..], &[7.0, 2.5, 7.0, 1.0]);
        drop((s, c));
        assert_eq!(array, vec![7.0, 2.5, 7.0]);
    }

    #[test]
    fn checked_bounds_last_until_a_change_and_never_on_foreign_memory() {
        let mut s = Store::from(vec![1i64, 4, 2]);
        assert!(s.set_below(5));
        assert_eq!(s.clone().below(), Some(5), "a copy holds the same elements");
        s.share();
        assert_eq!(s.below(), Some(5), "sharing changes no element");
        s.truncate(3);
        assert_eq!(
            s.below(),
            Some(5),
            "a truncation to the same length changes nothing"
        );
        let mut c = s.clone();
        c[0] = 9;
        assert_eq!(c.below(), None);
        let mut c = s.clone();
        c.truncate(1);
        assert_eq!(c.below(), None);
        let mut c = s.clone();
        c.push(0);
        assert_eq!(c.below(), None);
        let (mut foreign, _owner) = shared_copy_of(vec![0, 1]);
        assert!(!foreign.set_below(2), "its owner may change it");
        assert_eq!(foreign.below(), None);
    }

    #[test]
    fn unshared_stores_take_their_vec_back_without_a_copy() {
        let mut s: Store<f64> = vec![1.0, 2.0, 3.0].into();
        s.share();
        let at = s.as_ptr();
        let clone = s.clone();
        // A clone still reads it: it stays shared, and a write copies.
        s.unshare();
        assert!(matches!(s.repr, Repr::Shared { .. }));
        drop(clone);
        s.unshare();
        assert!(matches!(s.repr, Repr::Owned(_)));
        s[1] = 5.0;
        assert_eq!(s.as_ptr(), at, "written in place");
        assert_eq!(&s[..], &[1.0, 5.0, 3.0]);
        // An owned store is left alone.
        s.unshare();
        assert_eq!(&s[..], &[1.0, 5.0, 3.0]);
    }
}
