//! What a long snapshot costs the committers behind it: the work of keeping their queue of
//! committed transactions short must grow with the commits, not with their square.

use verso::{ColumnType, Database, GarbageCollector, Isolation, Options, Schema, Value};

/// Found by the lab (`verso tpcb --hold-snapshot`: throughput fell to 12%): every 1,024
/// commits the queue was folded from scratch, re-hashing every row pinned so far, so
/// inserts behind a held snapshot cost quadratic work.
#[test]
fn regression_queue_folding_behind_a_held_snapshot_is_not_quadratic() {
    const COMMITS: u64 = 20_000;
    for gc in GarbageCollector::ALL {
        let db = Database::open(Options::default().garbage_collector(gc)).expect("open");
        let table = db
            .create_table(
                "history",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("delta", ColumnType::I64)
                    .primary_key(&["id"]),
            )
            .expect("create");
        let held = db.begin(Isolation::Snapshot);
        for id in 0..COMMITS {
            let mut txn = db.begin(Isolation::Snapshot);
            txn.insert(table, &[Value::U64(id), Value::I64(1)])
                .expect("insert");
            txn.commit().expect("commit");
        }
        let folded = db.stats().rows_folded;
        assert!(
            folded <= 2 * COMMITS,
            "{gc:?}: {folded} row references moved to fold {COMMITS} commits"
        );
        assert!(
            folded >= COMMITS / 2,
            "{gc:?}: the queue was folded ({folded})"
        );
        assert_eq!(held.scan(table, ..).expect("scan").len(), 0);
    }
}
