//! Huge pages for large buffers: a global allocator ([`HugePages`]) that gives every allocation
//! of at least [`MIN_BYTES`] its own 2 MiB-aligned mapping, advised `MADV_HUGEPAGE` before
//! anything touches it, and passes everything smaller to the system allocator unchanged.
//!
//! Why: a kernel gathering `x[idx[p]]` over a vector of several MB touches thousands of 4 KiB
//! pages in random order, past the TLB's reach; with 2 MiB pages the same vector is a handful
//! of TLB entries (BENCHMARKS.md, "Huge pages for the runtime's large buffers"). Where
//! transparent huge pages are `madvise`-only (a common default), memory gets them only when
//! asked for, and only on the first fault of a whole 2 MiB-aligned range inside an advised
//! mapping: advising after `malloc` has touched its header, or a mapping that starts mid-range,
//! leaves the first and last ranges on small pages. NumPy advises its large arrays too, so
//! without this the SciPy and MKL peers had huge pages and Tessera's own buffers did not.
//!
//! Every array of the runtime is a `Vec` ([`super::store::Store`]), built by readers,
//! conversion, kernel outputs and a kernel's growth alike; an allocator reaches all of them
//! without changing how any is built. The binaries install it (`#[global_allocator]` in the
//! command-line tool and the Python extension); a program embedding the library may too.
//!
//! The policy is a function of the layout alone, so `dealloc` and `realloc` know how a block
//! was made. A large block's mapping is its size rounded up to 2 MiB (the tail of the last huge
//! page is never handed out, so at most 2 MiB - 1 bytes of address space and, once the last
//! element is written, of memory: under 50% at the threshold, less above). Growth uses `mremap`,
//! which moves page tables rather than copying, as glibc's `realloc` does for its own large
//! blocks. A few freed blocks (at most 256 MiB) are kept for the next allocation that fits, as
//! the system allocator keeps freed memory: a fresh mapping costs a zeroing fault per page. Off Linux, and if `mmap` fails, nothing changes: the system allocator serves every
//! request. `madvise` failing is ignored: it is advice.

use std::alloc::{GlobalAlloc, Layout, System};

/// The size of a huge page, and the alignment of every large block.
pub const HUGE_PAGE: usize = 2 << 20;

/// Allocations of at least this many bytes get huge pages: one huge page, the L2 of the
/// machines measured (smaller arrays are served from the cache, and rounding a smaller
/// block up to a huge page would more than double it).
pub const MIN_BYTES: usize = HUGE_PAGE;

/// The global allocator described in the module documentation.
pub struct HugePages;

/// Whether a block of this layout gets a mapping of its own with huge pages.
fn is_large(size: usize, align: usize) -> bool {
    cfg!(target_os = "linux") && size >= MIN_BYTES && align <= HUGE_PAGE && enabled()
}

/// Whether the process lets large blocks have huge pages: `TESSERA_HUGE_PAGES=0` in the
/// environment turns it off (where touching a huge page first is slow, as in some virtual
/// machines that back guest memory lazily, loading a large file costs more than its kernels
/// gain). Read once, at the first large block, and fixed for the process after that, so
/// `dealloc` and `realloc` always see the answer the block was made with.
fn enabled() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not read yet; 1: on; 2: off.
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = os::env_enabled();
            // Threads racing here read the same environment, so they store the same value.
            STATE.store(if on { 1 } else { 2 }, Ordering::Relaxed);
            on
        }
    }
}

/// For a program whose global allocator is [`HugePages`] (the command-line tool calls it
/// first thing): fix the system allocator's thresholds at [`MIN_BYTES`], where it would
/// have moved them itself had it seen the large blocks (`os::fix_system_thresholds`). Not
/// done by the allocator on its own: a library loaded into another program (the Python
/// extension) leaves its host's allocator as it is. Nothing when huge pages are off.
pub fn tune_system_allocator() {
    if cfg!(target_os = "linux") && os::env_enabled() {
        os::fix_system_thresholds();
    }
}

/// `size` rounded up to whole huge pages (`None` past the address space).
fn mapped_len(size: usize) -> Option<usize> {
    size.checked_next_multiple_of(HUGE_PAGE)
}

// SAFETY: every large block is a private anonymous mapping of `mapped_len(size)` bytes, made and
// released (or kept for reuse by `alloc`) only here, 2 MiB-aligned (so aligned for any layout
// `is_large` admits); `alloc_zeroed` always maps afresh, so its blocks read as zero, and
// `realloc` keeps the first `min(old, new)` bytes
// (`mremap` moves the pages themselves). Small blocks are the system allocator's, passed
// through with their own layouts. Which kind a block is follows from its layout alone, which
// the caller passes back unchanged (`GlobalAlloc`'s contract).
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size(), layout.align()) {
            return os::map(layout.size());
        }
        // SAFETY: forwarded with the caller's layout, under the same contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // A fresh anonymous mapping reads as zero: nothing to write, no page touched.
        if is_large(layout.size(), layout.align()) {
            return os::map_zeroed(layout.size());
        }
        // SAFETY: forwarded with the caller's layout, under the same contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout.size(), layout.align()) {
            // SAFETY: a large layout means `alloc` or `realloc` mapped this block here.
            unsafe { os::unmap(ptr, layout.size()) };
            return;
        }
        // SAFETY: a small layout means the system allocator made this block.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        match (is_large(layout.size(), align), is_large(new_size, align)) {
            // SAFETY: both small: the system allocator's block, resized by it.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            // SAFETY: a large layout means this module mapped the block.
            (true, true) => unsafe { os::remap(ptr, layout.size(), new_size) },
            // Crossing the threshold: a new block of the other kind, the elements copied.
            _ => {
                // SAFETY: `GlobalAlloc::realloc`'s contract makes `new_size` with `align` a
                // valid layout.
                let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, align) };
                // SAFETY: a non-zero size (the caller's contract).
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    // SAFETY: both blocks are live, distinct and at least this long.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod os {
    use super::{HUGE_PAGE, mapped_len};
    use std::ptr::null_mut;

    /// glibc's allocator maps each block past its threshold afresh and unmaps it when freed,
    /// and raises the threshold only when such a block comes back to it; with every block
    /// of [`super::MIN_BYTES`] or more served here, none ever does, so it kept mapping (and
    /// the kernel zeroing) every block from 128 KiB up, such as a BFS frontier's list once
    /// per step, and unmapping it, which costs a TLB shoot-down on the other cores once
    /// threads have run (web-NotreDame's BFS on 2 threads: 12.2 -> 10.0-10.5 ms). Fix the
    /// thresholds where glibc would have raised them: blocks below ours come from its heap,
    /// which it trims past twice that ([`super::tune_system_allocator`]).
    pub(super) fn fix_system_thresholds() {
        #[cfg(target_env = "gnu")]
        {
            let min = super::MIN_BYTES as libc::c_int;
            // SAFETY: `mallopt` only sets glibc's allocator parameters, under that
            // allocator's own lock; no memory is read or written through our pointers.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, min);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 2 * min);
            }
        }
    }

    /// Whether `TESSERA_HUGE_PAGES` is unset or anything but `0`; reads the environment
    /// without allocating (this runs inside the allocator).
    pub(super) fn env_enabled() -> bool {
        // SAFETY: `getenv` with a NUL-terminated name returns null or a pointer to the
        // value's NUL-terminated bytes, read at once; the process does not call `setenv`
        // from another thread while it allocates (std's `set_var` is `unsafe` for that).
        unsafe {
            let v = libc::getenv(c"TESSERA_HUGE_PAGES".as_ptr());
            v.is_null() || std::ffi::CStr::from_ptr(v).to_bytes() != b"0"
        }
    }

    /// A fresh mapping of `len` bytes (a multiple of [`HUGE_PAGE`]) at a 2 MiB boundary,
    /// advised for huge pages; null if there is no room.
    fn reserve(len: usize) -> *mut u8 {
        let Some(over) = len.checked_add(HUGE_PAGE) else {
            return null_mut();
        };
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return null_mut();
        }
        // Map a huge page more than asked and give back the unaligned head and tail.
        let start = raw as usize;
        let head = start.next_multiple_of(HUGE_PAGE) - start;
        let tail = HUGE_PAGE - head;
        // SAFETY: both ranges lie inside the mapping just made, page-aligned (mmap returns
        // page-aligned addresses and `head` is a difference of page multiples), and nothing
        // refers to them.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap(raw.cast::<u8>().add(head + len).cast(), tail);
            }
        }
        let ptr = raw.cast::<u8>().wrapping_add(head);
        advise(ptr, len);
        ptr
    }

    /// Ask for huge pages on `len` bytes at `ptr`, which no one has touched yet (the kernel
    /// gives huge pages on first fault). A refusal (THP off, an old kernel) changes nothing.
    fn advise(ptr: *mut u8, len: usize) {
        // SAFETY: `madvise` with MADV_HUGEPAGE changes no contents, only how later faults in
        // this mapping of ours are served.
        unsafe {
            libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
        }
    }

    /// A block for `size` bytes (at least [`super::MIN_BYTES`]), its contents undefined: a
    /// freed block from the cache if one fits, else a fresh mapping.
    pub(super) fn map(size: usize) -> *mut u8 {
        let Some(len) = mapped_len(size) else {
            return null_mut();
        };
        match cache::take(len) {
            Some(ptr) => ptr,
            None => reserve(len),
        }
    }

    /// A block for `size` bytes that reads as zero: always a fresh mapping (zeroed by the
    /// kernel on first touch, so nothing is written twice).
    pub(super) fn map_zeroed(size: usize) -> *mut u8 {
        mapped_len(size).map_or(null_mut(), reserve)
    }

    /// Release a block `map` or `remap` made for `size` bytes: kept in the cache (whose
    /// oldest blocks are unmapped to make room), or unmapped if larger than the cache.
    ///
    /// # Safety
    /// `ptr` must be such a block, not used afterwards.
    pub(super) unsafe fn unmap(ptr: *mut u8, size: usize) {
        let len = mapped_len(size).expect("a mapped block's length fits");
        for (at, l) in cache::put(ptr, len) {
            if l > 0 {
                // SAFETY: the caller's contract for `ptr`, and the cache's for the blocks it
                // took out: whole mappings of ours that nothing uses any more.
                unsafe { libc::munmap(at as *mut libc::c_void, l) };
            }
        }
    }

    /// Freed blocks kept for the next allocation that fits. Readers, conversions and calls
    /// that return a fresh output make and drop large blocks; a fresh mapping costs a fault
    /// and the zeroing of each 2 MiB page on first touch (and, in a VM whose memory the host
    /// fills lazily, the host's faults: 0.3-9 GB/s measured), and its release, once several
    /// threads have run, a TLB shoot-down on the other cores; the system allocator reuses
    /// freed memory as it is. A full cache makes room by unmapping its oldest blocks: the
    /// blocks a file's loading frees are large and never asked for again, and while they
    /// held every slot, each repeated search of a graph mapped its vectors afresh (a BFS on
    /// web-NotreDame spent a fifth of its time zeroing huge pages).
    mod cache {
        use std::sync::Mutex;

        const SLOTS: usize = 8;
        /// At most this many bytes are kept.
        const MAX_BYTES: usize = 256 << 20;

        /// (address, mapped length, when kept) of each kept block; length 0: an empty slot.
        type Slots = [(usize, usize, u64); SLOTS];

        /// The slots and the count of blocks kept so far (the age of each). std's `Mutex` is
        /// a futex on Linux: made and locked without allocating, so the allocator may take
        /// it (the critical sections are a scan of eight entries).
        static CACHE: Mutex<(Slots, u64)> = Mutex::new(([(0, 0, 0); SLOTS], 0));

        fn with_slots<R>(f: impl FnOnce(&mut (Slots, u64)) -> R) -> R {
            // `f` only reads and writes the array, so a poisoned lock holds whole entries.
            f(&mut CACHE.lock().unwrap_or_else(|e| e.into_inner()))
        }

        /// A kept block for `len` bytes (a multiple of the huge page): the smallest one of at
        /// least `len` and at most twice that, its excess tail unmapped.
        pub(super) fn take(len: usize) -> Option<*mut u8> {
            let (at, have) = with_slots(|state| take_from(state, len))?;
            if have > len {
                // SAFETY: the tail past `len` is part of the kept block, now ours alone, and
                // starts at a huge page boundary (both lengths are multiples of it).
                unsafe { libc::munmap((at + len) as *mut libc::c_void, have - len) };
            }
            Some(at as *mut u8)
        }

        /// Keep a freed block of `len` mapped bytes, making room by taking out the oldest
        /// kept blocks. Returns the blocks to unmap (those taken out, or this one if it alone
        /// is larger than the cache), `(address, length)`, length 0 for none.
        pub(super) fn put(ptr: *mut u8, len: usize) -> [(usize, usize); SLOTS + 1] {
            with_slots(|state| put_into(state, ptr as usize, len))
        }

        /// [`take`]'s choice in `state`: the block taken out, `(address, length)`.
        fn take_from((slots, _): &mut (Slots, u64), len: usize) -> Option<(usize, usize)> {
            let k = (0..SLOTS)
                .filter(|&k| slots[k].1 >= len && slots[k].1 / 2 <= len)
                .min_by_key(|&k| slots[k].1)?;
            let (at, have, _) = std::mem::take(&mut slots[k]);
            Some((at, have))
        }

        /// [`put`]'s bookkeeping in `state`.
        fn put_into(
            (slots, clock): &mut (Slots, u64),
            at: usize,
            len: usize,
        ) -> [(usize, usize); SLOTS + 1] {
            let mut out = [(0, 0); SLOTS + 1];
            if len > MAX_BYTES {
                out[0] = (at, len);
                return out;
            }
            let mut n = 0;
            loop {
                let kept: usize = slots.iter().map(|s| s.1).sum();
                let free = slots.iter().position(|s| s.1 == 0);
                if let Some(k) = free.filter(|_| kept + len <= MAX_BYTES) {
                    *clock += 1;
                    slots[k] = (at, len, *clock);
                    return out;
                }
                // Some slot holds a block: the cache is full or over its bytes.
                let oldest = (0..SLOTS)
                    .filter(|&k| slots[k].1 > 0)
                    .min_by_key(|&k| slots[k].2)
                    .expect("a full cache holds a block");
                let (old, l, _) = std::mem::take(&mut slots[oldest]);
                out[n] = (old, l);
                n += 1;
            }
        }

        #[cfg(test)]
        mod tests {
            use super::*;

            const MIB: usize = 1 << 20;

            #[test]
            fn a_full_cache_gives_up_its_oldest_blocks() {
                let mut state = ([(0, 0, 0); SLOTS], 0);
                // Four 64 MiB blocks fill the bytes; a 4 MiB one takes the oldest's place.
                for k in 1..=4 {
                    assert!(
                        put_into(&mut state, k << 40, 64 * MIB)
                            .iter()
                            .all(|b| b.1 == 0)
                    );
                }
                let out = put_into(&mut state, 9 << 40, 4 * MIB);
                assert_eq!(out[0], (1 << 40, 64 * MIB));
                assert!(out[1..].iter().all(|b| b.1 == 0));
                assert_eq!(take_from(&mut state, 4 * MIB), Some((9 << 40, 4 * MIB)));
                // Too small for what is kept (more than twice the request): nothing.
                assert_eq!(take_from(&mut state, 2 * MIB), None);
                // Eight small blocks fill the slots; the ninth evicts the oldest kept.
                let mut state = ([(0, 0, 0); SLOTS], 0);
                for k in 1..=SLOTS {
                    put_into(&mut state, k << 30, 2 * MIB);
                }
                let out = put_into(&mut state, 99 << 30, 2 * MIB);
                assert_eq!(out[0], (1 << 30, 2 * MIB));
                // A block larger than the cache is handed back whole.
                let out = put_into(&mut state, 7 << 44, MAX_BYTES + 2 * MIB);
                assert_eq!(out[0], (7 << 44, MAX_BYTES + 2 * MIB));
                assert_eq!(state.0.iter().filter(|s| s.1 > 0).count(), SLOTS);
            }
        }
    }

    /// Resize a block `map` made for `old` bytes to `new` bytes (both at least
    /// [`super::MIN_BYTES`]), keeping its first `min(old, new)` bytes and its alignment.
    ///
    /// # Safety
    /// `ptr` must be such a block; on success it is not used afterwards (the result is).
    pub(super) unsafe fn remap(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
        let old_len = mapped_len(old).expect("a mapped block's length fits");
        let Some(new_len) = mapped_len(new) else {
            return null_mut();
        };
        if new_len <= old_len {
            if new_len < old_len {
                // SAFETY: the cut-off tail is ours, past every byte kept, at a huge page
                // boundary (`new_len` is a multiple of it).
                unsafe { libc::munmap(ptr.add(new_len).cast(), old_len - new_len) };
            }
            return ptr;
        }
        // Grow in place if the addresses after the block are free (same mapping, same advice).
        // SAFETY: resizes our own mapping; without MREMAP_MAYMOVE it cannot move.
        let grown = unsafe { libc::mremap(ptr.cast(), old_len, new_len, 0) };
        if grown != libc::MAP_FAILED {
            return ptr;
        }
        // Else move the pages into a fresh aligned reservation, which MREMAP_FIXED replaces:
        // page tables move, no byte is copied, and huge pages stay huge (both ends aligned).
        let dest = reserve(new_len);
        if dest.is_null() {
            return null_mut();
        }
        // SAFETY: moves our block onto our reservation `dest` of `new_len` bytes (which it
        // replaces); on failure neither changes.
        let moved = unsafe {
            libc::mremap(
                ptr.cast(),
                old_len,
                new_len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                dest.cast::<libc::c_void>(),
            )
        };
        if moved == libc::MAP_FAILED {
            // SAFETY: the reservation is ours and unused.
            unsafe { libc::munmap(dest.cast(), new_len) };
            return null_mut();
        }
        // The moved mapping, grown part included, keeps the block's advice.
        dest
    }
}

/// Off Linux large layouts never occur (`is_large` is false), so these are never called.
#[cfg(not(target_os = "linux"))]
mod os {
    pub(super) fn env_enabled() -> bool {
        false
    }

    pub(super) fn fix_system_thresholds() {}

    pub(super) fn map(_size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }

    pub(super) fn map_zeroed(_size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }

    pub(super) unsafe fn unmap(_ptr: *mut u8, _size: usize) {}

    pub(super) unsafe fn remap(_ptr: *mut u8, _old: usize, _new: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
}

#[cfg(test)]
mod tests {
    //! The crate's unit tests run on [`HugePages`] (`lib.rs`), so the blocks here are its.
    use super::*;
    use crate::runtime::Buffer;
    use crate::types::{ElemType, Scalar};

    /// The `/proc/self/smaps` entry of the mapping holding `addr`: its `VmFlags` and
    /// `AnonHugePages` in kB (`None` off Linux or if no mapping holds it).
    fn mapping_of(addr: usize) -> Option<(String, u64)> {
        let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        let mut huge_kb = 0;
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
                continue;
            }
            if !inside {
                continue;
            }
            if first == "AnonHugePages:" {
                huge_kb = words.next()?.parse().ok()?;
            } else if first == "VmFlags:" {
                return Some((line.to_string(), huge_kb));
            }
        }
        None
    }

    /// Whether transparent huge pages are on for advised memory (`always` or `madvise`).
    fn thp_enabled() -> bool {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"))
    }

    #[test]
    fn large_buffers_are_aligned_advised_and_get_huge_pages() {
        let n = 3 * HUGE_PAGE / 8 + 5; // 6 MiB and a bit: a partial last huge page
        let mut zeros = Buffer::filled(ElemType::F64, n, Scalar::F64(0.0));
        let mut sevens = Buffer::filled(ElemType::I64, n, Scalar::I64(7));
        assert!(zeros.as_f64().unwrap().iter().all(|&x| x == 0.0));
        assert!(sevens.as_i64().unwrap().iter().all(|&x| x == 7));
        if !cfg!(target_os = "linux") {
            return;
        }
        for b in [&mut zeros, &mut sevens] {
            let at = b.as_mut_ptr() as usize;
            assert_eq!(at % HUGE_PAGE, 0, "a large buffer starts on a huge page");
            let (flags, _) = mapping_of(at).expect("the buffer is mapped");
            assert!(flags.contains(" hg"), "advised MADV_HUGEPAGE: {flags}");
        }
        // Touch every page of the zero-filled (never written) buffer, then count huge pages.
        if let Buffer::F64(v) = &mut zeros {
            for (k, x) in v.iter_mut().enumerate() {
                *x = k as f64;
            }
        }
        if !thp_enabled() {
            eprintln!("transparent huge pages are off here: AnonHugePages not checked");
            return;
        }
        let (_, huge_kb) = mapping_of(zeros.as_ptr() as usize).expect("mapped");
        assert!(
            huge_kb >= 2048,
            "a written 6 MiB buffer holds huge pages: {huge_kb} kB"
        );
    }

    #[test]
    fn growth_keeps_contents_and_alignment_across_the_threshold() {
        let mut v: Vec<u64> = Vec::new();
        let n = 5 * HUGE_PAGE / 8 + 3;
        for k in 0..n as u64 {
            v.push(k * 3 + 1);
            if v.len() * 8 >= MIN_BYTES && cfg!(target_os = "linux") {
                assert_eq!(v.as_ptr() as usize % HUGE_PAGE, 0);
            }
        }
        assert!(v.iter().enumerate().all(|(k, &x)| x == k as u64 * 3 + 1));
        // Exact growth between large sizes (mremap in place or moved), then shrinking: large
        // to large and large to small.
        v.reserve_exact(7 * HUGE_PAGE / 8);
        assert!(v.iter().enumerate().all(|(k, &x)| x == k as u64 * 3 + 1));
        v.truncate(HUGE_PAGE / 8 + 1);
        v.shrink_to_fit();
        assert!(v.iter().enumerate().all(|(k, &x)| x == k as u64 * 3 + 1));
        v.truncate(1000);
        v.shrink_to_fit();
        assert!(v.iter().enumerate().all(|(k, &x)| x == k as u64 * 3 + 1));
        assert_eq!(v.len(), 1000);
    }

    #[test]
    fn small_blocks_are_the_system_allocators() {
        assert!(!is_large(MIN_BYTES - 1, 8));
        assert!(
            !is_large(1 << 30, 2 * HUGE_PAGE),
            "over-aligned layouts pass through"
        );
        assert_eq!(is_large(MIN_BYTES, 8), cfg!(target_os = "linux"));
        let small = Buffer::filled(ElemType::F64, (MIN_BYTES - 8) / 8, Scalar::F64(1.5));
        assert!(small.as_f64().unwrap().iter().all(|&x| x == 1.5));
        if let Some((flags, _)) = mapping_of(small.as_ptr() as usize) {
            assert!(!flags.contains(" hg"), "not advised: {flags}");
        }
    }

    #[test]
    fn freed_blocks_are_reused_and_zeroed_ones_are_fresh() {
        if !cfg!(target_os = "linux") {
            return;
        }
        // SAFETY: valid non-zero layouts; every block is released with its own layout.
        unsafe {
            let l = Layout::from_size_align(7 * HUGE_PAGE + 3, 8).unwrap();
            let p = HugePages.alloc(l);
            p.write_bytes(0x5A, l.size());
            HugePages.dealloc(p, l);
            // Other tests run alongside and may take the block: only the zeroed case is
            // certain. A zeroed block is fresh whatever the cache holds.
            let z = HugePages.alloc_zeroed(l);
            assert!((0..l.size()).step_by(4001).all(|k| *z.add(k) == 0));
            assert_eq!(z as usize % HUGE_PAGE, 0);
            HugePages.dealloc(z, l);
            // A smaller block reuses a kept one when one fits (its tail given back).
            let small = Layout::from_size_align(5 * HUGE_PAGE, 8).unwrap();
            let q = HugePages.alloc(small);
            assert!(!q.is_null() && (q as usize).is_multiple_of(HUGE_PAGE));
            q.write_bytes(1, small.size());
            HugePages.dealloc(q, small);
        }
    }

    #[test]
    fn direct_calls_honour_the_contract() {
        // SAFETY: valid non-zero layouts; every block is released with its own layout.
        unsafe {
            let big = Layout::from_size_align(MIN_BYTES + 1, 64).unwrap();
            let p = HugePages.alloc_zeroed(big);
            assert!(!p.is_null());
            assert!((0..big.size()).step_by(4093).all(|k| *p.add(k) == 0));
            p.write_bytes(0xAB, big.size());
            // Down across the threshold: the first bytes are kept.
            let q = HugePages.realloc(p, big, 4096);
            assert!(!q.is_null());
            assert!((0..4096).all(|k| *q.add(k) == 0xAB));
            // And up again.
            let small = Layout::from_size_align(4096, 64).unwrap();
            let r = HugePages.realloc(q, small, 3 * HUGE_PAGE);
            assert!((0..4096).all(|k| *r.add(k) == 0xAB));
            HugePages.dealloc(r, Layout::from_size_align(3 * HUGE_PAGE, 64).unwrap());
            // Sizes past the address space are refused, not a crash.
            let absurd = Layout::from_size_align(usize::MAX / 4, 8).unwrap();
            assert!(HugePages.alloc(absurd).is_null());
        }
    }
}
