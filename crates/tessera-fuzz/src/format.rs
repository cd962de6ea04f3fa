//! The format parser and the storage of small tensors: a format either fails to parse, or it
//! prints as text that parses back to the same format, and a tensor built from a few entries in
//! it either is refused with an error or is valid and reads back those entries.

use crate::split_text;
use tessera::levels::Format;
use tessera::runtime::Buffer;
use tessera::tensor::Tensor;
use tessera::types::Scalar;

/// Above this rank the tensor part is skipped: shapes stay tiny, so this bounds nothing but
/// the time per input.
const MAX_RANK: usize = 4;
const MAX_ENTRIES: usize = 16;

/// `data` is `FORMAT TEXT \0 PARAMETERS`: the first parameter byte chooses the rank the text is
/// also parsed at (what shorthands such as `dense` need; 200 and above: none), the next ones
/// the extents (0..=4) and then the entries (one byte per coordinate, one for the value).
pub fn format(data: &[u8]) {
    let Some((text, params)) = split_text(data) else {
        return;
    };
    let mut params = params.iter().copied();
    let rank = params
        .next()
        .and_then(|b| (b < 200).then_some(usize::from(b % 6)));
    let plain = Format::parse(text, None);
    let hinted = Format::parse(text, rank);
    if let (Ok(p), Some(r)) = (&plain, rank)
        && p.rank() == r
    {
        assert!(
            hinted.as_ref() == Ok(p),
            "`{text}` parses as `{p}` without a rank but as {hinted:?} at its rank {r}"
        );
    }
    if let (Ok(h), Some(r)) = (&hinted, rank) {
        assert!(h.rank() == r, "`{text}` at rank {r} parses as `{h}`");
    }
    let Ok(f) = plain.or(hinted) else {
        return;
    };
    let shown = f.to_string();
    match Format::parse(&shown, Some(f.rank())) {
        Ok(again) if again == f => {}
        Ok(again) => panic!("`{text}` prints as `{shown}`, which parses as `{again}`"),
        Err(e) => panic!("`{text}` prints as `{shown}`, which does not parse: {e}"),
    }
    if f.rank() > MAX_RANK {
        return;
    }
    let shape: Vec<usize> = (0..f.rank())
        .map(|_| usize::from(params.next().unwrap_or(2) % 5))
        .collect();
    if let Ok(t) = Tensor::empty(&f, &shape) {
        check_holds(&f, &shape, &t, &[], &[]);
    }
    if shape.contains(&0) {
        return;
    }
    let mut coords: Vec<Vec<i64>> = vec![vec![]; shape.len()];
    let mut values = vec![];
    'entries: while values.len() < MAX_ENTRIES {
        let mut at = vec![];
        for &n in &shape {
            let Some(b) = params.next() else {
                break 'entries;
            };
            at.push(i64::from(b) % n as i64);
        }
        let Some(v) = params.next() else {
            break;
        };
        for (d, c) in at.into_iter().enumerate() {
            coords[d].push(c);
        }
        // Never 0: a Pattern leaf reads every stored entry as `true`.
        values.push(f64::from(v % 3 + 1));
    }
    let buffer = Buffer::F64(values.clone().into());
    if let Ok(t) = Tensor::from_coo(&f, &shape, &coords, &buffer, |_, b| b) {
        check_holds(&f, &shape, &t, &coords, &values);
    }
}

/// `t` was built without error from these entries (a later one at the same coordinates
/// overwrites): it must be valid and read as the fill with those entries in place.
fn check_holds(f: &Format, shape: &[usize], t: &Tensor, coords: &[Vec<i64>], values: &[f64]) {
    if let Err(e) = t.validate("t") {
        panic!("{f} {shape:?} built from {coords:?} = {values:?} is invalid: {e}");
    }
    let elem = f.elem();
    let mut want = Buffer::filled(elem, shape.iter().product(), f.fill());
    for (k, &v) in values.iter().enumerate() {
        let pos = (0..shape.len()).fold(0, |acc, d| acc * shape[d] + coords[d][k] as usize);
        want.set(pos, Scalar::F64(v).cast(elem));
    }
    let got = t.to_dense();
    assert!(
        crate::same_values(&got, &want),
        "{f} {shape:?} built from {coords:?} = {values:?} reads {got:?}, expected {want:?}"
    );
}
