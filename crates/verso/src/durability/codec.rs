//! The byte encoding shared by the log, checkpoints and the manifest: little-endian
//! integers, length-prefixed strings and byte strings, tagged values, and schemas; and the
//! reader that decodes them from untrusted bytes.
//!
//! Invariant of [`Reader`]: it never panics and never allocates more than the bytes it was
//! given hold. Every length is checked against what remains before anything is copied, so a
//! corrupt length is an error, not an absurd allocation (`tests` below and the decoders'
//! proptests feed it random and mutated bytes).

use crate::row::ValueRef;
use crate::schema::{PrimaryKeyIndex, Schema, TableSchema};
use crate::value::{ColumnType, Value};

/// Why bytes could not be decoded: what was expected, and where (from the start of the
/// buffer the reader was given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DecodeError {
    pub(crate) offset: usize,
    pub(crate) reason: String,
}

pub(crate) type Decoded<T> = Result<T, DecodeError>;

const TAG_NULL: u8 = 0;
const TAG_I64: u8 = 1;
const TAG_U64: u8 = 2;
const TAG_F64: u8 = 3;
const TAG_TEXT: u8 = 4;
const TAG_BYTES: u8 = 5;

pub(crate) fn put_u8(out: &mut Vec<u8>, value: u8) {
    out.push(value);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// A byte string: its length (u32), then its bytes.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("values are at most MAX_VALUE_BYTES long");
    put_u32(out, len);
    out.extend_from_slice(bytes);
}

pub(crate) fn put_str(out: &mut Vec<u8>, text: &str) {
    put_bytes(out, text.as_bytes());
}

/// A value: a tag byte, then its payload.
pub(crate) fn put_value(out: &mut Vec<u8>, value: ValueRef<'_>) {
    match value {
        ValueRef::Null => put_u8(out, TAG_NULL),
        ValueRef::I64(v) => {
            put_u8(out, TAG_I64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        ValueRef::U64(v) => {
            put_u8(out, TAG_U64);
            put_u64(out, v);
        }
        ValueRef::F64(v) => {
            put_u8(out, TAG_F64);
            put_u64(out, v.to_bits());
        }
        ValueRef::Text(v) => {
            put_u8(out, TAG_TEXT);
            put_str(out, v);
        }
        ValueRef::Bytes(v) => {
            put_u8(out, TAG_BYTES);
            put_bytes(out, v);
        }
    }
}

/// A list of values: their count (u16), then each.
pub(crate) fn put_values<'v>(
    out: &mut Vec<u8>,
    values: impl ExactSizeIterator<Item = ValueRef<'v>>,
) {
    put_u16(
        out,
        u16::try_from(values.len()).expect("at most MAX_COLUMNS values"),
    );
    for value in values {
        put_value(out, value);
    }
}

fn column_type_code(ty: ColumnType) -> u8 {
    match ty {
        ColumnType::I64 => 1,
        ColumnType::U64 => 2,
        ColumnType::F64 => 3,
        ColumnType::Text => 4,
        ColumnType::Bytes => 5,
    }
}

/// A table's name and schema, by names, so that decoding rebuilds it through
/// [`Schema`]'s own validation.
pub(crate) fn put_schema(out: &mut Vec<u8>, schema: &TableSchema) {
    put_str(out, &schema.name);
    put_u16(out, schema.arity() as u16);
    for (name, ty) in schema.column_names.iter().zip(&schema.column_types) {
        put_str(out, name);
        put_u8(out, column_type_code(*ty));
    }
    put_u16(out, schema.primary_key.len() as u16);
    for &column in &schema.primary_key {
        put_u16(out, column as u16);
    }
    put_u8(
        out,
        match schema.primary_key_index {
            PrimaryKeyIndex::HashAndOrdered => 0,
            PrimaryKeyIndex::OrderedOnly => 1,
        },
    );
    put_u16(out, schema.indexes.len() as u16);
    for index in &schema.indexes {
        put_str(out, &index.name);
        put_u16(out, index.columns.len() as u16);
        for &column in &index.columns {
            put_u16(out, column as u16);
        }
    }
}

/// Decodes bytes that may be anything.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.at
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn error<T>(&self, reason: impl Into<String>) -> Decoded<T> {
        Err(DecodeError {
            offset: self.at,
            reason: reason.into(),
        })
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Decoded<&'a [u8]> {
        if n > self.remaining() {
            return self.error(format!(
                "{what}: {n} bytes expected, {} remain",
                self.remaining()
            ));
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Decoded<[u8; N]> {
        let bytes = self.take(N, what)?;
        Ok(bytes.try_into().expect("took N bytes"))
    }

    pub(crate) fn u8(&mut self, what: &str) -> Decoded<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Decoded<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Decoded<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Decoded<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn bytes(&mut self, what: &str) -> Decoded<&'a [u8]> {
        let len = self.u32(what)? as usize;
        self.take(len, what)
    }

    pub(crate) fn str(&mut self, what: &str) -> Decoded<&'a str> {
        let start = self.at;
        let bytes = self.bytes(what)?;
        std::str::from_utf8(bytes).map_err(|_| DecodeError {
            offset: start,
            reason: format!("{what}: not UTF-8"),
        })
    }

    pub(crate) fn value(&mut self) -> Decoded<Value> {
        let tag = self.u8("a value's tag")?;
        Ok(match tag {
            TAG_NULL => Value::Null,
            TAG_I64 => Value::I64(i64::from_le_bytes(self.array("an I64 value")?)),
            TAG_U64 => Value::U64(self.u64("a U64 value")?),
            TAG_F64 => Value::F64(f64::from_bits(self.u64("an F64 value")?)),
            TAG_TEXT => Value::Text(self.str("a Text value")?.to_owned()),
            TAG_BYTES => Value::Bytes(self.bytes("a Bytes value")?.to_vec()),
            other => return self.error(format!("unknown value tag {other}")),
        })
    }

    /// A list of values into `out` (cleared first).
    pub(crate) fn values_into(&mut self, out: &mut Vec<Value>) -> Decoded<()> {
        out.clear();
        let count = self.u16("a value count")? as usize;
        if count > crate::schema::MAX_COLUMNS {
            return self.error(format!("{count} values; a row has at most 128"));
        }
        for _ in 0..count {
            out.push(self.value()?);
        }
        Ok(())
    }

    fn column_type(&mut self) -> Decoded<ColumnType> {
        Ok(match self.u8("a column type")? {
            1 => ColumnType::I64,
            2 => ColumnType::U64,
            3 => ColumnType::F64,
            4 => ColumnType::Text,
            5 => ColumnType::Bytes,
            other => return self.error(format!("unknown column type {other}")),
        })
    }

    fn column_name<'n>(&self, names: &'n [&'a str], position: u16) -> Decoded<&'n str> {
        match names.get(position as usize) {
            Some(name) => Ok(name),
            None => self.error(format!(
                "column {position} named, the table has {}",
                names.len()
            )),
        }
    }

    /// A table's name and schema as [`put_schema`] wrote them.
    pub(crate) fn schema(&mut self) -> Decoded<(String, Schema)> {
        let name = self.str("a table name")?.to_owned();
        let arity = self.u16("a column count")? as usize;
        if arity > crate::schema::MAX_COLUMNS {
            return self.error(format!("{arity} columns; a table has at most 128"));
        }
        let mut names = Vec::with_capacity(arity);
        let mut schema = Schema::new();
        for _ in 0..arity {
            let column = self.str("a column name")?;
            let ty = self.column_type()?;
            names.push(column);
            schema = schema.column(column, ty);
        }
        let key_len = self.u16("a key length")?;
        let mut key = Vec::new();
        for _ in 0..key_len {
            let position = self.u16("a key column")?;
            key.push(self.column_name(&names, position)?);
        }
        schema = schema.primary_key(&key);
        schema = schema.primary_key_index(match self.u8("a primary-key index kind")? {
            0 => PrimaryKeyIndex::HashAndOrdered,
            1 => PrimaryKeyIndex::OrderedOnly,
            other => return self.error(format!("unknown primary-key index kind {other}")),
        });
        let indexes = self.u16("an index count")?;
        for _ in 0..indexes {
            let index = self.str("an index name")?;
            let len = self.u16("an index's column count")?;
            let mut columns = Vec::new();
            for _ in 0..len {
                let position = self.u16("an index column")?;
                columns.push(self.column_name(&names, position)?);
            }
            schema = schema.index(index, &columns);
        }
        Ok((name, schema))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_schema() -> TableSchema {
        Schema::new()
            .column("id", ColumnType::U64)
            .column("name", ColumnType::Text)
            .column("score", ColumnType::F64)
            .primary_key(&["id"])
            .primary_key_index(PrimaryKeyIndex::OrderedOnly)
            .index("by_name", &["name", "score"])
            .validate("people")
            .unwrap()
    }

    #[test]
    fn values_and_schemas_round_trip() {
        let values = vec![
            Value::Null,
            Value::I64(-5),
            Value::U64(u64::MAX),
            Value::F64(-0.5),
            Value::Text("héllo".into()),
            Value::Bytes(vec![0, 255]),
        ];
        let mut out = Vec::new();
        put_values(&mut out, values.iter().map(ValueRef::from));
        put_schema(&mut out, &sample_schema());
        let mut reader = Reader::new(&out);
        let mut decoded = Vec::new();
        reader.values_into(&mut decoded).unwrap();
        assert_eq!(decoded, values);
        let (name, schema) = reader.schema().unwrap();
        assert_eq!(name, "people");
        let again = schema.validate(&name).unwrap();
        let original = sample_schema();
        assert_eq!(again.column_names, original.column_names);
        assert_eq!(again.primary_key, original.primary_key);
        assert_eq!(again.primary_key_index, original.primary_key_index);
        assert_eq!(again.indexes[0].columns, original.indexes[0].columns);
        assert!(reader.is_empty());
    }

    #[test]
    fn a_huge_length_is_an_error_not_an_allocation() {
        let mut out = Vec::new();
        put_u8(&mut out, TAG_BYTES);
        put_u32(&mut out, u32::MAX);
        let error = Reader::new(&out).value().unwrap_err();
        assert!(error.reason.contains("bytes expected"), "{error:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Any bytes: an answer or an error, never a panic.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut values = Vec::new();
            let _ = Reader::new(&bytes).values_into(&mut values);
            let _ = Reader::new(&bytes).schema();
        }

        /// A valid encoding with one byte changed or cut short: never a panic.
        #[test]
        fn decoding_mutated_encodings_never_panics(at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>()) {
            let mut out = Vec::new();
            put_schema(&mut out, &sample_schema());
            put_values(&mut out, [Value::Text("x".into()), Value::U64(3)].iter().map(ValueRef::from));
            let i = at.index(out.len());
            if cut { out.truncate(i) } else { out[i] = byte }
            let mut reader = Reader::new(&out);
            if let Ok((name, schema)) = reader.schema() {
                let _ = schema.validate(&name);
                let mut values = Vec::new();
                let _ = reader.values_into(&mut values);
            }
        }
    }
}
