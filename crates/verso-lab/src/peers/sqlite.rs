//! SQLite as a peer: embedded, through `rusqlite` (SQLite built from its bundled source), one
//! database file in a fresh directory, in WAL mode.
//!
//! WAL mode is what lets SQLite's readers run beside its one writer: a reader keeps the WAL
//! position it started at, and a checkpoint cannot reset the WAL past the oldest reader
//! (SQLite's documentation calls this checkpoint starvation), so a long reader makes the WAL
//! grow without bound. Every connection sets `synchronous = NORMAL` (commits do not wait for
//! the disk; the WAL is synced at checkpoints, so a crash of the process loses nothing and
//! a power loss may lose the last commits) and a busy timeout of 10 s. Writers begin with
//! `BEGIN IMMEDIATE` (they queue for SQLite's single write lock instead of failing when
//! they upgrade), readers with `BEGIN` (a snapshot at their first read). Every transaction
//! is serializable: SQLite runs one writer at a time. Growth: the database and WAL files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode};
use verso::{Database, Isolation};

use super::cleanup::{self, Cleanup, Registration};
use super::sql::{
    numbered_placeholders, Dialect, Session, SqlError, SqlRow, SqlValue, TableDef, TxnMode,
};
use super::{Peer, PeerDescription, PeerKind};
use crate::workload::{AbortReason, LabError, LoadProgress};

/// How long a connection waits for SQLite's locks before `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Prepared statements each connection keeps (the workloads use a few dozen).
const STATEMENT_CACHE: usize = 128;

/// SQLite, opened for one run: its directory, removed when this is dropped.
pub struct SqlitePeer {
    dir: PathBuf,
    file: PathBuf,
    description: PeerDescription,
    _registration: Registration,
}

fn failed(doing: &str, e: impl std::fmt::Display) -> LabError {
    LabError::Peer(format!("sqlite: {doing}: {e}"))
}

impl SqlitePeer {
    /// A fresh database file in a fresh directory under `parent`.
    pub fn create(parent: &Path) -> Result<SqlitePeer, LabError> {
        let dir = cleanup::fresh_dir(parent, "sqlite").map_err(|e| failed("its directory", e))?;
        let mut peer = SqlitePeer {
            _registration: cleanup::register(Cleanup::RemoveDir(dir.clone())),
            file: dir.join("lab.db"),
            dir,
            description: PeerDescription::default(),
        };
        let connection = peer.open()?;
        let journal: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| failed("PRAGMA journal_mode = WAL", e))?;
        if !journal.eq_ignore_ascii_case("wal") {
            return Err(failed("WAL mode", format!("journal_mode is {journal}")));
        }
        let version = rusqlite::version();
        let autocheckpoint: i64 = connection
            .query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))
            .map_err(|e| failed("PRAGMA wal_autocheckpoint", e))?;
        let cache: i64 = connection
            .query_row("PRAGMA cache_size", [], |row| row.get(0))
            .map_err(|e| failed("PRAGMA cache_size", e))?;
        drop(connection);
        peer.description = PeerDescription {
            version: format!("SQLite {version}"),
            settings: format!(
                "journal_mode=WAL, synchronous=NORMAL, wal_autocheckpoint={autocheckpoint} \
                     pages, cache_size={cache}, busy_timeout={} ms; writers BEGIN IMMEDIATE; \
                     a database file in {}, removed after the run",
                BUSY_TIMEOUT.as_millis(),
                peer.dir.display()
            ),
            durability: "WAL with synchronous=NORMAL: a commit is in the WAL file but not \
                             synced; a crash of the process loses nothing, a power loss may \
                             lose the last commits (like Verso's --durability none)"
                .to_owned(),
            growth_measure: "the database file plus its WAL file (a long reader keeps \
                                 checkpoints from resetting the WAL)"
                .to_owned(),
        };
        Ok(peer)
    }

    fn open(&self) -> Result<Connection, LabError> {
        let connection = Connection::open(&self.file).map_err(|e| failed("open", e))?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| failed("busy_timeout", e))?;
        connection
            .execute_batch("PRAGMA synchronous = NORMAL")
            .map_err(|e| failed("PRAGMA synchronous", e))?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(connection)
    }

    fn file_bytes(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }
}

impl Drop for SqlitePeer {
    fn drop(&mut self) {
        cleanup::remove_dir(&self.dir);
    }
}

impl Peer for SqlitePeer {
    fn kind(&self) -> PeerKind {
        PeerKind::Sqlite
    }

    fn description(&self) -> &PeerDescription {
        &self.description
    }

    fn isolation_name(&self, _isolation: Isolation) -> String {
        "SERIALIZABLE (SQLite's only level: one writer at a time, readers on a WAL snapshot)"
            .to_owned()
    }

    fn connect(&self) -> Result<Box<dyn Session>, LabError> {
        Ok(Box::new(SqliteSession {
            connection: self.open()?,
        }))
    }

    /// A prepared insert per table, all in one transaction; secondary indexes after.
    fn load(
        &self,
        tables: &[TableDef],
        source: &Database,
        progress: &dyn LoadProgress,
    ) -> Result<(), LabError> {
        let mut connection = self.open()?;
        let txn = connection.transaction().map_err(|e| failed("BEGIN", e))?;
        for table in tables {
            txn.execute_batch(&table.create_sql(Dialect::Sqlite, true))
                .map_err(|e| failed(&format!("CREATE TABLE {}", table.name), e))?;
            let mut insert = txn
                .prepare(&numbered_placeholders(&table.insert_sql()))
                .map_err(|e| failed(&format!("INSERT INTO {}", table.name), e))?;
            let mut insert_error = None;
            super::for_each_row(source, table, progress, |row| {
                match insert.execute(rusqlite::params_from_iter(row.iter())) {
                    Ok(_) => true,
                    Err(e) => {
                        insert_error = Some(e);
                        false
                    }
                }
            })?;
            if let Some(e) = insert_error {
                return Err(failed(&format!("INSERT INTO {}", table.name), e));
            }
            for statement in table.index_sql() {
                txn.execute_batch(&statement)
                    .map_err(|e| failed(&statement, e))?;
            }
        }
        txn.commit().map_err(|e| failed("COMMIT of the load", e))?;
        connection
            .execute_batch("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE)")
            .map_err(|e| failed("ANALYZE", e))
    }

    fn growth_bytes(&self, _tables: &[TableDef]) -> Option<u64> {
        let wal = PathBuf::from(format!("{}-wal", self.file.display()));
        Some(Self::file_bytes(&self.file) + Self::file_bytes(&wal))
    }
}

impl rusqlite::ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ToSqlOutput;
        Ok(match self {
            SqlValue::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            SqlValue::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            SqlValue::Float(f) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            SqlValue::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            SqlValue::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

/// One connection.
struct SqliteSession {
    connection: Connection,
}

fn classify(error: rusqlite::Error) -> SqlError {
    match &error {
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
        {
            SqlError::Abort(AbortReason::Busy, error.to_string())
        }
        _ => SqlError::Failed(error.to_string()),
    }
}

fn value_of(value: ValueRef<'_>) -> SqlValue {
    match value {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Int(i),
        ValueRef::Real(f) => SqlValue::Float(f),
        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => SqlValue::Bytes(b.to_vec()),
    }
}

impl Session for SqliteSession {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.connection.execute_batch(sql).map_err(classify)
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError> {
        let mut statement = self
            .connection
            .prepare_cached(&numbered_placeholders(sql))
            .map_err(classify)?;
        statement
            .execute(rusqlite::params_from_iter(params.iter()))
            .map(|changed| changed as u64)
            .map_err(classify)
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        let mut statement = self
            .connection
            .prepare_cached(&numbered_placeholders(sql))
            .map_err(classify)?;
        let columns = statement.column_count();
        let mut rows = statement
            .query(rusqlite::params_from_iter(params.iter()))
            .map_err(classify)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(classify)? {
            let mut values = Vec::with_capacity(columns);
            for i in 0..columns {
                values.push(value_of(row.get_ref(i).map_err(classify)?));
            }
            out.push(values);
        }
        Ok(out)
    }

    fn begin(&mut self, mode: TxnMode) -> Result<(), SqlError> {
        self.connection
            .execute_batch(match mode {
                TxnMode::ReadWrite(_) => "BEGIN IMMEDIATE",
                TxnMode::ReadOnly(_) => "BEGIN",
            })
            .map_err(classify)
    }

    fn commit(&mut self) -> Result<(), SqlError> {
        match self.connection.execute_batch("COMMIT") {
            Ok(()) => Ok(()),
            Err(e) => {
                // A busy COMMIT leaves the transaction open; end it so the next begins clean.
                let _ = self.connection.execute_batch("ROLLBACK");
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
