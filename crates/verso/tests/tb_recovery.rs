//! Reopening a tile-block database after a restart or a power loss (TB-Collect §4.5,
//! Algorithm 3): the region file at the database's path keeps the catalog and every
//! acknowledged commit; tiles, rows and indexes are rebuilt from the blocks; a collection a
//! crash interrupted is finished; a second open of the directory is refused. The crash
//! tests run a workload against a model on a simulated region that keeps any subset of
//! what was not persisted, crash it at a random persist point (inside commits, inside
//! collections and their relocations), reopen, and compare.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::Cleanup;

use verso::pmem::{AtomicUnit, PmBacking, PmOptions, RecoveryReport, SimulatedRegion};
use verso::{
    ColumnType, ConcurrencyControl, Database, Durability, Error, GarbageCollector, Isolation,
    Options, PrimaryKeyIndex, Schema, TableId, Value, VersionStorageKind,
};

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir(&format!("tb-recovery-{name}"))
}

fn options(gc: GarbageCollector, pm: PmOptions, dir: &std::path::Path) -> Options {
    Options::default()
        .version_storage(VersionStorageKind::TileBlock)
        .concurrency_control(ConcurrencyControl::Mvto)
        .garbage_collector(gc)
        .persistent_memory(pm)
        .path(dir)
}

/// A simulated region of 4 MiB (power losses drawn from `seed`) with blocks of `slots`
/// slots, and the options of a database in `dir` on it (tb-collect's epochs of 200 µs, so
/// that collections run in short tests).
fn simulated(
    seed: u64,
    dir: &std::path::Path,
    slots: u32,
    gc: GarbageCollector,
) -> (SimulatedRegion, Options) {
    let device = SimulatedRegion::new(4 << 20, seed);
    let pm = PmOptions::default()
        .backing(PmBacking::Simulated(device.clone()))
        .slots_per_block(slots);
    let mut options = options(gc, pm, dir);
    if gc == GarbageCollector::TbCollect {
        options = options.block_gc_epoch(std::time::Duration::from_micros(200));
    }
    (device, options)
}

/// `accounts(id, owner, balance)` with a secondary index on `owner`.
fn accounts_schema() -> Schema {
    Schema::new()
        .column("id", ColumnType::U64)
        .column("owner", ColumnType::Text)
        .column("balance", ColumnType::I64)
        .primary_key(&["id"])
        .index("by_owner", &["owner"])
        // The ordered index alone: an insert stores its row before it finds its key taken
        // (no lookup first), so a refused insert leaves a record to withdraw.
        .primary_key_index(PrimaryKeyIndex::OrderedOnly)
}

fn all_rows(db: &Database, table: TableId) -> Vec<Vec<Value>> {
    let txn = db.begin(Isolation::Serializable);
    let rows = txn
        .scan(table, ..)
        .unwrap()
        .map(|row| row.unwrap().into_values())
        .collect();
    txn.commit().unwrap();
    rows
}

fn report(db: &Database) -> Option<RecoveryReport> {
    db.stats().persistent_memory.expect("a region").recovery
}

#[test]
fn tables_rows_and_indexes_survive_close_and_reopen_on_a_region_file() {
    let dir = temp_dir("reopen");
    let _cleanup = Cleanup(dir.clone());
    let pm = || {
        PmOptions::default()
            .capacity_bytes(64 << 20)
            .slots_per_block(16)
    };
    let expected = {
        let db = Database::open(options(GarbageCollector::TbCollect, pm(), &dir)).unwrap();
        assert_eq!(report(&db), None, "a new region recovers nothing");
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let empty = db
            .create_table(
                "empty",
                Schema::new()
                    .column("k", ColumnType::I64)
                    .primary_key(&["k"]),
            )
            .unwrap();
        let _ = empty;
        for round in 0..6i64 {
            let mut txn = db.begin(Isolation::Serializable);
            for id in 0..40u64 {
                let owner = Value::Text(format!("owner-{}", (id + round as u64) % 7));
                if round == 0 {
                    txn.insert(accounts, &[Value::U64(id), owner, Value::I64(0)])
                        .unwrap();
                } else if id % 9 == 0 && round == 3 {
                    assert!(txn.delete(accounts, &[Value::U64(id)]).unwrap());
                } else if round < 3 || id % 9 != 0 {
                    txn.update(
                        accounts,
                        &[Value::U64(id)],
                        &[(1, owner), (2, Value::I64(round))],
                    )
                    .unwrap();
                }
            }
            txn.commit().unwrap();
        }
        // An insert whose key is taken leaves a record (withdrawn) the commit must not make
        // a version.
        let mut txn = db.begin(Isolation::Serializable);
        let taken = txn.insert(
            accounts,
            &[
                Value::U64(1),
                Value::Text("intruder".into()),
                Value::I64(-1),
            ],
        );
        assert!(
            matches!(taken, Err(Error::DuplicateKey { .. })),
            "{taken:?}"
        );
        txn.insert(
            accounts,
            &[
                Value::U64(100),
                Value::Text("owner-new".into()),
                Value::I64(7),
            ],
        )
        .unwrap();
        txn.commit().unwrap();
        db.collect_garbage();
        let rows = all_rows(&db, accounts);
        assert_eq!(rows.len(), 40 - 5 + 1);
        let held = versions_held(&db);
        db.close().unwrap();
        (rows, held)
    };
    let (mut expected, mut held_at_close) = expected;
    for reopening in 0..2 {
        let db = Database::open(options(GarbageCollector::TbCollect, pm(), &dir)).unwrap();
        let recovered = report(&db).expect("a region with data is recovered");
        // Every version record in the region's blocks is counted again by the rebuild (the
        // superseded ones too: their blocks are not freed by an open).
        assert_eq!(versions_held(&db), held_at_close, "reopening {reopening}");
        assert!(versions_held(&db) >= recovered.rows);
        assert_eq!(
            recovered.rows,
            expected.len() as u64,
            "reopening {reopening}"
        );
        assert_eq!(db.table_names(), vec!["accounts", "empty"]);
        let accounts = db.table("accounts").unwrap();
        assert_eq!(all_rows(&db, accounts), expected, "reopening {reopening}");
        // The secondary index was rebuilt: owner-new's one row, found through it.
        let txn = db.begin(Isolation::Serializable);
        let found: Vec<Vec<Value>> = txn
            .scan_index(
                accounts,
                "by_owner",
                vec![Value::Text("owner-new".into())]..=vec![Value::Text("owner-new".into())],
            )
            .unwrap()
            .map(|row| row.unwrap().into_values())
            .collect();
        txn.commit().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        // New transactions get ids past the recovered ones: their writes win after the
        // next reopening too (checked by the loop's second round).
        if reopening == 0 {
            for balance in [8, 11] {
                let mut txn = db.begin(Isolation::Serializable);
                assert!(txn
                    .update(accounts, &[Value::U64(100)], &[(2, Value::I64(balance))])
                    .unwrap());
                txn.commit().unwrap();
            }
            let row = expected
                .iter_mut()
                .find(|row| row[0] == Value::U64(100))
                .expect("row 100");
            row[2] = Value::I64(11);
        }
        held_at_close = versions_held(&db);
        db.close().unwrap();
    }
}

fn versions_held(db: &Database) -> u64 {
    db.stats().persistent_memory.unwrap().versions_held
}

#[test]
fn a_second_open_of_the_directory_is_refused_until_the_first_closes() {
    let dir = temp_dir("lock");
    let _cleanup = Cleanup(dir.clone());
    let pm = || PmOptions::default().capacity_bytes(16 << 20);
    let first = Database::open(options(GarbageCollector::TbCollect, pm(), &dir)).unwrap();
    let second = Database::open(options(GarbageCollector::TbCollect, pm(), &dir));
    assert!(
        matches!(second, Err(Error::DatabaseLocked { .. })),
        "{second:?}"
    );
    let table = first
        .create_table(
            "t",
            Schema::new()
                .column("k", ColumnType::I64)
                .primary_key(&["k"]),
        )
        .unwrap();
    let clone = first.clone();
    first.close().unwrap();
    // Closed: no commit reaches the region; and while a clone lives (which may still
    // append uncommitted records) the directory stays locked, so that no other open maps
    // the region under it.
    let mut txn = clone.begin(Isolation::Serializable);
    txn.insert(table, &[Value::I64(1)]).unwrap();
    assert!(matches!(txn.commit(), Err(Error::DatabaseClosed)));
    let meanwhile = Database::open(options(GarbageCollector::TbCollect, pm(), &dir));
    assert!(
        matches!(meanwhile, Err(Error::DatabaseLocked { .. })),
        "{meanwhile:?}"
    );
    drop(clone);
    let again = Database::open(options(GarbageCollector::TbCollect, pm(), &dir)).unwrap();
    assert_eq!(again.table_names(), vec!["t"]);
    assert!(matches!(
        again.checkpoint(),
        Err(Error::UnsupportedConfiguration { .. })
    ));
}

#[test]
fn durability_levels_other_than_sync_are_refused_with_a_reason() {
    let dir = temp_dir("levels");
    let _cleanup = Cleanup(dir.clone());
    for durability in [
        Durability::None,
        Durability::Async {
            interval: std::time::Duration::from_millis(5),
        },
    ] {
        let refused = Database::open(
            options(GarbageCollector::TbCollect, PmOptions::default(), &dir).durability(durability),
        );
        assert!(
            matches!(refused, Err(Error::UnsupportedConfiguration { .. })),
            "{refused:?}"
        );
    }
}

/// The model of one key-value table: what the acknowledged commits left.
type Model = BTreeMap<u64, i64>;

/// A small deterministic generator (the tests need no crate for it).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn crash_seeds(default: u64) -> u64 {
    std::env::var("PM_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn kv_schema() -> Schema {
    Schema::new()
        .column("k", ColumnType::U64)
        .column("v", ColumnType::I64)
        .primary_key(&["k"])
}

/// `kv_schema`, on every other seed with the ordered primary index alone: its inserts
/// store their row before they find the key taken, so refused inserts leave withdrawn
/// records (with the hash index too, the key is looked up first and nothing is stored).
fn kv_schema_for(seed: u64) -> Schema {
    if seed % 2 == 0 {
        kv_schema().primary_key_index(PrimaryKeyIndex::OrderedOnly)
    } else {
        kv_schema()
    }
}

fn read_model(db: &Database, table: TableId) -> Model {
    all_rows(db, table)
        .into_iter()
        .map(|row| match (&row[0], &row[1]) {
            (Value::U64(k), Value::I64(v)) => (*k, *v),
            other => panic!("a row {other:?}"),
        })
        .collect()
}

/// One transaction of the workload: 1 to 4 writes over 12 keys (inserts, updates,
/// deletes, an insert of a taken key now and then), applied to `model` as they succeed.
fn random_transaction(
    db: &Database,
    table: TableId,
    (rng, base): (&mut Rng, u64),
    model: &mut Model,
    stamp: i64,
) -> verso::Result<()> {
    let mut txn = db.begin(Isolation::Serializable);
    for _ in 0..1 + rng.below(4) {
        let k = base + rng.below(12);
        match (model.contains_key(&k), rng.below(4)) {
            (false, _) => {
                txn.insert(table, &[Value::U64(k), Value::I64(stamp)])?;
                model.insert(k, stamp);
            }
            (true, 0) => {
                assert!(txn.delete(table, &[Value::U64(k)])?);
                model.remove(&k);
            }
            (true, 1) => {
                // Refused: under the ordered index alone after its record was stored (and
                // withdrawn), else before anything was.
                let taken = txn.insert(table, &[Value::U64(k), Value::I64(-stamp)]);
                match taken {
                    Err(Error::DuplicateKey { .. }) => {}
                    other => other?,
                }
            }
            (true, _) => {
                assert!(txn.update(table, &[Value::U64(k)], &[(1, Value::I64(stamp))])?);
                model.insert(k, stamp);
            }
        }
    }
    txn.commit()
}

/// What a run until the crash saw: the acknowledged model and, if a commit was cut by the
/// crash, the model that commit would have made; version indexes built and the long
/// reader's checked reads (with one).
struct Crashed {
    acknowledged: Model,
    cut: Option<Model>,
    indexes_built: u64,
    /// Version indexes in the region when the power went.
    live_indexes: u64,
    snapshot_reads: u64,
}

/// Runs the workload until the crash at persist point `crash_at` (or to the end), then
/// loses power. With `long_reader_from`, a transaction begun at that step holds its
/// snapshot to the end and checks every 5 steps that it reads it.
fn run_until_the_crash(
    device: &SimulatedRegion,
    options: &Options,
    (seed, crash_at, steps): (u64, u64, u64),
    long_reader_from: Option<u64>,
) -> Crashed {
    let db = Database::open(options.clone()).unwrap();
    let table = match db.table("kv") {
        Ok(table) => table,
        // (`seed` is the test's seed × 2 + the life.)
        Err(_) => db.create_table("kv", kv_schema_for(seed / 2)).unwrap(),
    };
    let mut acknowledged = read_model(&db, table);
    device.crash_at_persist(crash_at);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut cut = None;
    let mut long: Option<(verso::Transaction<'_>, Model)> = None;
    let mut snapshot_reads = 0;
    for step in 0..steps {
        if Some(step) == long_reader_from {
            long = Some((db.begin(Isolation::Serializable), acknowledged.clone()));
        }
        let mut model = acknowledged.clone();
        match random_transaction(&db, table, (&mut rng, 0), &mut model, step as i64 + 1) {
            Ok(()) => acknowledged = model,
            Err(e) if e.is_retryable() || matches!(e, Error::DuplicateKey { .. }) => {}
            Err(_) => {
                cut = Some(model);
                break;
            }
        }
        if let Some((reader, snapshot)) = long.as_ref().filter(|_| step % 5 == 0) {
            for k in 0..12 {
                let value = reader
                    .get(table, &[Value::U64(k)])
                    .unwrap()
                    .map(|row| match row[1] {
                        Value::I64(v) => v,
                        ref other => panic!("{other:?}"),
                    });
                assert_eq!(
                    value,
                    snapshot.get(&k).copied(),
                    "seed {seed} step {step}: the long reader's key {k}"
                );
                snapshot_reads += 1;
            }
        }
        if step % 7 == 6 {
            db.collect_garbage();
        }
    }
    let blocks = db.stats().persistent_memory.unwrap().blocks;
    drop(long);
    drop(db);
    device.crash();
    Crashed {
        acknowledged,
        cut,
        indexes_built: blocks.version_indexes_built,
        live_indexes: blocks.version_indexes,
        snapshot_reads,
    }
}

#[test]
fn every_acknowledged_commit_survives_a_power_loss_at_any_persist_point() {
    let seeds = crash_seeds(60);
    let mut frozen_finished = 0;
    let mut crashed_in_the_run = 0;
    for seed in 0..seeds {
        let dir = temp_dir(&format!("crash-{seed}"));
        let _cleanup = Cleanup(dir.clone());
        let (device, options) = simulated(seed, &dir, 6, GarbageCollector::TbCollect);
        // Two lives, each crashed at a random persist point; the second starts from what
        // the first's recovery rebuilt.
        let mut model = Model::new();
        for life in 0..2u64 {
            let crash_at = 1 + (seed * 7 + life * 13) % 90;
            let before = device.persists();
            let Crashed {
                acknowledged, cut, ..
            } = run_until_the_crash(&device, &options, (seed * 2 + life, crash_at, 60), None);
            if device.persists() >= before + crash_at {
                crashed_in_the_run += 1;
            }
            // Every other seed reopens without a collector: Algorithm 3 finishes the frozen
            // blocks all the same, and collects nothing else.
            let without_collector = seed % 2 == 1;
            let mut reopening = options.clone();
            if without_collector {
                reopening = reopening.garbage_collector(GarbageCollector::NoCollection);
                reopening.block_gc_epoch = None;
            }
            let db = Database::open(reopening).unwrap_or_else(|e| {
                panic!("seed {seed} life {life}: the crashed region does not open: {e}")
            });
            let recovered = report(&db).expect("a region with data");
            frozen_finished += recovered.frozen_blocks;
            if without_collector {
                let blocks = db.stats().persistent_memory.unwrap().blocks;
                assert!(
                    blocks.blocks_freed <= recovered.frozen_blocks,
                    "seed {seed} life {life}: 'none' freed {} blocks, {} were frozen",
                    blocks.blocks_freed,
                    recovered.frozen_blocks
                );
            }
            let table = db.table("kv").unwrap();
            let found = read_model(&db, table);
            let expected_one_of = [Some(&acknowledged), cut.as_ref()];
            assert!(
                expected_one_of.contains(&Some(&found)),
                "seed {seed} life {life}: recovered {found:?}\nacknowledged {acknowledged:?}\n\
                 cut commit {cut:?}\nreport {recovered:?}"
            );
            // What recovery left is whole: a clean reopen finds no frozen block and the
            // same rows; and once everything safe to collect is collected, no block is
            // left that nothing needs (each holds a live row, but for the few this thread
            // appends to), so recovery leaked none.
            drop(db);
            let db = Database::open(options.clone()).unwrap();
            let again = report(&db).unwrap();
            assert_eq!(again.frozen_blocks, 0, "seed {seed} life {life}: {again:?}");
            let table = db.table("kv").unwrap();
            assert_eq!(read_model(&db, table), found, "seed {seed} life {life}");
            db.collect_garbage();
            let after = db.stats().persistent_memory.unwrap().blocks;
            assert!(
                after.frames_in_use <= found.len() as u64 + 2,
                "seed {seed} life {life}: {} frames in use for {} rows: {after:?}",
                after.frames_in_use,
                found.len()
            );
            // And every block the directory lists is one the store knows (has a tile).
            drop(db);
            let db = Database::open(options.clone()).unwrap();
            assert_eq!(
                report(&db).unwrap().blocks,
                after.tiles - after.tiles_kept,
                "seed {seed} life {life}: the directory lists blocks the store did not know"
            );
            drop(db);
            model = found;
        }
        let _ = model;
    }
    assert!(
        crashed_in_the_run > seeds / 2,
        "{crashed_in_the_run} of {} lives crashed inside the workload",
        2 * seeds
    );
    if seeds >= 40 {
        assert!(
            frozen_finished > 0,
            "no crash left a frozen block for Algorithm 3 in {seeds} seeds"
        );
    }
}

/// TB-Collect-hash at a power loss: a long reader holds its snapshot while the workload
/// runs, so collections free blocks it may walk, write version indexes (`Scratch` runs)
/// and switch chains to them. At a power loss at any persist point (inside an index's
/// build, its link switches, the frees after it), every acknowledged commit survives, the
/// open frees the frames of every index alive at the crash (and some crash leaves one),
/// and until the crash the reader read its snapshot through the indexes.
#[test]
fn hash_indexes_lose_nothing_acknowledged_at_a_power_loss_under_a_long_reader() {
    let seeds = crash_seeds(40);
    let mut indexes_built = 0;
    let mut index_frames_freed = 0;
    let mut snapshot_reads = 0;
    for seed in 0..seeds {
        let dir = temp_dir(&format!("hash-crash-{seed}"));
        let _cleanup = Cleanup(dir.clone());
        let (device, options) = simulated(seed, &dir, 6, GarbageCollector::TbCollect);
        let options = options.chain_consolidation(verso::ChainConsolidation::HashIndex);
        let crash_at = 20 + (seed * 7) % 160;
        // (A seed of `2 * seed`: the schema of `kv_schema_for(seed)`.)
        let crashed = run_until_the_crash(&device, &options, (2 * seed, crash_at, 90), Some(12));
        indexes_built += crashed.indexes_built;
        let crashed_with_live_indexes = crashed.live_indexes;
        snapshot_reads += crashed.snapshot_reads;
        let Crashed {
            acknowledged, cut, ..
        } = crashed;
        let db = Database::open(options.clone())
            .unwrap_or_else(|e| panic!("seed {seed}: the crashed region does not open: {e}"));
        let table = db.table("kv").unwrap();
        let found = read_model(&db, table);
        assert!(
            [Some(&acknowledged), cut.as_ref()].contains(&Some(&found)),
            "seed {seed}: recovered {found:?}\nacknowledged {acknowledged:?}\ncut {cut:?}"
        );
        // The indexes alive at the crash were persisted (built whole before any link named
        // them): the open found their `Scratch` runs and freed them.
        let recovered = report(&db).expect("a region with data");
        assert!(
            recovered.version_index_frames_freed >= crashed_with_live_indexes,
            "seed {seed}: {crashed_with_live_indexes} indexes alive at the crash, {} index \
             frames freed by the open: {recovered:?}",
            recovered.version_index_frames_freed
        );
        index_frames_freed += recovered.version_index_frames_freed;
        db.collect_garbage();
        let after = db.stats().persistent_memory.unwrap().blocks;
        assert!(
            after.frames_in_use <= found.len() as u64 + 2,
            "seed {seed}: {} frames in use for {} rows (an index's frames leaked?): {after:?}",
            after.frames_in_use,
            found.len()
        );
    }
    assert!(
        indexes_built > 0,
        "no version index was built in {seeds} seeds"
    );
    assert!(snapshot_reads > 0);
    assert!(
        index_frames_freed > 0,
        "no crash left a version index for the open to free in {seeds} seeds"
    );
}

/// Two writers on their own keys, each ending its thread every 15 transactions (a thread
/// that ends hands its open block to the next), collections between: at a power loss at
/// any persist point, each writer's keys hold what its acknowledged commits left, or that
/// plus the one commit the crash cut.
#[test]
fn concurrent_writers_lose_nothing_acknowledged_at_a_power_loss() {
    let seeds = crash_seeds(60) / 3;
    for seed in 0..seeds {
        let dir = temp_dir(&format!("concurrent-{seed}"));
        let _cleanup = Cleanup(dir.clone());
        let (device, options) = simulated(seed, &dir, 6, GarbageCollector::TbCollect);
        let db = Database::open(options.clone()).unwrap();
        let table = db.create_table("kv", kv_schema_for(seed)).unwrap();
        device.crash_at_persist(1 + (seed * 11) % 120);
        let writers: Vec<(Model, Option<Model>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2u64)
                .map(|writer| {
                    let db = &db;
                    scope.spawn(move || {
                        let mut rng =
                            Rng((seed * 2 + writer + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
                        let mut acknowledged = Model::new();
                        for session in 0..4i64 {
                            // Each session on a thread of its own, which then ends.
                            let (acked, cut, done) = std::thread::scope(|inner| {
                                inner
                                    .spawn(|| {
                                        let mut acked = acknowledged.clone();
                                        for step in 0..15i64 {
                                            let mut model = acked.clone();
                                            let stamp = session * 100 + step + 1;
                                            match random_transaction(
                                                db,
                                                table,
                                                (&mut rng, writer * 100),
                                                &mut model,
                                                stamp,
                                            ) {
                                                Ok(()) => acked = model,
                                                Err(e)
                                                    if e.is_retryable()
                                                        || matches!(
                                                            e,
                                                            Error::DuplicateKey { .. }
                                                        ) => {}
                                                Err(_) => return (acked, Some(model), true),
                                            }
                                            if step % 5 == 4 {
                                                db.collect_garbage();
                                            }
                                        }
                                        (acked, None, false)
                                    })
                                    .join()
                                    .unwrap()
                            });
                            acknowledged = acked;
                            if done {
                                return (acknowledged, cut);
                            }
                        }
                        (acknowledged, None)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        drop(db);
        device.crash();
        let db = Database::open(options.clone())
            .unwrap_or_else(|e| panic!("seed {seed}: the crashed region does not open: {e}"));
        let found = read_model(&db, db.table("kv").unwrap());
        for (writer, (acknowledged, cut)) in writers.iter().enumerate() {
            let base = writer as u64 * 100;
            let mine: Model = found
                .range(base..base + 100)
                .map(|(&k, &v)| (k, v))
                .collect();
            assert!(
                &mine == acknowledged || Some(&mine) == cut.as_ref(),
                "seed {seed} writer {writer}: recovered {mine:?}\nacknowledged {acknowledged:?}\n\
                 cut commit {cut:?}"
            );
        }
    }
}

/// Found while building recovery: a thread that ends hands its open block to the next
/// thread that appends, and its own stores since its last persist point (a rolled-back
/// transaction's record, the directory word of the block it opened) were never persisted.
/// The next thread's commits persist only its own stores, so a power loss could lose the
/// block's directory word or a record before them, and recovery, which reads a block up
/// to its first torn record, lost acknowledged commits behind it. A thread now persists
/// before its block passes on.
#[test]
fn regression_a_block_a_thread_left_keeps_the_next_threads_commits() {
    for seed in 0..24 {
        let dir = temp_dir(&format!("left-block-{seed}"));
        let _cleanup = Cleanup(dir.clone());
        let (device, options) = simulated(seed, &dir, 64, GarbageCollector::NoCollection);
        let db = Database::open(options.clone()).unwrap();
        let table = db.create_table("kv", kv_schema()).unwrap();
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let mut txn = db.begin(Isolation::Serializable);
                    txn.insert(table, &[Value::U64(1), Value::I64(1)]).unwrap();
                    txn.abort();
                })
                .join()
                .unwrap();
        });
        let mut txn = db.begin(Isolation::Serializable);
        txn.insert(table, &[Value::U64(2), Value::I64(2)]).unwrap();
        txn.commit().unwrap();
        drop(db);
        device.crash();
        let db = Database::open(options).unwrap();
        let found = read_model(&db, db.table("kv").unwrap());
        assert_eq!(found, Model::from([(2, 2)]), "seed {seed}");
    }
}

const KILL_CHILD_DIR: &str = "VERSO_TB_KILL_CHILD_DIR";

/// The options of the kill test's database, in `dir` on tmpfs.
fn kill_options(dir: &std::path::Path) -> Options {
    options(
        GarbageCollector::TbCollect,
        PmOptions::default()
            .capacity_bytes(64 << 20)
            .slots_per_block(32),
        dir,
    )
    .block_gc_epoch(std::time::Duration::from_millis(1))
}

/// The child of the kill test: sets key `i % 20` to `i` for ever larger `i` (continuing
/// from what the database holds), printing `key value` once each commit returned, with a
/// collection now and then, until it is killed.
#[test]
fn tb_kill_child() {
    let Ok(dir) = std::env::var(KILL_CHILD_DIR) else {
        return; // Run by the harness itself: nothing to do.
    };
    let db = Database::open(kill_options(std::path::Path::new(&dir))).unwrap();
    let table = match db.table("kv") {
        Ok(table) => table,
        Err(_) => db.create_table("kv", kv_schema()).unwrap(),
    };
    let start = read_model(&db, table).values().copied().max().unwrap_or(0) + 1;
    let mut out = std::io::stdout();
    for value in start.. {
        let key = value as u64 % 20;
        let mut txn = db.begin(Isolation::Serializable);
        if !txn
            .update(table, &[Value::U64(key)], &[(1, Value::I64(value))])
            .unwrap()
        {
            txn.insert(table, &[Value::U64(key), Value::I64(value)])
                .unwrap();
        }
        txn.commit().unwrap();
        std::io::Write::write_all(&mut out, format!("{key} {value}\n").as_bytes()).unwrap();
        std::io::Write::flush(&mut out).unwrap();
        if value % 97 == 0 {
            db.collect_garbage();
        }
    }
}

/// A tile-block database in a region file on tmpfs survives SIGKILL at any moment:
/// reopened, every key holds the value last reported committed for it, or the one commit
/// after it that was in flight; and the next child goes on from there. `TB_KILLS` kills
/// (default 4; the documented longer run: `TB_KILLS=200 cargo test --release -p verso
/// --test tb_recovery sigkill`).
#[cfg(target_os = "linux")]
#[test]
fn a_database_in_a_region_file_keeps_every_acknowledged_commit_across_sigkill() {
    use std::io::BufRead;
    let dir =
        std::path::Path::new("/dev/shm").join(format!("verso-tb-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _cleanup = Cleanup(dir.clone());
    let exe = std::env::current_exe().unwrap();
    let kills: u64 = std::env::var("TB_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let mut reported = Model::new();
    for run in 0..kills {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "tb_kill_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(KILL_CHILD_DIR, &dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let target = 300 * (run % 5 + 1);
        let mut note = |line: String| {
            let mut fields = line.split_whitespace().map(|f| f.parse::<i64>());
            if let (Some(Ok(key)), Some(Ok(value))) = (fields.next(), fields.next()) {
                reported.insert(key as u64, value);
            }
        };
        for _ in 0..target {
            match lines.next() {
                Some(Ok(line)) => note(line),
                _ => panic!("run {run}: the child ended before it was killed"),
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // What the child reported before the kill and the pipe still holds was committed
        // too (a line cut by the kill is no report).
        for line in lines.map_while(|line| line.ok()) {
            note(line);
        }
        let db = Database::open(kill_options(&dir)).unwrap();
        let found = read_model(&db, db.table("kv").unwrap());
        // The commit after the last report, at most one (the child commits one at a
        // time), may have reached the region: the next value, of its key.
        let in_flight = reported.values().copied().max().unwrap_or(0) + 1;
        for key in 0..20u64 {
            let now = found.get(&key).copied();
            let was = reported.get(&key).copied();
            assert!(
                now == was || (in_flight as u64 % 20 == key && now == Some(in_flight)),
                "run {run}: key {key} was committed with {was:?}, the database holds {now:?}"
            );
        }
        reported = found;
        db.close().unwrap();
    }
}

/// A directory holds one kind of database: a log-based one is not opened as a region, nor
/// a region as a log-based one (either would make a second, empty database beside the
/// first).
#[test]
fn a_directory_of_one_kind_of_database_is_refused_by_the_other() {
    let logged = temp_dir("kinds-logged");
    let region = temp_dir("kinds-region");
    let _cleanup = (Cleanup(logged.clone()), Cleanup(region.clone()));
    Database::open(Options::default().path(&logged))
        .unwrap()
        .close()
        .unwrap();
    let pm = || PmOptions::default().capacity_bytes(16 << 20);
    let refused = Database::open(options(GarbageCollector::TbCollect, pm(), &logged));
    assert!(
        matches!(&refused, Err(Error::UnsupportedConfiguration { reason }) if reason.contains("redo log")),
        "{refused:?}"
    );
    Database::open(options(GarbageCollector::TbCollect, pm(), &region))
        .unwrap()
        .close()
        .unwrap();
    let refused = Database::open(Options::default().path(&region));
    assert!(
        matches!(&refused, Err(Error::UnsupportedConfiguration { reason }) if reason.contains("tile-block")),
        "{refused:?}"
    );
}

/// Found while building recovery: a block's directory word became durable only at the
/// persist point of its first commit, together with the records. A power loss in that
/// persist point could keep the records and lose the word: the frame stayed free, with
/// the same generation, so the next block there had the same checksum key, and once its
/// appends ended where a stale record began, the next recovery read the stale records,
/// commit record included, as the new block's: a transaction never acknowledged appeared
/// after the second restart (and its id, which the first recovery never saw, could be
/// reused). A block's directory word is now persisted when it is allocated, before any
/// record goes into it.
#[test]
fn regression_records_of_a_block_whose_allocation_was_lost_never_come_back() {
    let schema = || {
        Schema::new()
            .column("k", ColumnType::U64)
            .column("t", ColumnType::Text)
            .primary_key(&["k"])
    };
    let rows = |db: &Database| -> Vec<Vec<Value>> { all_rows(db, db.table("t").unwrap()) };
    for seed in 0..64 {
        let dir = temp_dir(&format!("lost-allocation-{seed}"));
        let _cleanup = Cleanup(dir.clone());
        let (device, options) = simulated(seed, &dir, 64, GarbageCollector::NoCollection);
        // Whole 256-byte lines kept or lost (word by word, four records' words all kept
        // are too rare to see).
        device.set_atomic_unit(AtomicUnit::MediaLine);
        let db = Database::open(options.clone()).unwrap();
        let table = db.create_table("t", schema()).unwrap();
        // A first record of 80 bytes (its header, 24 bytes of tags and slots, 32 of text),
        // then three more: the next life's insert of 48 bytes and commit record of 32 end
        // where the second one begins. The power goes in the commit's persist point.
        let mut txn = db.begin(Isolation::Serializable);
        txn.insert(table, &[Value::U64(1), Value::Text("x".repeat(32))])
            .unwrap();
        for k in 2..5 {
            txn.insert(table, &[Value::U64(k), Value::Text(String::new())])
                .unwrap();
        }
        device.crash_at_persist(1);
        let cut = txn.commit();
        drop(db);
        device.crash();
        let db = Database::open(options.clone()).unwrap();
        let first = rows(&db);
        assert!(
            first.is_empty() || (cut.is_err() && first.len() == 4),
            "seed {seed}: {first:?}"
        );
        let table = db.table("t").unwrap();
        let mut txn = db.begin(Isolation::Serializable);
        txn.insert(table, &[Value::U64(10), Value::Text(String::new())])
            .unwrap();
        txn.commit().unwrap();
        db.close().unwrap();
        let db = Database::open(options)
            .unwrap_or_else(|e| panic!("seed {seed}: the second reopening fails: {e}"));
        let mut expected = first;
        expected.push(vec![Value::U64(10), Value::Text(String::new())]);
        assert_eq!(rows(&db), expected, "seed {seed}");
    }
}

/// Found by the long crash runs on a loaded machine: an open right after the last handle
/// of a database at the same path was dropped (or closed) now and then got
/// `DatabaseLocked`, because the storage, which holds the directory's lock, outlived the
/// handle on another thread (a thread's cache of appenders upgraded its weak reference to
/// the storage as the thread ended, which with scoped threads is after the scope returned).
/// A second cause showed in the long runs after that fix: this binary's kill loop forks
/// children, which shared the lock's open file description until they exec'd (the lock was
/// an `flock` then; `durability.rs`,
/// `regression_a_child_forked_while_the_database_was_open_does_not_keep_its_lock`).
/// Opened, written and dropped many times in a row (`TB_REOPENS`, 200 by default; the bug
/// showed within 100), with the idle collector running every millisecond and writer threads
/// that come and go, each open must find the directory free.
#[test]
fn regression_the_directory_is_free_as_soon_as_the_last_handle_goes() {
    let dir = temp_dir("free-at-once");
    let _cleanup = common::Cleanup(dir.clone());
    let rounds: u64 = std::env::var("TB_REOPENS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    for round in 0..rounds {
        let db = Database::open(
            options(
                GarbageCollector::TbCollect,
                PmOptions::default()
                    .capacity_bytes(64 << 20)
                    .slots_per_block(16),
                &dir,
            )
            .idle_collection_interval(Some(std::time::Duration::from_millis(1)))
            .block_gc_epoch(std::time::Duration::from_micros(200)),
        )
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let table = match db.table("kv") {
            Ok(table) => table,
            Err(_) => db.create_table("kv", kv_schema()).unwrap(),
        };
        std::thread::scope(|scope| {
            for writer in 0..2u64 {
                let db = &db;
                scope.spawn(move || {
                    for step in 0..2u64 {
                        let mut txn = db.begin(Isolation::Serializable);
                        let key = Value::U64(writer * 10 + step);
                        let _ = txn.delete(table, std::slice::from_ref(&key));
                        let _ = txn.insert(table, &[key, Value::I64(round as i64)]);
                        let _ = txn.commit();
                    }
                });
            }
        });
        if round % 2 == 0 {
            db.close().unwrap();
        } else {
            drop(db);
        }
    }
}

/// Found by the long crash runs (`concurrent_writers_lose_nothing_...`, once in 3,000
/// seeds): a refused insert's record in one block, its `Withdrawn` record in the next,
/// and the transaction's commit record in a third. A collection freeing the first two
/// blocks dropped the `Withdrawn` record, because the block it names was being freed
/// too. But a power loss in the persist point of the `FREE` words keeps any subset of
/// them: the named block survived (`FROZEN`, its records read again by recovery) while
/// the `Withdrawn` record's block was gone, and with the commit record surviving, the
/// refused insert's record, the highest id of its key, came back as the key's value.
/// A `Withdrawn` record now stays until the block it names is durably free. Crashes at
/// every persist point of the collection, over seeds each keeping another subset.
#[test]
fn regression_a_refused_insert_stays_withdrawn_when_a_crash_frees_only_some_blocks() {
    let mut crashes_inside = 0;
    let mut recovered_frozen = 0;
    for seed in 0..crash_seeds(48) {
        // Persist points of the collection, measured on a run without a crash (the same
        // single-threaded run replays exactly).
        let mut persists_of_collection = None;
        let mut crash_at = 1;
        loop {
            let dir = temp_dir(&format!("withdrawn-across-blocks-{seed}-{crash_at}"));
            let _cleanup = Cleanup(dir.clone());
            let (device, options) = simulated(seed, &dir, 4, GarbageCollector::TbCollect);
            // No collection but the one this test asks for.
            let options = options.block_gc_epoch(std::time::Duration::from_secs(3600));
            let db = Database::open(options.clone()).unwrap();
            let table = db.create_table("kv", kv_schema_for(0)).unwrap();
            let mut txn = db.begin(Isolation::Serializable);
            txn.insert(table, &[Value::U64(1), Value::I64(1)]).unwrap();
            txn.commit().unwrap();
            // Blocks of 4 slots: key 1's version and its commit record, then this
            // transaction's insert of key 2 and its refused insert of key 1 fill the first
            // block; the `Withdrawn` record and the inserts of keys 3 to 5 fill the second;
            // the commit record opens the third.
            let mut txn = db.begin(Isolation::Serializable);
            txn.insert(table, &[Value::U64(2), Value::I64(2)]).unwrap();
            let taken = txn.insert(table, &[Value::U64(1), Value::I64(-2)]);
            assert!(
                matches!(taken, Err(Error::DuplicateKey { .. })),
                "{taken:?}"
            );
            for k in 3..6 {
                txn.insert(table, &[Value::U64(k), Value::I64(k as i64)])
                    .unwrap();
            }
            txn.commit().unwrap();
            let expected = Model::from([(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]);
            let before = device.persists();
            if persists_of_collection.is_some() {
                device.crash_at_persist(crash_at);
            }
            db.collect_garbage();
            let persists = device.persists() - before;
            let freed = db.stats().persistent_memory.expect("a region").blocks;
            drop(db);
            device.crash();
            let Some(total) = persists_of_collection else {
                assert!(
                    freed.blocks_freed >= 3,
                    "seed {seed}: the collection freed the three blocks: {freed:?}"
                );
                persists_of_collection = Some(persists);
                continue;
            };
            let db = Database::open(options).unwrap_or_else(|e| {
                panic!("seed {seed} crash at {crash_at}: the region does not open: {e}")
            });
            recovered_frozen += report(&db).map_or(0, |r| r.frozen_blocks);
            crashes_inside += 1;
            assert_eq!(
                read_model(&db, db.table("kv").unwrap()),
                expected,
                "seed {seed}, crash at persist point {crash_at} of {total} in the collection"
            );
            drop(db);
            crash_at += 1;
            if crash_at > total {
                break;
            }
        }
    }
    assert!(crashes_inside > 0, "no crash fell inside a collection");
    assert!(
        recovered_frozen > 0,
        "no crash left a block frozen: the case this test is for never happened"
    );
}
