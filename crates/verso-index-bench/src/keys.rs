//! Key shapes and key representations.
//!
//! Every benchmark key is derived from a logical id: `s = scramble(id)` is a bijection on `u64`,
//! so distinct ids give distinct keys and ids `0..n` inserted in order arrive in random key order.
//! The key's columns are built from `s` so that key order always equals the order of `s`:
//!
//! * 8 bytes: `(s)`
//! * 16 bytes: `(s >> 56, s)` -- a low-cardinality leading column, as in composite keys
//! * 24 bytes: `(s >> 56, (s >> 48) & 0xff, s)`
//!
//! Each column is a big-endian `u64`, i.e. the memcomparable encoding of an unsigned column
//! (seven leading zero bytes for the small leading columns, as a real composite key has).

use std::borrow::Borrow;
use std::fmt::Debug;

use smallvec::SmallVec;

/// Number of bytes an encoded key of the largest shape takes.
pub const MAX_KEY_BYTES: usize = 24;

/// The primary-key shapes measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// One `u64` column: 8 bytes.
    U64x1,
    /// Two `u64` columns: 16 bytes.
    U64x2,
    /// Three `u64` columns: 24 bytes.
    U64x3,
}

impl Shape {
    /// All shapes, smallest first.
    pub const ALL: [Shape; 3] = [Shape::U64x1, Shape::U64x2, Shape::U64x3];

    /// Number of `u64` columns.
    pub const fn columns(self) -> usize {
        match self {
            Shape::U64x1 => 1,
            Shape::U64x2 => 2,
            Shape::U64x3 => 3,
        }
    }

    /// Encoded length in bytes.
    pub const fn bytes(self) -> usize {
        self.columns() * 8
    }

    /// Parses `8`, `16` or `24` (bytes).
    pub fn from_bytes(bytes: usize) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.bytes() == bytes)
    }
}

/// Bijective 64-bit mixer (the MurmurHash3 `fmix64` finaliser: xor-shifts and multiplications
/// by odd constants, each invertible).
pub const fn scramble(id: u64) -> u64 {
    let mut x = id;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// The column values of key `id`; only the first `shape.columns()` are meaningful.
pub const fn columns(shape: Shape, id: u64) -> [u64; 3] {
    let s = scramble(id);
    match shape {
        Shape::U64x1 => [s, 0, 0],
        Shape::U64x2 => [s >> 56, s, 0],
        Shape::U64x3 => [s >> 56, (s >> 48) & 0xff, s],
    }
}

/// An encoded key on the stack, as the engine would build a search key.
#[derive(Clone, Copy, Debug)]
pub struct KeyBuf {
    bytes: [u8; MAX_KEY_BYTES],
    len: usize,
}

impl KeyBuf {
    /// Memcomparable encoding of key `id` of `shape`.
    pub fn encode(shape: Shape, id: u64) -> KeyBuf {
        KeyBuf::from_columns(&columns(shape, id)[..shape.columns()])
    }

    /// Memcomparable encoding of up to three unsigned columns.
    ///
    /// # Panics
    /// If more than three columns are given.
    pub fn from_columns(cols: &[u64]) -> KeyBuf {
        assert!(cols.len() <= 3, "KeyBuf holds at most three u64 columns");
        let mut bytes = [0u8; MAX_KEY_BYTES];
        for (chunk, col) in bytes.chunks_exact_mut(8).zip(cols) {
            chunk.copy_from_slice(&col.to_be_bytes());
        }
        KeyBuf {
            bytes,
            len: cols.len() * 8,
        }
    }

    /// A key greater than every key of `shape` except the all-ones one (`0xff` bytes).
    pub fn max(shape: Shape) -> KeyBuf {
        KeyBuf {
            bytes: [0xff; MAX_KEY_BYTES],
            len: shape.bytes(),
        }
    }

    /// The encoded bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// How a key is stored in a map (`Self`) and how it is looked up (`Self::Q`).
pub trait KeyRepr: Ord + Clone + Debug + Send + Sync + 'static + Borrow<Self::Q> {
    /// The borrowed form used for lookups and bounds (`[u8]` or `u64`).
    type Q: ?Sized + Ord + Debug;
    /// Stack-built search key.
    type Buf: Copy;
    /// Name used in reports.
    const NAME: &'static str;

    /// Whether this representation can hold keys of `shape`.
    fn supports(shape: Shape) -> bool;
    /// Builds the search key for `id`.
    fn encode(shape: Shape, id: u64) -> Self::Buf;
    /// The upper sentinel used as the (exclusive) upper bound of scans.
    fn max_key(shape: Shape) -> Self::Buf;
    /// Borrows the search key.
    fn query(buf: &Self::Buf) -> &Self::Q;
    /// Builds the owned key stored in the map.
    fn owned(buf: &Self::Buf) -> Self;
}

impl KeyRepr for Vec<u8> {
    type Q = [u8];
    type Buf = KeyBuf;
    const NAME: &'static str = "Vec<u8>";

    fn supports(_shape: Shape) -> bool {
        true
    }
    fn encode(shape: Shape, id: u64) -> KeyBuf {
        KeyBuf::encode(shape, id)
    }
    fn max_key(shape: Shape) -> KeyBuf {
        KeyBuf::max(shape)
    }
    fn query(buf: &KeyBuf) -> &[u8] {
        buf.as_slice()
    }
    fn owned(buf: &KeyBuf) -> Self {
        buf.as_slice().to_vec()
    }
}

/// Inline small key: up to 24 bytes live inside the map entry, longer keys spill to the heap.
/// `smallvec` with the `union` feature makes this 32 bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct InlineKey(pub SmallVec<[u8; MAX_KEY_BYTES]>);

impl Borrow<[u8]> for InlineKey {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

// ferntree stores non-integer keys behind a per-key `Box` (`BoxedSlot`); this opts the newtype
// into that scheme, exactly as ferntree does for `Vec<u8>` and `String`.
ferntree::impl_optimistic_read_boxed!(InlineKey);

impl KeyRepr for InlineKey {
    type Q = [u8];
    type Buf = KeyBuf;
    const NAME: &'static str = "SmallVec<[u8;24]>";

    fn supports(_shape: Shape) -> bool {
        true
    }
    fn encode(shape: Shape, id: u64) -> KeyBuf {
        KeyBuf::encode(shape, id)
    }
    fn max_key(shape: Shape) -> KeyBuf {
        KeyBuf::max(shape)
    }
    fn query(buf: &KeyBuf) -> &[u8] {
        buf.as_slice()
    }
    fn owned(buf: &KeyBuf) -> Self {
        InlineKey(SmallVec::from_slice(buf.as_slice()))
    }
}

impl KeyRepr for u64 {
    type Q = u64;
    type Buf = u64;
    const NAME: &'static str = "u64";

    fn supports(shape: Shape) -> bool {
        shape == Shape::U64x1
    }
    fn encode(_shape: Shape, id: u64) -> u64 {
        scramble(id)
    }
    fn max_key(_shape: Shape) -> u64 {
        u64::MAX
    }
    fn query(buf: &u64) -> &u64 {
        buf
    }
    fn owned(buf: &u64) -> Self {
        *buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_matches_scramble_order() {
        for shape in Shape::ALL {
            let mut prev: Option<(u64, KeyBuf)> = None;
            let mut ids: Vec<u64> = (0..2000).collect();
            ids.sort_by_key(|&id| scramble(id));
            for id in ids {
                let k = KeyBuf::encode(shape, id);
                assert_eq!(k.as_slice().len(), shape.bytes());
                if let Some((pid, pk)) = prev {
                    assert!(pk.as_slice() < k.as_slice(), "{shape:?} {pid} {id}");
                }
                prev = Some((id, k));
            }
        }
    }

    #[test]
    fn u64_key_matches_bytes() {
        let id = 12345;
        assert_eq!(
            KeyBuf::encode(Shape::U64x1, id).as_slice(),
            scramble(id).to_be_bytes()
        );
    }
}
