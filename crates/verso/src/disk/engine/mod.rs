//! The disk engine behind [`crate::Database`] (`Options::disk`): tables in PostgreSQL's
//! version storage ([`super::table`]) in files of one directory, cached in a buffer pool of
//! a configured size, every change in the page log, transactions on Verso's timestamps
//! ([`super::transactions`]), and autovacuum (design note: `docs/design/buffer-pool.md`,
//! "The disk engine").
//!
//! # Files
//!
//! | file | what |
//! |---|---|
//! | `DISK_CATALOG` | the tables and their schemas (replaced whole: [`catalog`]) |
//! | `xact` | the commit log (file 0) |
//! | `t<i>.heap`, `t<i>.fsm` | table `i`'s heap and free-space map (files `1 + 64 i`, `+1`) |
//! | `t<i>.pk`, `t<i>.idx<j>` | its primary index and secondary index `j` (`+2`, `+3 + j`) |
//! | `MANIFEST`, log segments | the page log (`disk::page_log`) |
//!
//! # Invariants
//!
//! - **DE1** A table's files are listed in the catalog, durably, before any change to them
//!   is logged: recovery attaches every file the log may name before it redoes.
//! - **DE2** A table's id is its position in the catalog; tables are never dropped.

mod catalog;
mod storage;
mod txn;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use super::btree::BTree;
use super::buffer_pool::{BufferPool, WriteAheadLog};
use super::commit_log::CommitLog;
use super::free_space_map::FreeSpaceMap;
use super::heap_file::HeapFile;
use super::page::FileNo;
use super::page_log::PageLog;
use super::replacement::ReplacementPolicy;
use super::table::{DiskTable, RowKeys};
use super::transactions::DiskTransactions;
use crate::fs::{FileSystem, OpenMode};
use crate::schema::TableSchema;
use crate::sync::Mutex;
use crate::{Error, Result, Schema, Stats, TableId};

pub use storage::DiskStorage;
pub(crate) use storage::TableStorage;
pub(crate) use txn::DiskTxn;

/// The most tables a disk database holds (file numbers: 64 per table below 2^16).
pub const MAX_DISK_TABLES: usize = 1023;
/// The most secondary indexes of one table on disk.
pub const MAX_DISK_INDEXES: usize = 61;
const FILES_PER_TABLE: u32 = 64;
const COMMIT_LOG_FILE: FileNo = FileNo(0);
/// The undo file of InnoDB's design: past every table's files.
pub(crate) const UNDO_FILE: FileNo = FileNo(1 + MAX_DISK_TABLES as u32 * FILES_PER_TABLE);
const UNDO_FILE_NAME: &str = "undo";
/// Committed undo logs purge takes per batch (InnoDB's `innodb_purge_batch_size` is 300
/// pages; a log here is usually one page).
const PURGE_BATCH: usize = 300;

/// A table of a disk database: its schema and its storage.
pub(crate) struct DiskTableEntry {
    pub(crate) schema: TableSchema,
    pub(crate) table: TableStorage,
}

/// Reads a table's keys from its packed rows (`RowKeys`), in Verso's key encoding: the
/// primary key, and each secondary index's columns (NULL-tagged) followed by the primary
/// key, as the in-memory engine orders index entries.
struct SchemaKeys {
    schema: TableSchema,
}

impl SchemaKeys {
    fn row<'a>(&self, row: &'a [u8]) -> Result<crate::row::PackedRef<'a>> {
        crate::row::PackedRef::from_untrusted(row, self.schema.arity()).map_err(|reason| {
            Error::Corruption {
                file: format!("a heap file of table {}", self.schema.name),
                offset: 0,
                reason: format!("a tuple that is no row: {reason}"),
            }
        })
    }
}

impl RowKeys for SchemaKeys {
    fn primary_key(&self, row: &[u8]) -> Result<Vec<u8>> {
        let row = self.row(row)?;
        let mut key = Vec::new();
        crate::key::encode_row_key(
            &mut key,
            &crate::row::RowView::packed(row),
            &self.schema.primary_key,
        );
        Ok(key)
    }

    fn index_key(&self, index: usize, row: &[u8]) -> Result<Vec<u8>> {
        let row = self.row(row)?;
        let mut key = Vec::new();
        crate::key::encode_index_entry(
            &mut key,
            &crate::row::RowView::packed(row),
            &self.schema.indexes[index].columns,
            &self.schema.primary_key,
        );
        Ok(key)
    }
}

/// The disk engine of one open database.
pub(crate) struct DiskEngine {
    pub(crate) tag: u32,
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    pub(crate) log: Arc<PageLog>,
    pub(crate) pool: Arc<BufferPool>,
    pub(crate) txns: DiskTransactions,
    tables: Box<[OnceLock<DiskTableEntry>]>,
    table_count: AtomicUsize,
    /// Table names to positions; held while a table is created (one at a time).
    names: Mutex<HashMap<String, u32>>,
    /// The catalog as written (each table's creation body), for the next rewrite.
    catalog: Mutex<Vec<Vec<u8>>>,
    closed: AtomicBool,
    autovacuum: Mutex<Option<autovacuum::Worker>>,
    pub(crate) counters: Counters,
    /// Every table's heap prunes by this rule.
    pruning: crate::disk::heap_file::Pruning,
    /// The buffer pool's eviction policy (named in the design).
    eviction: ReplacementPolicy,
    /// Page files are opened for direct I/O.
    direct_io: bool,
    /// Every table's heap places new versions by this policy.
    placement: crate::disk::VersionPlacement,
    /// The tables' version organization.
    storage: DiskStorage,
    /// InnoDB's design: the undo space.
    pub(crate) undo: Option<Arc<super::undo::UndoSpace>>,
    /// How long a committed undo log waits before purge may take it (DIVA's delayed purge).
    purge_delay: std::time::Duration,
    /// One purge at a time (the worker, or `Database::collect_garbage`).
    purging: Mutex<()>,
}

/// Transaction and version counters of the disk engine, in the in-memory engine's terms
/// ([`Stats`]): every write creates a version (an insert its tuple, an update its new
/// tuple, a delete the deleted tuple's death); a committed insert's is folded at once
/// (nothing old to collect), an aborted delete's rolled back; pruning and vacuum reclaim
/// the rest, tuple by tuple.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) transactions_begun: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) read_only_commits: AtomicU64,
    pub(crate) aborts_by_user: AtomicU64,
    pub(crate) aborts_write_conflict: AtomicU64,
    pub(crate) aborts_serialization: AtomicU64,
    pub(crate) aborts_durability: AtomicU64,
    pub(crate) versions_created: AtomicU64,
    pub(crate) insert_records_folded: AtomicU64,
    pub(crate) versions_rolled_back: AtomicU64,
    pub(crate) prefetch_keys: AtomicU64,
    pub(crate) prefetch_rows_found: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

mod autovacuum;

impl std::fmt::Debug for DiskEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskEngine")
            .field("dir", &self.dir)
            .field("tables", &self.table_count.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What opening a disk engine takes from `Options`.
pub(crate) struct DiskSettings {
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) dir: PathBuf,
    pub(crate) durability: crate::Durability,
    pub(crate) buffer_pool_bytes: usize,
    pub(crate) eviction: ReplacementPolicy,
    /// Page files opened for direct I/O ([`crate::Options::direct_io`]).
    pub(crate) direct_io: bool,
    pub(crate) segment_bytes: u64,
    pub(crate) autovacuum_naptime: Option<std::time::Duration>,
    pub(crate) checkpoint_after_log_bytes: Option<u64>,
    /// Which versions pruning removes (from the garbage collector chosen).
    pub(crate) pruning: crate::disk::heap_file::Pruning,
    /// Where new versions go (`Options::version_placement`).
    pub(crate) placement: crate::disk::VersionPlacement,
    /// The tables' version organization (`Options::disk_storage`).
    pub(crate) storage: DiskStorage,
    /// How long purge leaves a committed undo log (`Options::purge_delay`).
    pub(crate) purge_delay: std::time::Duration,
}

fn table_file(table: u32, offset: u32) -> FileNo {
    FileNo(1 + table * FILES_PER_TABLE + offset)
}

/// A table's first file: its heap (PostgreSQL's design), or its primary index (InnoDB's,
/// which has no heap and no free-space map).
fn first_table_file(storage: DiskStorage) -> u32 {
    match storage {
        DiskStorage::Heap => 0,
        DiskStorage::Undo => 2,
    }
}

fn table_file_name(table: u32, offset: u32) -> String {
    match offset {
        0 => format!("t{table}.heap"),
        1 => format!("t{table}.fsm"),
        2 => format!("t{table}.pk"),
        j => format!("t{table}.idx{}", j - 3),
    }
}

impl DiskEngine {
    /// Opens (or creates) the disk database in `settings.dir`: the catalog, the page log
    /// (its directory lock refuses a second opener), every file attached, the log redone,
    /// the commit log and the tables opened; then autovacuum starts.
    pub(crate) fn open(tag: u32, settings: DiskSettings) -> Result<Arc<DiskEngine>> {
        let DiskSettings {
            fs,
            dir,
            durability,
            buffer_pool_bytes,
            eviction,
            direct_io,
            segment_bytes,
            autovacuum_naptime,
            checkpoint_after_log_bytes,
            pruning,
            placement,
            storage,
            purge_delay,
        } = settings;
        fs.create_dir_all(&dir).map_err(|e| {
            crate::durability::io_error(&dir, "creating the database directory", &e)
        })?;
        // The storage is the directory's: a database that has a commit log has an undo file
        // exactly when it was created in InnoDB's design.
        let exists = |name: &str| {
            fs.exists(&dir.join(name))
                .map_err(|e| crate::durability::io_error(&dir.join(name), "looking for a file", &e))
        };
        if exists("xact")? && exists(UNDO_FILE_NAME)? != (storage == DiskStorage::Undo) {
            return Err(Error::UnsupportedConfiguration {
                reason: format!(
                    "the disk database in {} was created with the {} storage; open it with \
                     Options::disk_storage(DiskStorage::{})",
                    dir.display(),
                    if storage == DiskStorage::Undo {
                        "heap"
                    } else {
                        "undo"
                    },
                    if storage == DiskStorage::Undo {
                        "Heap"
                    } else {
                        "Undo"
                    },
                ),
            });
        }
        let recovering = PageLog::open(Arc::clone(&fs), &dir, durability, segment_bytes)?;
        let catalog = catalog::read(&*fs, &dir)?;
        let log = recovering.log();
        let pool = Arc::new(BufferPool::with_bytes(
            buffer_pool_bytes,
            eviction,
            Arc::clone(&log) as Arc<dyn WriteAheadLog>,
        ));
        attach(&*fs, direct_io, &pool, &dir, COMMIT_LOG_FILE, "xact")?;
        if storage == DiskStorage::Undo {
            attach(&*fs, direct_io, &pool, &dir, UNDO_FILE, UNDO_FILE_NAME)?;
        }
        let mut schemas = Vec::with_capacity(catalog.len());
        for (position, (name, schema)) in catalog.iter().enumerate() {
            let table = position as u32;
            let schema = schema.clone().validate(name)?;
            for offset in first_table_file(storage)..3 + schema.indexes.len() as u32 {
                attach(
                    &*fs,
                    direct_io,
                    &pool,
                    &dir,
                    table_file(table, offset),
                    &table_file_name(table, offset),
                )?;
            }
            schemas.push(schema);
        }
        recovering.redo(&pool)?;
        let commit_log = CommitLog::open(Arc::clone(&pool), COMMIT_LOG_FILE, Arc::clone(&log))?;
        let txns = DiskTransactions::open(commit_log)?;
        let (undo, found) = if storage == DiskStorage::Undo {
            let (undo, found) =
                super::undo::UndoSpace::open(Arc::clone(&pool), UNDO_FILE, Arc::clone(&log))?;
            (Some(Arc::new(undo)), Some(found))
        } else {
            (None, None)
        };
        let engine = DiskEngine {
            tag,
            dir,
            fs,
            log,
            pool,
            txns,
            tables: (0..MAX_DISK_TABLES).map(|_| OnceLock::new()).collect(),
            table_count: AtomicUsize::new(0),
            names: Mutex::new(HashMap::new()),
            catalog: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            autovacuum: Mutex::new(None),
            counters: Counters::default(),
            pruning,
            eviction,
            direct_io,
            placement,
            storage,
            undo,
            purge_delay,
            purging: Mutex::new(()),
        };
        {
            let mut names = engine.names.lock();
            let mut bodies = engine.catalog.lock();
            for (position, schema) in schemas.into_iter().enumerate() {
                bodies.push(catalog::entry_body(position as u32, &schema));
                names.insert(schema.name.clone(), position as u32);
                engine.open_table(position as u32, schema)?;
            }
        }
        if let Some(found) = found {
            engine.recover_undo(found)?;
        }
        let engine = Arc::new(engine);
        if autovacuum_naptime.is_some()
            || checkpoint_after_log_bytes.is_some()
            || engine.undo.is_some()
        {
            let worker = autovacuum::Worker::start(
                Arc::downgrade(&engine),
                autovacuum_naptime,
                checkpoint_after_log_bytes,
            )?;
            *engine.autovacuum.lock() = Some(worker);
        }
        Ok(engine)
    }

    /// Opens table `position`'s storage over its attached files (formatting new ones).
    fn open_table(&self, position: u32, schema: TableSchema) -> Result<()> {
        let primary = BTree::open_logged(
            Arc::clone(&self.pool),
            table_file(position, 2),
            Arc::clone(&self.log),
        )?;
        let indexes = (0..schema.indexes.len() as u32)
            .map(|j| {
                BTree::open_logged(
                    Arc::clone(&self.pool),
                    table_file(position, 3 + j),
                    Arc::clone(&self.log),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let keys = Box::new(SchemaKeys {
            schema: schema.clone(),
        });
        let table = match &self.undo {
            Some(undo) => TableStorage::Clustered(
                super::clustered::ClusteredTable::new(
                    schema.name.clone(),
                    position,
                    primary,
                    indexes,
                    keys,
                    Arc::clone(undo),
                )
                .with_eager_pruning(self.pruning == crate::disk::heap_file::Pruning::Eager),
            ),
            None => {
                let fsm = FreeSpaceMap::open(Arc::clone(&self.pool), table_file(position, 1))?;
                let heap = HeapFile::open(
                    Arc::clone(&self.pool),
                    table_file(position, 0),
                    fsm,
                    Arc::clone(&self.log),
                )?
                .with_pruning(self.pruning)
                .with_placement(self.placement);
                TableStorage::Heap(DiskTable::new(
                    schema.name.clone(),
                    heap,
                    primary,
                    indexes,
                    keys,
                ))
            }
        };
        if self.tables[position as usize]
            .set(DiskTableEntry { schema, table })
            .is_err()
        {
            unreachable!("tables are opened in order, each once");
        }
        self.table_count
            .fetch_max(position as usize + 1, Ordering::AcqRel);
        Ok(())
    }

    /// InnoDB's design at open, after the tables: rolls back every undo log whose owner
    /// did not commit (in progress at the crash, or aborted before its rollback finished),
    /// newest record first, and queues every log for purge (the committed ones in commit
    /// order).
    fn recover_undo(&self, found: super::undo::FoundLogs) -> Result<()> {
        let undo = self.undo.as_ref().expect("InnoDB's design");
        for (owner, pages) in found.by_owner {
            match self.txns.commit_log().status(owner)? {
                super::commit_log::TransactionStatus::Committed(ts) => {
                    undo.adopt(owner, ts, pages, false)
                }
                _ => {
                    self.roll_back_records(owner, &pages)?;
                    // Purge, not a free: versions eager pruning merged into it carry the
                    // duty to remove the entries only they still have
                    // (`regression_recovery_purges_what_a_rolled_back_log_merged`).
                    // No snapshot exists yet: purge may take it at once (timestamp 0).
                    undo.adopt(owner, 0, pages, true);
                    undo.note_rolled_back();
                }
            }
        }
        Ok(())
    }

    /// Undoes the records of `xid`'s log on `pages`, newest first.
    fn roll_back_records(&self, xid: u64, pages: &[u32]) -> Result<()> {
        let undo = self.undo.as_ref().expect("InnoDB's design");
        let records = undo.records_of(xid, pages)?;
        let horizon = super::transactions::Resolve::horizon(&self.txns);
        for (ptr, record, _) in records.iter().rev() {
            self.clustered_table(record.table)?
                .roll_back(xid, *ptr, record, horizon, &self.txns)?;
        }
        Ok(())
    }

    /// The clustered table at catalog position `position` (an undo record's table).
    fn clustered_table(&self, position: u32) -> Result<&super::clustered::ClusteredTable> {
        self.tables
            .get(position as usize)
            .and_then(OnceLock::get)
            .and_then(|entry| entry.table.clustered())
            .ok_or_else(|| Error::Corruption {
                file: "the undo file".into(),
                offset: 0,
                reason: format!("an undo record of table {position}, which has no clustered index"),
            })
    }

    /// Rolls back aborted transaction `xid`'s changes in InnoDB's design (after its abort is
    /// in the commit log, C5; its snapshot started at `start`) and finishes its undo log. A
    /// rollback that fails leaves rows only a restart can roll back: the log is failed, so
    /// the database stops accepting writes until it is reopened (whose recovery rolls
    /// back).
    pub(crate) fn roll_back_undo(&self, xid: u64, start: u64) {
        let Some(undo) = &self.undo else { return };
        let Some(ended) = undo.forget(xid) else {
            return;
        };
        let pages = ended.pages;
        let rolled_back = self.roll_back_records(xid, &pages).and_then(|()| {
            if ended.holds_versions {
                // Rows it restored may lead to the versions eager pruning merged into its
                // log (U4), which only snapshots older than the newest versions it found
                // may need: each committed below its own snapshot's `start`, so purge may
                // free the log once every snapshot starts at `start` or later.
                undo.adopt(xid, start.saturating_sub(1), pages.clone(), true);
                Ok(())
            } else {
                undo.finish(xid, &pages)
            }
        });
        match rolled_back {
            Ok(()) => undo.note_rolled_back(),
            Err(error) => {
                let _ = self.log.fail(format!(
                    "rolling back transaction {xid} failed ({error}); reopen the database to \
                     roll it back"
                ));
            }
        }
    }

    /// `xid` committed at `ts`: its undo log joins the history list (InnoDB's design).
    pub(crate) fn committed_undo(&self, xid: u64, ts: u64) {
        if let Some(undo) = &self.undo {
            if let Err(error) = undo.committed(xid, ts) {
                let _ = self.log.fail(format!(
                    "freeing the undo pages of committed transaction {xid} failed ({error})"
                ));
            }
        }
    }

    /// Purge (InnoDB's design): works through the history list, oldest commit first, every
    /// log committed below the oldest active snapshot and waiting at least the purge delay
    /// (none if `now`): the secondary entries its changes marked that no needed version
    /// has, the rows its deletes left, then its pages. Returns the logs purged.
    pub(crate) fn purge(&self, now: bool) -> Result<u64> {
        let Some(undo) = &self.undo else {
            return Ok(0);
        };
        let _one = self.purging.lock();
        let delay = if now {
            std::time::Duration::ZERO
        } else {
            self.purge_delay
        };
        let mut purged = 0;
        loop {
            let horizon = super::transactions::Resolve::horizon(&self.txns);
            let logs = undo.purgeable(horizon, delay, PURGE_BATCH);
            if logs.is_empty() {
                return Ok(purged);
            }
            let mut logs = logs.into_iter();
            while let Some(log) = logs.next() {
                let mut versions = 0;
                let done = undo.records_of(log.xid, &log.pages).and_then(|records| {
                    for (_, record, dead) in &records {
                        self.clustered_table(record.table)?
                            .purge(log.xid, record, horizon, &self.txns)?;
                        // A record stands for an old version until pruning unlinked it
                        // (then it was counted pruned, or written again merged); of a
                        // rolled-back log only the merged ones do.
                        use super::undo::UndoKind;
                        let stands = match record.kind {
                            UndoKind::Insert => false,
                            UndoKind::Merged => true,
                            UndoKind::Update | UndoKind::Delete => !log.aborted,
                        };
                        versions += u64::from(stands && !dead);
                    }
                    undo.finish(log.xid, &log.pages)
                });
                if let Err(error) = done {
                    undo.requeue(log);
                    for rest in logs {
                        undo.requeue(rest);
                    }
                    return Err(error);
                }
                undo.note_purged(versions);
                purged += 1;
            }
            if self.check_open().is_err() {
                return Ok(purged);
            }
        }
    }

    /// The database's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Fails once the database is closed, or its log failed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::DatabaseClosed);
        }
        self.log.check()
    }

    pub(crate) fn design(&self) -> String {
        let pruning = match self.pruning {
            crate::disk::heap_file::Pruning::Horizon => "vacuum",
            crate::disk::heap_file::Pruning::Eager => "steam+vacuum",
        };
        let eviction = match self.eviction {
            ReplacementPolicy::Clock => "",
            ReplacementPolicy::Lru2 => "/lru2",
        };
        if self.storage == DiskStorage::Undo {
            let pruning = match self.pruning {
                crate::disk::heap_file::Pruning::Horizon => "purge",
                crate::disk::heap_file::Pruning::Eager => "steam+purge",
            };
            return format!("disk-undo/{pruning}/si-first-updater-wins{eviction}");
        }
        let mut design = format!("disk-heap/{pruning}/si-first-updater-wins{eviction}");
        if self.placement != crate::disk::VersionPlacement::PostgreSql {
            design += "/";
            design += self.placement.name();
        }
        design
    }

    /// Creates a table: its files are made and listed in the catalog durably (DE1) before
    /// its storage is formatted.
    pub(crate) fn create_table(&self, name: &str, schema: Schema) -> Result<TableId> {
        self.check_open()?;
        let schema = schema.validate(name)?;
        let mut names = self.names.lock();
        if names.contains_key(name) {
            return Err(Error::DuplicateTable {
                name: name.to_owned(),
            });
        }
        if self.catalog.lock().len() >= MAX_DISK_TABLES {
            return Err(Error::CapacityExceeded {
                what: "tables of a disk database".into(),
                limit: MAX_DISK_TABLES,
            });
        }
        if schema.indexes.len() > MAX_DISK_INDEXES {
            return Err(Error::CapacityExceeded {
                what: "secondary indexes of a table in a disk database".into(),
                limit: MAX_DISK_INDEXES,
            });
        }
        // The catalog is the truth of positions: a table whose storage failed to open
        // keeps its position (and a new table the next).
        let mut bodies = self.catalog.lock();
        let position = bodies.len() as u32;
        for offset in first_table_file(self.storage)..3 + schema.indexes.len() as u32 {
            let number = table_file(position, offset);
            if self.pool.file_pages(number).is_ok() {
                // Attached by an earlier attempt that failed before the catalog listed
                // the table: nothing was logged to it (DE1), so it is empty; reuse it.
                continue;
            }
            let file_name = table_file_name(position, offset);
            // A file a crashed creation left behind holds nothing the log names (DE1).
            crate::durability::remove_if_present(&*self.fs, &self.dir.join(&file_name))?;
            attach(
                &*self.fs,
                self.direct_io,
                &self.pool,
                &self.dir,
                number,
                &file_name,
            )?;
        }
        bodies.push(catalog::entry_body(position, &schema));
        let staged = catalog::stage(&*self.fs, &self.dir, &bodies);
        if let Err(error) = staged {
            bodies.pop();
            return Err(error);
        }
        if let Err(error) = catalog::install(&*self.fs, &self.dir) {
            // The rename may have happened, and a failed sync cannot be retried as if it
            // had not (the durability issue's rule): whether the table exists after a
            // restart is unknown, so this database takes no more work.
            return Err(self.log.fail(format!("creating table {name}: {error}")));
        }
        drop(bodies);
        names.insert(name.to_owned(), position);
        self.open_table(position, schema)?;
        Ok(TableId {
            index: position,
            database: self.tag,
        })
    }

    pub(crate) fn table_id(&self, name: &str) -> Result<TableId> {
        self.names
            .lock()
            .get(name)
            .map(|&index| TableId {
                index,
                database: self.tag,
            })
            .ok_or_else(|| Error::UnknownTable {
                name: name.to_owned(),
            })
    }

    /// The table behind an id, if it belongs to this database.
    pub(crate) fn table(&self, id: TableId) -> Result<&DiskTableEntry> {
        if id.database != self.tag {
            return Err(Error::UnknownTable {
                name: format!("{id:?} (an id from another database)"),
            });
        }
        self.tables
            .get(id.index as usize)
            .and_then(OnceLock::get)
            .ok_or_else(|| Error::UnknownTable {
                name: format!("{id:?}"),
            })
    }

    /// Every table, in creation order.
    pub(crate) fn tables(&self) -> impl Iterator<Item = &DiskTableEntry> {
        let count = self.table_count.load(Ordering::Acquire);
        self.tables[..count].iter().filter_map(OnceLock::get)
    }

    pub(crate) fn table_names(&self) -> Vec<String> {
        self.tables()
            .map(|entry| entry.schema.name.clone())
            .collect()
    }

    pub(crate) fn stats(&self, _new_window: bool) -> Stats {
        let c = &self.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let mut stats = Stats {
            transactions_begun: get(&c.transactions_begun),
            commits: get(&c.commits),
            read_only_commits: get(&c.read_only_commits),
            aborts_by_user: get(&c.aborts_by_user),
            aborts_write_conflict: get(&c.aborts_write_conflict),
            aborts_serialization: get(&c.aborts_serialization),
            aborts_durability: get(&c.aborts_durability),
            versions_created: get(&c.versions_created),
            insert_records_folded: get(&c.insert_records_folded),
            versions_rolled_back: get(&c.versions_rolled_back),
            prefetch_keys: get(&c.prefetch_keys),
            prefetch_rows_found: get(&c.prefetch_rows_found),
            ..Stats::default()
        };
        let mut disk = crate::stats::DiskStats {
            buffer_pool: self.pool.stats(),
            page_log: self.log.stats(),
            ..Default::default()
        };
        if let Some(undo) = &self.undo {
            disk.undo = undo.stats();
        }
        for entry in self.tables() {
            if let Some(clustered) = entry.table.clustered() {
                let c = clustered.stats();
                disk.clustered.inserts += c.inserts;
                disk.clustered.updates += c.updates;
                disk.clustered.deletes += c.deletes;
                disk.clustered.undo_hops += c.undo_hops;
                disk.clustered.records_rolled_back += c.records_rolled_back;
                disk.clustered.rows_purged += c.rows_purged;
                disk.clustered.entries_purged += c.entries_purged;
                disk.clustered.versions_pruned += c.versions_pruned;
                // The clustered tree holds the rows: the table's heap, in the stats'
                // terms; the secondary trees are its indexes.
                let pages = entry.table.pages().unwrap_or(0);
                let indexes = entry.table.index_pages().unwrap_or(0);
                disk.heap_pages += pages - indexes.min(pages);
                disk.table_pages += pages;
                disk.index_pages += indexes;
                continue;
            }
            let heap = entry.table.heap().expect("a heap table").stats();
            disk.heap.hot_updates += heap.hot_updates;
            disk.heap.cold_updates += heap.cold_updates;
            disk.heap.inserts += heap.inserts;
            disk.heap.deletes += heap.deletes;
            disk.heap.hint_writes += heap.hint_writes;
            disk.heap.pages_pruned += heap.pages_pruned;
            disk.heap.tuples_pruned += heap.tuples_pruned;
            disk.heap.aborted_tuples_pruned += heap.aborted_tuples_pruned;
            disk.heap.tuples_pruned_eagerly += heap.tuples_pruned_eagerly;
            disk.heap.pages_extended += heap.pages_extended;
            disk.heap.pages_claimed += heap.pages_claimed;
            disk.heap.pages_owned += heap.pages_owned;
            disk.heap.pages_dropped_at_abort += heap.pages_dropped_at_abort;
            disk.heap_pages += u64::from(entry.table.heap().expect("a heap").pages().unwrap_or(0));
            disk.table_pages += entry.table.pages().unwrap_or(0);
            disk.index_pages += entry.table.index_pages().unwrap_or(0);
            disk.dead_tuples += entry.table.dead_tuples();
        }
        let mut durability = self.log.durability_stats();
        // The shared log counts commit records; here a commit is a page change of the
        // commit log, so the writers' commits are counted instead.
        durability.log_commits = stats.commits.saturating_sub(stats.read_only_commits);
        stats.durability = Some(durability);
        disk.vacuums = self
            .autovacuum
            .lock()
            .as_ref()
            .map_or(0, |worker| worker.vacuums());
        // Tuples whose creator aborted were counted as rolled back at the abort; those only
        // eager pruning removed are the in-memory engine's pruned eagerly (EPO).
        stats.versions_pruned_eagerly =
            disk.heap.tuples_pruned_eagerly + disk.clustered.versions_pruned;
        // InnoDB's design: each update's or delete's record purge finished is the old
        // version it held, reclaimed.
        stats.versions_reclaimed = disk
            .heap
            .tuples_pruned
            .saturating_sub(disk.heap.aborted_tuples_pruned + disk.heap.tuples_pruned_eagerly)
            + disk.undo.records_purged;
        // The slots' counters: commit records published, examined and dropped.
        let rate = crate::ticks::Rate::measure();
        let mut from_slots = Stats::default();
        for slot in self.txns.manager().slots() {
            slot.stats.add_to(&mut from_slots, rate, _new_window);
        }
        stats.commit_records_published = from_slots.commit_records_published;
        stats.commit_records_dropped = from_slots.commit_records_dropped;
        stats.validation_records_examined = from_slots.validation_records_examined;
        stats.vacuum_passes = disk.vacuums;
        stats.disk = Some(disk);
        stats
    }

    /// Versions of the row under `key` besides the one a new snapshot sees (all versions
    /// its index entries lead to, minus one), or `None` if no entry has the key.
    pub(crate) fn chain_length(&self, id: TableId, key: &[crate::Value]) -> Result<Option<usize>> {
        let entry = self.table(id)?;
        entry.schema.check_key(key)?;
        let mut encoded = Vec::new();
        crate::key::encode_key_values(&mut encoded, key);
        let versions = entry.table.versions_of(&encoded)?;
        Ok((versions > 0).then(|| versions - 1))
    }

    /// Entries of a table's primary index (one per chain root: versions of rows, live or
    /// dead, until vacuum removes them).
    pub(crate) fn index_entries(&self, id: TableId) -> Result<usize> {
        let entry = self.table(id)?;
        count_entries(entry.table.primary_index())
    }

    pub(crate) fn secondary_index_entries(&self, id: TableId, index: &str) -> Result<usize> {
        let entry = self.table(id)?;
        let position = entry.schema.index_position(index)?;
        count_entries(
            entry
                .table
                .index(position)
                .expect("a schema's index exists"),
        )
    }

    /// Vacuums every table now (what `Database::collect_garbage` does on disk).
    pub(crate) fn vacuum_all(&self) -> Result<()> {
        self.check_open()?;
        for entry in self.tables() {
            entry.table.vacuum(&self.txns)?;
        }
        self.purge(true).map(drop)
    }

    /// A checkpoint: every dirty page written while writers run, and the redo point moved.
    pub(crate) fn checkpoint(&self) -> Result<crate::CheckpointReport> {
        self.check_open()?;
        let started = std::time::Instant::now();
        let written_before = self.pool.stats().pages_written;
        self.log.checkpoint(&self.pool)?;
        let pages = self.pool.stats().pages_written - written_before;
        Ok(crate::CheckpointReport {
            snapshot: self.txns.clock(),
            rows: 0,
            bytes: pages * super::PAGE_SIZE as u64,
            nanos: started.elapsed().as_nanos() as u64,
        })
    }

    /// Stops the background worker and waits for a round in progress (the last handle's
    /// drop: the engine then goes on the dropping thread, not at a round's end).
    pub(crate) fn stop_background(&self) {
        if let Some(worker) = self.autovacuum.lock().take() {
            worker.stop();
        }
    }

    /// Closes: autovacuum stops, every commit is made durable, a checkpoint written, and
    /// the directory let go. Later calls fail with [`Error::DatabaseClosed`].
    pub(crate) fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(worker) = self.autovacuum.lock().take() {
            worker.stop();
        }
        let result = self
            .log
            .sync()
            .and_then(|()| self.log.checkpoint(&self.pool).map(drop));
        self.log.close();
        result
    }
}

impl Drop for DiskEngine {
    fn drop(&mut self) {
        if let Some(worker) = self.autovacuum.lock().take() {
            worker.stop();
        }
        if !self.closed.load(Ordering::Acquire) {
            let _ = self.log.sync();
            self.log.close();
        }
    }
}

fn count_entries(tree: &BTree) -> Result<usize> {
    let mut count = 0;
    for item in tree.range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded) {
        item?;
        count += 1;
    }
    Ok(count)
}

/// Attaches `dir/name` as `number`, creating it (and syncing the directory) if missing;
/// opened for direct I/O if `direct` (every transfer of the pool is a whole page at a page
/// offset, as direct I/O needs).
fn attach(
    fs: &dyn FileSystem,
    direct: bool,
    pool: &BufferPool,
    dir: &Path,
    number: FileNo,
    name: &str,
) -> Result<()> {
    let path = dir.join(name);
    let open = |mode| {
        if direct {
            fs.open_direct(&path, mode)
        } else {
            fs.open(&path, mode)
        }
    };
    let file = match open(OpenMode::ReadWrite) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let file = open(OpenMode::CreateNew)
                .map_err(|e| crate::durability::io_error(&path, "creating a disk file", &e))?;
            fs.sync_dir(dir)
                .map_err(|e| crate::durability::io_error(dir, "syncing the directory", &e))?;
            file
        }
        Err(error) => {
            return Err(crate::durability::io_error(
                &path,
                "opening a disk file",
                &error,
            ))
        }
    };
    pool.attach(number, &path, file)
}
