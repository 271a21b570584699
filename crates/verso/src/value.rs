//! Column types and values.

use std::fmt;

/// The type of a column. Every column is nullable unless it is part of the primary key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// 64-bit IEEE float. Ordered by `f64::total_cmp` in keys.
    F64,
    /// UTF-8 text.
    Text,
    /// Raw bytes.
    Bytes,
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ColumnType::I64 => "I64",
            ColumnType::U64 => "U64",
            ColumnType::F64 => "F64",
            ColumnType::Text => "Text",
            ColumnType::Bytes => "Bytes",
        };
        f.write_str(name)
    }
}

/// One column value. `Null` is allowed in every non-key column.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// SQL NULL: no value.
    Null,
    /// A value of a [`ColumnType::I64`] column.
    I64(i64),
    /// A value of a [`ColumnType::U64`] column.
    U64(u64),
    /// A value of a [`ColumnType::F64`] column.
    F64(f64),
    /// A value of a [`ColumnType::Text`] column.
    Text(String),
    /// A value of a [`ColumnType::Bytes`] column.
    Bytes(Vec<u8>),
}

impl Value {
    /// The column type this value belongs to, or `None` for `Null`.
    pub fn column_type(&self) -> Option<ColumnType> {
        match self {
            Value::Null => None,
            Value::I64(_) => Some(ColumnType::I64),
            Value::U64(_) => Some(ColumnType::U64),
            Value::F64(_) => Some(ColumnType::F64),
            Value::Text(_) => Some(ColumnType::Text),
            Value::Bytes(_) => Some(ColumnType::Bytes),
        }
    }

    /// Whether this value may be stored in a column of type `ty` (NULL fits every type).
    pub fn fits(&self, ty: ColumnType) -> bool {
        self.column_type().is_none_or(|own| own == ty)
    }

    /// The value as `i64`, if it is an `I64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as `u64`, if it is a `U64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as `f64`, if it is an `F64`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::F64(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as text, if it is `Text`.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(v) => Some(v),
            _ => None,
        }
    }

    /// The value as bytes, if it is `Bytes`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(v) => Some(v),
            _ => None,
        }
    }

    /// Whether this is `Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::row::ValueRef::from(self).fmt(f)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::U64(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Bytes(v.to_vec())
    }
}
/// `None` is NULL.
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}
