//! The one error type of Verso.

use std::fmt;

use crate::value::ColumnType;

/// Everything that can go wrong in Verso.
///
/// Variants fall into two families, told apart by [`Error::is_retryable`]:
/// *conflicts* (the transaction lost a race with another one and was rolled back; run it
/// again) and *misuse* (the request itself is wrong; running it again gives the same error).
///
/// What an error does to the transaction that returned it:
/// - a conflict ([`Error::WriteConflict`], [`Error::SerializationFailure`],
///   [`Error::LockConflict`]) rolls the transaction back on the spot; every later call on
///   it, `commit` included, returns [`Error::TransactionAborted`], which is retryable too;
/// - any other error leaves the transaction usable: the failed call changed nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Another transaction wrote this row first (it is still running, or it committed after
    /// this transaction began): snapshot isolation's first-updater-wins rule. Retry.
    WriteConflict {
        /// The table of the row.
        table: String,
    },
    /// The transaction could not be serialized with the ones that committed while it ran.
    /// Retry.
    SerializationFailure {
        /// What the validation found.
        reason: String,
    },
    /// A row lock or timestamp refused a read or a write (MVTO, MV2PL with no-wait): another
    /// transaction holds the row's write lock, holds read locks on it, or (MVTO) a younger
    /// transaction read it. Retry.
    LockConflict {
        /// The table of the row.
        table: String,
        /// What refused the access.
        reason: &'static str,
    },
    /// The transaction was already rolled back because of an earlier conflict (a call that
    /// returned [`Error::WriteConflict`], [`Error::SerializationFailure`] or
    /// [`Error::LockConflict`]). Retry the whole transaction; [`Error::is_retryable`] says
    /// so.
    TransactionAborted,
    /// An insert found a row with the same primary key visible to this transaction.
    DuplicateKey {
        /// The table.
        table: String,
    },
    /// No table has this name (or this id, in this database).
    UnknownTable {
        /// The name or id asked for.
        name: String,
    },
    /// A table with this name already exists.
    DuplicateTable {
        /// The name.
        name: String,
    },
    /// The table has no column with this name or index.
    UnknownColumn {
        /// The table.
        table: String,
        /// The column name or index asked for.
        column: String,
    },
    /// A column's value read as a Rust type it does not convert to ([`Row::get`]): a NULL
    /// read as anything but an `Option`, or a value of another type (Verso converts no
    /// number to another).
    ///
    /// [`Row::get`]: crate::Row::get
    ValueConversion {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// The value the column holds.
        value: String,
        /// The type asked for.
        target: String,
    },
    /// The table has no secondary index with this name.
    UnknownIndex {
        /// The table.
        table: String,
        /// The index name asked for.
        index: String,
    },
    /// A row or key had the wrong number of values.
    WrongArity {
        /// What was being checked ("row of orders", "primary key of orders", ...).
        what: String,
        /// How many values were expected.
        expected: usize,
        /// How many were given.
        found: usize,
    },
    /// A value does not fit its column's type.
    WrongType {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// The column's type.
        expected: ColumnType,
        /// A short description of the value given.
        found: String,
    },
    /// A text or bytes value is longer than [`MAX_VALUE_BYTES`](crate::MAX_VALUE_BYTES).
    ValueTooLarge {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// The value's length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A primary-key column was given NULL.
    NullInPrimaryKey {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
    /// An update tried to change a primary-key column; delete and insert instead.
    PrimaryKeyUpdate {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
    /// The schema is not valid (no columns, no primary key, a duplicate name, ...).
    InvalidSchema {
        /// What is wrong.
        reason: String,
    },
    /// The options ask for a combination of designs that cannot work together.
    UnsupportedConfiguration {
        /// Why it cannot work.
        reason: String,
    },
    /// A transaction begun read-only ([`crate::Database::begin_read_only`]) tried to write.
    ReadOnlyTransaction,
    /// A fixed capacity of the engine was reached (tables, threads).
    CapacityExceeded {
        /// Which capacity.
        what: String,
        /// Its limit.
        limit: usize,
    },
    /// Reading or writing a file of the database failed. Nothing acknowledged was lost by
    /// it; if it happened while making commits durable, [`Error::DurabilityLost`] follows.
    Io {
        /// The file or directory.
        path: String,
        /// What Verso was doing ("syncing a log segment", ...).
        operation: &'static str,
        /// The kind of the operating system's error.
        kind: std::io::ErrorKind,
        /// The operating system's words.
        message: String,
    },
    /// A file of the database holds bytes that cannot be what Verso wrote: a checksum that
    /// does not match, a record a later sync point says was synced but is not there, a
    /// structure that does not decode. `open` refuses rather than drop acknowledged
    /// commits; restore the directory from a backup, or inspect the file at the offset.
    Corruption {
        /// The file.
        file: String,
        /// Where in it.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// Writing or syncing the log failed after commits became visible, so their
    /// durability cannot be promised. The database accepts no more work: every later call
    /// fails with this error, and no commit is acknowledged. Reopening the directory
    /// recovers every commit that was acknowledged before.
    DurabilityLost {
        /// The failure, with its file.
        reason: String,
    },
    /// Another process (or another open `Database` in this one) has the directory open.
    DatabaseLocked {
        /// The directory.
        path: String,
    },
    /// A file of the database was written by a format version this build does not read.
    UnsupportedFormat {
        /// The file.
        file: String,
        /// Its format version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The database was closed ([`crate::Database::close`]).
    DatabaseClosed,
    /// An index entry is larger than a page can hold several of.
    EntryTooLarge {
        /// What was too large.
        what: &'static str,
        /// Its bytes.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A page was asked for that its file does not have (past the pages allocated in it),
    /// or of a file not attached to the buffer pool: a bug of the caller, not of the disk.
    PageOutOfRange {
        /// The file, or its number if it is not attached.
        file: String,
        /// The page asked for.
        page: u32,
        /// The pages the file has.
        pages: u32,
    },
    /// A disk transaction id was used for something its state does not allow: ending it
    /// twice, or one never begun in this run.
    TransactionNotInProgress {
        /// The transaction id.
        xid: u64,
        /// What it is instead.
        state: &'static str,
    },
    /// A file was attached to a buffer pool under a number another attached file has.
    FileNumberInUse {
        /// The number.
        number: u32,
        /// The file attached under it.
        path: String,
    },
}

impl Error {
    /// Whether the transaction lost a race and running it again may succeed: a conflict,
    /// or [`Error::TransactionAborted`] (a call after a conflict rolled it back, which is
    /// the only way a transaction ends up rolled back while its handle lives).
    /// [`Database::run`](crate::Database::run) retries exactly these.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::WriteConflict { .. }
                | Error::SerializationFailure { .. }
                | Error::LockConflict { .. }
                | Error::TransactionAborted
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::WriteConflict { table } => write!(
                f,
                "write-write conflict on a row of {table}: another transaction wrote it first; \
                 the transaction was rolled back, retry it"
            ),
            Error::SerializationFailure { reason } => write!(
                f,
                "serialization failure ({reason}); the transaction was rolled back, retry it"
            ),
            Error::LockConflict { table, reason } => write!(
                f,
                "lock conflict on a row of {table}: {reason}; the transaction was rolled \
                 back, retry it"
            ),
            Error::TransactionAborted => f.write_str(
                "the transaction was already rolled back by an earlier conflict; retry it",
            ),
            Error::DuplicateKey { table } => {
                write!(f, "a row with this primary key already exists in {table}")
            }
            Error::UnknownTable { name } => write!(f, "no table named {name}"),
            Error::DuplicateTable { name } => write!(f, "a table named {name} already exists"),
            Error::UnknownColumn { table, column } => {
                write!(f, "table {table} has no column {column}")
            }
            Error::ValueConversion {
                table,
                column,
                value,
                target,
            } => {
                write!(
                    f,
                    "cannot read {table}.{column} as {target}: it holds {value}"
                )?;
                if value == "NULL" {
                    write!(f, " (read a column that may be NULL as Option<{target}>)")?;
                }
                Ok(())
            }
            Error::UnknownIndex { table, index } => {
                write!(f, "table {table} has no secondary index {index}")
            }
            Error::WrongArity {
                what,
                expected,
                found,
            } => write!(f, "{what}: expected {expected} values, got {found}"),
            Error::WrongType {
                table,
                column,
                expected,
                found,
            } => write!(
                f,
                "column {table}.{column} has type {expected}, got the value {found}"
            ),
            Error::ValueTooLarge {
                table,
                column,
                bytes,
                limit,
            } => write!(
                f,
                "value of {table}.{column} is {bytes} bytes long; the limit is {limit}"
            ),
            Error::NullInPrimaryKey { table, column } => {
                write!(f, "primary-key column {table}.{column} cannot be NULL")
            }
            Error::PrimaryKeyUpdate { table, column } => write!(
                f,
                "column {table}.{column} is part of the primary key and cannot be updated; \
                 delete the row and insert it again"
            ),
            Error::InvalidSchema { reason } => write!(f, "invalid schema: {reason}"),
            Error::UnsupportedConfiguration { reason } => {
                write!(f, "unsupported configuration: {reason}")
            }
            Error::ReadOnlyTransaction => write!(
                f,
                "this transaction was begun read-only and cannot insert, update or delete"
            ),
            Error::CapacityExceeded { what, limit } => {
                write!(f, "too many {what}: the limit is {limit}")
            }
            Error::Io {
                path,
                operation,
                message,
                ..
            } => write!(f, "I/O error {operation} ({path}): {message}"),
            Error::Corruption {
                file,
                offset,
                reason,
            } => write!(f, "{file} is corrupt at byte {offset}: {reason}"),
            Error::DurabilityLost { reason } => write!(
                f,
                "durability was lost ({reason}): the database accepts no more work; reopen it \
                 to recover every acknowledged commit"
            ),
            Error::DatabaseLocked { path } => write!(
                f,
                "the database in {path} is open in another process (or another Database of \
                 this one)"
            ),
            Error::UnsupportedFormat {
                file,
                found,
                supported,
            } => write!(
                f,
                "{file} has format version {found}; this build of Verso reads version \
                 {supported}"
            ),
            Error::DatabaseClosed => f.write_str("the database was closed"),
            Error::EntryTooLarge { what, bytes, limit } => {
                write!(
                    f,
                    "{what} of {bytes} bytes is larger than the limit of {limit}"
                )
            }
            Error::PageOutOfRange { file, page, pages } => write!(
                f,
                "page {page} of {file} was asked for, but the file has {pages} pages"
            ),
            Error::TransactionNotInProgress { xid, state } => {
                write!(f, "transaction {xid} is not in progress: {state}")
            }
            Error::FileNumberInUse { number, path } => {
                write!(f, "file number {number} is already attached, to {path}")
            }
        }
    }
}

impl std::error::Error for Error {}

/// Verso's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
