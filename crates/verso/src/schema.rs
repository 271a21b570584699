//! Table schemas: the builder users write, and the validated form the engine uses.

use crate::error::{Error, Result};
use crate::value::{ColumnType, Value};

/// The most columns a table may have: one bit each in a [`ColumnMask`].
pub const MAX_COLUMNS: usize = 128;

/// The largest text or bytes value, in bytes (16 MiB). With at most [`MAX_COLUMNS`] columns
/// a packed row stays far below the 4 GiB its 32-bit offsets can address.
pub const MAX_VALUE_BYTES: usize = 16 << 20;

/// A table description, built with chained calls and checked by
/// [`Database::create_table`](crate::Database::create_table).
///
/// ```
/// use verso::{ColumnType, Schema};
/// let schema = Schema::new()
///     .column("id", ColumnType::U64)
///     .column("name", ColumnType::Text)
///     .column("balance", ColumnType::I64)
///     .primary_key(&["id"])
///     .index("by_name", &["name"]);
/// # let _ = schema;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Schema {
    columns: Vec<(String, ColumnType)>,
    primary_key: Vec<String>,
    primary_key_index: PrimaryKeyIndex,
    indexes: Vec<(String, Vec<String>)>,
}

/// How a table's primary key is indexed ([`Schema::primary_key_index`]).
///
/// Both kinds answer the same operations with the same results: point reads, scans in key
/// order, uniqueness. They differ in cost only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrimaryKeyIndex {
    /// A hash index for point lookups (one cache miss for the slot holding key and row
    /// pointer) beside the ordered index that serves scans. The default.
    #[default]
    HashAndOrdered,
    /// The ordered index alone: point lookups descend the tree. For insert-heavy tables
    /// whose rows are mostly reached by scans (TPC-C's ORDER_LINE, a history table), it
    /// saves the hash index's memory (a cache line per key), its inserts, and the fresh
    /// pages its doublings fault in. Prefetch hints are ignored for such a table.
    OrderedOnly,
}

impl Schema {
    /// An empty schema.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a column. Columns are numbered from 0 in the order they are added.
    pub fn column(mut self, name: &str, column_type: ColumnType) -> Self {
        self.columns.push((name.to_owned(), column_type));
        self
    }

    /// Sets the primary key (one or more columns, in key order). It is unique and never NULL.
    pub fn primary_key(mut self, columns: &[&str]) -> Self {
        self.primary_key = columns.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    /// Chooses how the primary key is indexed (default [`PrimaryKeyIndex::HashAndOrdered`]).
    pub fn primary_key_index(mut self, kind: PrimaryKeyIndex) -> Self {
        self.primary_key_index = kind;
        self
    }

    /// Adds a non-unique secondary index over `columns`, in key order.
    pub fn index(mut self, name: &str, columns: &[&str]) -> Self {
        self.indexes.push((
            name.to_owned(),
            columns.iter().map(|c| (*c).to_owned()).collect(),
        ));
        self
    }

    /// Checks the schema and resolves names to column positions.
    pub(crate) fn validate(self, table: &str) -> Result<TableSchema> {
        let invalid = |reason: String| Error::InvalidSchema {
            reason: format!("table {table}: {reason}"),
        };
        if table.is_empty() {
            return Err(Error::InvalidSchema {
                reason: "a table name cannot be empty".into(),
            });
        }
        if self.columns.is_empty() {
            return Err(invalid("it has no columns".into()));
        }
        if self.columns.len() > MAX_COLUMNS {
            return Err(invalid(format!(
                "it has {} columns, the limit is {MAX_COLUMNS}",
                self.columns.len()
            )));
        }
        for (i, (name, _)) in self.columns.iter().enumerate() {
            if name.is_empty() {
                return Err(invalid(format!("column {i} has an empty name")));
            }
            if self.columns[..i].iter().any(|(other, _)| other == name) {
                return Err(invalid(format!("column {name} is declared twice")));
            }
        }
        let position = |column: &str| -> Result<usize> {
            self.columns
                .iter()
                .position(|(name, _)| name == column)
                .ok_or_else(|| Error::UnknownColumn {
                    table: table.to_owned(),
                    column: column.to_owned(),
                })
        };
        let resolve = |columns: &[String], what: &str| -> Result<Vec<usize>> {
            if columns.is_empty() {
                return Err(invalid(format!("{what} has no columns")));
            }
            let mut positions = Vec::with_capacity(columns.len());
            for column in columns {
                let pos = position(column)?;
                if positions.contains(&pos) {
                    return Err(invalid(format!("{what} names column {column} twice")));
                }
                positions.push(pos);
            }
            Ok(positions)
        };
        if self.primary_key.is_empty() {
            return Err(invalid("it has no primary key".into()));
        }
        let primary_key = resolve(&self.primary_key, "the primary key")?;
        let mut indexes = Vec::with_capacity(self.indexes.len());
        for (name, columns) in &self.indexes {
            if name.is_empty() {
                return Err(invalid("a secondary index has an empty name".into()));
            }
            if indexes
                .iter()
                .any(|index: &IndexSchema| &index.name == name)
            {
                return Err(invalid(format!("index {name} is declared twice")));
            }
            let columns = resolve(columns, &format!("index {name}"))?;
            let mask = ColumnMask::from_columns(&columns);
            indexes.push(IndexSchema {
                name: name.clone(),
                columns,
                mask,
            });
        }
        let primary_key_mask = ColumnMask::from_columns(&primary_key);
        let secondary_mask = indexes
            .iter()
            .fold(ColumnMask::EMPTY, |acc, index| acc.union(index.mask));
        Ok(TableSchema {
            name: table.to_owned(),
            column_names: self.columns.iter().map(|(n, _)| n.clone()).collect(),
            column_types: self.columns.iter().map(|(_, t)| *t).collect(),
            primary_key,
            primary_key_mask,
            primary_key_index: self.primary_key_index,
            indexes,
            secondary_mask,
        })
    }
}

/// A secondary index, resolved.
#[derive(Clone, Debug)]
pub(crate) struct IndexSchema {
    pub(crate) name: String,
    pub(crate) columns: Vec<usize>,
    pub(crate) mask: ColumnMask,
}

/// A validated schema: names resolved to positions, masks precomputed.
#[derive(Clone, Debug)]
pub(crate) struct TableSchema {
    pub(crate) name: String,
    pub(crate) column_names: Vec<String>,
    pub(crate) column_types: Vec<ColumnType>,
    pub(crate) primary_key: Vec<usize>,
    pub(crate) primary_key_mask: ColumnMask,
    pub(crate) primary_key_index: PrimaryKeyIndex,
    pub(crate) indexes: Vec<IndexSchema>,
    /// Union of the columns of all secondary indexes.
    pub(crate) secondary_mask: ColumnMask,
}

impl TableSchema {
    pub(crate) fn arity(&self) -> usize {
        self.column_types.len()
    }

    pub(crate) fn column_position(&self, name: &str) -> Result<usize> {
        self.column_names
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| Error::UnknownColumn {
                table: self.name.clone(),
                column: name.to_owned(),
            })
    }

    pub(crate) fn index_position(&self, name: &str) -> Result<usize> {
        self.indexes
            .iter()
            .position(|i| i.name == name)
            .ok_or_else(|| Error::UnknownIndex {
                table: self.name.clone(),
                index: name.to_owned(),
            })
    }

    fn check_value(&self, column: usize, value: &Value) -> Result<()> {
        let expected = self.column_types[column];
        let len = match value {
            Value::Text(text) => text.len(),
            Value::Bytes(bytes) => bytes.len(),
            _ => 0,
        };
        if len > MAX_VALUE_BYTES {
            return Err(Error::ValueTooLarge {
                table: self.name.clone(),
                column: self.column_names[column].clone(),
                bytes: len,
                limit: MAX_VALUE_BYTES,
            });
        }
        if value.fits(expected) {
            Ok(())
        } else {
            Err(Error::WrongType {
                table: self.name.clone(),
                column: self.column_names[column].clone(),
                expected,
                found: describe(value),
            })
        }
    }

    /// Checks a whole row for an insert.
    pub(crate) fn check_row(&self, row: &[Value]) -> Result<()> {
        if row.len() != self.arity() {
            return Err(Error::WrongArity {
                what: format!("row of {}", self.name),
                expected: self.arity(),
                found: row.len(),
            });
        }
        for (column, value) in row.iter().enumerate() {
            self.check_value(column, value)?;
        }
        for &column in &self.primary_key {
            if row[column].is_null() {
                return Err(self.null_in_key(column));
            }
        }
        Ok(())
    }

    /// Checks a primary key given as its own values, in key order.
    pub(crate) fn check_key(&self, key: &[Value]) -> Result<()> {
        if key.len() != self.primary_key.len() {
            return Err(Error::WrongArity {
                what: format!("primary key of {}", self.name),
                expected: self.primary_key.len(),
                found: key.len(),
            });
        }
        for (value, &column) in key.iter().zip(&self.primary_key) {
            if value.is_null() {
                return Err(self.null_in_key(column));
            }
            self.check_value(column, value)?;
        }
        Ok(())
    }

    /// Checks a key prefix for a secondary index (its first `key.len()` columns).
    pub(crate) fn check_index_key(&self, index: usize, key: &[Value]) -> Result<()> {
        let columns = &self.indexes[index].columns;
        if key.len() > columns.len() {
            return Err(Error::WrongArity {
                what: format!("key of index {}", self.indexes[index].name),
                expected: columns.len(),
                found: key.len(),
            });
        }
        for (value, &column) in key.iter().zip(columns) {
            self.check_value(column, value)?;
        }
        Ok(())
    }

    /// Checks an update's assignments and returns the mask of the columns they change.
    pub(crate) fn check_assignments(&self, changes: &[(usize, Value)]) -> Result<ColumnMask> {
        let mut mask = ColumnMask::EMPTY;
        for (column, value) in changes {
            if *column >= self.arity() {
                return Err(Error::UnknownColumn {
                    table: self.name.clone(),
                    column: format!("#{column}"),
                });
            }
            if self.primary_key_mask.contains(*column) {
                return Err(Error::PrimaryKeyUpdate {
                    table: self.name.clone(),
                    column: self.column_names[*column].clone(),
                });
            }
            self.check_value(*column, value)?;
            mask = mask.with(*column);
        }
        Ok(mask)
    }

    fn null_in_key(&self, column: usize) -> Error {
        Error::NullInPrimaryKey {
            table: self.name.clone(),
            column: self.column_names[column].clone(),
        }
    }
}

fn describe(value: &Value) -> String {
    match value.column_type() {
        Some(ty) => format!("{value} of type {ty}"),
        None => "NULL".into(),
    }
}

/// A set of column positions, one bit per column (Steam's attribute mask, Table 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ColumnMask(u128);

impl ColumnMask {
    /// No columns.
    pub const EMPTY: ColumnMask = ColumnMask(0);

    /// Every column of a table of `arity` columns.
    pub fn all(arity: usize) -> Self {
        debug_assert!(arity <= MAX_COLUMNS);
        if arity == MAX_COLUMNS {
            ColumnMask(u128::MAX)
        } else {
            ColumnMask((1u128 << arity) - 1)
        }
    }

    /// The columns listed.
    pub fn from_columns(columns: &[usize]) -> Self {
        columns
            .iter()
            .fold(ColumnMask::EMPTY, |mask, &column| mask.with(column))
    }

    /// This set plus `column`.
    #[must_use]
    pub fn with(self, column: usize) -> Self {
        debug_assert!(column < MAX_COLUMNS);
        ColumnMask(self.0 | (1u128 << column))
    }

    /// Whether `column` is in the set.
    pub fn contains(self, column: usize) -> bool {
        column < MAX_COLUMNS && self.0 & (1u128 << column) != 0
    }

    /// Columns in either set.
    #[must_use]
    pub fn union(self, other: ColumnMask) -> Self {
        ColumnMask(self.0 | other.0)
    }

    /// Columns in both sets.
    #[must_use]
    pub fn intersection(self, other: ColumnMask) -> Self {
        ColumnMask(self.0 & other.0)
    }

    /// Columns in `self` but not in `other`.
    #[must_use]
    pub fn difference(self, other: ColumnMask) -> Self {
        ColumnMask(self.0 & !other.0)
    }

    /// Whether every column of `other` is in `self` (Steam's covered check, one `or`).
    pub fn covers(self, other: ColumnMask) -> bool {
        self.0 | other.0 == self.0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of columns in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The columns in ascending order.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                None
            } else {
                let column = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(column)
            }
        })
    }

    /// The columns of the set at or after `column`.
    #[must_use]
    pub(crate) fn at_or_after(self, column: usize) -> Self {
        debug_assert!(column < MAX_COLUMNS);
        ColumnMask(self.0 & (u128::MAX << column))
    }

    /// How many columns of the set come before `column` (the slot of `column` in a
    /// before-image that stores only the masked columns, in ascending order).
    pub fn rank(self, column: usize) -> usize {
        debug_assert!(column < MAX_COLUMNS);
        let below = if column == 0 {
            0
        } else {
            self.0 & (u128::MAX >> (MAX_COLUMNS - column))
        };
        below.count_ones() as usize
    }
}
