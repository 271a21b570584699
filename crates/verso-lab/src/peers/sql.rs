//! What the peers have in common: one SQL session per worker, values, errors, table
//! definitions.
//!
//! Every workload's SQL is written once, against [`Session`], with PostgreSQL's `$1`
//! placeholders (DuckDB takes them as they are; the SQLite session rewrites them to `?1`).
//! A session prepares each distinct statement text once and keeps it (prepared statements,
//! as the issue asks and as a real application would), and runs transactions explicitly:
//! [`Session::begin`] at the isolation the run asks for, then [`Session::commit`] or
//! [`Session::rollback`].

use std::fmt::Write as _;

use verso::Isolation;

use crate::workload::{AbortReason, LabError};

/// A value passed to or read from a peer.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// An integer (BIGINT).
    Int(i64),
    /// A floating-point number (DOUBLE PRECISION); NUMERIC and DECIMAL results are read as
    /// this too.
    Float(f64),
    /// Text.
    Text(String),
    /// Bytes (BYTEA, BLOB).
    Bytes(Vec<u8>),
}

impl SqlValue {
    /// The integer, if this is one (a float with no fraction counts: aggregates of
    /// integers come back as NUMERIC from PostgreSQL and HUGEINT from DuckDB).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            SqlValue::Int(i) => Some(*i),
            SqlValue::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(*f as i64),
            _ => None,
        }
    }

    /// The number, integer or float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            SqlValue::Int(i) => Some(*i as f64),
            SqlValue::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The text, if this is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            SqlValue::Text(t) => Some(t),
            _ => None,
        }
    }

    /// Whether this is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, SqlValue::Null)
    }

    /// The value of a Verso row's column, as a peer stores it (unsigned integers fit: the
    /// lab's keys are far below 2^63).
    pub fn of_verso(value: verso::ValueRef<'_>) -> SqlValue {
        use verso::ValueRef;
        match value {
            ValueRef::Null => SqlValue::Null,
            ValueRef::I64(i) => SqlValue::Int(i),
            ValueRef::U64(u) => SqlValue::Int(i64::try_from(u).unwrap_or(i64::MAX)),
            ValueRef::F64(f) => SqlValue::Float(f),
            ValueRef::Text(t) => SqlValue::Text(t.to_owned()),
            ValueRef::Bytes(b) => SqlValue::Bytes(b.to_vec()),
        }
    }
}

/// One row of a query's result.
pub type SqlRow = Vec<SqlValue>;

/// Why a statement failed.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlError {
    /// The transaction lost a conflict and was (or must be) rolled back; running it again
    /// may succeed. The peer's own message says which conflict.
    Abort(AbortReason, String),
    /// Anything else: a bug in the workload's SQL or a broken connection. Stops the run.
    Failed(String),
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SqlError::Abort(reason, message) => write!(f, "{} abort: {message}", reason.name()),
            SqlError::Failed(message) => f.write_str(message),
        }
    }
}

impl SqlError {
    /// This error as the lab's error, naming the peer and what it was doing.
    pub fn in_peer(self, peer: &str, doing: &str) -> LabError {
        LabError::Peer(format!("{peer}: {doing}: {self}"))
    }
}

/// How a transaction begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnMode {
    /// A transaction that may write, at the run's isolation.
    ReadWrite(Isolation),
    /// A transaction that only reads (declared so where the peer has a way to).
    ReadOnly(Isolation),
}

/// One connection to a peer, owned by one thread.
pub trait Session {
    /// Runs statements that take no parameters and return nothing (DDL, SET, ...).
    fn batch(&mut self, sql: &str) -> Result<(), SqlError>;
    /// Runs a statement (prepared once per session), returning the rows it changed.
    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError>;
    /// Runs a query (prepared once per session), returning its rows.
    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError>;
    /// Begins a transaction.
    fn begin(&mut self, mode: TxnMode) -> Result<(), SqlError>;
    /// Commits the open transaction; a conflict found at commit is an [`SqlError::Abort`]
    /// and leaves no transaction open.
    fn commit(&mut self) -> Result<(), SqlError>;
    /// Rolls the open transaction back (nothing happens if none is open).
    fn rollback(&mut self) -> Result<(), SqlError>;
}

impl dyn Session + '_ {
    /// The single row of a query that must return exactly one.
    pub fn query_one(&mut self, sql: &str, params: &[SqlValue]) -> Result<SqlRow, SqlError> {
        let mut rows = self.query(sql, params)?;
        match rows.len() {
            1 => Ok(rows.swap_remove(0)),
            n => Err(SqlError::Failed(format!(
                "expected one row, got {n}, from: {sql}"
            ))),
        }
    }

    /// The first column of a query's single row, as an integer (NULL and other types are
    /// an error naming the query).
    pub fn query_i64(&mut self, sql: &str, params: &[SqlValue]) -> Result<i64, SqlError> {
        let row = self.query_one(sql, params)?;
        row.first().and_then(SqlValue::as_i64).ok_or_else(|| {
            SqlError::Failed(format!("expected an integer, got {row:?}, from: {sql}"))
        })
    }
}

/// A column's type, as every peer understands it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqlType {
    /// 64-bit integer.
    BigInt,
    /// 64-bit floating point.
    Double,
    /// Text.
    Text,
    /// Bytes.
    Bytes,
}

impl SqlType {
    /// The type of a Verso column.
    pub fn of_verso(column_type: verso::ColumnType) -> SqlType {
        use verso::ColumnType;
        match column_type {
            ColumnType::I64 | ColumnType::U64 => SqlType::BigInt,
            ColumnType::F64 => SqlType::Double,
            ColumnType::Text => SqlType::Text,
            ColumnType::Bytes => SqlType::Bytes,
        }
    }
}

/// The SQL dialects the peers speak, where they differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// DuckDB.
    DuckDb,
    /// SQLite.
    Sqlite,
}

impl Dialect {
    /// The name of `column_type` in this dialect.
    pub fn type_name(self, column_type: SqlType) -> &'static str {
        match (self, column_type) {
            (_, SqlType::BigInt) => "BIGINT",
            (Dialect::Postgres, SqlType::Double) => "DOUBLE PRECISION",
            (Dialect::DuckDb, SqlType::Double) => "DOUBLE",
            (Dialect::Sqlite, SqlType::Double) => "REAL",
            (_, SqlType::Text) => "TEXT",
            (Dialect::Postgres, SqlType::Bytes) => "BYTEA",
            (_, SqlType::Bytes) => "BLOB",
        }
    }
}

/// A table as the peers create it: the same columns, key and secondary indexes as Verso's.
#[derive(Clone, Debug, PartialEq)]
pub struct TableDef {
    /// The table's name.
    pub name: String,
    /// Columns, in Verso's order (the order rows are copied in).
    pub columns: Vec<(String, SqlType)>,
    /// Primary key columns; empty for none (pgbench's history has no key).
    pub primary_key: Vec<String>,
    /// Secondary indexes: name and columns.
    pub indexes: Vec<(String, Vec<String>)>,
}

impl TableDef {
    /// A table of `columns`, keyed by `primary_key`, without secondary indexes.
    pub fn new(name: &str, columns: &[(&str, SqlType)], primary_key: &[&str]) -> TableDef {
        TableDef {
            name: name.to_owned(),
            columns: columns.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect(),
            primary_key: primary_key.iter().map(|c| (*c).to_owned()).collect(),
            indexes: Vec::new(),
        }
    }

    /// A table whose columns are Verso's `(name, type)` list.
    pub fn of_verso(
        name: &str,
        columns: &[(&str, verso::ColumnType)],
        primary_key: &[&str],
    ) -> TableDef {
        let columns: Vec<(&str, SqlType)> = columns
            .iter()
            .map(|(n, t)| (*n, SqlType::of_verso(*t)))
            .collect();
        TableDef::new(name, &columns, primary_key)
    }

    /// This table with a secondary index.
    #[must_use]
    pub fn index(mut self, name: &str, columns: &[&str]) -> TableDef {
        self.indexes.push((
            name.to_owned(),
            columns.iter().map(|c| (*c).to_owned()).collect(),
        ));
        self
    }

    /// `CREATE TABLE`, with the primary key declared in it when `with_key`. In SQLite a
    /// single integer key is declared `INTEGER PRIMARY KEY`, SQLite's way of keying a table
    /// by an integer (the key is then the row id; any other declaration adds a separate
    /// index beside the table).
    pub fn create_sql(&self, dialect: Dialect, with_key: bool) -> String {
        let row_id_key = match (dialect, self.primary_key.as_slice()) {
            (Dialect::Sqlite, [key]) if with_key => self
                .columns
                .iter()
                .any(|(column, t)| column == key && *t == SqlType::BigInt)
                .then_some(key.as_str()),
            _ => None,
        };
        let mut sql = format!("CREATE TABLE {} (", self.name);
        for (i, (column, column_type)) in self.columns.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            if row_id_key == Some(column.as_str()) {
                let _ = write!(sql, "{column} INTEGER PRIMARY KEY");
            } else {
                let _ = write!(sql, "{column} {}", dialect.type_name(*column_type));
            }
        }
        if with_key && !self.primary_key.is_empty() && row_id_key.is_none() {
            let _ = write!(sql, ", PRIMARY KEY ({})", self.primary_key.join(", "));
        }
        sql.push(')');
        sql
    }

    /// `ALTER TABLE ... ADD PRIMARY KEY` (PostgreSQL, after its COPY, as `pgbench -i` does).
    pub fn add_key_sql(&self) -> Option<String> {
        (!self.primary_key.is_empty()).then(|| {
            format!(
                "ALTER TABLE {} ADD PRIMARY KEY ({})",
                self.name,
                self.primary_key.join(", ")
            )
        })
    }

    /// `CREATE INDEX` for each secondary index.
    pub fn index_sql(&self) -> Vec<String> {
        self.indexes
            .iter()
            .map(|(index, columns)| {
                format!(
                    "CREATE INDEX {index} ON {} ({})",
                    self.name,
                    columns.join(", ")
                )
            })
            .collect()
    }

    /// `INSERT INTO t VALUES ($1, ..., $n)`.
    pub fn insert_sql(&self) -> String {
        let placeholders: Vec<String> = (1..=self.columns.len()).map(|i| format!("${i}")).collect();
        format!(
            "INSERT INTO {} VALUES ({})",
            self.name,
            placeholders.join(", ")
        )
    }
}

/// `sql` with PostgreSQL's `$N` placeholders written `?N`, as SQLite numbers them. A `$`
/// inside a string literal is left alone.
pub fn numbered_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut in_literal = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_literal = !in_literal;
                out.push(c);
            }
            '$' if !in_literal && chars.peek().is_some_and(char::is_ascii_digit) => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_renumbered_outside_literals() {
        assert_eq!(
            numbered_placeholders("SELECT a FROM t WHERE a = $1 AND b = '$2' AND c = $12"),
            "SELECT a FROM t WHERE a = ?1 AND b = '$2' AND c = ?12"
        );
    }

    #[test]
    fn tables_are_created_in_each_dialect() {
        let t = TableDef::new(
            "t",
            &[("id", SqlType::BigInt), ("x", SqlType::Double)],
            &["id"],
        )
        .index("t_by_x", &["x"]);
        assert_eq!(
            t.create_sql(Dialect::Postgres, false),
            "CREATE TABLE t (id BIGINT, x DOUBLE PRECISION)"
        );
        assert_eq!(
            t.create_sql(Dialect::Sqlite, true),
            "CREATE TABLE t (id INTEGER PRIMARY KEY, x REAL)"
        );
        assert_eq!(
            t.create_sql(Dialect::DuckDb, true),
            "CREATE TABLE t (id BIGINT, x DOUBLE, PRIMARY KEY (id))"
        );
        assert_eq!(t.index_sql(), ["CREATE INDEX t_by_x ON t (x)"]);
        assert_eq!(t.insert_sql(), "INSERT INTO t VALUES ($1, $2)");
    }

    #[test]
    fn integers_read_back_from_aggregates() {
        assert_eq!(SqlValue::Float(42.0).as_i64(), Some(42));
        assert_eq!(SqlValue::Float(4.5).as_i64(), None);
        assert_eq!(SqlValue::Null.as_i64(), None);
    }
}
