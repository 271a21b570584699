//! Idle threads must not hold garbage forever (Steam §4.2): when every thread stops after a
//! long reader ends, the background janitor finalizes what the writer's slot still holds.
//! Without the janitor (the control) the garbage stays until someone collects. The
//! background collectors ('Hana', 'Hekaton') do it in their own thread; 'none' never does.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use verso::{ColumnType, Database, GarbageCollector, Isolation, Options, Schema, Value};

/// Live versions while the reader holds them, and once `patience` has passed after it ended
/// (or as soon as none are left).
fn live_versions_after_writer_goes_idle(options: Options, patience: Duration) -> (u64, u64) {
    let db = Database::open(options).expect("open");
    let table = db
        .create_table(
            "t",
            Schema::new()
                .column("id", ColumnType::U64)
                .column("v", ColumnType::I64)
                .primary_key(&["id"]),
        )
        .expect("create");
    let mut load = db.begin(Isolation::Snapshot);
    for id in 0..100 {
        load.insert(table, &[Value::U64(id), Value::I64(0)])
            .expect("insert");
    }
    load.commit().expect("commit");

    let reader = db.begin(Isolation::Snapshot);
    let wrote = Barrier::new(2);
    let finished = Barrier::new(2);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 1..=20 {
                for id in 0..100 {
                    let mut txn = db.begin(Isolation::Snapshot);
                    txn.update(table, &[Value::U64(id)], &[(1, Value::I64(round))])
                        .expect("update");
                    txn.commit().expect("commit");
                }
            }
            wrote.wait();
            // Stay alive and idle: this thread's slot still holds its committed
            // transactions, which the reader kept from being finalized.
            finished.wait();
        });
        wrote.wait();
        let held = db.stats().live_versions();
        drop(reader);
        // Nobody commits any more. Give the janitor time to notice.
        let deadline = Instant::now() + patience;
        let mut live = db.stats().live_versions();
        while live > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            live = db.stats().live_versions();
        }
        finished.wait();
        (held, live)
    })
}

#[test]
fn janitor_collects_what_idle_threads_hold() {
    for gc in GarbageCollector::ALL {
        let (held, after) =
            // Returns as soon as nothing is left: the patience only covers a loaded machine
            // ('none' never gets there; two seconds show that it collected nothing).
            live_versions_after_writer_goes_idle(
                Options::default()
                    .garbage_collector(gc)
                    .version_storage(gc.required_storage().unwrap_or_default()),
                if gc == GarbageCollector::NoCollection {
                    Duration::from_secs(2)
                } else {
                    Duration::from_secs(30)
                },
            );
        assert!(
            held > 0,
            "{gc:?}: the long reader should have held versions"
        );
        if gc == GarbageCollector::NoCollection {
            assert_eq!(after, held, "{gc:?}: collects nothing");
        } else {
            assert_eq!(after, 0, "{gc:?}: idle garbage was not collected");
        }
    }
}

#[test]
fn without_the_janitor_idle_garbage_stays_until_collected() {
    let options = Options::default()
        .garbage_collector(GarbageCollector::WatermarkOnly)
        .idle_collection_interval(None);
    // Two seconds: two hundred of the janitor's rounds, had it been running.
    let (held, after) = live_versions_after_writer_goes_idle(options, Duration::from_secs(2));
    assert!(held > 0);
    assert_eq!(
        after, held,
        "nothing should have collected without the janitor"
    );
}
