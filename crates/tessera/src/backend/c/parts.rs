//! Large kernels as several C functions.
//!
//! GCC's optimisation time grows faster than linearly with the size of one function (its
//! data-flow and register-allocation passes work over every block and every variable live
//! across it): a gradient kernel of 4,900 lines took 2.6 s at `-O3`, most of it in "df live
//! regs" and the register allocator, and past ~6,000 lines the backend had to drop to `-O1`
//! ([`super::LARGE_KERNEL_LINES`]), which made the kernels it served several times slower.
//! A kernel's top-level statements (its loop nests, one after another) share nothing but the
//! kernel's variables and buffers, so a large kernel is emitted as one `noinline` function per
//! group of consecutive top-level statements ([`Config::group`]), which `tessera_kernel` calls in
//! order. The kernel's variables live in one struct between the calls: a part copies the
//! variables its text names into locals on entry (so GCC keeps them in registers inside) and,
//! before it returns normally, copies back those it assigns that a later part names (copying
//! back every one would keep each live to the part's end); a part that fails returns the fault
//! code, which the kernel returns at once, as the one function did (nothing reads the
//! variables after a fault). Buffers are re-read from the views in each part, which holds the
//! current pointer and length of a grown buffer.

use std::collections::BTreeSet;

/// When a kernel is cut into parts, and how large they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Kernels whose statements take more lines of C than this are split into parts; smaller
    /// ones stay one function, exactly as before (GCC's view of the whole is worth more than
    /// the time it saves there).
    pub split_lines: usize,
    /// A part holds consecutive top-level statements up to about this many lines (a statement
    /// longer than this is a part of its own).
    pub part_lines: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            split_lines: 2000,
            part_lines: 1000,
        }
    }
}

impl Config {
    /// The defaults, or `TESSERA_C_SPLIT_LINES` and `TESSERA_C_PART_LINES` when set (for
    /// measurements and tests: a large split value keeps every kernel one function; 0 and 1
    /// make every top-level statement a function of its own).
    pub fn from_env() -> Config {
        let var = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let d = Config::default();
        Config {
            split_lines: var("TESSERA_C_SPLIT_LINES", d.split_lines),
            part_lines: var("TESSERA_C_PART_LINES", d.part_lines),
        }
    }

    /// Consecutive groups of the top-level statements, given each one's number of lines of
    /// C: each group's total stays within `part_lines` unless it is one statement.
    pub fn group(&self, lines: &[usize]) -> Vec<std::ops::Range<usize>> {
        let mut out = vec![];
        let (mut start, mut size) = (0, 0);
        for (i, &n) in lines.iter().enumerate() {
            if i > start && size + n > self.part_lines {
                out.push(start..i);
                (start, size) = (i, 0);
            }
            size += n;
        }
        if start < lines.len() {
            out.push(start..lines.len());
        }
        out
    }
}

/// The variables (`v<N>`) a piece of emitted C names, in order.
pub fn named_vars(text: &str) -> BTreeSet<usize> {
    let bytes = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1]);
        if bytes[i] == b'v' && starts_word {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            if j > i + 1 && (j == bytes.len() || !is_ident(bytes[j])) {
                out.insert(text[i + 1..j].parse().expect("digits"));
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Lines of the longest function in a generated source: what GCC's time depends on.
pub fn longest_function(source: &str) -> usize {
    let mut longest = 0;
    let mut current: Option<usize> = None;
    for line in source.lines() {
        if line.starts_with("int64_t tessera_kernel(")
            || line.starts_with("static int64_t tessera_part")
        {
            current = Some(0);
        }
        if let Some(n) = current.as_mut() {
            *n += 1;
            longest = longest.max(*n);
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_pack_statements_in_order() {
        let c = Config::default();
        assert_eq!(c.group(&[]), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(c.group(&[10, 20]), vec![0..2]);
        assert_eq!(
            c.group(&[600, 600, 300, 2500, 1]),
            vec![0..1, 1..3, 3..4, 4..5]
        );
        assert_eq!(c.group(&[1000, 1]), vec![0..1, 1..2]);
        let each = Config {
            split_lines: 0,
            part_lines: 1,
        };
        assert_eq!(each.group(&[5, 1, 7]), vec![0..1, 1..2, 2..3]);
    }

    #[test]
    fn variables_are_whole_words() {
        let text = "v1 = v23 + views[2].len; tv4 = nv5; v6++; f(v7,v8)";
        assert_eq!(
            named_vars(text).into_iter().collect::<Vec<_>>(),
            vec![1, 6, 7, 8, 23]
        );
    }

    #[test]
    fn the_longest_function_is_counted_from_its_header() {
        let src = "prelude\nline\nstatic int64_t tessera_part0(x) {\na\n}\nint64_t tessera_kernel(y) {\n}\n";
        assert_eq!(longest_function(src), 3);
    }
}
