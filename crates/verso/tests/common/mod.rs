//! Helpers shared by the integration tests: every supported configuration, and a few
//! standard tables.
//!
//! Tests loop over [`all_configurations`] so that a collector or storage added later runs
//! every test without touching the tests.

#![allow(dead_code)]

use verso::research::NonInline;
use verso::{
    ColumnType, ConcurrencyControl, Database, GarbageCollector, IndexPointers, Isolation, Options,
    PrimaryKeyIndex, Schema, TableId, Transaction, Value, VersionPlacement, VersionStorageKind,
};

/// One `Options` per supported configuration: every garbage collector over every version
/// storage it supports ('coop' only over append-o2n), physical index pointers over both
/// append-only orders under every collector each supports, long values copied and shared
/// out of line over every storage, and HyPer's one-version-at-a-time removal, under the
/// default protocol; and every other protocol over every storage, over physical pointers
/// on both orders (under Steam) and every collector (over delta storage, or the one it
/// needs).
pub fn all_configurations() -> Vec<Options> {
    let mut all = si_configurations();
    for protocol in ConcurrencyControl::ALL.into_iter().skip(1) {
        for storage in VersionStorageKind::ALL {
            all.push(
                Options::default()
                    .version_storage(storage)
                    .concurrency_control(protocol),
            );
        }
        all.push(physical_pointers().concurrency_control(protocol));
        all.push(physical_o2n_pointers().concurrency_control(protocol));
        for gc in GarbageCollector::ALL.into_iter().skip(1) {
            all.push(
                Options::default()
                    .garbage_collector(gc)
                    .version_storage(gc.required_storage().unwrap_or_default())
                    .concurrency_control(protocol),
            );
        }
    }
    all.extend(persistent_memory_configurations());
    all.extend(disk_configurations());
    all
}

/// The disk engine (PostgreSQL's heap) under both its pruning rules, Steam's eager one
/// (the default) and PostgreSQL's horizon alone ([`GarbageCollector::Vacuum`]); the eager
/// one again with LRU-2 eviction instead of CLOCK, and with SI-CV's co-located placement of
/// new versions, and in InnoDB's design (in place, undo and purge, and with Steam's pruning
/// of undo chains); through a buffer pool
/// of 48 pages, so that the suites' tables are larger
/// than memory, with autovacuum waking every 20 ms. [`open`] gives each database its own
/// simulated disk (the file trait's other implementation, in memory), so the suites leave
/// no files behind; the disk engine's own tests (`disk_engine.rs`) run it on the real file
/// system.
pub fn disk_configurations() -> Vec<Options> {
    use verso::disk::{DiskStorage, ReplacementPolicy};
    [
        (
            GarbageCollector::Steam,
            ReplacementPolicy::Clock,
            VersionPlacement::PostgreSql,
            DiskStorage::Heap,
        ),
        (
            GarbageCollector::Vacuum,
            ReplacementPolicy::Clock,
            VersionPlacement::PostgreSql,
            DiskStorage::Heap,
        ),
        (
            GarbageCollector::Steam,
            ReplacementPolicy::Lru2,
            VersionPlacement::PostgreSql,
            DiskStorage::Heap,
        ),
        (
            GarbageCollector::Steam,
            ReplacementPolicy::Clock,
            VersionPlacement::CoLocated,
            DiskStorage::Heap,
        ),
        (
            GarbageCollector::Vacuum,
            ReplacementPolicy::Clock,
            VersionPlacement::CoLocatedHot,
            DiskStorage::Heap,
        ),
        // InnoDB's design: in place, undo, purge; and with Steam's pruning of undo chains.
        (
            GarbageCollector::Vacuum,
            ReplacementPolicy::Clock,
            VersionPlacement::PostgreSql,
            DiskStorage::Undo,
        ),
        (
            GarbageCollector::Steam,
            ReplacementPolicy::Clock,
            VersionPlacement::PostgreSql,
            DiskStorage::Undo,
        ),
    ]
    .into_iter()
    .map(|(gc, eviction, placement, storage)| {
        Options::default()
            .disk(SUITE_DISK_DIR)
            .garbage_collector(gc)
            .buffer_pool_eviction(eviction)
            .version_placement(placement)
            .disk_storage(storage)
            .file_system(std::sync::Arc::new(verso::fs::SimulatedFileSystem::new(0)))
            .buffer_pool(48 * verso::disk::PAGE_SIZE)
            .durability(verso::Durability::None)
            .log_segment_bytes(1 << 20)
            .autovacuum_naptime(Some(std::time::Duration::from_millis(20)))
    })
    .collect()
}

/// The directory of the suites' disk databases, on their simulated disks.
pub const SUITE_DISK_DIR: &str = "/verso-disk";

/// Whether `options` open the disk engine.
pub fn is_disk(options: &Options) -> bool {
    options.disk.is_some()
}

/// The configurations whose commits the redo log makes durable (a database with a path):
/// all but the persistent-memory storages, which make commits durable in their region and
/// do not open a path yet, and the disk engine, whose directory is its own
/// (`disk_engine.rs` tests its durability).
pub fn logged_configurations() -> Vec<Options> {
    all_configurations()
        .into_iter()
        .filter(|o| !o.version_storage.uses_persistent_memory() && !is_disk(o))
        .collect()
}

/// The storages that keep their versions in a persistent-memory region, each under MVTO
/// (the only protocol they run under), under every collector it runs under ('none', its
/// block-level collector, the baselines' collectors), with small blocks and partitions so
/// that tests fill, seal and free them.
pub fn persistent_memory_configurations() -> Vec<Options> {
    let mut all = Vec::new();
    for storage in VersionStorageKind::PERSISTENT_MEMORY {
        for &gc in storage.persistent_memory_collectors() {
            all.push(
                Options::default()
                    .version_storage(storage)
                    .concurrency_control(ConcurrencyControl::Mvto)
                    .garbage_collector(gc)
                    .persistent_memory(
                        verso::pmem::PmOptions::default()
                            .capacity_bytes(1 << 30)
                            .slots_per_block(64)
                            .partition_frames(2),
                    ),
            );
        }
    }
    // TB-Collect-hash: tb-collect with version indexes instead of kept tiles.
    let hash = all
        .iter()
        .find(|o| o.garbage_collector == GarbageCollector::TbCollect)
        .expect("the tile-block storage runs under tb-collect")
        .clone()
        .chain_consolidation(verso::ChainConsolidation::HashIndex);
    all.push(hash);
    all
}

/// The configurations whose transactions read the snapshot taken at `begin` and are never
/// refused a read: every protocol but MVTO (reads stamp and meet locks) and MV2PL (locked
/// reads see the newest versions).
pub fn snapshot_read_configurations() -> Vec<Options> {
    all_configurations()
        .into_iter()
        .filter(|o| {
            !matches!(
                o.concurrency_control,
                ConcurrencyControl::Mvto | ConcurrencyControl::Mv2pl
            )
        })
        .collect()
}

/// The configurations whose serializable transactions validate every read at commit
/// against precision locking's commit records from their snapshot on: the default protocol
/// and MVOCC.
pub fn precision_configurations() -> Vec<Options> {
    all_configurations()
        .into_iter()
        .filter(|o| {
            matches!(
                o.concurrency_control,
                ConcurrencyControl::SnapshotIsolation | ConcurrencyControl::Mvocc
            )
        })
        .collect()
}

/// The configurations of one protocol.
pub fn configurations_of(protocol: ConcurrencyControl) -> Vec<Options> {
    all_configurations()
        .into_iter()
        .filter(|o| o.concurrency_control == protocol)
        .collect()
}

/// The configurations of the default protocol: every garbage collector over every version
/// storage, and HyPer's one-version-at-a-time removal.
pub fn si_configurations() -> Vec<Options> {
    let mut all: Vec<Options> = VersionStorageKind::ALL
        .into_iter()
        .flat_map(|storage| {
            GarbageCollector::ALL
                .into_iter()
                .filter(move |gc| gc.required_storage().is_none_or(|s| s == storage))
                .map(move |gc| {
                    Options::default()
                        .version_storage(storage)
                        .garbage_collector(gc)
                })
        })
        .collect();
    // Physical index pointers, under every collector their storage supports.
    all.extend(
        GarbageCollector::ALL
            .into_iter()
            .filter(|gc| gc.required_storage().is_none())
            .map(|gc| physical_pointers().garbage_collector(gc)),
    );
    all.extend(
        GarbageCollector::ALL
            .into_iter()
            .filter(|gc| {
                gc.required_storage()
                    .is_none_or(|s| s == VersionStorageKind::AppendOldestToNewest)
            })
            .map(|gc| physical_o2n_pointers().garbage_collector(gc)),
    );
    // Long values out of line (Wu et al. §4.1), copied and shared, over every storage, and
    // shared under physical pointers (whose versions entries hold).
    for storage in VersionStorageKind::ALL {
        for non_inline in [NonInline::Copied, NonInline::Shared] {
            all.push(
                Options::default()
                    .version_storage(storage)
                    .non_inline(non_inline),
            );
        }
    }
    all.push(physical_pointers().non_inline(NonInline::Shared));
    // HyPer's version removal, under the collector that leaves it the longest chains.
    all.push(
        Options::default()
            .garbage_collector(GarbageCollector::WatermarkOnly)
            .version_removal(verso::research::VersionRemoval::OneVersionAtATime),
    );
    all
}

/// Physical index pointers over append-only storage, oldest to newest.
pub fn physical_o2n_pointers() -> Options {
    Options::default()
        .version_storage(VersionStorageKind::AppendOldestToNewest)
        .index_pointers(IndexPointers::Physical)
}

/// Physical index pointers over the storage they need (append-only, newest to oldest).
pub fn physical_pointers() -> Options {
    Options::default()
        .version_storage(VersionStorageKind::AppendNewestToOldest)
        .index_pointers(IndexPointers::Physical)
}

/// Whether the database's collector frees anything at all (every collector but 'none',
/// the no-collection baseline). Tests of what collection frees assert it only then, and
/// assert under 'none' that nothing was freed.
pub fn collects(db: &Database) -> bool {
    db.options().garbage_collector != GarbageCollector::NoCollection
}

/// After [`Database::collect_garbage`] with no transaction open: every version record is
/// freed; under 'none', collection freed nothing at all (no version, no row).
#[track_caller]
pub fn assert_collected_everything(db: &Database, context: &str) {
    let stats = db.stats();
    if collects(db) {
        assert_eq!(stats.live_versions(), 0, "{context}: {stats:?}");
    } else {
        let freed = stats.versions_reclaimed
            + stats.versions_pruned_eagerly
            + stats.versions_pruned_in_background
            + stats.rows_reclaimed;
        assert_eq!(freed, 0, "{context}: 'none' collected: {stats:?}");
        assert!(
            stats.live_versions() > 0
                || stats.versions_created
                    == stats.versions_rolled_back + stats.insert_records_folded,
            "{context}: {stats:?}"
        );
    }
}

/// What a check expects: `collected` under a collector, `kept` under 'none'.
pub fn if_collected<T>(db: &Database, collected: T, kept: T) -> T {
    if collects(db) {
        collected
    } else {
        kept
    }
}

/// Opens a database, panicking with the options if that fails.
pub fn open(options: &Options) -> Database {
    Database::open(fresh(options))
        .unwrap_or_else(|error| panic!("cannot open {options:?}: {error}"))
}

/// `options` for a new database: a disk configuration gets a fresh simulated disk of its
/// own (see [`disk_configurations`]).
pub fn fresh(options: &Options) -> Options {
    if options.disk.as_deref() == Some(std::path::Path::new(SUITE_DISK_DIR)) {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEED: AtomicU64 = AtomicU64::new(1);
        let disk = verso::fs::SimulatedFileSystem::new(SEED.fetch_add(1, Ordering::Relaxed));
        options.clone().file_system(std::sync::Arc::new(disk))
    } else {
        options.clone()
    }
}

/// A freshly opened database per supported configuration.
pub fn all_databases() -> impl Iterator<Item = Database> {
    all_configurations()
        .into_iter()
        .map(|options| open(&options))
}

// ----- the "items" table: composite key, every column type, two secondary indexes -------

/// Name of the standard table.
pub const ITEMS: &str = "items";

/// Column positions of the standard table.
pub mod items {
    /// `Text`, first primary-key column.
    pub const REGION: usize = 0;
    /// `U64`, second primary-key column.
    pub const ID: usize = 1;
    /// `I64`, indexed with `WEIGHT` by `by_score`.
    pub const SCORE: usize = 2;
    /// `F64`.
    pub const WEIGHT: usize = 3;
    /// `Text`, indexed by `by_name`.
    pub const NAME: usize = 4;
    /// `Bytes`.
    pub const BLOB: usize = 5;
    /// `U64`, nullable and not indexed.
    pub const TAG: usize = 6;
    /// Number of columns.
    pub const ARITY: usize = 7;
    /// Secondary index over `NAME`.
    pub const BY_NAME: &str = "by_name";
    /// Secondary index over `(SCORE, WEIGHT)`.
    pub const BY_SCORE: &str = "by_score";
}

/// The standard table's schema: primary key `(region, id)`, indexes `by_name(name)` and
/// `by_score(score, weight)`.
pub fn items_schema() -> Schema {
    Schema::new()
        .column("region", ColumnType::Text)
        .column("id", ColumnType::U64)
        .column("score", ColumnType::I64)
        .column("weight", ColumnType::F64)
        .column("name", ColumnType::Text)
        .column("blob", ColumnType::Bytes)
        .column("tag", ColumnType::U64)
        .primary_key(&["region", "id"])
        .index(items::BY_NAME, &["name"])
        .index(items::BY_SCORE, &["score", "weight"])
}

/// How the standard tables of `db` index their primary keys: about half the configurations
/// (chosen by a stable hash of the design's name, so a failure reproduces; each protocol
/// gets both kinds) take the ordered index alone, so every suite runs both kinds without
/// running twice.
pub fn primary_key_index_for(db: &Database) -> PrimaryKeyIndex {
    let hash = db
        .design()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    // The top bit: FNV-1a's low bit is only the parity of the odd bytes.
    if hash >> 63 == 0 {
        PrimaryKeyIndex::HashAndOrdered
    } else {
        PrimaryKeyIndex::OrderedOnly
    }
}

/// Creates `name(id U64 primary key, value I64)`, empty.
pub fn create_id_value_table(db: &Database, name: &str) -> TableId {
    db.create_table(
        name,
        Schema::new()
            .column("id", ColumnType::U64)
            .column("value", ColumnType::I64)
            .primary_key(&["id"])
            .primary_key_index(primary_key_index_for(db)),
    )
    .unwrap_or_else(|error| panic!("{}: create {name}: {error}", db.design()))
}

/// Creates `name(id U64 primary key, value I64)` holding the committed row `(1, 0)`.
pub fn create_counter(db: &Database, name: &str) -> TableId {
    let table = create_id_value_table(db, name);
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(table, &[Value::U64(1), Value::I64(0)])
        .unwrap_or_else(|error| panic!("{}: insert into {name}: {error}", db.design()));
    txn.commit()
        .unwrap_or_else(|error| panic!("{}: commit into {name}: {error}", db.design()));
    table
}

/// Creates the standard table.
pub fn create_items(db: &Database) -> TableId {
    db.create_table(
        ITEMS,
        items_schema().primary_key_index(primary_key_index_for(db)),
    )
    .unwrap_or_else(|error| panic!("{}: create {ITEMS}: {error}", db.design()))
}

/// A row of the standard table with every non-key column set.
pub fn item(region: &str, id: u64, score: i64, name: &str) -> Vec<Value> {
    vec![
        Value::from(region),
        Value::U64(id),
        Value::I64(score),
        Value::F64(score as f64 / 4.0),
        Value::from(name),
        item_blob(id),
        Value::U64(id * 10),
    ]
}

/// The `blob` of the standard row `id`: long enough to be a non-inline attribute, stored
/// out of line under [`NonInline::Copied`] and [`NonInline::Shared`].
pub fn item_blob(id: u64) -> Value {
    let mut blob = vec![id as u8, 0, 0xFF];
    blob.resize(verso::research::NON_INLINE_MIN_BYTES + 8, 0xB1);
    Value::Bytes(blob)
}

/// The primary key of a row of the standard table.
pub fn item_key(region: &str, id: u64) -> Vec<Value> {
    vec![Value::from(region), Value::U64(id)]
}

// ----- the "accounts" table: one u64 key, one i64 balance ----------------------------------

/// Name of the accounts table.
pub const ACCOUNTS: &str = "accounts";
/// Column of the balance in the accounts table.
pub const BALANCE: usize = 1;

/// Creates `accounts(id U64 primary key, balance I64)` and commits `count` accounts with
/// `balance` each.
pub fn create_accounts(db: &Database, count: u64, balance: i64) -> TableId {
    let table = db
        .create_table(
            ACCOUNTS,
            Schema::new()
                .column("id", ColumnType::U64)
                .column("balance", ColumnType::I64)
                .primary_key(&["id"])
                .primary_key_index(primary_key_index_for(db)),
        )
        .unwrap_or_else(|error| panic!("{}: create {ACCOUNTS}: {error}", db.design()));
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..count {
        txn.insert(table, &[Value::U64(id), Value::I64(balance)])
            .unwrap_or_else(|error| panic!("{}: insert account {id}: {error}", db.design()));
    }
    txn.commit()
        .unwrap_or_else(|error| panic!("{}: commit accounts: {error}", db.design()));
    table
}

// ----- small conveniences ----------------------------------------------------------------

/// A scan's rows collected as values, or its first error (opening the scan or reading it):
/// `txn.scan(table, ..).rows()`, where a test compares whole results.
pub trait ScanRows {
    /// The rows in the scan's order.
    fn rows(self) -> verso::Result<Vec<Vec<Value>>>;
}

impl ScanRows for verso::Result<verso::Scan<'_, '_>> {
    fn rows(self) -> verso::Result<Vec<Vec<Value>>> {
        self?.map(|row| row.map(verso::Row::into_values)).collect()
    }
}

/// Inserts `rows` in one transaction and commits.
pub fn commit_rows(db: &Database, table: TableId, rows: &[Vec<Value>]) {
    let mut txn = db.begin(Isolation::Snapshot);
    for row in rows {
        txn.insert(table, row)
            .unwrap_or_else(|error| panic!("{}: insert {row:?}: {error}", db.design()));
    }
    txn.commit()
        .unwrap_or_else(|error| panic!("{}: commit: {error}", db.design()));
}

/// The sum of I64 column `column` over every row of `table` that `txn` sees.
pub fn column_sum(txn: &Transaction<'_>, table: TableId, column: usize) -> i64 {
    txn.scan(table, ..)
        .rows()
        .expect("scan")
        .iter()
        .map(|row| row[column].as_i64().expect("an i64 column"))
        .sum()
}

/// Every row of `table` a new snapshot sees, in primary-key order.
pub fn all_rows(db: &Database, table: TableId) -> Vec<Vec<Value>> {
    let txn = db.begin(Isolation::Snapshot);
    let rows = txn
        .scan(table, ..)
        .rows()
        .unwrap_or_else(|error| panic!("{}: scan: {error}", db.design()));
    // Commit rather than drop, so that reading does not count as an abort.
    txn.commit()
        .unwrap_or_else(|error| panic!("{}: read-only commit: {error}", db.design()));
    rows
}

/// The rows a new snapshot finds in secondary index `index` under key prefix `prefix`.
pub fn index_rows(db: &Database, table: TableId, index: &str, prefix: &[Value]) -> Vec<Vec<Value>> {
    let txn = db.begin(Isolation::Snapshot);
    let rows = txn
        .scan_index(table, index, prefix.to_vec()..=prefix.to_vec())
        .rows()
        .unwrap_or_else(|error| panic!("{}: scan_index {index}: {error}", db.design()));
    txn.commit()
        .unwrap_or_else(|error| panic!("{}: read-only commit: {error}", db.design()));
    rows
}

/// A table `named(k U64 primary key, name Text)` with a secondary index `by_name(name)`: the
/// smallest table whose secondary index can go stale (used by the regression tests).
pub fn create_named(db: &Database) -> TableId {
    db.create_table(
        "named",
        Schema::new()
            .column("k", ColumnType::U64)
            .column("name", ColumnType::Text)
            .primary_key(&["k"])
            .index("by_name", &["name"]),
    )
    .unwrap_or_else(|e| panic!("{}: create: {e}", db.design()))
}

/// Default options with this collector, on the version storage it needs if it needs one
/// ('coop': append-o2n), else the default storage.
pub fn options_for(gc: GarbageCollector) -> Options {
    Options::default()
        .garbage_collector(gc)
        .version_storage(gc.required_storage().unwrap_or_default())
}

/// A fresh directory under the system's temporary one, named for the test, the process and
/// the thread (removed first if a previous run left it).
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "verso-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Removes its directory when dropped, also when the test fails.
pub struct Cleanup(pub std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
