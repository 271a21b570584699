//! Wu et al. §4.4's separate memory spaces, with `verso::research::MemorySpaces` as this
//! binary's global allocator: each writer thread's versions come from its own space, any
//! thread's frees go back to the space a block came from, and the data read back is intact.
//!
//! The spaces are process-wide, so everything runs in one test, one step after the other:
//! counts of blocks in use are exact only with no other test allocating beside it.

use std::alloc::System;

use verso::research::memory_space_usage;
use verso::{
    ColumnType, Database, Error, GarbageCollector, Isolation, Options, Schema, TableId, Value,
    VersionStorageKind,
};

#[global_allocator]
static GLOBAL: verso::research::MemorySpaces<System> = verso::research::MemorySpaces::new(System);

const ROWS: u64 = 200;
const UPDATES: u64 = 5;

fn blocks_in_use(space: usize) -> i64 {
    memory_space_usage()[space].blocks_in_use as i64
}

fn create(db: &Database) -> TableId {
    db.create_table(
        "t",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("n", ColumnType::I64)
            .column("payload", ColumnType::Bytes)
            .primary_key(&["id"]),
    )
    .unwrap()
}

fn payload(id: u64, n: u64) -> Value {
    Value::Bytes(vec![(id + n) as u8; 100])
}

/// On a thread of its own: inserts `ROWS` rows from `first` on, then updates each
/// `UPDATES` times, one transaction per write.
fn write_rows(db: &Database, table: TableId, first: u64) {
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for id in first..first + ROWS {
                let mut txn = db.begin(Isolation::Snapshot);
                txn.insert(table, &[Value::U64(id), Value::I64(0), payload(id, 0)])
                    .unwrap();
                txn.commit().unwrap();
            }
            for n in 1..=UPDATES {
                for id in first..first + ROWS {
                    let mut txn = db.begin(Isolation::Snapshot);
                    let changes = [(1, Value::I64(n as i64)), (2, payload(id, n))];
                    assert!(txn.update(table, &[Value::U64(id)], &changes).unwrap());
                    txn.commit().unwrap();
                }
            }
        });
    });
}

#[test]
fn memory_spaces_serve_the_version_storage_of_each_writer_thread() {
    for bad in [0, verso::research::MAX_MEMORY_SPACES + 1] {
        match Database::open(Options::default().memory_spaces(bad)) {
            Err(Error::UnsupportedConfiguration { reason }) => {
                assert!(reason.contains("must number 1 to"), "{reason}")
            }
            other => panic!("{bad} spaces: {:?}", other.map(|db| db.design())),
        }
    }
    assert!(verso::research::memory_spaces_installed());
    for storage in VersionStorageKind::ALL {
        for spaces in [1, 2] {
            let db = Database::open(
                Options::default()
                    .version_storage(storage)
                    .memory_spaces(spaces)
                    // No eager pruning: every version waits for the collection below.
                    .garbage_collector(GarbageCollector::WatermarkOnly)
                    .idle_collection_interval(None),
            )
            .unwrap();
            let d = db.design();
            assert!(d.ends_with(&format!("/spaces-{spaces}")), "{d}");
            let table = create(&db);
            let held = db.begin(Isolation::Snapshot); // keeps every version
            let before = [blocks_in_use(0), blocks_in_use(1)];
            // Two writer threads, one after the other: consecutive thread numbers, so
            // under two spaces one writes into each.
            write_rows(&db, table, 0);
            write_rows(&db, table, ROWS);
            let grown = [blocks_in_use(0) - before[0], blocks_in_use(1) - before[1]];
            // Each writer made a row and UPDATES versions per row, each at least a block.
            // (The index may free an earlier database's rows meanwhile, by epochs: the
            // bounds leave room for that.)
            let per_writer = (ROWS * (1 + UPDATES)) as i64;
            if spaces == 1 {
                assert!(grown[0] >= per_writer, "{d}: {grown:?}");
                assert!(grown[1] <= 0, "{d}: one space only: {grown:?}");
            } else {
                assert!(
                    grown[0] >= per_writer / 2 && grown[1] >= per_writer / 2,
                    "{d}: {grown:?}"
                );
            }
            // What was written reads back, at the held snapshot and now.
            let now = db.begin(Isolation::Snapshot);
            for id in 0..2 * ROWS {
                let row = now.get(table, &[Value::U64(id)]).unwrap().expect("row");
                assert_eq!(row[1], Value::I64(UPDATES as i64), "{d}");
                assert_eq!(row[2], payload(id, UPDATES), "{d}");
                assert_eq!(held.get(table, &[Value::U64(id)]).unwrap(), None, "{d}");
            }
            drop((now, held));
            // The collector (this thread) frees the versions back to the spaces they
            // came from.
            let in_use = blocks_in_use(0) + blocks_in_use(1);
            db.collect_garbage();
            assert_eq!(db.stats().live_versions(), 0, "{d}");
            let freed = in_use - (blocks_in_use(0) + blocks_in_use(1));
            assert!(
                freed >= 2 * (ROWS * UPDATES) as i64,
                "{d}: freed {freed} blocks"
            );
        }
    }
}
