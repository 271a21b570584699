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
//!
//! Long values may instead live out of line (Wu et al. §4.1, chosen by [`NonInline`]): a
//! Text or Bytes value of [`NON_INLINE_MIN_BYTES`] or more gets an allocation of its own,
//! and its slot's span holds a descriptor of it (`row/out_of_line.rs`), flagged in its tag.
//! A copy of the row (a new version of an update that leaves the value alone, a
//! before-image, a time-travel copy) either copies the value into a new allocation
//! ([`NonInline::Copied`], the conventional full-tuple copy) or shares it with one more
//! reference count ([`NonInline::Shared`]); the last row to let go frees it.

use std::fmt;

use crate::value::Value;

mod out_of_line;

const TAG_NULL: u8 = 0;
const TAG_I64: u8 = 1;
const TAG_U64: u8 = 2;
const TAG_F64: u8 = 3;
const TAG_TEXT: u8 = 4;
const TAG_BYTES: u8 = 5;
/// The bits of a tag that say the column's kind (one of the `TAG_` values).
const KIND: u8 = 0x0F;
/// On a Text or Bytes tag: the value is out of line, the slot's span holds its descriptor.
const OUT_OF_LINE: u8 = 0x10;
/// Beside [`OUT_OF_LINE`]: a copy of the row shares the value (one more count) rather than
/// copying it.
const SHARED: u8 = 0x20;

/// Text and bytes values at least this long are the "non-inline attributes" of Wu et al.
/// §4.1: stored out of line unless the policy is [`NonInline::Packed`].
pub const NON_INLINE_MIN_BYTES: usize = 64;

/// How rows store their long Text and Bytes values ([`NON_INLINE_MIN_BYTES`] or more), the
/// non-inline attributes of Wu et al. §4.1. Chosen per database with
/// [`Options::non_inline`](crate::Options::non_inline); every version storage supports
/// each. Shorter values are always packed in the row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NonInline {
    /// In the row's own packed allocation with its other values (the default): a new
    /// version copies the whole row, long values included, in one allocation.
    #[default]
    Packed,
    /// Each in an allocation of its own, which every new version, before-image or
    /// time-travel copy copies: the conventional full-tuple copy §4.1 compares against.
    Copied,
    /// Each in an allocation of its own, shared by every version that did not change it,
    /// freed with a reference count when the last one goes (§4.1).
    Shared,
}

impl NonInline {
    /// Every policy, in the order the docs list them.
    pub const ALL: [NonInline; 3] = [NonInline::Packed, NonInline::Copied, NonInline::Shared];

    /// The name used in design strings and on the lab's command line.
    pub fn name(self) -> &'static str {
        match self {
            NonInline::Packed => "packed",
            NonInline::Copied => "copied",
            NonInline::Shared => "shared",
        }
    }

    /// Parses a name as printed by [`NonInline::name`].
    pub fn from_name(name: &str) -> crate::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|policy| policy.name() == name)
            .ok_or_else(|| crate::Error::UnsupportedConfiguration {
                reason: format!(
                    "unknown non-inline storage {name:?}; known: packed, copied, shared"
                ),
            })
    }

    /// The tag flags a new Text or Bytes value of `len` bytes is stored with.
    fn flags_for(self, len: usize) -> u8 {
        match self {
            NonInline::Packed => 0,
            _ if len < NON_INLINE_MIN_BYTES => 0,
            NonInline::Copied => OUT_OF_LINE,
            NonInline::Shared => OUT_OF_LINE | SHARED,
        }
    }

    /// Bytes a new value of `len` bytes takes in the packed row.
    fn stored_len(self, len: usize) -> usize {
        if self.flags_for(len) & OUT_OF_LINE != 0 {
            out_of_line::DESCRIPTOR_BYTES
        } else {
            len
        }
    }
}

impl fmt::Display for NonInline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
///
/// 120, 184 and 248 make a delta row (72 bytes before its tail) fill the allocator's size
/// classes of 192, 256 and 320 bytes exactly: TPC-C's ORDER_LINE packs into 120 bytes, and
/// its rows took 224 with the tail of 128.
macro_rules! tail_classes {
    ($apply:ident) => {
        $apply!(
            0 16 32 48 64 80 96 112 120 128 160 184 192 224 248 256 320 384 448 512 640 768 1024
            1280 1536 2048
        )
    };
}
pub(crate) use tail_classes;

/// Packed rows up to this many bytes live inline, in the version record itself: a small
/// before-image needs no allocation of its own. (A row's newest values live in an
/// [`InPlaceRow`], sized for the row when it is created.)
const INLINE_BYTES: usize = 64;

/// The values of one row (or one before-image), inline when small, else in one allocation.
///
/// Invariant: `out_of_line` is true exactly when some column's tag carries
/// [`OUT_OF_LINE`]; each such column's descriptor owns one strong count of its value
/// (see `row/out_of_line.rs`), given back when the row is dropped.
pub(crate) struct PackedRow {
    storage: Storage,
    arity: u32,
    out_of_line: bool,
}

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

/// Where a value of a row being packed comes from.
#[derive(Clone, Copy)]
pub(crate) enum Cell<'v> {
    /// A value the transaction gave: stored as the [`NonInline`] policy stores new values.
    New(ValueRef<'v>),
    /// Column `.1` of existing packed values, stored as it is there: an out-of-line value
    /// stays out of line, shared (one more count) or copied (a new allocation) as its tag
    /// says; an inline one is copied inline.
    Of(PackedRef<'v>, usize),
    /// Column `.1` of packed values that are being replaced: an out-of-line descriptor
    /// moves as it is, its count with it (only `InPlaceRow::apply_changes` makes these,
    /// and it stops treating the old values' descriptors as owning counts).
    Moved(PackedRef<'v>, usize),
}

impl<'v> From<ValueRef<'v>> for Cell<'v> {
    fn from(value: ValueRef<'v>) -> Self {
        Cell::New(value)
    }
}

/// Column `column` of `packed` with `changes` applied (the last assignment wins).
fn changed_cell<'v>(
    packed: PackedRef<'v>,
    changes: &'v [(usize, Value)],
    column: usize,
) -> Cell<'v> {
    match changes.iter().rev().find(|(c, _)| *c == column) {
        Some((_, value)) => Cell::New(ValueRef::from(value)),
        None => Cell::Of(packed, column),
    }
}

/// Bytes the variable part of `cell` takes in a packed row.
fn stored_len(cell: Cell<'_>, non_inline: NonInline) -> usize {
    match cell {
        Cell::New(ValueRef::Text(t)) => non_inline.stored_len(t.len()),
        Cell::New(ValueRef::Bytes(b)) => non_inline.stored_len(b.len()),
        Cell::New(_) => 0,
        Cell::Of(packed, column) | Cell::Moved(packed, column) => {
            let tag = packed.tag(column);
            if is_variable(tag) {
                variable_span(read_slot(packed.bytes, packed.arity(), column)).1
            } else {
                0
            }
        }
    }
}

/// Bytes the packed form of `arity` cells produced by `cell` takes.
fn packed_len<'v>(arity: usize, cell: &impl Fn(usize) -> Cell<'v>, non_inline: NonInline) -> usize {
    let variable: usize = (0..arity).map(|i| stored_len(cell(i), non_inline)).sum();
    slots_start(arity) + 8 * arity + variable
}

/// Bytes the packed form of `values` takes.
pub(crate) fn packed_len_of(values: &[Value], non_inline: NonInline) -> usize {
    packed_len(
        values.len(),
        &|i| Cell::New(ValueRef::from(&values[i])),
        non_inline,
    )
}

/// Packs `arity` cells produced by `cell` into `bytes`, which is exactly [`packed_len`]
/// long. Returns whether any column went out of line (its descriptor now owns a count).
fn pack_into<'v>(
    arity: usize,
    cell: &impl Fn(usize) -> Cell<'v>,
    non_inline: NonInline,
    bytes: &mut [u8],
) -> bool {
    let mut next = slots_start(arity) + 8 * arity;
    let mut out_of_line = false;
    for i in 0..arity {
        let (tag, slot) = match cell(i) {
            Cell::New(value) => pack_new(value, non_inline, bytes, &mut next),
            Cell::Of(packed, column) => {
                let tag = packed.tag(column);
                if tag & OUT_OF_LINE != 0 {
                    let descriptor = adopt(tag, packed.stored(column));
                    (tag, place(bytes, &mut next, &descriptor))
                } else {
                    // Inline values are copied inline, whatever the policy: a copy keeps
                    // the representation it copies.
                    pack_new(packed.get(column), NonInline::Packed, bytes, &mut next)
                }
            }
            Cell::Moved(packed, column) => {
                let tag = packed.tag(column);
                if tag & OUT_OF_LINE != 0 {
                    (tag, place(bytes, &mut next, packed.stored(column)))
                } else {
                    pack_new(packed.get(column), NonInline::Packed, bytes, &mut next)
                }
            }
        };
        out_of_line |= tag & OUT_OF_LINE != 0;
        bytes[i] = tag;
        write_slot(bytes, arity, i, slot);
    }
    debug_assert_eq!(
        next,
        bytes.len(),
        "the values filled the packed length exactly"
    );
    out_of_line
}

/// The tag and slot of a new value, its variable part placed at `next`.
fn pack_new(
    value: ValueRef<'_>,
    non_inline: NonInline,
    bytes: &mut [u8],
    next: &mut usize,
) -> (u8, u64) {
    let mut variable = |tag: u8, data: &[u8]| {
        let flags = non_inline.flags_for(data.len());
        if flags & OUT_OF_LINE != 0 {
            (tag | flags, place(bytes, next, &out_of_line::store(data)))
        } else {
            (tag, place(bytes, next, data))
        }
    };
    match value {
        ValueRef::Null => (TAG_NULL, 0),
        ValueRef::I64(v) => (TAG_I64, v as u64),
        ValueRef::U64(v) => (TAG_U64, v),
        ValueRef::F64(v) => (TAG_F64, v.to_bits()),
        ValueRef::Text(t) => variable(TAG_TEXT, t.as_bytes()),
        ValueRef::Bytes(b) => variable(TAG_BYTES, b),
    }
}

/// The descriptor a new row stores for an out-of-line value it copies from another row
/// (`descriptor`, under `tag`): the same one, with one more count, when the value is
/// shared; a new allocation's otherwise.
#[allow(unsafe_code)]
fn adopt(tag: u8, descriptor: &[u8]) -> [u8; out_of_line::DESCRIPTOR_BYTES] {
    debug_assert!(tag & OUT_OF_LINE != 0);
    if tag & SHARED != 0 {
        // SAFETY: `descriptor` lies in a live row's bytes under an out-of-line tag (it
        // comes from a `PackedRef`, which borrows its row), so it owns a count that stays
        // held during the call; the new row will own the one taken here.
        unsafe { out_of_line::share(descriptor) };
        descriptor.try_into().expect("a descriptor's length")
    } else {
        // SAFETY: as above; the row stays borrowed while the data is copied.
        out_of_line::store(unsafe { out_of_line::data(descriptor) })
    }
}

/// Makes the out-of-line descriptors of `bytes`, just copied from another live row, this
/// row's own: each takes a count of a shared value or a copy of a copied one.
fn adopt_all(bytes: &mut [u8], arity: usize) {
    for column in 0..arity {
        let tag = bytes[column];
        if tag & OUT_OF_LINE != 0 {
            let (offset, len) = variable_span(read_slot(bytes, arity, column));
            let own = adopt(tag, &bytes[offset..offset + len]);
            bytes[offset..offset + len].copy_from_slice(&own);
        }
    }
}

/// Gives back the count every out-of-line descriptor of `bytes` owns: the row holding
/// them is being dropped or overwritten.
#[allow(unsafe_code)]
fn release_all(bytes: &[u8], arity: usize) {
    for column in 0..arity {
        if bytes[column] & OUT_OF_LINE != 0 {
            let (offset, len) = variable_span(read_slot(bytes, arity, column));
            // SAFETY: the descriptor lies in the bytes of a row that owns its count, and
            // the caller drops or overwrites those bytes next, so no one treats it as
            // owning a count afterwards (each descriptor is released once: each column
            // has its own).
            unsafe { out_of_line::release(&bytes[offset..offset + len]) };
        }
    }
}

/// Heap bytes the out-of-line values of `packed` that it alone holds take (copied ones;
/// a shared value may be held by many versions and is counted by none, see
/// `docs/known-issues.md`).
fn copied_out_of_line_bytes(packed: PackedRef<'_>) -> usize {
    if !packed.out_of_line {
        return 0;
    }
    (0..packed.arity())
        .filter(|&column| packed.tag(column) & (OUT_OF_LINE | SHARED) == OUT_OF_LINE)
        .map(|column| packed.get(column).stored_bytes() + ARC_HEADER_BYTES)
        .sum()
}

/// The two reference counts in front of an `Arc`'s data.
const ARC_HEADER_BYTES: usize = 16;

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

/// The `(offset, len)` of a Text or Bytes value's stored bytes (its data, or its
/// descriptor when it is out of line), from its slot.
fn variable_span(slot: u64) -> (usize, usize) {
    ((slot >> 32) as usize, (slot & 0xFFFF_FFFF) as usize)
}

fn is_variable(tag: u8) -> bool {
    matches!(tag & KIND, TAG_TEXT | TAG_BYTES)
}

impl<'v> ValueRef<'v> {
    /// Bytes of a Text or Bytes value's data; 0 for the others.
    fn stored_bytes(self) -> usize {
        match self {
            ValueRef::Text(t) => t.len(),
            ValueRef::Bytes(b) => b.len(),
            _ => 0,
        }
    }
}

impl PackedRow {
    /// Packs `arity` cells produced by `cell`, new values as `non_inline` says.
    pub(crate) fn build<'v>(
        arity: usize,
        cell: impl Fn(usize) -> Cell<'v>,
        non_inline: NonInline,
    ) -> Self {
        let total = packed_len(arity, &cell, non_inline);
        let (storage, out_of_line) = if total <= INLINE_BYTES {
            let mut bytes = [0u8; INLINE_BYTES];
            let out_of_line = pack_into(arity, &cell, non_inline, &mut bytes[..total]);
            let len = total as u8;
            (Storage::Inline { len, bytes }, out_of_line)
        } else {
            let mut heap = vec![0u8; total];
            let out_of_line = pack_into(arity, &cell, non_inline, &mut heap);
            (Storage::Heap(heap.into_boxed_slice()), out_of_line)
        };
        PackedRow {
            storage,
            arity: arity_u32(arity),
            out_of_line,
        }
    }

    /// A copy of packed values (out-of-line values shared or copied, as their tags say).
    pub(crate) fn copy_of(packed: PackedRef<'_>) -> Self {
        let total = packed.bytes.len();
        let arity = packed.arity();
        let adopt_copied = |bytes: &mut [u8]| {
            bytes.copy_from_slice(packed.bytes);
            if packed.out_of_line {
                adopt_all(bytes, arity);
            }
        };
        let storage = if total <= INLINE_BYTES {
            let mut bytes = [0u8; INLINE_BYTES];
            adopt_copied(&mut bytes[..total]);
            Storage::Inline {
                len: total as u8,
                bytes,
            }
        } else {
            let mut heap = vec![0u8; total].into_boxed_slice();
            adopt_copied(&mut heap);
            Storage::Heap(heap)
        };
        PackedRow {
            storage,
            arity: packed.arity,
            out_of_line: packed.out_of_line,
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
            out_of_line: self.out_of_line,
        }
    }

    /// Packs the columns of `mask`, in ascending order, taking each from `cell` (new values
    /// are packed inline).
    pub(crate) fn project<'v>(
        mask: crate::schema::ColumnMask,
        cell: impl Fn(usize) -> Cell<'v>,
    ) -> Self {
        // `build` asks for slots in order (twice); map slot k to the k-th masked column by
        // walking the mask alongside, without allocating a list of columns.
        let columns = ColumnsOf::new(mask);
        Self::build(
            mask.len(),
            |slot| cell(columns.nth(slot)),
            NonInline::Packed,
        )
    }

    /// Packs `values` (new long values stored as `non_inline` says).
    pub(crate) fn from_values(values: &[Value], non_inline: NonInline) -> Self {
        Self::build(
            values.len(),
            |i| Cell::New(ValueRef::from(&values[i])),
            non_inline,
        )
    }

    pub(crate) fn empty() -> Self {
        Self::build(0, |_| Cell::New(ValueRef::Null), NonInline::Packed)
    }

    pub(crate) fn arity(&self) -> usize {
        self.arity as usize
    }

    /// Bytes this row occupies on the heap (beyond its inline part), with the out-of-line
    /// values it alone holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        let packed = match &self.storage {
            Storage::Inline { .. } => 0,
            Storage::Heap(bytes) => bytes.len(),
        };
        packed + copied_out_of_line_bytes(self.packed())
    }

    pub(crate) fn get(&self, index: usize) -> ValueRef<'_> {
        self.packed().get(index)
    }

    /// This row with `changes` applied.
    #[cfg(test)]
    pub(crate) fn with_changes(
        &self,
        changes: &[(usize, Value)],
        non_inline: NonInline,
    ) -> PackedRow {
        self.packed().with_changes(changes, non_inline)
    }

    #[cfg(test)]
    pub(crate) fn to_values(&self) -> Vec<Value> {
        (0..self.arity()).map(|i| self.get(i).to_value()).collect()
    }
}

impl Drop for PackedRow {
    fn drop(&mut self) {
        if self.out_of_line {
            release_all(self.bytes(), self.arity());
        }
    }
}

impl Clone for PackedRow {
    fn clone(&self) -> Self {
        PackedRow::copy_of(self.packed())
    }
}

/// Equal values, column by column, however they are stored (floats compared by their
/// bits, so that equality is an equivalence).
impl PartialEq for PackedRow {
    fn eq(&self, other: &Self) -> bool {
        let same = |a: ValueRef<'_>, b: ValueRef<'_>| match (a, b) {
            (ValueRef::F64(x), ValueRef::F64(y)) => x.to_bits() == y.to_bits(),
            _ => a == b,
        };
        self.arity == other.arity && (0..self.arity()).all(|i| same(self.get(i), other.get(i)))
    }
}

impl Eq for PackedRow {}

/// Packed values, borrowed: from a [`PackedRow`] or an [`InPlaceRow`].
///
/// Invariant: `bytes` are the bytes of a live row, borrowed for `'a` (so every
/// out-of-line descriptor in them owns a count for at least `'a`); only `row.rs` makes
/// one.
#[derive(Clone, Copy)]
pub(crate) struct PackedRef<'a> {
    bytes: &'a [u8],
    arity: u32,
    out_of_line: bool,
}

impl<'a> PackedRef<'a> {
    /// Packed values stored outside any row object (a version's contents in a region of
    /// persistent memory), of a table of `arity` columns.
    ///
    /// # Safety
    /// `bytes` must be what this module packed for `arity` columns with every long value
    /// inline ([`NonInline::Packed`]: no out-of-line descriptor, whose count a borrow would
    /// have to hold), unchanged since and while borrowed: [`PackedRef::get`] reads text
    /// without validating its UTF-8 again. Bytes read back from storage that may hold
    /// anything (a region after a crash) must be validated first.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn from_stored(bytes: &'a [u8], arity: usize) -> Self {
        PackedRef {
            bytes,
            arity: arity_u32(arity),
            out_of_line: false,
        }
    }

    /// Packed values read back from storage that may hold anything (a region after a
    /// crash, whose checksum says only that the bytes are whole): checked to be what this
    /// module packs for `arity` columns with every value inline (tags known, spans inside
    /// the bytes, text UTF-8), so that reading them never panics nor trusts a lie.
    pub(crate) fn from_untrusted(
        bytes: &'a [u8],
        arity: usize,
    ) -> std::result::Result<Self, &'static str> {
        let arity_u32 = u32::try_from(arity).map_err(|_| "more columns than a row has")?;
        let slots_end = arity
            .checked_mul(8)
            .and_then(|slots| slots.checked_add(slots_start(arity)))
            .ok_or("more columns than a row has")?;
        if bytes.len() < slots_end {
            return Err("a packed row shorter than its tags and slots");
        }
        for index in 0..arity {
            let tag = bytes[index];
            match tag {
                TAG_NULL | TAG_I64 | TAG_U64 | TAG_F64 => {}
                TAG_TEXT | TAG_BYTES => {
                    let (offset, len) = variable_span(read_slot(bytes, arity, index));
                    let data = offset
                        .checked_add(len)
                        .and_then(|end| bytes.get(offset..end))
                        .ok_or("a value's bytes outside its packed row")?;
                    if tag == TAG_TEXT && std::str::from_utf8(data).is_err() {
                        return Err("text that is not UTF-8 in a packed row");
                    }
                }
                _ => return Err("an unknown or out-of-line tag in a packed row"),
            }
        }
        Ok(PackedRef {
            bytes,
            arity: arity_u32,
            out_of_line: false,
        })
    }

    /// The packed bytes, as [`PackedRef::from_stored`] takes them back.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub(crate) fn arity(&self) -> usize {
        self.arity as usize
    }

    fn tag(&self, index: usize) -> u8 {
        self.bytes[index]
    }

    /// The bytes a Text or Bytes column stores: its data, or its descriptor.
    fn stored(&self, index: usize) -> &'a [u8] {
        let (offset, len) = variable_span(read_slot(self.bytes, self.arity(), index));
        &self.bytes[offset..offset + len]
    }

    /// Column `index`, as a cell of a row being packed from these values.
    pub(crate) fn cell(self, index: usize) -> Cell<'a> {
        Cell::Of(self, index)
    }

    #[allow(unsafe_code)]
    pub(crate) fn get(&self, index: usize) -> ValueRef<'a> {
        let arity = self.arity();
        assert!(index < arity, "column {index} of a row of {arity}");
        let slot = read_slot(self.bytes, arity, index);
        let tag = self.tag(index);
        match tag {
            TAG_NULL => ValueRef::Null,
            TAG_I64 => ValueRef::I64(slot as i64),
            TAG_U64 => ValueRef::U64(slot),
            TAG_F64 => ValueRef::F64(f64::from_bits(slot)),
            tag => {
                let stored = self.stored(index);
                let data = if tag & OUT_OF_LINE != 0 {
                    // SAFETY: a `PackedRef` borrows a live row for `'a` (its invariant),
                    // and this descriptor lies in that row's bytes under an out-of-line
                    // tag, so its count is held for `'a`.
                    unsafe { out_of_line::data(stored) }
                } else {
                    stored
                };
                if tag & KIND == TAG_TEXT {
                    debug_assert!(std::str::from_utf8(data).is_ok());
                    // SAFETY: text is written under a text tag only from a `&str`
                    // (`pack_new` and the in-place `overwrite`, directly or through
                    // `out_of_line::store`) and copied as it is, never edited, so these
                    // bytes are UTF-8. Validating them again cost 3.5% of TPC-C's time.
                    ValueRef::Text(unsafe { std::str::from_utf8_unchecked(data) })
                } else {
                    debug_assert_eq!(tag & KIND, TAG_BYTES);
                    ValueRef::Bytes(data)
                }
            }
        }
    }

    /// These values with `changes` applied (the last assignment of a column wins); new
    /// values stored as `non_inline` says, the others as they are here.
    pub(crate) fn with_changes(
        self,
        changes: &'a [(usize, Value)],
        non_inline: NonInline,
    ) -> PackedRow {
        PackedRow::build(self.arity(), |i| changed_cell(self, changes, i), non_inline)
    }

    /// Bytes the packed values take.
    pub(crate) fn len_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// How many rows hold the out-of-line value of column `index` (tests check sharing).
    #[cfg(test)]
    #[allow(unsafe_code)]
    pub(crate) fn holders(&self, index: usize) -> usize {
        assert!(
            self.tag(index) & OUT_OF_LINE != 0,
            "column {index} is inline"
        );
        // SAFETY: as in `get`: the descriptor's count is held while `self` borrows the row.
        unsafe { out_of_line::strong_count(self.stored(index)) }
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
/// Invariants: `spilled.is_none()` exactly when the values fit the tail, and then they are
/// `inline[..len]`; `out_of_line` as in [`PackedRow`] (the descriptors own their counts,
/// given back when the values are dropped or replaced).
pub(crate) struct InPlaceRow<D: ?Sized + AsRef<[u8]> = [u8]> {
    arity: u16,
    out_of_line: bool,
    len: u32,
    /// Boxed twice so that the pointer is thin: values spill only beyond the largest tail
    /// class, and a word less in every row's header put TPC-C's ORDER_LINE rows in a
    /// smaller allocator size class.
    spilled: Option<Box<Box<[u8]>>>,
    inline: D,
}

impl<const N: usize> InPlaceRow<[u8; N]> {
    fn empty(arity: usize) -> Self {
        InPlaceRow {
            arity: u16::try_from(arity).expect("at most MAX_COLUMNS columns"),
            out_of_line: false,
            len: 0,
            spilled: None,
            inline: [0u8; N],
        }
    }

    /// `values` in place, in a tail of `N` bytes (they spill to the heap if they need
    /// more), long ones stored as `non_inline` says.
    pub(crate) fn new(values: &[Value], non_inline: NonInline) -> Self {
        Self::build(
            values.len(),
            |i| Cell::New(ValueRef::from(&values[i])),
            non_inline,
        )
    }

    /// `arity` cells produced by `cell` in place, in a tail of `N` bytes.
    pub(crate) fn build<'v>(
        arity: usize,
        cell: impl Fn(usize) -> Cell<'v>,
        non_inline: NonInline,
    ) -> Self {
        let mut row = Self::empty(arity);
        let total = packed_len(arity, &cell, non_inline);
        row.store(total, |bytes| pack_into(arity, &cell, non_inline, bytes));
        row
    }

    /// `packed` with `changes` applied, in a tail of `N` bytes: the new version of an
    /// update. Values with nothing out of line are copied whole and changed in place (one
    /// memcpy, then the changes: no column-by-column repacking of a wide row); values with
    /// out-of-line columns are packed once, each unchanged one shared or copied as its tag
    /// says (a copy and a repack would take its count twice).
    pub(crate) fn changed<'v>(
        packed: PackedRef<'v>,
        changes: &'v [(usize, Value)],
        non_inline: NonInline,
    ) -> Self {
        if packed.out_of_line {
            return Self::build(
                packed.arity(),
                |i| changed_cell(packed, changes, i),
                non_inline,
            );
        }
        let mut row = Self::empty(packed.arity());
        row.set_packed(packed);
        if !changes.is_empty() {
            row.apply_changes(changes, non_inline);
        }
        row
    }
}

impl<D: ?Sized + AsRef<[u8]>> InPlaceRow<D> {
    fn bytes(&self) -> &[u8] {
        match &self.spilled {
            Some(bytes) => bytes,
            None => &self.inline.as_ref()[..self.len as usize],
        }
    }
}

impl<D: ?Sized + AsRef<[u8]>> Drop for InPlaceRow<D> {
    fn drop(&mut self) {
        if self.out_of_line {
            release_all(self.bytes(), usize::from(self.arity));
        }
    }
}

impl<D: ?Sized + AsRef<[u8]> + AsMut<[u8]>> InPlaceRow<D> {
    /// Makes the values the `total` bytes `fill` writes, in the tail if they fit; `fill`
    /// says whether any of them is out of line. The values replaced give back their
    /// out-of-line counts first.
    fn store(&mut self, total: usize, fill: impl FnOnce(&mut [u8]) -> bool) {
        let len = u32::try_from(total).expect("rows are far below 4 GiB");
        if self.out_of_line {
            release_all(self.bytes(), self.arity());
            // The old bytes' descriptors own nothing now: leave no bytes to read them from,
            // in case `fill` panics (a read then panics on the missing column instead).
            self.out_of_line = false;
            self.len = 0;
            self.spilled = None;
        }
        let inline = self.inline.as_mut();
        if total <= inline.len() {
            self.out_of_line = fill(&mut inline[..total]);
            self.spilled = None;
        } else {
            let mut heap = vec![0u8; total];
            self.out_of_line = fill(&mut heap);
            self.spilled = Some(Box::new(heap.into_boxed_slice()));
        }
        self.len = len;
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
            arity: u32::from(self.arity),
            out_of_line: self.out_of_line,
        }
    }

    pub(crate) fn arity(&self) -> usize {
        usize::from(self.arity)
    }

    pub(crate) fn get(&self, index: usize) -> ValueRef<'_> {
        self.packed().get(index)
    }

    /// Column `index`, as a cell of a row being packed from these values.
    pub(crate) fn cell(&self, index: usize) -> Cell<'_> {
        self.packed().cell(index)
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

    /// Bytes the values occupy outside the row object (when they spilled, and the
    /// out-of-line values this row alone holds).
    pub(crate) fn heap_bytes(&self) -> usize {
        // A spilled row's bytes, and the box that holds their (fat) pointer.
        self.spilled
            .as_ref()
            .map_or(0, |bytes| bytes.len() + std::mem::size_of::<Box<[u8]>>())
            + copied_out_of_line_bytes(self.packed())
    }

    /// Replaces the values with `values` (the same arity), long ones stored as
    /// `non_inline` says.
    pub(crate) fn set_values(&mut self, values: &[Value], non_inline: NonInline) {
        debug_assert_eq!(values.len(), self.arity());
        let cell = |i: usize| Cell::New(ValueRef::from(&values[i]));
        let total = packed_len(values.len(), &cell, non_inline);
        self.store(total, |bytes| {
            pack_into(values.len(), &cell, non_inline, bytes)
        });
    }

    /// Replaces the values with a copy of `packed` (the same arity).
    pub(crate) fn set_packed(&mut self, packed: PackedRef<'_>) {
        debug_assert_eq!(packed.arity(), self.arity());
        self.store(packed.bytes.len(), |bytes| {
            bytes.copy_from_slice(packed.bytes);
            if packed.out_of_line {
                adopt_all(bytes, packed.arity());
            }
            packed.out_of_line
        });
    }

    /// Packs the values anew with `changes` applied. The unchanged out-of-line values move
    /// into the new packing, counts and all (an update of one column neither copies nor
    /// shares the others); the replaced ones give their counts back.
    #[allow(unsafe_code)]
    fn repack_with_changes(&mut self, changes: &[(usize, Value)], non_inline: NonInline) {
        let old = self.packed();
        let changed = PackedRow::build(
            old.arity(),
            |i| match changes.iter().rev().find(|(c, _)| *c == i) {
                Some((_, value)) => Cell::New(ValueRef::from(value)),
                None => Cell::Moved(old, i),
            },
            non_inline,
        );
        if self.out_of_line {
            let old = self.packed();
            for (k, (column, _)) in changes.iter().enumerate() {
                let last_assignment = !changes[k + 1..].iter().any(|(c, _)| c == column);
                if last_assignment && old.tag(*column) & OUT_OF_LINE != 0 {
                    // SAFETY: the descriptor lies in this row's bytes and owns a count;
                    // its column was replaced in `changed` (it did not move), and the
                    // row stops treating any old descriptor as owning a count just
                    // below, so this one is given back exactly once.
                    unsafe { out_of_line::release(old.stored(*column)) };
                }
            }
            // The other counts moved into `changed`.
            self.out_of_line = false;
        }
        self.take_row(changed);
    }

    /// Replaces the values with `row`'s, taking over its out-of-line counts.
    fn take_row(&mut self, mut row: PackedRow) {
        debug_assert_eq!(row.arity(), self.arity());
        self.store(row.bytes().len(), |bytes| {
            bytes.copy_from_slice(row.bytes());
            // The counts move with the descriptors: `row` must not give them back.
            std::mem::replace(&mut row.out_of_line, false)
        });
    }

    /// Applies `changes` (the last assignment of a column wins), new values stored as
    /// `non_inline` says. When every change keeps its column's layout (a fixed-size value
    /// over a fixed-size value, or inline Text or Bytes of the same length over inline
    /// Text or Bytes) the values are rewritten where they are; otherwise they are packed
    /// anew.
    pub(crate) fn apply_changes(&mut self, changes: &[(usize, Value)], non_inline: NonInline) {
        let arity = self.arity();
        let keeps_layout = {
            let bytes = self.bytes();
            changes.iter().all(|(column, value)| {
                let old_tag = bytes[*column];
                let old_variable = is_variable(old_tag);
                let same_inline_len = |len: usize| {
                    old_tag & OUT_OF_LINE == 0
                        && non_inline.flags_for(len) == 0
                        && variable_span(read_slot(bytes, arity, *column)).1 == len
                };
                match value {
                    Value::Text(t) => old_variable && same_inline_len(t.len()),
                    Value::Bytes(b) => old_variable && same_inline_len(b.len()),
                    _ => !old_variable,
                }
            })
        };
        if !keeps_layout {
            self.repack_with_changes(changes, non_inline);
            return;
        }
        // Same layout: every change overwrites its tag and its slot or data, and the
        // checks above still hold after each (a column's layout never changes here, and
        // no column involved is out of line).
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
        let packed = PackedRow::from_values(&values, NonInline::Packed);
        assert_eq!(packed.arity(), values.len());
        assert_eq!(packed.to_values(), values);
        for (i, value) in values.iter().enumerate() {
            assert_eq!(packed.get(i), *value);
        }
        assert_eq!(PackedRow::empty().arity(), 0);
    }

    #[test]
    fn projection_keeps_the_masked_columns_in_order() {
        let packed = PackedRow::from_values(&sample(), NonInline::Packed);
        let mask = crate::schema::ColumnMask::from_columns(&[6, 0, 4]);
        let projected = PackedRow::project(mask, |column| packed.packed().cell(column));
        assert_eq!(
            projected.to_values(),
            vec![
                sample()[0].clone(),
                sample()[4].clone(),
                sample()[6].clone()
            ]
        );
        let none = PackedRow::project(crate::schema::ColumnMask::EMPTY, |c| {
            packed.packed().cell(c)
        });
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
        let small = PackedRow::from_values(
            &[Value::U64(1), Value::Text("ab".into())],
            NonInline::Packed,
        );
        assert_eq!(small.heap_bytes(), 0);
        assert_eq!(small.get(1), ValueRef::Text("ab"));
        let large = PackedRow::from_values(&[Value::Bytes(vec![7; 100])], NonInline::Packed);
        assert!(large.heap_bytes() > INLINE_BYTES);
        assert_eq!(large.get(0), ValueRef::Bytes(&[7; 100]));
    }

    #[test]
    fn changes_apply_last_assignment_wins() {
        let packed = PackedRow::from_values(&sample(), NonInline::Packed);
        let changed = packed.with_changes(
            &[
                (4, Value::Text("x".into())),
                (1, Value::I64(9)),
                (4, Value::Text("last".into())),
            ],
            NonInline::Packed,
        );
        let mut expected = sample();
        expected[1] = Value::I64(9);
        expected[4] = Value::Text("last".into());
        assert_eq!(changed.to_values(), expected);
        assert_eq!(packed.to_values(), sample(), "the original is untouched");
    }

    fn in_place<const N: usize>(values: &[Value]) -> InPlaceRow<[u8; N]> {
        InPlaceRow::new(values, NonInline::Packed)
    }

    fn values_of(row: &InPlaceRow) -> Vec<Value> {
        (0..row.arity()).map(|i| row.get(i).to_value()).collect()
    }

    #[test]
    fn in_place_rows_keep_their_values_in_the_tail_when_they_fit() {
        let values = sample();
        let needed = packed_len_of(&values, NonInline::Packed);
        let boxed: Box<InPlaceRow> = Box::new(in_place::<128>(&values));
        assert!(needed <= 128);
        assert_eq!(boxed.heap_bytes(), 0);
        assert_eq!(values_of(&boxed), values);
        let spilled: Box<InPlaceRow> = Box::new(in_place::<16>(&values));
        // The spilled bytes and the box holding their pointer.
        assert_eq!(
            spilled.heap_bytes(),
            needed + std::mem::size_of::<Box<[u8]>>()
        );
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
        let reference = PackedRow::from_values(&sample(), NonInline::Packed)
            .with_changes(&changes, NonInline::Packed);
        row.apply_changes(&changes, NonInline::Packed);
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
        row.apply_changes(&[(4, Value::Text("longer text".into()))], NonInline::Packed);
        let mut expected = sample();
        expected[4] = Value::Text("longer text".into());
        assert_eq!(values_of(&row), expected);
        assert_eq!(row.heap_bytes(), 0);
        // Text over a fixed value, and far more than the tail holds: spills.
        row.apply_changes(&[(0, Value::Text("x".repeat(200)))], NonInline::Packed);
        expected[0] = Value::Text("x".repeat(200));
        assert_eq!(values_of(&row), expected);
        assert!(row.heap_bytes() > 128);
        // A fixed value over a spilled row's text: repacked, back in the tail.
        row.apply_changes(&[(0, Value::U64(3))], NonInline::Packed);
        expected[0] = Value::U64(3);
        assert_eq!(values_of(&row), expected);
        assert_eq!(row.heap_bytes(), 0);
        // Whole replacements.
        row.set_values(&sample(), NonInline::Packed);
        assert_eq!(values_of(&row), sample());
        let copy = row.to_packed();
        row.apply_changes(&[(2, Value::Null)], NonInline::Packed);
        row.set_packed(copy.packed());
        assert_eq!(values_of(&row), sample());
    }

    /// A row of a key, a long bytes value, a short text and a long text: under the
    /// out-of-line policies columns 1 and 3 are out of line, column 2 (one byte short of
    /// the threshold) is not.
    fn long_row() -> Vec<Value> {
        vec![
            Value::U64(1),
            Value::Bytes(vec![7; 100]),
            Value::Text("s".repeat(NON_INLINE_MIN_BYTES - 1)),
            Value::Text("t".repeat(NON_INLINE_MIN_BYTES)),
        ]
    }

    fn data_address(row: PackedRef<'_>, column: usize) -> *const u8 {
        match row.get(column) {
            ValueRef::Text(t) => t.as_ptr(),
            ValueRef::Bytes(b) => b.as_ptr(),
            other => panic!("column {column} is {other:?}"),
        }
    }

    #[test]
    fn long_values_go_out_of_line_under_copied_and_shared_only() {
        let values = long_row();
        let fixed = slots_start(4) + 8 * 4;
        for policy in NonInline::ALL {
            let row = PackedRow::from_values(&values, policy);
            assert_eq!(row.to_values(), values, "{policy}");
            let packed = row.packed();
            let out = |column: usize| packed.tag(column) & OUT_OF_LINE != 0;
            let expected_len = if policy == NonInline::Packed {
                assert!(!packed.out_of_line && !out(1) && !out(3));
                fixed + 100 + 63 + 64
            } else {
                assert!(packed.out_of_line && out(1) && out(3), "{policy}");
                assert_eq!(packed.holders(1), 1);
                fixed + 2 * out_of_line::DESCRIPTOR_BYTES + 63
            };
            assert!(!out(2), "below the threshold stays packed");
            assert_eq!(packed.bytes.len(), expected_len, "{policy}");
            assert_eq!(packed_len_of(&values, policy), expected_len);
            let in_place: Box<InPlaceRow> = Box::new(in_place_with::<256>(&values, policy));
            assert_eq!(values_of(&in_place), values);
            assert_eq!(PackedRow::copy_of(in_place.packed()), row, "{policy}");
        }
        assert_eq!(
            PackedRow::from_values(&values, NonInline::Shared),
            PackedRow::from_values(&values, NonInline::Packed),
            "equal values are equal rows, however they are stored"
        );
    }

    #[test]
    fn a_copy_shares_a_shared_value_and_copies_a_copied_one() {
        let shared = PackedRow::from_values(&long_row(), NonInline::Shared);
        let copy = shared.clone();
        assert_eq!(shared.packed().holders(1), 2);
        assert_eq!(
            data_address(copy.packed(), 3),
            data_address(shared.packed(), 3),
            "one value, two rows"
        );
        drop(copy);
        assert_eq!(
            shared.packed().holders(1),
            1,
            "the copy gave its count back"
        );

        let copied = PackedRow::from_values(&long_row(), NonInline::Copied);
        let copy = copied.clone();
        assert_eq!(copied.packed().holders(1), 1);
        assert_eq!(copy.packed().holders(1), 1);
        assert_ne!(
            data_address(copy.packed(), 3),
            data_address(copied.packed(), 3),
            "each row its own copy"
        );
        assert_eq!(copy, copied);
        // A copied value counts in its row's heap bytes; a shared one in no row's.
        let arc_header = 2 * std::mem::size_of::<usize>();
        assert_eq!(
            copied.heap_bytes() - shared.heap_bytes(),
            (100 + arc_header) + (64 + arc_header)
        );
    }

    #[test]
    fn a_successor_shares_the_values_its_update_leaves_alone() {
        let base = PackedRow::from_values(&long_row(), NonInline::Shared);
        let changes = [(3, Value::Text("new ".repeat(20)))];
        let successor =
            InPlaceRow::<[u8; 128]>::changed(base.packed(), &changes, NonInline::Shared);
        let successor: Box<InPlaceRow> = Box::new(successor);
        let mut expected = long_row();
        expected[3] = changes[0].1.clone();
        assert_eq!(values_of(&successor), expected);
        assert_eq!(base.packed().holders(1), 2, "unchanged: shared");
        assert_eq!(
            successor.packed().holders(3),
            1,
            "changed: a value of its own"
        );
        assert_eq!(base.packed().holders(3), 1);
        drop(successor);
        assert_eq!(base.packed().holders(1), 1);
    }

    #[test]
    fn an_update_in_place_moves_the_values_it_leaves_alone_and_frees_the_one_it_replaces() {
        for policy in [NonInline::Copied, NonInline::Shared] {
            let mut row: Box<InPlaceRow> = Box::new(in_place_with::<256>(&long_row(), policy));
            // A before-image of column 1 and 3, as the delta storage keeps.
            let mask = crate::schema::ColumnMask::from_columns(&[1, 3]);
            let before = PackedRow::project(mask, |c| row.cell(c));
            let kept = data_address(row.packed(), 1);
            let shares = usize::from(policy == NonInline::Shared);
            assert_eq!(row.packed().holders(3), 1 + shares, "{policy}");
            row.apply_changes(
                &[(3, Value::Text("u".repeat(70))), (0, Value::U64(9))],
                policy,
            );
            let mut expected = long_row();
            expected[0] = Value::U64(9);
            expected[3] = Value::Text("u".repeat(70));
            assert_eq!(values_of(&row), expected, "{policy}");
            assert_eq!(data_address(row.packed(), 1), kept, "moved, not copied");
            assert_eq!(row.packed().holders(1), 1 + shares, "{policy}");
            assert_eq!(row.packed().holders(3), 1);
            assert_eq!(
                before.packed().holders(1),
                1,
                "the replaced value: the image's alone"
            );
            assert_eq!(
                before.to_values(),
                vec![long_row()[1].clone(), long_row()[3].clone()]
            );
            // Same-layout changes of packed columns leave the out-of-line ones where they are.
            row.apply_changes(&[(2, Value::Text("z".repeat(63)))], policy);
            assert_eq!(data_address(row.packed(), 1), kept);
            // Whole replacements give back what they replace.
            let copy = row.to_packed();
            assert_eq!(copy.packed().holders(3), 1 + shares);
            row.set_values(&long_row(), policy);
            assert_eq!(copy.packed().holders(3), 1, "{policy}");
            row.set_packed(copy.packed());
            assert_eq!(copy.packed().holders(3), 1 + shares, "{policy}");
            assert_eq!(values_of(&row), copy.to_values());
        }
    }

    #[test]
    fn a_long_value_assigned_under_packed_stays_in_the_row() {
        let mut row: Box<InPlaceRow> =
            Box::new(in_place_with::<256>(&long_row(), NonInline::Shared));
        row.apply_changes(&[(1, Value::Bytes(vec![1; 100]))], NonInline::Packed);
        assert_eq!(row.packed().tag(1) & OUT_OF_LINE, 0);
        assert_eq!(row.packed().holders(3), 1, "the other stays out of line");
        assert_eq!(row.get(1), ValueRef::Bytes(&[1; 100]));
    }

    fn in_place_with<const N: usize>(values: &[Value], policy: NonInline) -> InPlaceRow<[u8; N]> {
        InPlaceRow::new(values, policy)
    }
}
