//! DuckDB as a peer (cargo feature `duckdb`): embedded, through the `duckdb` crate (DuckDB
//! built from its bundled C++ source), an in-memory database.
//!
//! DuckDB runs snapshot isolation with optimistic concurrency control: the second of two
//! transactions to update a row fails with a conflict (counted as `write_conflict`). Its
//! MVCC keeps undo buffers that a version can leave only when no transaction could still
//! see it, so one long transaction keeps every undo buffer written after it began. Each
//! worker has its own connection (a clone of the database's first one). Loads go through
//! DuckDB's Appender. Growth: `duckdb_memory()`, the memory DuckDB's buffer manager holds.

use std::sync::Mutex;

use duckdb::types::ValueRef;
use duckdb::Connection;
use verso::{Database, Isolation};

use super::sql::{Dialect, Session, SqlError, SqlRow, SqlValue, TableDef, TxnMode};
use super::{Peer, PeerDescription, PeerKind};
use crate::workload::{AbortReason, LabError, LoadProgress};

/// Prepared statements each connection keeps.
const STATEMENT_CACHE: usize = 128;

/// DuckDB, opened in memory for one run.
pub struct DuckDbPeer {
    /// The first connection: cloned for every session, used by the sampler.
    main: Mutex<Connection>,
    description: PeerDescription,
}

fn failed(doing: &str, e: impl std::fmt::Display) -> LabError {
    LabError::Peer(format!("duckdb: {doing}: {e}"))
}

fn poisoned() -> LabError {
    LabError::Peer("duckdb: a thread panicked while using the main connection".into())
}

impl DuckDbPeer {
    /// A fresh in-memory database.
    pub fn open() -> Result<DuckDbPeer, LabError> {
        let main = Connection::open_in_memory().map_err(|e| failed("open", e))?;
        let (version, threads, memory_limit): (String, String, String) = main
            .query_row(
                "SELECT version(), current_setting('threads')::VARCHAR, \
                 current_setting('memory_limit')::VARCHAR",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .map_err(|e| failed("reading its version and settings", e))?;
        Ok(DuckDbPeer {
            main: Mutex::new(main),
            description: PeerDescription {
                version: format!("DuckDB {version}"),
                settings: format!(
                    "in-memory database, threads={threads}, memory_limit={memory_limit} \
                     (as shipped)"
                ),
                durability: "none: an in-memory database, like Verso's without --path; a \
                             crash loses everything"
                    .to_owned(),
                growth_measure: "memory held by DuckDB's buffer manager (sum of \
                                 duckdb_memory()), where its tables and undo buffers live"
                    .to_owned(),
            },
        })
    }
}

impl Peer for DuckDbPeer {
    fn kind(&self) -> PeerKind {
        PeerKind::DuckDb
    }

    fn description(&self) -> &PeerDescription {
        &self.description
    }

    fn isolation_name(&self, _isolation: Isolation) -> String {
        "snapshot isolation (DuckDB's only level; optimistic: the second updater of a row \
         fails)"
            .to_owned()
    }

    fn connect(&self) -> Result<Box<dyn Session>, LabError> {
        let connection = self
            .main
            .lock()
            .map_err(|_| poisoned())?
            .try_clone()
            .map_err(|e| failed("connect", e))?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(Box::new(DuckDbSession { connection }))
    }

    /// Creates each table with its key, fills it through an Appender, then builds its
    /// secondary indexes.
    fn load(
        &self,
        tables: &[TableDef],
        source: &Database,
        progress: &dyn LoadProgress,
    ) -> Result<(), LabError> {
        let connection = self.main.lock().map_err(|_| poisoned())?;
        for table in tables {
            connection
                .execute_batch(&table.create_sql(Dialect::DuckDb, true))
                .map_err(|e| failed(&format!("CREATE TABLE {}", table.name), e))?;
            let mut appender = connection
                .appender(&table.name)
                .map_err(|e| failed(&format!("the appender of {}", table.name), e))?;
            let mut append_error = None;
            super::for_each_row(source, table, progress, |row| {
                match appender.append_row(duckdb::appender_params_from_iter(row.iter())) {
                    Ok(()) => true,
                    Err(e) => {
                        append_error = Some(e);
                        false
                    }
                }
            })?;
            if let Some(e) = append_error {
                return Err(failed(&format!("appending to {}", table.name), e));
            }
            appender
                .flush()
                .map_err(|e| failed(&format!("appending to {}", table.name), e))?;
            drop(appender);
            for statement in table.index_sql() {
                connection
                    .execute_batch(&statement)
                    .map_err(|e| failed(&statement, e))?;
            }
        }
        Ok(())
    }

    fn growth_bytes(&self, _tables: &[TableDef]) -> Option<u64> {
        let connection = self.main.lock().ok()?;
        let bytes: i64 = connection
            .query_row(
                "SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT FROM duckdb_memory()",
                [],
                |row| row.get(0),
            )
            .ok()?;
        u64::try_from(bytes).ok()
    }
}

impl duckdb::ToSql for SqlValue {
    fn to_sql(&self) -> duckdb::Result<duckdb::types::ToSqlOutput<'_>> {
        use duckdb::types::ToSqlOutput;
        Ok(match self {
            SqlValue::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            SqlValue::Int(i) => ToSqlOutput::Borrowed(ValueRef::BigInt(*i)),
            SqlValue::Float(f) => ToSqlOutput::Borrowed(ValueRef::Double(*f)),
            SqlValue::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            SqlValue::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

/// One connection.
struct DuckDbSession {
    connection: Connection,
}

/// DuckDB reports a lost conflict as a "TransactionContext Error" whose message names the
/// conflict ("Conflict on tuple deletion", "Conflict on update", ...).
fn classify(error: duckdb::Error) -> SqlError {
    let message = error.to_string();
    if message.contains("onflict") || message.contains("TransactionContext Error") {
        SqlError::Abort(AbortReason::WriteConflict, message)
    } else {
        SqlError::Failed(message)
    }
}

fn value_of(value: ValueRef<'_>) -> SqlValue {
    match value {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Boolean(b) => SqlValue::Int(i64::from(b)),
        ValueRef::TinyInt(i) => SqlValue::Int(i64::from(i)),
        ValueRef::SmallInt(i) => SqlValue::Int(i64::from(i)),
        ValueRef::Int(i) => SqlValue::Int(i64::from(i)),
        ValueRef::BigInt(i) => SqlValue::Int(i),
        ValueRef::HugeInt(i) => i64::try_from(i).map_or(SqlValue::Float(i as f64), SqlValue::Int),
        ValueRef::UTinyInt(i) => SqlValue::Int(i64::from(i)),
        ValueRef::USmallInt(i) => SqlValue::Int(i64::from(i)),
        ValueRef::UInt(i) => SqlValue::Int(i64::from(i)),
        ValueRef::UBigInt(i) => i64::try_from(i).map_or(SqlValue::Float(i as f64), SqlValue::Int),
        ValueRef::Float(f) => SqlValue::Float(f64::from(f)),
        ValueRef::Double(f) => SqlValue::Float(f),
        ValueRef::Decimal(d) => {
            let text = d.to_string();
            if text.contains('.') {
                SqlValue::Float(text.parse().unwrap_or(f64::NAN))
            } else {
                text.parse()
                    .map_or(SqlValue::Float(f64::NAN), SqlValue::Int)
            }
        }
        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => SqlValue::Bytes(b.to_vec()),
        other => SqlValue::Text(format!("{other:?}")),
    }
}

impl Session for DuckDbSession {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.connection.execute_batch(sql).map_err(classify)
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError> {
        let mut statement = self.connection.prepare_cached(sql).map_err(classify)?;
        statement
            .execute(duckdb::params_from_iter(params.iter()))
            .map(|changed| changed as u64)
            .map_err(classify)
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        let mut statement = self.connection.prepare_cached(sql).map_err(classify)?;
        let mut rows = statement
            .query(duckdb::params_from_iter(params.iter()))
            .map_err(classify)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(classify)? {
            let columns = row.as_ref().column_count();
            let mut values = Vec::with_capacity(columns);
            for i in 0..columns {
                values.push(value_of(row.get_ref(i).map_err(classify)?));
            }
            out.push(values);
        }
        Ok(out)
    }

    fn begin(&mut self, _mode: TxnMode) -> Result<(), SqlError> {
        self.connection
            .execute_batch("BEGIN TRANSACTION")
            .map_err(classify)
    }

    fn commit(&mut self) -> Result<(), SqlError> {
        match self.connection.execute_batch("COMMIT") {
            Ok(()) => Ok(()),
            Err(e) => {
                if !self.connection.is_autocommit() {
                    let _ = self.connection.execute_batch("ROLLBACK");
                }
                Err(classify(e))
            }
        }
    }

    fn rollback(&mut self) -> Result<(), SqlError> {
        if self.connection.is_autocommit() {
            return Ok(());
        }
        self.connection.execute_batch("ROLLBACK").map_err(classify)
    }
}
