use std::collections::BTreeMap;

use crate::pmem::layout::{self, RecordKind, RecordScan};
use crate::pmem::{PmBacking, PmOptions, SimulatedRegion};
#[allow(unused_imports)]
use crate::row::RowView;
use crate::{
    ColumnType, ConcurrencyControl, Database, GarbageCollector, Isolation, Options, Schema,
    TableId, Value, VersionStorageKind,
};

/// Tile-block on `device`, blocks of `slots` slots.
fn simulated_options(device: &SimulatedRegion, slots: u32) -> Options {
    Options::default()
        .version_storage(VersionStorageKind::TileBlock)
        .concurrency_control(ConcurrencyControl::Mvto)
        .garbage_collector(GarbageCollector::NoCollection)
        .persistent_memory(
            PmOptions::default()
                .backing(PmBacking::Simulated(device.clone()))
                .slots_per_block(slots),
        )
}

/// The number of seeds of a crash test: `PM_CRASH_SEEDS`, or `default` (the documented
/// longer run: `PM_CRASH_SEEDS=2000 cargo test --release -p verso --lib pmem tile_block`).
pub(crate) fn crash_seeds(default: u64) -> u64 {
    std::env::var("PM_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The records a region image holds: for each transaction id, how many version and
/// tombstone records, and the count its commit record states (if one is whole). Blocks
/// are read as recovery will read them: records in order from the metadata line, up to
/// the first that is not whole (a torn tail).
fn records_in(image: &[u8]) -> BTreeMap<u64, (u32, Option<u32>)> {
    let superblock = layout::decode_superblock(&image[..512], image.len() as u64, "image")
        .expect("a formatted region");
    let g = superblock.geometry;
    let words: Vec<u64> = (0..g.frame_count)
        .map(|f| {
            let at = g.directory_word(f) as usize;
            u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
        })
        .collect();
    let scan = layout::scan_directory(&words).expect("a directory no crash can make");
    let mut by_txn: BTreeMap<u64, (u32, Option<u32>)> = BTreeMap::new();
    for block in scan.blocks {
        let start = g.frame_offset(block.first_frame) as usize;
        let end = start + block.frames as usize * g.frame_bytes as usize;
        let mut at = start + layout::METADATA_LINE_BYTES as usize;
        let key = layout::block_key(block.first_frame, block.generation);
        while let RecordScan::Valid(record) = layout::decode_record(&image[at..end], key) {
            let entry = by_txn.entry(record.txn_id).or_default();
            match record.kind {
                RecordKind::Commit => entry.1 = record.committed_records(),
                _ => entry.0 += 1,
            }
            at += record.stored_bytes();
        }
    }
    by_txn
}

/// The durability point: once `commit()` returned, a power loss at any later moment
/// keeps the transaction's commit record and every record it counts. (What recovery,
/// TB §4.5, will rebuild from.) And no partial transaction: a whole commit record comes
/// with all its records. Crashes at every persist point of a run of transactions of 1 to
/// 3 inserts, updates or deletes in blocks of 4 slots (so that many span two blocks),
/// each unpersisted word kept or lost at random.
#[test]
fn every_acknowledged_commit_survives_a_power_loss_whole() {
    let mut crashes = 0;
    let seeds = crash_seeds(40);
    for seed in 0..seeds {
        let device = SimulatedRegion::new(4 << 20, seed);
        let db = Database::open(simulated_options(&device, 4)).unwrap();
        let table = db
            .create_table(
                "t",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("value", ColumnType::I64)
                    .primary_key(&["id"]),
            )
            .unwrap();
        device.crash_at_persist(1 + seed % 30);
        let mut acknowledged = Vec::new();
        for step in 0..40u64 {
            let mut txn = db.begin(Isolation::Serializable);
            let id = txn.start_ts();
            // 1 to 3 keys, so that transactions span blocks.
            let mut wrote = false;
            for key in (0..1 + (step * seed) % 3).map(|k| (step + k * 3) % 7) {
                let key = [Value::U64(key)];
                wrote |= match step % 3 {
                    0 => txn
                        .insert(table, &[key[0].clone(), Value::I64(step as i64)])
                        .is_ok(),
                    1 => txn
                        .update(table, &key, &[(1, Value::I64(-1))])
                        .unwrap_or(false),
                    _ => txn.delete(table, &key).unwrap_or(false),
                };
            }
            if !wrote {
                continue;
            }
            match txn.commit() {
                Ok(()) => acknowledged.push(id),
                Err(_) => break, // the power loss: nothing after it is acknowledged
            }
        }
        drop(db);
        if device.persists() < 1 + seed % 30 {
            continue; // the run ended before the crash point
        }
        crashes += 1;
        let found = records_in(&device.durable_image());
        for id in &acknowledged {
            let (records, committed) = found.get(id).copied().unwrap_or_default();
            assert_eq!(
                committed,
                Some(records),
                "seed {seed}: acknowledged transaction {id} lost its commit or a record"
            );
        }
        // No partial transaction: a whole commit record, acknowledged or not, comes
        // with every record it counts (the records are persisted before it is written).
        for (id, &(records, committed)) in &found {
            if let Some(counted) = committed {
                assert_eq!(
                    counted, records,
                    "seed {seed}: transaction {id}'s commit record is whole but a record \
                     it counts was lost"
                );
            }
        }
    }
    assert!(crashes > seeds / 2, "{crashes} of {seeds} runs crashed");
}

/// A record read back: kind, flags, transaction id, and for content records the key
/// and value (`None`: a tombstone).
type FoundRecord = (RecordKind, u8, u64, Option<(u64, Option<i64>)>);

/// Every record a region image holds in blocks that are not free, read as recovery
/// reads them: records in order from the metadata line up to the first that is not
/// whole. Each as (kind, flags, txn id, key and value of a `counters` row).
#[allow(unsafe_code)]
fn rows_in(image: &[u8]) -> Vec<FoundRecord> {
    let superblock = layout::decode_superblock(&image[..512], image.len() as u64, "image")
        .expect("a formatted region");
    let g = superblock.geometry;
    let words: Vec<u64> = (0..g.frame_count)
        .map(|f| {
            let at = g.directory_word(f) as usize;
            u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
        })
        .collect();
    let scan = layout::scan_directory(&words).expect("a directory no crash can make");
    let mut found = Vec::new();
    for block in scan.blocks {
        let start = g.frame_offset(block.first_frame) as usize;
        let end = start + block.frames as usize * g.frame_bytes as usize;
        let mut at = start + layout::METADATA_LINE_BYTES as usize;
        let key = layout::block_key(block.first_frame, block.generation);
        while let RecordScan::Valid(record) = layout::decode_record(&image[at..end], key) {
            let holds_a_row = !matches!(record.kind, RecordKind::Commit | RecordKind::Withdrawn);
            let row = holds_a_row.then(|| {
                // SAFETY: a payload this storage packed for the two-column table,
                // every value inline (commit and withdrawn records hold none), its
                // checksum just verified.
                let values = unsafe { crate::row::PackedRef::from_stored(record.payload, 2) };
                let key = match values.get(0) {
                    crate::row::ValueRef::U64(key) => key,
                    other => panic!("{other:?}"),
                };
                let value = match values.get(1) {
                    crate::row::ValueRef::I64(v) => v,
                    other => panic!("{other:?}"),
                };
                let tombstone = record.kind == RecordKind::Tombstone
                    || (record.kind == RecordKind::Relocated
                        && record.flags & layout::RELOCATED_TOMBSTONE != 0);
                (key, (!tombstone).then_some(value))
            });
            found.push((record.kind, record.flags, record.txn_id, row));
            at += record.stored_bytes();
        }
    }
    found
}

/// What recovery (TB §4.5) will take for each key of a region image: of the committed
/// records of the key, the one with the highest id (its value, or `None` for a
/// tombstone); a key with no such record is absent. A transaction is committed iff its
/// commit record is whole; a relocated copy is of a committed version.
fn newest_committed(image: &[u8]) -> BTreeMap<u64, (u64, Option<i64>)> {
    let rows = rows_in(image);
    let committed: std::collections::BTreeSet<u64> = rows
        .iter()
        .filter(|(kind, ..)| *kind == RecordKind::Commit)
        .map(|&(_, _, id, _)| id)
        .collect();
    let mut newest: BTreeMap<u64, (u64, Option<i64>)> = BTreeMap::new();
    for (kind, _, id, row) in rows {
        let Some((key, value)) = row else { continue };
        if kind != RecordKind::Relocated && !committed.contains(&id) {
            continue;
        }
        if newest
            .get(&key)
            .is_none_or(|&(newest_id, _)| id > newest_id)
        {
            newest.insert(key, (id, value));
        }
    }
    newest
}

/// A power loss at any persist point, collections' included (their `FROZEN` words,
/// relocated copies and `FREE` words), keeps for every key a committed record of the
/// last acknowledged write (or of the write in flight at the loss, which may or may not
/// have become durable), as the newest committed record of its key; a deleted key has
/// nothing newer than its delete. Blocks of 8 slots, transactions of up to 3 records
/// and a commit record, so that transactions span blocks and blocks are freed often.
#[test]
fn collections_keep_every_acknowledged_write_through_a_power_loss() {
    collections_keep_every_acknowledged_write(1);
}

/// The same with the keys spread over two tables (key k in table k mod 2): each table has
/// its own open block, so a transaction writing both spans blocks and its commit record
/// goes to one of them after the others' records are persisted.
#[test]
fn transactions_over_two_tables_keep_every_acknowledged_write_through_a_power_loss() {
    collections_keep_every_acknowledged_write(2);
}

/// The power-loss test above, its keys spread over `tables` tables of the same schema.
fn collections_keep_every_acknowledged_write(tables: u64) {
    let seeds = crash_seeds(60);
    let mut crashed_in_a_collection = 0;
    let mut total_collections = 0;
    for seed in 0..seeds {
        let device = SimulatedRegion::new(8 << 20, seed);
        let db = Database::open(
            simulated_options(&device, 8)
                .garbage_collector(GarbageCollector::TbCollect)
                .block_gc_epoch(std::time::Duration::from_micros(200)),
        )
        .unwrap();
        let table_of_key: Vec<TableId> = (0..tables)
            .map(|t| {
                db.create_table(
                    &format!("counters{t}"),
                    Schema::new()
                        .column("id", ColumnType::U64)
                        .column("value", ColumnType::I64)
                        .primary_key(&["id"]),
                )
                .unwrap()
            })
            .collect();
        let crash_at = 1 + seed * 7 % 150;
        device.crash_at_persist(crash_at);
        // key → (id, value) of its last acknowledged write (`None`: deleted).
        let mut model: BTreeMap<u64, (u64, Option<i64>)> = BTreeMap::new();
        let mut in_flight: Vec<(u64, u64, Option<i64>)> = Vec::new();
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut commits = 0;
        'run: for step in 0..200i64 {
            let mut txn = db.begin(Isolation::Serializable);
            let id = txn.start_ts();
            let mut writes: Vec<(u64, u64, Option<i64>)> = Vec::new();
            for _ in 0..1 + next(3) {
                let key = next(12);
                if writes.iter().any(|&(_, k, _)| k == key) {
                    continue;
                }
                let exists = model.get(&key).is_some_and(|&(_, v)| v.is_some());
                let value = step * 100 + key as i64;
                let table = table_of_key[(key % tables) as usize];
                let done = if exists && next(4) == 0 {
                    txn.delete(table, &[Value::U64(key)]).map(|_| None)
                } else if exists {
                    txn.update(table, &[Value::U64(key)], &[(1, Value::I64(value))])
                        .map(|_| Some(value))
                } else {
                    txn.insert(table, &[Value::U64(key), Value::I64(value)])
                        .map(|()| Some(value))
                };
                match done {
                    Ok(value) => writes.push((id, key, value)),
                    Err(_) => break 'run,
                }
            }
            let persists_before = device.persists();
            match txn.commit() {
                Ok(()) => {
                    commits += 1;
                    for (id, key, value) in writes {
                        model.insert(key, (id, value));
                    }
                }
                Err(_) => {
                    // The power went at this commit's persist point, or earlier, at a
                    // collection's (the region refuses commits from then on).
                    if persists_before >= crash_at {
                        crashed_in_a_collection += 1;
                    }
                    in_flight = writes;
                    break;
                }
            }
        }
        let collections = db
            .stats()
            .persistent_memory
            .map(|pm| pm.blocks.collections)
            .unwrap_or(0);
        total_collections += collections;
        drop(db);
        if device.persists() < crash_at {
            continue; // the run ended before the crash point
        }
        // The first commit needs persist points of its own: the catalog's of each table,
        // the directory word of each block it opens, and, spanning blocks, its records'
        // before its commit record's (three more with a second table).
        assert!(
            commits > 0 || crash_at < 3 + 3 * (tables - 1),
            "seed {seed}"
        );
        let found = newest_committed(&device.durable_image());
        for key in 0..12u64 {
            let expected = model.get(&key).copied();
            let flying = in_flight
                .iter()
                .find(|&&(_, k, _)| k == key)
                .map(|&(id, _, v)| (id, v));
            let got = found.get(&key).copied();
            let deleted_or_absent =
                |v: Option<(u64, Option<i64>)>| v.is_none_or(|(_, v)| v.is_none());
            let ok = got == expected
                || (got.is_some() && got == flying)
                || (deleted_or_absent(got) && deleted_or_absent(expected))
                || (deleted_or_absent(got) && flying.is_some_and(|(_, v)| v.is_none()));
            let records_of_key = || {
                rows_in(&device.durable_image())
                    .into_iter()
                    .filter(|r| r.3.is_some_and(|(k, _)| k == key))
                    .collect::<Vec<_>>()
            };
            assert!(
                ok,
                "seed {seed} (crash at persist {crash_at}, {collections} collections): \
                 key {key}: acknowledged {expected:?}, in flight {flying:?}, found {got:?} \
                 among {:?}",
                records_of_key()
            );
        }
    }
    assert!(
        crashed_in_a_collection > 0,
        "no power loss hit a collection"
    );
    assert!(
        total_collections > seeds,
        "{total_collections} collections in {seeds} runs"
    );
}

/// Found while writing the crash test above: a transaction whose records span two
/// blocks has its commit record in the later one. When that block was freed (all its
/// slots obsolete) while the earlier one stayed, the region kept the transaction's
/// still-newest record in the earlier block but no commit record saying it committed:
/// recovery would have dropped an acknowledged write. Blocks of 4 slots: T1 fills 3 of
/// block A; T2 inserts key 2 into A's last slot and key 3 into block B, and commits
/// there; T3 and T4 update key 3 until B is all obsolete and collected.
#[test]
fn regression_a_transaction_spanning_blocks_keeps_its_commit_when_its_last_block_is_freed() {
    let device = SimulatedRegion::new(4 << 20, 3);
    let db = Database::open(
        simulated_options(&device, 4).garbage_collector(GarbageCollector::TbCollect),
    )
    .unwrap();
    let table = db
        .create_table(
            "counters",
            Schema::new()
                .column("id", ColumnType::U64)
                .column("value", ColumnType::I64)
                .primary_key(&["id"]),
        )
        .unwrap();
    let write = |rows: &[(u64, i64)], update: bool| {
        let mut txn = db.begin(Isolation::Serializable);
        let id = txn.start_ts();
        for &(key, value) in rows {
            if update {
                assert!(txn
                    .update(table, &[Value::U64(key)], &[(1, Value::I64(value))])
                    .unwrap());
            } else {
                txn.insert(table, &[Value::U64(key), Value::I64(value)])
                    .unwrap();
            }
        }
        txn.commit().unwrap();
        id
    };
    write(&[(0, 0), (1, 1)], false);
    let spanning = write(&[(2, 2), (3, 3)], false);
    write(&[(3, 30)], true);
    write(&[(3, 300)], true);
    // The thread's list of active snapshots is rebuilt once per epoch: the next
    // transaction's end in a new epoch sees B in case 1.
    std::thread::sleep(crate::gc::tb_collect::EPOCH + std::time::Duration::from_millis(10));
    db.begin(Isolation::Serializable).commit().unwrap();
    let blocks = db.stats().persistent_memory.unwrap().blocks;
    assert!(blocks.blocks_freed > 0, "block B was collected: {blocks:?}");
    let found = newest_committed(&device.durable_image());
    assert_eq!(
        found.get(&2),
        Some(&(spanning, Some(2))),
        "key 2's newest record, written by the spanning transaction, reads as committed"
    );
    assert_eq!(found.get(&3).map(|&(_, v)| v), Some(Some(300)));
}

fn store_of(slots: u32) -> std::sync::Arc<super::TileStore> {
    use crate::version::VersionStorage;
    let options = simulated_options(&SimulatedRegion::new(8 << 20, 7), slots);
    super::TileBlockStorage::open_shared(&options).unwrap()
}

/// Inserts one row of `id` for a new transaction of that id and commits it durably.
fn insert_and_commit(store: &std::sync::Arc<super::TileStore>, id: u64) {
    use crate::version::{NewRowContext, VersionStorage};
    let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
    let context = NewRowContext {
        table: 0,
        txn_id: id,
        indexed: false,
    };
    let values = [Value::U64(id), Value::I64(0)];
    let (row, _) = super::TileBlockStorage::insert_row(
        store,
        context,
        &values,
        &owner,
        crate::row::NonInline::Packed,
    )
    .unwrap();
    owner.mark_committing();
    super::TileBlockStorage::commit_durably(store, &owner, id).unwrap();
    owner.mark_committed(id);
    super::TileBlockStorage::stamp(&row, &owner, id);
}

/// The image of a region after a small workload with collections: two tables (one
/// with a secondary index), updates, deletes, a frozen-and-freed block or two.
fn worked_region_image() -> Vec<u8> {
    let device = SimulatedRegion::new(4 << 20, 11);
    let options = simulated_options(&device, 6)
        .garbage_collector(GarbageCollector::TbCollect)
        .block_gc_epoch(std::time::Duration::from_micros(100));
    let db = Database::open(options).unwrap();
    let t = db
        .create_table(
            "t",
            Schema::new()
                .column("id", ColumnType::U64)
                .column("name", ColumnType::Text)
                .primary_key(&["id"])
                .index("by_name", &["name"]),
        )
        .unwrap();
    for round in 0..8u64 {
        let mut txn = db.begin(Isolation::Serializable);
        for id in 0..10u64 {
            let name = Value::Text(format!("n{}", (id * round) % 4));
            if round == 0 {
                txn.insert(t, &[Value::U64(id), name]).unwrap();
            } else if round == 5 && id % 3 == 0 {
                let _ = txn.delete(t, &[Value::U64(id)]);
            } else {
                let _ = txn.update(t, &[Value::U64(id)], &[(1, name)]);
            }
        }
        txn.commit().unwrap();
        db.collect_garbage();
    }
    drop(db);
    device.crash();
    device.durable_image()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Recovery's decoders, fuzzed: a region with bytes changed anywhere in what the
    /// workload wrote opens (and reads, writes and collects) or is refused with a typed
    /// error; it never panics.
    #[test]
    fn a_mutated_region_opens_or_is_refused_without_a_panic(
        flips in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 1u8..), 1..6),
    ) {
        use std::sync::OnceLock;
        static IMAGE: OnceLock<(Vec<u8>, usize)> = OnceLock::new();
        let (image, used) = IMAGE.get_or_init(|| {
            let image = worked_region_image();
            let used = image.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
            (image, used)
        });
        let mut mutated = image.clone();
        for (at, mask) in flips {
            mutated[at.index(*used)] ^= mask;
        }
        let device = SimulatedRegion::from_image(&mutated, 5);
        let options = simulated_options(&device, 6).garbage_collector(GarbageCollector::TbCollect);
        if let Ok(db) = Database::open(options) {
            let t = db.table("t");
            if let Ok(t) = t {
                let mut txn = db.begin(Isolation::Serializable);
                let rows: Vec<_> = txn.scan(t, ..).into_iter().flatten().collect();
                let _ = txn.insert(t, &[Value::U64(1000), Value::Text("new".into())]);
                let _ = txn.commit();
                drop(rows);
            }
            db.collect_garbage();
        }
    }
}

/// The region offset and checksum key of the first block `image`'s directory lists.
fn first_block(image: &[u8]) -> (usize, u64) {
    let superblock = layout::decode_superblock(&image[..512], image.len() as u64, "image")
        .expect("a formatted region");
    let g = superblock.geometry;
    let words: Vec<u64> = (0..g.frame_count)
        .map(|f| {
            let at = g.directory_word(f) as usize;
            u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
        })
        .collect();
    let block = layout::scan_directory(&words)
        .expect("a whole directory")
        .blocks[0];
    (
        g.frame_offset(block.first_frame) as usize,
        layout::block_key(block.first_frame, block.generation),
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Recovery's checks past the checksum, fuzzed: a record whose checksum is valid but
    /// whose fields are anything (any kind, table, transaction id, slot, sequence, a
    /// payload of random bytes or a well-formed row of other values) put first in a
    /// block opens or is refused with a typed error; it never panics.
    #[test]
    fn a_checksummed_record_of_any_content_opens_or_is_refused_without_a_panic(
        kind in 1u8..=5,
        flags in proptest::prelude::any::<u8>(),
        table in 0u16..3,
        txn_id in proptest::prop_oneof![
            proptest::strategy::Just(0u64),
            1u64..2_000,
            (1u64 << 62)..,
        ],
        slot in 0u16..3,
        sequence in proptest::prelude::any::<u16>(),
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
        row in proptest::option::of((proptest::prelude::any::<u64>(), "[a-z]{0,12}")),
    ) {
        use std::sync::OnceLock;
        static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
        let mut image = IMAGE.get_or_init(worked_region_image).clone();
        let (block_at, key) = first_block(&image);
        let kind = match kind {
            1 => RecordKind::Version,
            2 => RecordKind::Tombstone,
            3 => RecordKind::Relocated,
            4 => RecordKind::Commit,
            _ => RecordKind::Withdrawn,
        };
        let packed;
        let payload: Vec<u8> = match (kind, row) {
            (RecordKind::Commit, _) => bytes.iter().copied().chain([0; 8]).take(8).collect(),
            (RecordKind::Withdrawn, _) => {
                bytes.iter().copied().chain([0; 16]).take(16).collect()
            }
            (_, Some((id, name))) => {
                packed = crate::row::PackedRow::from_values(
                    &[Value::U64(id), Value::Text(name)],
                    crate::row::NonInline::Packed,
                );
                packed.packed().bytes().to_vec()
            }
            (_, None) => bytes,
        };
        let record = layout::Record { kind, flags, table, txn_id, slot, sequence, payload: &payload };
        let encoded = layout::encode_record(&record, key);
        let at = block_at + layout::METADATA_LINE_BYTES as usize;
        image[at..at + encoded.len()].copy_from_slice(&encoded);
        let device = SimulatedRegion::from_image(&image, 5);
        let options = simulated_options(&device, 6).garbage_collector(GarbageCollector::TbCollect);
        if let Ok(db) = Database::open(options) {
            if let Ok(t) = db.table("t") {
                let mut txn = db.begin(Isolation::Serializable);
                let rows: Vec<_> = txn.scan(t, ..).into_iter().flatten().collect();
                let _ = txn.insert(t, &[Value::U64(1000), Value::Text("new".into())]);
                let _ = txn.commit();
                drop(rows);
            }
            db.collect_garbage();
        }
    }
}

/// Found by the checksummed-record proptest: a whole `Withdrawn` record naming a frame
/// past the region's last went into the rebuilt commit spans, and the first collection
/// indexed the tile table with it (a panic). Recovery refuses it as corruption.
#[test]
fn regression_a_withdrawn_record_naming_a_frame_past_the_region_is_refused() {
    let mut image = worked_region_image();
    let (block_at, key) = first_block(&image);
    let past = layout::block_key(1 << 20, 0);
    let payload = layout::withdrawn_payload(past, 0);
    let record = layout::Record {
        kind: RecordKind::Withdrawn,
        flags: 0,
        table: 0,
        txn_id: 1,
        slot: 0,
        sequence: 0,
        payload: &payload,
    };
    let encoded = layout::encode_record(&record, key);
    let at = block_at + layout::METADATA_LINE_BYTES as usize;
    image[at..at + encoded.len()].copy_from_slice(&encoded);
    let device = SimulatedRegion::from_image(&image, 5);
    let options = simulated_options(&device, 6).garbage_collector(GarbageCollector::TbCollect);
    let opened = Database::open(options);
    assert!(
        matches!(&opened, Err(crate::Error::Corruption { reason, .. }) if reason.contains("withdrawn")),
        "{opened:?}"
    );
}

/// An insert that loses its key to a concurrent insert leaves its record unpublished
/// (`discard_unpublished`) and its transaction goes on, may get `DuplicateKey`, and
/// may commit. Recovery took the record, the highest id of its key, for the key's
/// newest version; a `Withdrawn` record now takes it back. (The engine's insert looks
/// the key up first, so only the race reaches this: driven here through the storage.)
#[test]
fn regression_an_insert_that_lost_its_key_is_no_version_after_recovery() {
    use crate::version::{NewRowContext, VersionStorage};
    let device = SimulatedRegion::new(4 << 20, 3);
    let options = simulated_options(&device, 8);
    let schema = Schema::new()
        .column("id", ColumnType::U64)
        .column("value", ColumnType::I64)
        .primary_key(&["id"]);
    {
        let store = super::TileBlockStorage::open_shared(&options).unwrap();
        let validated = schema.clone().validate("t").unwrap();
        super::TileBlockStorage::record_table(&store, 0, &validated).unwrap();
        insert_and_commit(&store, 5); // key 5, value 0, by transaction 5
        let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
        let context = NewRowContext {
            table: 0,
            txn_id: 9,
            indexed: false,
        };
        let (row, _) = super::TileBlockStorage::insert_row(
            &store,
            context,
            &[Value::U64(5), Value::I64(-1)],
            &owner,
            crate::row::NonInline::Packed,
        )
        .unwrap();
        super::TileBlockStorage::discard_unpublished(&row, &owner);
        owner.mark_committing();
        super::TileBlockStorage::commit_durably(&store, &owner, 9).unwrap();
        owner.mark_committed(9);
    }
    device.crash();
    let store = super::TileBlockStorage::open_shared(&options).unwrap();
    let recovered = super::TileBlockStorage::take_recovered(&store).expect("recovered");
    assert_eq!(recovered.rows.len(), 1);
    let (_, _, row) = &recovered.rows[0];
    let chain = row.read();
    assert_eq!(
        chain.store.record_txn_id(chain.head),
        5,
        "the withdrawn record of transaction 9 was taken for key 5's version"
    );
    assert_eq!(recovered.max_txn_id, 9);
}

fn blocks(store: &super::TileStore) -> usize {
    store
        .tiles
        .iter()
        .filter(|t| !t.load(std::sync::atomic::Ordering::Relaxed).is_null())
        .count()
}

/// Blocks of 4 slots: 6 transactions of one version and one commit record fill 3
/// blocks; the full ones are sealed in the directory, the last stays open; a commit
/// record's slot is obsolete from the start.
#[test]
fn blocks_fill_seal_and_count_commit_slots_obsolete() {
    let store = store_of(4);
    for id in 1..=6 {
        insert_and_commit(&store, id);
    }
    assert_eq!(blocks(&store), 3);
    let g = *store.space.geometry();
    let states: Vec<_> = (0..3)
        .map(|f| {
            layout::DirectoryEntry::decode(
                store
                    .region
                    .load_u64(g.directory_word(f), std::sync::atomic::Ordering::Acquire),
            )
            .unwrap()
            .state
        })
        .collect();
    use layout::FrameState::{Open, Sealed};
    assert_eq!(states, [Sealed, Sealed, Open]);
    for f in 0..3 {
        let tile = store.tile_at(f).unwrap();
        let used = tile.used.load(std::sync::atomic::Ordering::Relaxed);
        let obsolete = tile.obsolete.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            (used, obsolete),
            (4, 2),
            "block {f}: two versions, two commit records"
        );
    }
}

/// Threads that come and go hand their open block to the next one instead of leaving
/// near-empty blocks behind.
#[test]
fn threads_that_come_and_go_share_blocks() {
    let store = store_of(64);
    for id in 1..=20u64 {
        let store = std::sync::Arc::clone(&store);
        std::thread::spawn(move || insert_and_commit(&store, id))
            .join()
            .unwrap();
    }
    // 40 slots of 64: one block, whatever the number of threads.
    assert_eq!(blocks(&store), 1);
    assert_eq!(store.spare_blocks.lock().unwrap().len(), 1);
    // Two threads at once each need a block of their own.
    std::thread::scope(|scope| {
        for id in [100u64, 200] {
            let store = &store;
            scope.spawn(move || {
                for i in 0..10 {
                    insert_and_commit(store, id + i);
                }
            });
        }
    });
    assert!(blocks(&store) <= 2, "{} blocks", blocks(&store));
}

/// The rows of a test driven through the storage, by key (column 0, a `U64`), for a
/// collection's relocation.
struct RowsByKey(std::sync::Mutex<BTreeMap<u64, crate::sync::Arc<super::TileRow>>>);

impl crate::version::RowFinder<super::TileRow> for RowsByKey {
    fn arity(&self, table: u32) -> Option<usize> {
        (table == 0).then_some(2)
    }

    fn find(&self, _table: u32, values: &RowView<'_>) -> Option<crate::sync::Arc<super::TileRow>> {
        match values.get(0) {
            crate::row::ValueRef::U64(k) => self.0.lock().unwrap().get(&k).cloned(),
            _ => None,
        }
    }
}

/// Collects the block at `frame` (queued) on this thread, as `collect_garbage` would,
/// with no snapshot active.
fn collect_on_this_thread(
    store: &std::sync::Arc<super::TileStore>,
    frame: usize,
    rows: &RowsByKey,
) {
    let none = crate::version::ActiveSnapshots::new(u64::MAX, Vec::new());
    collect_queue_here(store, frame, rows, &none, true);
}

/// `collect_queue` of the queued block at `frame` on this thread against `active`.
fn collect_queue_here(
    store: &std::sync::Arc<super::TileStore>,
    frame: usize,
    rows: &RowsByKey,
    active: &crate::version::ActiveSnapshots,
    everything: bool,
) {
    let active = || active.clone();
    let context = crate::version::BlockGcContext {
        ended: None,
        everything,
        active: &active,
        threads: 2,
        rows,
    };
    store.with_appender(|appender| {
        let mine = std::sync::Arc::clone(&appender.gc);
        let mut gc = super::lock(&mine);
        store.collect_queue(appender, &mut gc, vec![frame], &context);
    });
}

/// A tb-collect store of two-slot blocks (a version and its commit record) over `device`,
/// and its one row (key 1) inserted by transaction 1 and updated by transactions 2 to
/// `updates + 1`, each committed: one version a block, the newest at the head.
fn one_row_updated(
    device: &SimulatedRegion,
    consolidation: crate::ChainConsolidation,
    updates: u64,
) -> (
    std::sync::Arc<super::TileStore>,
    crate::sync::Arc<super::TileRow>,
) {
    use crate::version::{NewRowContext, Snapshot, VersionStorage as _};
    use crate::version::{WriteIntent, WriteResult};
    type Storage = super::TileBlockStorage;
    let options = simulated_options(device, 2)
        .garbage_collector(GarbageCollector::TbCollect)
        .chain_consolidation(consolidation);
    let store = Storage::open_shared(&options).unwrap();
    let schema = Schema::new()
        .column("id", ColumnType::U64)
        .column("value", ColumnType::I64)
        .primary_key(&["id"]);
    Storage::record_table(&store, 0, &schema.validate("t").unwrap()).unwrap();
    let commit = |owner: &crate::sync::Arc<crate::txn::state::TxnShared>,
                  id: u64,
                  row: &crate::sync::Arc<super::TileRow>| {
        owner.mark_committing();
        Storage::commit_durably(&store, owner, id).unwrap();
        owner.mark_committed(id);
        Storage::stamp(row, owner, id);
    };
    let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
    let context = NewRowContext {
        table: 0,
        txn_id: 1,
        indexed: false,
    };
    let values = [Value::U64(1), Value::I64(0)];
    let (row, _) = Storage::insert_row(
        &store,
        context,
        &values,
        &owner,
        crate::row::NonInline::Packed,
    )
    .unwrap();
    commit(&owner, 1, &row);
    for id in 2..=updates + 1 {
        let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
        let snapshot = Snapshot {
            start_ts: id,
            owner: None,
            obsolete_below: 0,
        };
        let changes = [(1, Value::I64(id as i64 - 1))];
        let intent = WriteIntent::Update(crate::schema::ColumnMask::from_columns(&[1]), &changes);
        match Storage::write(
            &row,
            &snapshot,
            intent,
            &owner,
            crate::row::NonInline::Packed,
        ) {
            WriteResult::Installed { .. } => {}
            _ => panic!("the update of transaction {id} was not installed"),
        }
        commit(&owner, id, &row);
    }
    (store, row)
}

/// The frame of version `version` (0 the inserted one) of `one_row_updated`'s row, while
/// its whole chain is linked.
fn frame_of_version(row: &super::TileRow, version: u64) -> usize {
    use crate::version::linked::LinkedChain as _;
    let chain = row.read();
    let links: Vec<super::Link> = std::iter::once(chain.head)
        .chain(chain.behind(chain.head))
        .collect();
    links[links.len() - 1 - version as usize].frame()
}

/// Queues the sealed block at `frame` (a candidate already: its slots are obsolete) and
/// collects it on this thread against `active`.
fn collect_against(
    store: &std::sync::Arc<super::TileStore>,
    frame: usize,
    rows: &RowsByKey,
    active: &crate::version::ActiveSnapshots,
) {
    let tile = store.tile_at(frame).unwrap();
    let _ = tile.claim_for_a_queue();
    assert_eq!(
        tile.state.load(std::sync::atomic::Ordering::SeqCst),
        super::block_state::QUEUED
    );
    // Out of the store's list of new candidates (its writer put it there): this
    // collection's queue is the one queue that holds it.
    super::lock(&store.candidates).retain(|&queued| queued != frame);
    collect_queue_here(store, frame, rows, active, false);
}

/// TB-Collect keeps the tile of a block in case 2 (TB §4.4) whether or not a chain still
/// reaches it: the paper decides by the block's bounds against the epochs. TB-Collect-hash
/// indexed only blocks that chains reached, so it consolidated far less often than
/// TB-Collect kept tiles (the first `tb-fig11`: 0.4 blocks indexed a second against 6-9
/// tiles kept) and Fig. 11 did not compare the two on the same blocks. Here the list of
/// active snapshots the collection reads (a thread's list may be a millisecond old) still
/// holds a snapshot at 1 that has ended, and finalizing has cut the chain behind its head:
/// no chain reaches block B (version 1, written by 2, covered by 3), which is in case 2.
/// Both designs keep what they keep for it, and free it when the snapshot is gone.
#[test]
fn regression_the_hash_consolidation_indexes_every_block_whose_tile_tb_collect_keeps() {
    use crate::version::linked::LinkedChain as _;
    use crate::version::{ActiveSnapshots, ChainEdit as _};
    for consolidation in crate::ChainConsolidation::ALL {
        let device = SimulatedRegion::new(4 << 20, 5);
        let (store, row) = one_row_updated(&device, consolidation, 3);
        let b = frame_of_version(&row, 1);
        let cut = row.write().truncate(5);
        assert_eq!(cut.0, 3, "versions 0-2 cut behind the head");
        let tile = store.tile_at(b).unwrap();
        assert_eq!(
            tile.pinned.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "no chain reaches block B"
        );
        let rows = RowsByKey(std::sync::Mutex::new(BTreeMap::from([(
            1,
            crate::sync::Arc::clone(&row),
        )])));
        let stale = ActiveSnapshots::new(5, vec![1]);
        assert!(matches!(
            crate::gc::tb_collect::classify(2, 3, &stale),
            crate::gc::tb_collect::BlockCase::KeepTileFreeBlock { newest_long: 1 }
        ));
        collect_against(&store, b, &rows, &stale);
        let stats = store.stats().blocks;
        assert!(
            store.tile_at(b).is_none(),
            "{consolidation:?}: block B freed"
        );
        match consolidation {
            crate::ChainConsolidation::KeptTiles => {
                assert!(store.kept_tile_at(b).is_some(), "the tile is kept");
                assert_eq!(stats.blocks_freed_tile_kept, 1, "{stats:?}");
                assert_eq!(stats.version_indexes_built, 0, "{stats:?}");
            }
            crate::ChainConsolidation::HashIndex => {
                assert!(store.kept_tile_at(b).is_none(), "no tile kept");
                assert_eq!(stats.blocks_freed_tile_kept, 0, "{stats:?}");
                assert_eq!(stats.blocks_freed_indexed, 1, "{stats:?}");
                assert_eq!(stats.version_indexes, 1, "{stats:?}");
                assert_eq!(stats.version_index_entries, 1, "version 1: {stats:?}");
                assert_eq!(stats.index_links_switched, 0, "no chain to switch");
                assert_eq!(stats.consolidations_refused, 0, "{stats:?}");
            }
        }
        // The snapshot is gone: what was kept for it goes.
        let none = || ActiveSnapshots::new(u64::MAX, Vec::new());
        let context = crate::version::BlockGcContext {
            ended: None,
            everything: true,
            active: &none,
            threads: 2,
            rows: &rows,
        };
        store.collect_blocks(&context);
        let after = store.stats().blocks;
        assert!(store.kept_tile_at(b).is_none(), "{after:?}");
        assert_eq!(after.tiles_kept, 0, "{after:?}");
        assert_eq!(after.version_indexes, 0, "{after:?}");
        assert_eq!(after.version_index_bytes, 0, "{after:?}");
        assert_eq!(
            after.version_indexes_freed, after.version_indexes_built,
            "{after:?}"
        );
        // The row reads its newest value still.
        let chain = row.read();
        assert_eq!(chain.values_of(chain.head).get(1).to_value(), Value::I64(3));
    }
}

/// Found while fixing the same-collection case
/// (`tb_recovery.rs`, `regression_a_refused_insert_stays_withdrawn_when_a_crash_frees_only_some_blocks`):
/// two collections at once. Collection X takes block A (a refused insert's record) out of
/// the tile table; before X's `FREE` words are persisted, collection Y frees block B, which
/// holds the `Withdrawn` record naming it. Y read "A is gone" from the table and dropped
/// the `Withdrawn` record; a power loss in X's persist point keeping A (`FROZEN`) brought
/// the refused insert's record back as its key's version (its transaction's commit record
/// is in a third block, untouched). Y now counts A as in the region until X's words are
/// durable (`frees_not_durable`), and so does D23's bound, read by Y's relocation to decide
/// whether a buried row's tombstone may go (found by reading, the same window). Driven
/// through the storage, Y on a second thread inside X (a test hook), the power lost in X's
/// persist point, over seeds keeping A's word or not.
#[test]
fn regression_a_block_another_collection_frees_stays_in_the_region_until_its_free_is_durable() {
    use crate::version::{NewRowContext, VersionStorage as _};
    type Storage = super::TileBlockStorage;
    let mut frozen_after_crash = 0;
    for seed in 0..16 {
        let device = SimulatedRegion::new(4 << 20, seed);
        let options = simulated_options(&device, 4);
        let schema = Schema::new()
            .column("id", ColumnType::U64)
            .column("value", ColumnType::I64)
            .primary_key(&["id"]);
        let store = Storage::open_shared(&options).unwrap();
        Storage::record_table(&store, 0, &schema.clone().validate("t").unwrap()).unwrap();
        let rows = RowsByKey(std::sync::Mutex::new(BTreeMap::new()));
        let insert = |owner: &crate::sync::Arc<crate::txn::state::TxnShared>, id: u64, k: u64| {
            let context = NewRowContext {
                table: 0,
                txn_id: id,
                indexed: false,
            };
            let values = [Value::U64(k), Value::I64(id as i64)];
            let (row, _) = Storage::insert_row(
                &store,
                context,
                &values,
                owner,
                crate::row::NonInline::Packed,
            )
            .unwrap();
            row
        };
        let commit = |owner: &crate::sync::Arc<crate::txn::state::TxnShared>,
                      id: u64,
                      written: Vec<(u64, crate::sync::Arc<super::TileRow>)>| {
            owner.mark_committing();
            Storage::commit_durably(&store, owner, id).unwrap();
            owner.mark_committed(id);
            for (k, row) in written {
                Storage::stamp(&row, owner, id);
                rows.0.lock().unwrap().insert(k, row);
            }
        };
        // Block A: key 5 by transaction 5 and its commit record; transaction 9's insert
        // of key 7 and its refused insert of key 5. Block B: the `Withdrawn` record and
        // keys 8, 11, 12. Block C: transaction 9's commit record.
        let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
        let row = insert(&owner, 5, 5);
        commit(&owner, 5, vec![(5, row)]);
        let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
        let mut written = vec![(7, insert(&owner, 9, 7))];
        let refused = insert(&owner, 9, 5);
        Storage::discard_unpublished(&refused, &owner);
        for k in [8, 11, 12] {
            written.push((k, insert(&owner, 9, k)));
        }
        commit(&owner, 9, written);
        let used = |frame: usize| {
            store
                .tile_at(frame)
                .map(|t| t.used.load(std::sync::atomic::Ordering::Relaxed))
        };
        assert_eq!((used(0), used(1), used(2)), (Some(4), Some(4), Some(1)));
        for frame in [0, 1] {
            assert!(store.tile_at(frame).unwrap().claim_for_a_queue(), "sealed");
        }
        // Y, on another thread, once X took A out of the table; then the power goes in
        // X's persist point.
        let hook_store = std::sync::Arc::clone(&store);
        let hook_rows = RowsByKey(std::sync::Mutex::new(rows.0.lock().unwrap().clone()));
        let hook_device = device.clone();
        *super::lock(&store.before_free_is_durable) = Some(Box::new(move || {
            // D23's bound, which decides whether Y may drop a buried row's tombstone, still
            // counts A: its superseded records (key 5's and 7's originals, moved; the
            // refused insert's) may come back with it.
            assert_eq!(
                hook_store.oldest_superseded(),
                5,
                "block A, out of the table but not durably free, bounds D23"
            );
            std::thread::spawn(move || {
                collect_on_this_thread(&hook_store, 1, &hook_rows);
                assert!(hook_store.tile_at(1).is_none(), "Y freed block B");
            })
            .join()
            .unwrap();
            hook_device.crash_at_persist(1);
        }));
        collect_on_this_thread(&store, 0, &rows);
        assert!(
            super::lock(&store.before_free_is_durable).is_none(),
            "the hook ran"
        );
        drop(rows);
        drop(store);
        device.crash();
        let store = Storage::open_shared(&options).unwrap();
        frozen_after_crash += store.stats().recovery.map_or(0, |r| r.frozen_blocks);
        let recovered = Storage::take_recovered(&store).expect("recovered");
        let mut by_txn: Vec<u64> = recovered
            .rows
            .iter()
            .map(|(_, _, row)| {
                let chain = row.read();
                chain.store.record_txn_id(chain.head)
            })
            .collect();
        by_txn.sort_unstable();
        assert_eq!(
            by_txn,
            [5, 9, 9, 9, 9],
            "seed {seed}: key 5's version is transaction 5's, the refused insert stays withdrawn"
        );
    }
    assert!(
        frozen_after_crash > 0,
        "no power loss kept block A frozen: the case this test is for never happened"
    );
}

/// Found by review (TB-Collect-hash, `hash_index.rs`): an index's entries were copied from
/// the block's headers before any row latch was taken, and the chains were then walked
/// through the entries. Another thread may change those headers in between, under the
/// rows' latches: here a second collection, consolidating the block of the next older
/// version, switches the link in this block's header to its own index and frees its tile.
/// The first collection then followed its stale entry into the freed tile ("a link into a
/// freed tile"; a use-after-free had the tile's memory been reused in the window). Row 1:
/// v3 (block 3, the head) → v2 (block 2, Y's) → v1 (block 1, X's) → v0 (block 0); blocks
/// of two slots (a version and its commit record). Y, consolidating block 2, runs X on
/// another thread between its index's build and its switch (a test hook).
#[test]
fn regression_a_version_index_follows_the_blocks_headers_as_they_are_when_it_switches_a_chain() {
    use crate::version::linked::LinkedChain as _;
    let device = SimulatedRegion::new(4 << 20, 3);
    let (store, row) = one_row_updated(&device, crate::ChainConsolidation::HashIndex, 3);
    let frame_of = |version: u64| frame_of_version(&row, version);
    let (c, a) = (frame_of(2), frame_of(1));
    assert!(c != a && frame_of(0) != a, "one version a block");
    for frame in [a, c] {
        // Sealed, and a candidate already (both its slots obsolete): queued either way.
        let tile = store.tile_at(frame).unwrap();
        let _ = tile.claim_for_a_queue();
        assert_eq!(
            tile.state.load(std::sync::atomic::Ordering::SeqCst),
            super::block_state::QUEUED
        );
    }
    let rows = RowsByKey(std::sync::Mutex::new(BTreeMap::from([(
        1,
        crate::sync::Arc::clone(&row),
    )])));
    let hook_store = std::sync::Arc::clone(&store);
    let hook_rows = RowsByKey(std::sync::Mutex::new(rows.0.lock().unwrap().clone()));
    *super::lock(&store.after_index_built) = Some(Box::new(move || {
        // X, on another thread: block 1's index, the header of v2 (in block 2) switched
        // to it, block 1's tile freed.
        std::thread::spawn(move || {
            collect_on_this_thread(&hook_store, a, &hook_rows);
            assert!(hook_store.tile_at(a).is_none(), "X freed block 1's tile");
        })
        .join()
        .unwrap();
    }));
    collect_on_this_thread(&store, c, &rows);
    assert!(
        super::lock(&store.after_index_built).is_none(),
        "the hook ran"
    );
    let stats = store.stats().blocks;
    assert_eq!(stats.blocks_freed_indexed, 2, "{stats:?}");
    assert_eq!(stats.version_indexes, 2, "{stats:?}");
    assert_eq!(stats.index_entries_refreshed, 1, "v2's entry: {stats:?}");
    assert!(store.tile_at(c).is_none() && store.kept_tile_at(c).is_none());
    // The chain is whole: every version, its timestamp, and the oldest's values.
    let chain = row.read();
    let behind: Vec<super::Link> = chain.behind(chain.head).collect();
    let stamps: Vec<Option<u64>> = behind.iter().map(|&l| chain.commit_ts(l)).collect();
    assert_eq!(stamps, [Some(3), Some(2), Some(1)]);
    assert!(behind[0].indexed() && behind[1].indexed() && !behind[2].indexed());
    let oldest = chain.values_of(behind[2]);
    assert_eq!(oldest.get(1).to_value(), Value::I64(0));
}
