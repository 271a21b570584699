//! Packed rows: all values of a row (or of a before-image) in one allocation, and the
//! borrowed views readers get of them.
//!
//! Layout of a [`PackedRow`] of `n` columns:
//!
//! ```text
//! [tag; n] [pad to 8] [slot: u64; n] [variable bytes ...]
//! ```
//!
//! A tag says the column's kind (NULL, I64, U64, F64, Text, Bytes). A fixed-size value sits in
//! its slot; a Text or Bytes value's slot holds `offset << 32 | len` into the variable bytes.
//! One allocation per row instead of one per string keeps a whole-row read to a couple of
//! cache lines, which is what a YCSB read of ten 10-byte fields needs.

use std::fmt;

use crate::value::Value;

const TAG_NULL: u8 = 0;
const TAG_I64: u8 = 1;
const TAG_U64: u8 = 2;
const TAG_F64: u8 = 3;
const TAG_TEXT: u8 = 4;
const TAG_BYTES: u8 = 5;

/// A borrowed column value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    /// NULL.
    Null,
    /// An `I64` value.
    I64(i64),
    /// A `U64` value.
    U64(u64),
    /// An `F64` value.
    F64(f64),
    /// A `Text` value.
    Text(&'a str),
    /// A `Bytes` value.
    Bytes(&'a [u8]),
}

impl<'a> ValueRef<'a> {
    /// An owned copy.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::I64(v) => Value::I64(v),
            ValueRef::U64(v) => Value::U64(v),
            ValueRef::F64(v) => Value::F64(v),
            ValueRef::Text(v) => Value::Text(v.to_owned()),
            ValueRef::Bytes(v) => Value::Bytes(v.to_vec()),
        }
    }

    /// The value as `i64`, if it is one.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            ValueRef::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as `u64`, if it is one.
    pub fn as_u64(self) -> Option<u64> {
        match self {
            ValueRef::U64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as `f64`, if it is one.
    pub fn as_f64(self) -> Option<f64> {
        match self {
            ValueRef::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as text, if it is text.
    pub fn as_text(self) -> Option<&'a str> {
        match self {
            ValueRef::Text(v) => Some(v),
            _ => None,
        }
    }

    /// The value as bytes, if it is bytes.
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            ValueRef::Bytes(v) => Some(v),
            _ => None,
        }
    }

    /// Whether this is NULL.
    pub fn is_null(self) -> bool {
        matches!(self, ValueRef::Null)
    }
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(value: &'a Value) -> Self {
        match value {
            Value::Null => ValueRef::Null,
            Value::I64(v) => ValueRef::I64(*v),
            Value::U64(v) => ValueRef::U64(*v),
            Value::F64(v) => ValueRef::F64(*v),
            Value::Text(v) => ValueRef::Text(v),
            Value::Bytes(v) => ValueRef::Bytes(v),
        }
    }
}

impl PartialEq<Value> for ValueRef<'_> {
    fn eq(&self, other: &Value) -> bool {
        *self == ValueRef::from(other)
    }
}

impl fmt::Display for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Null => f.write_str("NULL"),
            ValueRef::I64(v) => write!(f, "{v}"),
            ValueRef::U64(v) => write!(f, "{v}"),
            ValueRef::F64(v) => write!(f, "{v}"),
            ValueRef::Text(v) => write!(f, "{v:?}"),
            ValueRef::Bytes(v) => write!(f, "{} bytes", v.len()),
        }
    }
}

/// Anything that lends column values by position.
pub(crate) trait Columns {
    fn column(&self, index: usize) -> ValueRef<'_>;
}

impl Columns for [Value] {
    fn column(&self, index: usize) -> ValueRef<'_> {
        ValueRef::from(&self[index])
    }
}

/// Bytes of packed values a new row's tail (an [`InPlaceRow`] inside the row's or the
/// version's own allocation) can hold: fine steps for small rows, coarser ones for large
/// rows, so a tail wastes at most about a fifth of its row and a value that grows a little
/// usually still fits. Larger rows spill their values to the heap. `tail_classes!(m)` calls
/// the macro `m` with the classes as literals (a storage picks the smallest that fits).
macro_rules! tail_classes {
    ($apply:ident) => {
        $apply!(
            0 16 32 48 64 80 96 112 128 160 192 224 256 320 384 448 512 640 768 1024 1280 1536
            2048
        )
    };
}
pub(crate) use tail_classes;

/// Packed rows up to this many bytes live inline, in the version record itself: a small
/// before-image needs no allocation of its own. (A row's newest values live in an
/// [`InPlaceRow`], sized for the row when it is created.)
const INLINE_BYTES: usize = 64;

/// The values of one row (or one before-image), inline when small, else in one allocation.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PackedRow {
    storage: Storage,
    arity: u32,
}

#[derive(Clone, PartialEq, Eq)]
enum Storage {
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    Heap(Box<[u8]>),
}

fn slots_start(arity: usize) -> usize {
    arity.div_ceil(8) * 8
}

fn arity_u32(arity: usize) -> u32 {
    u32::try_from(arity).expect("at most MAX_COLUMNS columns")
}

/// Bytes the packed form of `arity` values produced by `value` takes.
fn packed_len<'v>(arity: usize, value: &impl Fn(usize) -> ValueRef<'v>) -> usize {
    let variable: usize = (0..arity)
        .map(|i| match value(i) {
            ValueRef::Text(t) => t.len(),
            ValueRef::Bytes(b) => b.len(),
            _ => 0,
        })
        .sum();
    slots_start(arity) + 8 * arity + variable
}

/// Bytes the packed form of `values` takes.
pub(crate) fn packed_len_of(values: &[Value]) -> usize {
    packed_len(values.len(), &|i| ValueRef::from(&values[i]))
}

/// Packs `arity` values produced by `value` into `bytes`, which is exactly
/// [`packed_len`] long.
fn pack_into<'v>(arity: usize, value: &impl Fn(usize) -> ValueRef<'v>, bytes: &mut [u8]) {
    let mut next = slots_start(arity) + 8 * arity;
    for i in 0..arity {
        let (tag, slot) = match value(i) {
            ValueRef::Null => (TAG_NULL, 0),
            ValueRef::I64(v) => (TAG_I64, v as u64),
            ValueRef::U64(v) => (TAG_U64, v),
            ValueRef::F64(v) => (TAG_F64, v.to_bits()),
            ValueRef::Text(t) => (TAG_TEXT, place(bytes, &mut next, t.as_bytes())),
            ValueRef::Bytes(b) => (TAG_BYTES, place(bytes, &mut next, b)),
        };
        bytes[i] = tag;
        write_slot(bytes, arity, i, slot);
    }
    debug_assert_eq!(
        next,
        bytes.len(),
        "the values filled the packed length exactly"
    );
}

fn write_slot(bytes: &mut [u8], arity: usize, index: usize, slot: u64) {
    let at = slots_start(arity) + 8 * index;
    bytes[at..at + 8].copy_from_slice(&slot.to_ne_bytes());
}

fn read_slot(bytes: &[u8], arity: usize, index: usize) -> u64 {
    let at = slots_start(arity) + 8 * index;
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(word)
}

/// The `(offset, len)` of a Text or Bytes value's data, from its slot.
fn variable_span(slot: u64) -> (usize, usize) {
    ((slot >> 32) as usize, (slot & 0xFFFF_FFFF) as usize)
}

impl PackedRow {
    /// Packs `arity` values produced by `value`.
    pub(crate) fn build<'v>(arity: usize, value: impl Fn(usize) -> ValueRef<'v>) -> Self {
        let total = packed_len(arity, &value);
        let storage = if total <= INLINE_BYTES {
            let mut bytes = [0u8; INLINE_BYTES];
            pack_into(arity, &value, &mut bytes[..total]);
            Storage::Inline {
                len: total as u8,
                bytes,
            }
        } else {
            let mut heap = vec![0u8; total];
            pack_into(arity, &value, &mut heap);
            Storage::Heap(heap.into_boxed_slice())
        };
        PackedRow {
            storage,
            arity: arity_u32(arity),
        }
    }

    /// A copy of packed values.
    pub(crate) fn copy_of(packed: PackedRef<'_>) -> Self {
        let total = packed.bytes.len();
        let storage = if total <= INLINE_BYTES {
            let mut bytes = [0u8; INLINE_BYTES];
            bytes[..total].copy_from_slice(packed.bytes);
            Storage::Inline {
                len: total as u8,
                bytes,
            }
        } else {
            Storage::Heap(packed.bytes.into())
        };
        PackedRow {
            storage,
            arity: packed.arity,
        }
    }

    fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Inline { len, bytes } => &bytes[..*len as usize],
            Storage::Heap(bytes) => bytes,
        }
    }

    /// The packed values, borrowed.
    pub(crate) fn packed(&self) -> PackedRef<'_> {
        PackedRef {
            bytes: self.bytes(),
            arity: self.arity,
        }
    }

    /// Packs the columns of `mask`, in ascending order, taking each from `column`.
    pub(crate) fn project<'v>(
        mask: crate::schema::ColumnMask,
        column: impl Fn(usize) -> ValueRef<'v>,
    ) -> Self {
        // `build` asks for slots in order (twice); map slot k to the k-th masked column by
        // walking the mask alongside, without allocating a list of columns.
        let columns = ColumnsOf::new(mask);
        Self::build(mask.len(), |slot| column(columns.nth(slot)))
    }

    #[cfg(test)]
    pub(crate) fn from_values(values: &[Value]) -> Self {
        Self::build(values.len(), |i| ValueRef::from(&values[i]))
    }

    pub(crate) fn empty() -> Self {
        Self::build(0, |_| ValueRef::Null)
    }

    pub(crate) fn arity(&self) -> usize {
        self.arity as usize
    }

    /// Bytes this row occupies on the heap (beyond its inline part).
    pub(crate) fn heap_bytes(&self) -> usize {
        match &self.storage {
            Storage::Inline { .. } => 0,
            Storage::Heap(bytes) => bytes.len(),
        }
    }

    pub(crate) fn get(&self, index: usize) -> ValueRef<'_> {
        self.packed().get(index)
    }

    /// This row with `changes` applied.
    #[cfg(test)]
    pub(crate) fn with_changes(&self, changes: &[(usize, Value)]) -> PackedRow {
        self.packed().with_changes(changes)
    }

    #[cfg(test)]
    pub(crate) fn to_values(&self) -> Vec<Value> {
        (0..self.arity()).map(|i| self.get(i).to_value()).collect()
    }
}

/// Packed values, borrowed: from a [`PackedRow`] or an [`InPlaceRow`].
#[derive(Clone, Copy)]
pub(crate) struct PackedRef<'a> {
    bytes: &'a [u8],
    arity: u32,
}

impl<'a> PackedRef<'a> {
    pub(crate) fn arity(&self) -> usize {
        self.arity as usize
    }

    pub(crate) fn get(&self, index: usize) -> ValueRef<'a> {
        let arity = self.arity();
        assert!(index < arity, "column {index} of a row of {arity}");
        let bytes = self.bytes;
        let slot = read_slot(bytes, arity, index);
        match bytes[index] {
            TAG_NULL => ValueRef::Null,
            TAG_I64 => ValueRef::I64(slot as i64),
            TAG_U64 => ValueRef::U64(slot),
            TAG_F64 => ValueRef::F64(f64::from_bits(slot)),
            tag => {
                let (offset, len) = variable_span(slot);
                let data = &bytes[offset..offset + len];
                if tag == TAG_TEXT {
                    // Only `pack_into` writes text here, from a `&str`.
                    ValueRef::Text(std::str::from_utf8(data).unwrap_or_default())
                } else {
                    debug_assert_eq!(tag, TAG_BYTES);
                    ValueRef::Bytes(data)
                }
            }
        }
    }

    /// These values with `changes` applied (the last assignment of a column wins).
    pub(crate) fn with_changes(&self, changes: &[(usize, Value)]) -> PackedRow {
        PackedRow::build(self.arity(), |i| {
            match changes.iter().rev().find(|(column, _)| *column == i) {
                Some((_, value)) => ValueRef::from(value),
                None => self.get(i),
            }
        })
    }
}

/// The newest values of a row, kept in place in the row object.
///
/// The packed bytes live in the tail `inline` when they fit (`D` is `[u8; N]` while the
/// row is built and `[u8]` once it is stored, so the tail is part of the row's own
/// allocation: a read misses the cache once for the row, not once more for its values,
/// and an update that keeps every value's size rewrites them where they are, allocating
/// nothing). Values that outgrow the tail spill to the heap.
///
/// Invariant: `spilled.is_none()` exactly when the values fit the tail, and then they are
/// `inline[..len]`.
pub(crate) struct InPlaceRow<D: ?Sized = [u8]> {
    arity: u32,
    len: u32,
    spilled: Option<Box<[u8]>>,
    inline: D,
}

impl<const N: usize> InPlaceRow<[u8; N]> {
    /// `values` in place, in a tail of `N` bytes (they spill to the heap if they need
    /// more).
    pub(crate) fn new(values: &[Value]) -> Self {
        let value = |i: usize| ValueRef::from(&values[i]);
        let total = packed_len(values.len(), &value);
        let mut row = InPlaceRow {
            arity: arity_u32(values.len()),
            len: 0,
            spilled: None,
            inline: [0u8; N],
        };
        row.store(total, |bytes| pack_into(values.len(), &value, bytes));
        row
    }
}

impl<const N: usize> InPlaceRow<[u8; N]> {
    /// A copy of `packed`, in a tail of `N` bytes (spilled to the heap if it needs more).
    pub(crate) fn from_packed(packed: PackedRef<'_>) -> Self {
        let mut row = InPlaceRow {
            arity: packed.arity,
            len: 0,
            spilled: None,
            inline: [0u8; N],
        };
        row.set_packed(packed);
        row
    }
}

impl<'a> PackedRef<'a> {
    /// Bytes the packed values take.
    pub(crate) fn len_bytes(&self) -> usize {
        self.bytes.len()
    }
}

impl<D: ?Sized + AsRef<[u8]> + AsMut<[u8]>> InPlaceRow<D> {
    /// Makes the values the `total` bytes `fill` writes, in the tail if they fit.
    fn store(&mut self, total: usize, fill: impl FnOnce(&mut [u8])) {
        let inline = self.inline.as_mut();
        if total <= inline.len() {
            fill(&mut inline[..total]);
            self.spilled = None;
        } else {
            let mut heap = vec![0u8; total];
            fill(&mut heap);
            self.spilled = Some(heap.into_boxed_slice());
        }
        self.len = u32::try_from(total).expect("rows are far below 4 GiB");
    }

    fn bytes(&self) -> &[u8] {
        match &self.spilled {
            Some(bytes) => bytes,
            None => &self.inline.as_ref()[..self.len as usize],
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.spilled {
            Some(bytes) => bytes,
            None => &mut self.inline.as_mut()[..self.len as usize],
        }
    }

    /// The values, borrowed.
    pub(crate) fn packed(&self) -> PackedRef<'_> {
        PackedRef {
            bytes: self.bytes(),
            arity: self.arity,
        }
    }

    pub(crate) fn arity(&self) -> usize {
        self.arity as usize
    }

    pub(crate) fn get(&self, index: usize) -> ValueRef<'_> {
        self.packed().get(index)
    }

    /// An owned copy of the values.
    pub(crate) fn to_packed(&self) -> PackedRow {
        PackedRow::copy_of(self.packed())
    }

    /// Bytes the tail holds.
    #[cfg(test)]
    pub(crate) fn tail_len(&self) -> usize {
        self.inline.as_ref().len()
    }

    /// Bytes the values occupy outside the row object (when they spilled).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.spilled.as_ref().map_or(0, |bytes| bytes.len())
    }

    /// Replaces the values with `values` (the same arity).
    pub(crate) fn set_values(&mut self, values: &[Value]) {
        debug_assert_eq!(values.len(), self.arity());
        let value = |i: usize| ValueRef::from(&values[i]);
        let total = packed_len(values.len(), &value);
        self.store(total, |bytes| pack_into(values.len(), &value, bytes));
    }

    /// Replaces the values with a copy of `packed` (the same arity).
    pub(crate) fn set_packed(&mut self, packed: PackedRef<'_>) {
        debug_assert_eq!(packed.arity, self.arity);
        self.store(packed.bytes.len(), |bytes| {
            bytes.copy_from_slice(packed.bytes)
        });
    }

    /// Applies `changes` (the last assignment of a column wins). When every change keeps
    /// its column's layout (a fixed-size value over a fixed-size value, or Text or Bytes of
    /// the same length over Text or Bytes) the values are rewritten where they are;
    /// otherwise they are packed anew.
    pub(crate) fn apply_changes(&mut self, changes: &[(usize, Value)]) {
        let arity = self.arity();
        let keeps_layout = {
            let bytes = self.bytes();
            changes.iter().all(|(column, value)| {
                let old_tag = bytes[*column];
                let old_variable = old_tag == TAG_TEXT || old_tag == TAG_BYTES;
                match value {
                    Value::Text(t) => {
                        old_variable && variable_span(read_slot(bytes, arity, *column)).1 == t.len()
                    }
                    Value::Bytes(b) => {
                        old_variable && variable_span(read_slot(bytes, arity, *column)).1 == b.len()
                    }
                    _ => !old_variable,
                }
            })
        };
        if !keeps_layout {
            let changed = self.packed().with_changes(changes);
            self.set_packed(changed.packed());
            return;
        }
        // Same layout: every change overwrites its tag and its slot or data, and the
        // checks above still hold after each (a column's layout never changes here).
        let bytes = self.bytes_mut();
        for (column, value) in changes {
            let column = *column;
            let (tag, slot) = match value {
                Value::Null => (TAG_NULL, 0),
                Value::I64(v) => (TAG_I64, *v as u64),
                Value::U64(v) => (TAG_U64, *v),
                Value::F64(v) => (TAG_F64, v.to_bits()),
                Value::Text(t) => (TAG_TEXT, overwrite(bytes, arity, column, t.as_bytes())),
                Value::Bytes(b) => (TAG_BYTES, overwrite(bytes, arity, column, b)),
            };
            bytes[column] = tag;
            write_slot(bytes, arity, column, slot);
        }
    }
}

/// Overwrites the data of variable-size column `column` with `data` of the same length;
/// returns its (unchanged) slot.
fn overwrite(bytes: &mut [u8], arity: usize, column: usize, data: &[u8]) -> u64 {
    let slot = read_slot(bytes, arity, column);
    let (offset, len) = variable_span(slot);
    debug_assert_eq!(len, data.len());
    bytes[offset..offset + len].copy_from_slice(data);
    slot
}

/// The columns of a mask, looked up by rank; sequential lookups (`nth(0)`, `nth(1)`, ...)
/// cost one bit operation each.
struct ColumnsOf {
    mask: crate::schema::ColumnMask,
    cursor: std::cell::Cell<(usize, usize)>,
    /// Columns of the mask the lookups stepped over (tests count the walk's cost).
    #[cfg(test)]
    walked: std::cell::Cell<usize>,
}

impl ColumnsOf {
    fn new(mask: crate::schema::ColumnMask) -> Self {
        ColumnsOf {
            mask,
            cursor: std::cell::Cell::new((0, 0)),
            #[cfg(test)]
            walked: std::cell::Cell::new(0),
        }
    }

    /// The `rank`-th column of the mask. A lookup at or after the previous one starts
    /// from the previous one's column, so lookups in rank order cost one step per column
    /// stepped over; one behind it starts again from the first column.
    fn nth(&self, rank: usize) -> usize {
        let (mut at_rank, mut column) = self.cursor.get();
        if rank < at_rank {
            (at_rank, column) = (0, 0);
        }
        // Invariant: the mask's `at_rank`-th column is at or after `column`.
        let mut columns = self.mask.at_or_after(column).iter().inspect(|_| {
            #[cfg(test)]
            self.walked.set(self.walked.get() + 1);
        });
        let found = columns
            .nth(rank - at_rank)
            .expect("rank is below the mask's length");
        debug_assert_eq!(self.mask.rank(found), rank);
        self.cursor.set((rank, found));
        found
    }
}

fn place(bytes: &mut [u8], next: &mut usize, data: &[u8]) -> u64 {
    let offset = *next;
    bytes[offset..offset + data.len()].copy_from_slice(data);
    *next += data.len();
    let offset = u32::try_from(offset).expect("rows are far below 4 GiB");
    let len = u32::try_from(data.len()).expect("values are far below 4 GiB");
    (u64::from(offset) << 32) | u64::from(len)
}

impl Columns for PackedRow {
    fn column(&self, index: usize) -> ValueRef<'_> {
        self.get(index)
    }
}

impl fmt::Debug for PackedRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries((0..self.arity()).map(|i| self.get(i)))
            .finish()
    }
}

/// A row as a transaction sees it, lent to a closure: the fast read path (no copy, no
/// allocation when the newest version is visible).
#[derive(Clone, Copy)]
pub struct RowView<'a> {
    inner: ViewInner<'a>,
}

#[derive(Clone, Copy)]
enum ViewInner<'a> {
    Packed(PackedRef<'a>),
    Reconstructed(&'a [ValueRef<'a>]),
}

impl<'a> RowView<'a> {
    pub(crate) fn packed(row: PackedRef<'a>) -> Self {
        RowView {
            inner: ViewInner::Packed(row),
        }
    }

    pub(crate) fn reconstructed(values: &'a [ValueRef<'a>]) -> Self {
        RowView {
            inner: ViewInner::Reconstructed(values),
        }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        match self.inner {
            ViewInner::Packed(row) => row.arity(),
            ViewInner::Reconstructed(values) => values.len(),
        }
    }

    /// Whether the row has no columns (never, for a table row).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of column `index`.
    ///
    /// # Panics
    /// If `index` is not a column of the table.
    pub fn get(&self, index: usize) -> ValueRef<'a> {
        match self.inner {
            ViewInner::Packed(row) => row.get(index),
            ViewInner::Reconstructed(values) => values[index],
        }
    }

    /// The values, in column order.
    pub fn iter(&self) -> impl Iterator<Item = ValueRef<'a>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// An owned copy of the row.
    pub fn to_values(&self) -> Vec<Value> {
        self.iter().map(ValueRef::to_value).collect()
    }
}

impl Columns for RowView<'_> {
    fn column(&self, index: usize) -> ValueRef<'_> {
        self.get(index)
    }
}

impl fmt::Debug for RowView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Value> {
        vec![
            Value::U64(7),
            Value::Null,
            Value::I64(-3),
            Value::F64(2.5),
            Value::Text("héllo".into()),
            Value::Bytes(vec![0, 1, 2, 255]),
            Value::Text(String::new()),
        ]
    }

    #[test]
    fn packs_and_unpacks_every_type() {
        let values = sample();
        let packed = PackedRow::from_values(&values);
        assert_eq!(packed.arity(), values.len());
        assert_eq!(packed.to_values(), values);
        for (i, value) in values.iter().enumerate() {
            assert_eq!(packed.get(i), *value);
        }
        assert_eq!(PackedRow::empty().arity(), 0);
    }

    #[test]
    fn projection_keeps_the_masked_columns_in_order() {
        let packed = PackedRow::from_values(&sample());
        let mask = crate::schema::ColumnMask::from_columns(&[6, 0, 4]);
        let projected = PackedRow::project(mask, |column| packed.get(column));
        assert_eq!(
            projected.to_values(),
            vec![
                sample()[0].clone(),
                sample()[4].clone(),
                sample()[6].clone()
            ]
        );
        let none = PackedRow::project(crate::schema::ColumnMask::EMPTY, |c| packed.get(c));
        assert_eq!(none.arity(), 0);
    }

    /// `wu-fig14` found the delta storage three times slower than the whole-copy ones
    /// when an update changes all of 100 columns: building the before-image looked up each
    /// masked column by walking the mask from its first column, so a mask of n columns
    /// cost n²/2 steps per pass. Sequential lookups must cost one step each.
    #[test]
    fn regression_looking_up_a_wide_mask_in_order_walks_each_column_once() {
        let mask = crate::schema::ColumnMask::all(crate::MAX_COLUMNS);
        let columns = ColumnsOf::new(mask);
        for pass in 0..2 {
            for rank in 0..mask.len() {
                assert_eq!(columns.nth(rank), rank, "pass {pass}");
            }
        }
        // Two passes over 128 columns, each column stepped over at most once per pass
        // (plus the one found).
        assert!(
            columns.walked.get() <= 2 * 2 * mask.len(),
            "walked {} columns",
            columns.walked.get()
        );
        let sparse = crate::schema::ColumnMask::from_columns(&[3, 64, 65, 127]);
        let of_sparse = ColumnsOf::new(sparse);
        let found: Vec<usize> = (0..4).map(|rank| of_sparse.nth(rank)).collect();
        assert_eq!(found, [3, 64, 65, 127]);
        assert_eq!(
            of_sparse.nth(1),
            64,
            "a lookup behind the cursor starts over"
        );
    }

    #[test]
    fn small_rows_are_inline_and_large_ones_on_the_heap() {
        let small = PackedRow::from_values(&[Value::U64(1), Value::Text("ab".into())]);
        assert_eq!(small.heap_bytes(), 0);
        assert_eq!(small.get(1), ValueRef::Text("ab"));
        let large = PackedRow::from_values(&[Value::Bytes(vec![7; 100])]);
        assert!(large.heap_bytes() > INLINE_BYTES);
        assert_eq!(large.get(0), ValueRef::Bytes(&[7; 100]));
    }

    #[test]
    fn changes_apply_last_assignment_wins() {
        let packed = PackedRow::from_values(&sample());
        let changed = packed.with_changes(&[
            (4, Value::Text("x".into())),
            (1, Value::I64(9)),
            (4, Value::Text("last".into())),
        ]);
        let mut expected = sample();
        expected[1] = Value::I64(9);
        expected[4] = Value::Text("last".into());
        assert_eq!(changed.to_values(), expected);
        assert_eq!(packed.to_values(), sample(), "the original is untouched");
    }

    fn in_place<const N: usize>(values: &[Value]) -> InPlaceRow<[u8; N]> {
        InPlaceRow::new(values)
    }

    fn values_of(row: &InPlaceRow) -> Vec<Value> {
        (0..row.arity()).map(|i| row.get(i).to_value()).collect()
    }

    #[test]
    fn in_place_rows_keep_their_values_in_the_tail_when_they_fit() {
        let values = sample();
        let needed = packed_len_of(&values);
        let boxed: Box<InPlaceRow> = Box::new(in_place::<128>(&values));
        assert!(needed <= 128);
        assert_eq!(boxed.heap_bytes(), 0);
        assert_eq!(values_of(&boxed), values);
        let spilled: Box<InPlaceRow> = Box::new(in_place::<16>(&values));
        assert_eq!(spilled.heap_bytes(), needed);
        assert_eq!(values_of(&spilled), values);
    }

    #[test]
    fn changes_that_keep_the_layout_are_written_in_place() {
        let mut row: Box<InPlaceRow> = Box::new(in_place::<128>(&sample()));
        let before = row.packed().bytes.as_ptr();
        let changes = [
            (0, Value::I64(-1)),           // fixed over fixed, another type
            (1, Value::F64(1.5)),          // over NULL
            (4, Value::Bytes(vec![9; 6])), // Bytes over Text of the same length
            (5, Value::Bytes(vec![4; 4])),
            (5, Value::Bytes(vec![5; 4])), // the last assignment wins
        ];
        let mut expected = sample();
        for (column, value) in &changes {
            expected[*column] = value.clone();
        }
        let reference = PackedRow::from_values(&sample()).with_changes(&changes);
        row.apply_changes(&changes);
        assert_eq!(values_of(&row), expected);
        assert_eq!(
            row.packed().bytes,
            reference.packed().bytes,
            "same bytes as a repack"
        );
        assert_eq!(
            row.packed().bytes.as_ptr(),
            before,
            "rewritten where they were"
        );
        assert_eq!(row.heap_bytes(), 0);
    }

    #[test]
    fn changes_that_move_values_repack_and_may_spill_and_come_back() {
        let mut row: Box<InPlaceRow> = Box::new(in_place::<128>(&sample()));
        // A longer text: repacked, still in the tail.
        row.apply_changes(&[(4, Value::Text("longer text".into()))]);
        let mut expected = sample();
        expected[4] = Value::Text("longer text".into());
        assert_eq!(values_of(&row), expected);
        assert_eq!(row.heap_bytes(), 0);
        // Text over a fixed value, and far more than the tail holds: spills.
        row.apply_changes(&[(0, Value::Text("x".repeat(200)))]);
        expected[0] = Value::Text("x".repeat(200));
        assert_eq!(values_of(&row), expected);
        assert!(row.heap_bytes() > 128);
        // A fixed value over a spilled row's text: repacked, back in the tail.
        row.apply_changes(&[(0, Value::U64(3))]);
        expected[0] = Value::U64(3);
        assert_eq!(values_of(&row), expected);
        assert_eq!(row.heap_bytes(), 0);
        // Whole replacements.
        row.set_values(&sample());
        assert_eq!(values_of(&row), sample());
        let copy = row.to_packed();
        row.apply_changes(&[(2, Value::Null)]);
        row.set_packed(copy.packed());
        assert_eq!(values_of(&row), sample());
    }
}
