//! Order-preserving ("memcomparable") key encoding: comparing two encoded keys byte by byte
//! gives the same order as comparing their values column by column.
//!
//! - `I64`: big-endian with the sign bit flipped; `U64`: big-endian; `F64`: IEEE bits, all
//!   flipped for negatives and the sign bit flipped for positives (`f64::total_cmp` order).
//! - `Text` and `Bytes`: each 0x00 byte escaped as 0x00 0xFF, then the terminator 0x00 0x00,
//!   so a string sorts before every longer string it is a prefix of.
//! - In secondary-index keys each column starts with a tag: 0x00 for NULL (NULL sorts
//!   first), 0x01 for a value. Primary-key columns are never NULL and carry no tag.
//!
//! Each column's encoding is prefix-free, so a sequence of columns encodes to a byte string
//! whose prefixes are exactly the encodings of its leading columns: a key *prefix* can be
//! used as a range bound (see [`prefix_successor`]).

use crate::row::{Columns, ValueRef};
use crate::value::Value;

/// Bytes of a key stored inline in the index node (no allocation, no pointer to chase).
/// 32 covers every primary key of up to four integer columns (TPC-C's largest).
const INLINE: usize = 32;

/// An encoded key as stored in an index.
///
/// The first [`INLINE`] bytes (all of a short key) live in the index node, zero-padded, and
/// compare as four big-endian words. This is the byte order of the unpadded keys: where two
/// keys first differ within the first [`INLINE`] bytes, their padded forms differ the same
/// way; where one is a prefix of the other, the padding (zeros) is at most equal to the
/// longer key's bytes. Only when the words tie does the rest decide: the lengths for two
/// short keys, the whole bytes otherwise. A longer key also keeps all its bytes on the
/// heap, but its inline prefix settles most comparisons without reaching them (a search
/// through secondary keys of four integer columns, 36 bytes with their tags, chased a
/// pointer per comparison before).
#[derive(Clone)]
pub(crate) struct Key {
    inline: [u8; INLINE],
    len: u32,
    /// Boxed twice so that the pointer is thin: a key of 48 bytes, an entry with its row
    /// pointer of one cache line. Only ties beyond the inline prefix read it.
    spilled: Option<Box<Box<[u8]>>>,
}

impl Key {
    pub(crate) fn from_bytes(bytes: &[u8]) -> Self {
        let mut inline = [0u8; INLINE];
        let prefix = bytes.len().min(INLINE);
        inline[..prefix].copy_from_slice(&bytes[..prefix]);
        let spilled = (bytes.len() > INLINE).then(|| Box::new(bytes.into()));
        Key {
            inline,
            len: u32::try_from(bytes.len()).expect("keys are far below 4 GiB"),
            spilled,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.spilled {
            Some(bytes) => bytes,
            None => &self.inline[..self.len as usize],
        }
    }

    /// The inline bytes as words in the machine's byte order: for equality only.
    fn native_words(&self) -> [u64; INLINE / 8] {
        std::array::from_fn(|i| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&self.inline[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(word)
        })
    }

    fn words(&self) -> [u64; INLINE / 8] {
        std::array::from_fn(|i| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&self.inline[i * 8..i * 8 + 8]);
            u64::from_be_bytes(word)
        })
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let by_prefix = self.words().cmp(&other.words());
        if by_prefix.is_ne() {
            return by_prefix;
        }
        if self.spilled.is_none() && other.spilled.is_none() {
            self.len.cmp(&other.len)
        } else {
            self.as_bytes().cmp(other.as_bytes())
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    /// Consistent with `Ord`, without its byte swaps. The words are compared as native
    /// words: `[u8; 32] ==` became a call to `memcmp` in every tree search.
    fn eq(&self, other: &Self) -> bool {
        // Equal keys have equal lengths and equal (zero-padded) prefixes.
        self.len == other.len
            && self.native_words() == other.native_words()
            && match (&self.spilled, &other.spilled) {
                (None, None) => true,
                _ => self.as_bytes() == other.as_bytes(),
            }
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({:02x?})", self.as_bytes())
    }
}

/// Appends the encoding of one non-NULL value.
pub(crate) fn encode_value(out: &mut Vec<u8>, value: ValueRef<'_>) {
    match value {
        ValueRef::Null => unreachable!("callers encode NULL with encode_tagged"),
        ValueRef::I64(v) => out.extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes()),
        ValueRef::U64(v) => out.extend_from_slice(&v.to_be_bytes()),
        ValueRef::F64(v) => {
            let bits = v.to_bits();
            let ordered = if bits >> 63 == 1 {
                !bits
            } else {
                bits ^ (1 << 63)
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        ValueRef::Text(v) => encode_escaped(out, v.as_bytes()),
        ValueRef::Bytes(v) => encode_escaped(out, v),
    }
}

fn encode_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &byte in bytes {
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Appends a value with its NULL tag (secondary-index columns).
pub(crate) fn encode_tagged(out: &mut Vec<u8>, value: ValueRef<'_>) {
    if value.is_null() {
        out.push(0);
    } else {
        out.push(1);
        encode_value(out, value);
    }
}

/// Encodes a primary key given as its values in key order.
pub(crate) fn encode_key_values(out: &mut Vec<u8>, key: &[Value]) {
    out.clear();
    append_key_values(out, key);
}

/// Appends the encoding of a primary key's values to `out`.
pub(crate) fn append_key_values(out: &mut Vec<u8>, key: &[Value]) {
    for value in key {
        encode_value(out, ValueRef::from(value));
    }
}

/// Encodes the primary key of a full row.
pub(crate) fn encode_row_key<C: Columns + ?Sized>(
    out: &mut Vec<u8>,
    row: &C,
    key_columns: &[usize],
) {
    out.clear();
    for &column in key_columns {
        encode_value(out, row.column(column));
    }
}

/// Encodes a secondary-index entry: the indexed columns (tagged), then the primary key.
/// Returns the length of the secondary part.
pub(crate) fn encode_index_entry<C: Columns + ?Sized>(
    out: &mut Vec<u8>,
    row: &C,
    index_columns: &[usize],
    key_columns: &[usize],
) -> usize {
    out.clear();
    for &column in index_columns {
        encode_tagged(out, row.column(column));
    }
    let secondary_len = out.len();
    for &column in key_columns {
        encode_value(out, row.column(column));
    }
    secondary_len
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None`
/// if there is none (the prefix is empty or all 0xFF).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut successor = prefix.to_vec();
    while let Some(last) = successor.pop() {
        if last < 0xFF {
            successor.push(last + 1);
            return Some(successor);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(values: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key_values(&mut out, values);
        out
    }

    #[test]
    fn integer_order_is_preserved() {
        let ints = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for pair in ints.windows(2) {
            assert!(enc(&[Value::I64(pair[0])]) < enc(&[Value::I64(pair[1])]));
        }
        let uints = [0u64, 1, 255, 256, u64::MAX];
        for pair in uints.windows(2) {
            assert!(enc(&[Value::U64(pair[0])]) < enc(&[Value::U64(pair[1])]));
        }
    }

    #[test]
    fn float_order_is_total_cmp() {
        let floats = [f64::NEG_INFINITY, -2.5, -0.0, 0.0, 1e-9, 3.0, f64::INFINITY];
        for pair in floats.windows(2) {
            assert!(enc(&[Value::F64(pair[0])]) < enc(&[Value::F64(pair[1])]));
        }
    }

    #[test]
    fn text_order_and_prefix_freedom() {
        let texts = ["", "a", "a\0", "a\0b", "ab", "b"];
        for pair in texts.windows(2) {
            assert!(
                enc(&[Value::from(pair[0])]) < enc(&[Value::from(pair[1])]),
                "{:?} < {:?}",
                pair[0],
                pair[1]
            );
        }
        // Composite keys compare column by column, even when the first column is a prefix.
        assert!(enc(&[Value::from("a"), Value::U64(9)]) < enc(&[Value::from("ab"), Value::U64(0)]));
    }

    #[test]
    fn inline_key_order_is_byte_order() {
        let samples: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![0, 1],
            vec![1],
            vec![1, 0, 0, 0, 0, 0, 0, 0, 0],
            vec![1, 0, 0, 0, 0, 0, 0, 0, 1],
            vec![7; 31],
            vec![7; 32],
            vec![7; 33],
            [vec![7; 32], vec![0]].concat(),
            vec![8],
            vec![255; 40],
        ];
        for a in &samples {
            for b in &samples {
                assert_eq!(
                    Key::from_bytes(a).cmp(&Key::from_bytes(b)),
                    a.cmp(b),
                    "{a:?} vs {b:?}"
                );
                assert_eq!(Key::from_bytes(a).as_bytes(), &a[..]);
            }
        }
    }

    proptest::proptest! {
        /// Keys of any length, long ones sharing their inline prefix among them, order and
        /// compare equal exactly as their bytes do (a long key's inline prefix decides only
        /// when it differs).
        #[test]
        fn keys_compare_as_their_bytes(
            a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 7, 255]), 0..72),
            b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 7, 255]), 0..72),
            shared in 0usize..72,
        ) {
            // Give b a's first bytes, so prefixes tie often and the tail has to decide.
            let mut b = b;
            let shared = shared.min(a.len()).min(b.len());
            b[..shared].copy_from_slice(&a[..shared]);
            let (ka, kb) = (Key::from_bytes(&a), Key::from_bytes(&b));
            proptest::prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            proptest::prop_assert_eq!(ka == kb, a == b);
            proptest::prop_assert_eq!(ka.as_bytes(), &a[..]);
        }
    }

    #[test]
    fn prefix_successor_bounds_the_prefix_group() {
        let prefix = enc(&[Value::U64(5)]);
        let upper = prefix_successor(&prefix).expect("has a successor");
        assert!(enc(&[Value::U64(5), Value::U64(u64::MAX)]) < upper);
        assert!(enc(&[Value::U64(6), Value::U64(0)]) >= upper);
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
    }
}
