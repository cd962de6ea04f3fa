//! Runtime errors of compiled kernels as values.
//!
//! A kernel's checks (a write a level cannot take, a loop running outside a tensor) and the
//! backends' faults (an access outside an array, a failed grow) become a [`KernelError`]: the
//! tensor, the place and a [`KernelErrorKind`] with the data of the failure. Nothing downstream
//! reads the message text: `explain` adds the program's writes of the tensor by matching on
//! the kind, and API users match on it the same way (`Error::Kernel(e)` with `e.kind`).
//!
//! It sits in the bottom layer because both the loop IR (kernels carry their errors) and the
//! crate's `Error` (which wraps one) need it, and those two may not import each other.

use crate::span::Span;
use std::fmt;

/// A runtime error raised by a compiled kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelError {
    /// The tensor the failing check guards; `None` for an array that belongs to no tensor.
    pub tensor: Option<String>,
    /// The access as the user wrote it (`C[i, j]`), when the error is tied to one.
    pub access: Option<String>,
    /// Where in the program text; unknown (`Span::default()`) for built programs and for
    /// checks that do not know the statement (a level's order check, until `explain`).
    pub span: Span,
    pub kind: KernelErrorKind,
    /// Every write of `tensor` in the program, for errors about writes (added by `explain`).
    pub writes: Vec<WriteSite>,
    /// What to change, for writes the format takes only in order (added by `explain`).
    pub hint: Option<OrderHint>,
}

/// What went wrong. Level variants carry the level's name as it appears in a format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelErrorKind {
    /// Writes the level takes only in increasing order came in another order.
    OutOfOrder { level: &'static str, order: Order },
    /// An entry written twice into a level that cannot combine repeated writes.
    Duplicate { level: &'static str },
    /// A second run (or a write inside the stored run) for a fiber that holds one run.
    SecondRun { level: &'static str },
    /// A second coordinate for a fiber that holds one entry.
    SecondEntry { level: &'static str },
    /// A loop's index leaves dimension `dim` of the tensor; `value` is the offending index
    /// (filled in when the backend's fault is converted, if the kernel stored it).
    OutOfBounds { dim: usize, value: Option<i64> },
    /// A shifted access (`A[i + c]`) leaves dimension `dim` of the tensor.
    ShiftOutOfBounds { dim: usize },
    /// A load or store at `index` outside `array` (of length `len`): the tensor's arrays
    /// contradict each other.
    Storage {
        array: String,
        index: i64,
        len: usize,
    },
    /// `array` could not grow to `len` elements (over the memory limit, or out of memory).
    Grow { array: String, len: i64 },
    /// A 4-byte level (`coord=i32`) was asked to index a dimension, or hold a count of
    /// entries, beyond `i32::MAX` (`what` says which): refused rather than wrapped.
    IndexOverflow {
        level: &'static str,
        what: &'static str,
    },
}

/// Which order a level needs its writes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Fibers opened in increasing position order.
    Fibers,
    /// Entries of a fiber once each, in increasing coordinate order.
    Entries,
    /// Coordinates of a run-length fiber once each, in increasing order.
    Runs,
    /// No write before the start of the fiber's band.
    BandStart,
    /// Sorted as written: only a level above a leaf can be sorted at freeze.
    Sorted,
}

/// A write of the failing tensor in the program.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteSite {
    /// The access as the user wrote it.
    pub access: String,
    pub span: Span,
    /// The loops around the write, outermost first: index and the loop's place.
    pub loops: Vec<(String, Span)>,
}

/// The fix for an out-of-order write.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderHint {
    /// The tensor's format, as written.
    pub format: Option<String>,
    /// For a write indexed by loop indices only: those indices in access order (the loop
    /// nest that writes in order).
    pub loop_order: Option<Vec<String>>,
    /// Formats whose levels all take writes in any order.
    pub any_order: String,
    /// Where the program updates the tensor again after reading it: its format keeps the
    /// stored entries and appends, so the new writes must come after them.
    pub reopened_at: Option<crate::span::Span>,
}

impl KernelError {
    /// An error about `tensor` with no place yet.
    pub fn new(tensor: impl Into<String>, kind: KernelErrorKind) -> KernelError {
        KernelError::about(Some(tensor.into()), kind)
    }

    /// An error about `tensor`, if the failing array belongs to one, with no place yet.
    pub fn about(tensor: Option<String>, kind: KernelErrorKind) -> KernelError {
        KernelError {
            tensor,
            access: None,
            span: Span::default(),
            kind,
            writes: vec![],
            hint: None,
        }
    }

    /// `self` raised at `span`.
    pub fn at(mut self, span: Span) -> KernelError {
        self.span = span;
        self
    }

    /// Equal including the place (`Span` equality ignores positions, but two checks at two
    /// places are two errors).
    pub fn same(&self, other: &KernelError) -> bool {
        self == other && (self.span.line, self.span.col) == (other.span.line, other.span.col)
    }

    /// Whether the error is about a write the tensor's format cannot take.
    pub fn is_refused_write(&self) -> bool {
        matches!(
            self.kind,
            KernelErrorKind::OutOfOrder { .. }
                | KernelErrorKind::Duplicate { .. }
                | KernelErrorKind::SecondRun { .. }
                | KernelErrorKind::SecondEntry { .. }
        )
    }
}

/// `name` for a tensor that may be unknown.
fn tensor_name(t: &Option<String>) -> &str {
    t.as_deref().unwrap_or("?")
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use KernelErrorKind::*;
        // The writes, when listed, carry their places; otherwise the error's own place leads.
        if self.span.is_known() && self.writes.is_empty() {
            write!(f, "{}: ", self.span)?;
        }
        let named_inline = matches!(self.kind, OutOfBounds { .. } | ShiftOutOfBounds { .. });
        if let Some(t) = &self.tensor
            && !named_inline
        {
            write!(f, "tensor `{t}`: ")?;
        }
        let t = tensor_name(&self.tensor);
        match &self.kind {
            OutOfOrder { level, order } => match order {
                Order::Fibers => write!(
                    f,
                    "{level} fibers must be written in increasing position order"
                ),
                Order::Entries => write!(
                    f,
                    "{level} entries must be written once each, in increasing coordinate order"
                ),
                Order::Runs => write!(
                    f,
                    "{level} coordinates must be written once each, in increasing order"
                ),
                Order::BandStart => write!(
                    f,
                    "{level} cannot write before the start of a fiber's band (write each fiber in increasing coordinate order)"
                ),
                Order::Sorted => write!(
                    f,
                    "a {level} level with levels below it must be written in increasing order (only a leaf child can be sorted at freeze)"
                ),
            },
            Duplicate { level } => write!(
                f,
                "a {level} entry was written twice (it cannot combine repeated writes; use SparseDict or SparseByteMap to accumulate)"
            ),
            SecondRun { level } => write!(
                f,
                "a {level} fiber can only hold one run (a second run, or a write inside the stored run, was made)"
            ),
            SecondEntry { level } => write!(
                f,
                "{level} holds one entry per fiber, but a second coordinate was written"
            ),
            OutOfBounds { dim, value } => match value {
                Some(v) => write!(f, "index {v} is outside dimension {dim} of `{t}`"),
                None => write!(f, "an index is outside dimension {dim} of `{t}`"),
            },
            ShiftOutOfBounds { dim } => write!(
                f,
                "the shifted index of `{t}` in dimension {dim} leaves the tensor's bounds (use `~` to read outside as `missing`)"
            ),
            Storage { array, index, len } => write!(
                f,
                "index {index} is out of bounds of `{array}` (length {len}): the tensor's arrays are inconsistent"
            ),
            Grow { array, len } => write!(
                f,
                "cannot grow `{array}` to {len} elements: over the memory limit or out of memory"
            ),
            IndexOverflow { level, what } => write!(
                f,
                "{level} with coord=i32 cannot hold {what} above {} (use coord=i64)",
                i32::MAX
            ),
        }?;
        if self.writes.is_empty()
            && let Some(a) = &self.access
        {
            write!(f, " (at `{a}`)")?;
        }
        for w in &self.writes {
            write!(f, "; `{t}` is written as `{}`", w.access)?;
            if w.span.is_known() {
                write!(f, " at {}", w.span)?;
            }
            if !w.loops.is_empty() {
                let loops: Vec<String> = w
                    .loops
                    .iter()
                    .map(|(i, s)| match s.is_known() {
                        true => format!("`{i}` ({s})"),
                        false => format!("`{i}`"),
                    })
                    .collect();
                write!(f, " inside the loops over {}", loops.join(", "))?;
            }
        }
        if let Some(h) = &self.hint {
            if let Some(at) = h.reopened_at {
                write!(
                    f,
                    "; `{t}` is updated again at {at} after it was read, and its format keeps the stored entries and appends the new ones after them, so they must come after the last stored one"
                )?;
            }
            let format = h
                .format
                .as_ref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            write!(
                f,
                ". Hint: its format{format} takes these writes only in increasing coordinate order"
            )?;
            match &h.loop_order {
                Some(order) => {
                    let nest: Vec<String> = order.iter().map(|i| format!("{i} = _")).collect();
                    write!(
                        f,
                        ": nest the loops in the order of the access's indices (`for {}`), or",
                        nest.join(", ")
                    )?;
                }
                None => {
                    f.write_str(" (an index computed from data must increase with the loops), so")?
                }
            }
            write!(
                f,
                " store `{t}` in a format that takes writes in any order ({})",
                h.any_order
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(e: &KernelError) -> String {
        e.to_string()
    }

    #[test]
    fn level_errors_name_the_tensor_and_keep_their_wording() {
        let e = KernelError::new(
            "C",
            KernelErrorKind::OutOfOrder {
                level: "SparseList",
                order: Order::Entries,
            },
        );
        assert_eq!(
            shown(&e),
            "tensor `C`: SparseList entries must be written once each, in increasing coordinate order"
        );
        let e = KernelError::new(
            "y",
            KernelErrorKind::SecondRun {
                level: "SparseInterval",
            },
        );
        assert!(shown(&e).contains("can only hold one run"), "{e}");
        let e = KernelError::new("y", KernelErrorKind::Duplicate { level: "SparseCOO" });
        assert!(shown(&e).starts_with("tensor `y`: a SparseCOO entry was written twice"));
    }

    #[test]
    fn bounds_errors_lead_with_a_known_place_and_omit_an_unknown_one() {
        let e = KernelError::new(
            "A",
            KernelErrorKind::OutOfBounds {
                dim: 1,
                value: Some(7),
            },
        );
        assert_eq!(shown(&e), "index 7 is outside dimension 1 of `A`");
        assert_eq!(
            shown(&e.clone().at(Span::new(3, 5))),
            "3:5: index 7 is outside dimension 1 of `A`"
        );
        let unknown = KernelError::new(
            "A",
            KernelErrorKind::OutOfBounds {
                dim: 0,
                value: None,
            },
        );
        assert_eq!(shown(&unknown), "an index is outside dimension 0 of `A`");
    }

    #[test]
    fn writes_and_hint_follow_the_message() {
        let mut e = KernelError::new(
            "C",
            KernelErrorKind::OutOfOrder {
                level: "SparseList",
                order: Order::Entries,
            },
        )
        .at(Span::new(3, 3));
        e.writes = vec![WriteSite {
            access: "C[i, j]".into(),
            span: Span::new(3, 3),
            loops: vec![("j".into(), Span::new(2, 1)), ("i".into(), Span::default())],
        }];
        e.hint = Some(OrderHint {
            format: Some("Dense(SparseList(Element(0.0)))".into()),
            loop_order: Some(vec!["i".into(), "j".into()]),
            any_order: "Dense".into(),
            reopened_at: None,
        });
        let s = shown(&e);
        // The write list carries the place: no leading span.
        assert!(s.starts_with("tensor `C`: SparseList"), "{s}");
        assert!(
            s.contains("; `C` is written as `C[i, j]` at 3:3 inside the loops over `j` (2:1), `i`. Hint: its format Dense(SparseList(Element(0.0))) takes"),
            "{s}"
        );
        assert!(s.contains("(`for i = _, j = _`), or store `C` in a format that takes writes in any order (Dense)"), "{s}");
        e.hint.as_mut().unwrap().loop_order = None;
        assert!(
            shown(&e).contains("must increase with the loops), so store `C`"),
            "{e}"
        );
    }

    #[test]
    fn places_count_in_sameness() {
        let a = KernelError::new("A", KernelErrorKind::ShiftOutOfBounds { dim: 0 });
        assert!(a.same(&a.clone()));
        assert!(!a.same(&a.clone().at(Span::new(1, 2))));
        assert!(!a.same(&KernelError::new(
            "B",
            KernelErrorKind::ShiftOutOfBounds { dim: 0 }
        )));
    }

    #[test]
    fn refused_writes_are_the_level_kinds() {
        let level = |kind| KernelError::new("x", kind).is_refused_write();
        assert!(level(KernelErrorKind::SecondEntry {
            level: "SparsePoint"
        }));
        assert!(!level(KernelErrorKind::Grow {
            array: "x_idx".into(),
            len: 9
        }));
        assert!(!level(KernelErrorKind::OutOfBounds {
            dim: 0,
            value: None
        }));
    }
}
