//! The per-window chain maxima and exact means the lab's time series are built from.

mod common;

use common::create_counter;
use verso::{Database, GarbageCollector, Isolation, Options, Value};

#[test]
fn sample_stats_starts_a_new_window_for_the_chain_maxima() {
    let db = Database::open(Options::default().garbage_collector(GarbageCollector::WatermarkOnly))
        .expect("open");
    let table = create_counter(&db, "counter");
    let key = [Value::U64(1)];

    let reader = db.begin(Isolation::Snapshot);
    for i in 1..=50 {
        let mut writer = db.begin(Isolation::Snapshot);
        writer
            .update(table, &key, &[(1, Value::I64(i))])
            .expect("update");
        writer.commit().expect("commit");
    }
    // The old snapshot walks past all 50 newer versions.
    assert_eq!(
        reader.get(table, &key).expect("get").expect("row")[1],
        Value::I64(0)
    );
    let first = db.sample_stats();
    assert!(first.read_chain_lengths.window_max >= 50, "{first:?}");
    assert!(first.read_chain_lengths.max >= 50);
    assert!(first.read_chain_lengths.mean() > 0.0);
    assert!(first.read_chain_lengths.total >= 50);

    // A fresh snapshot reads the newest version in place (looking at most at the newest
    // record's timestamp): the new window's maximum is at most 1, while the all-time
    // maximum stays.
    let fresh = db.begin(Isolation::Snapshot);
    assert_eq!(
        fresh.get(table, &key).expect("get").expect("row")[1],
        Value::I64(50)
    );
    let second = db.sample_stats();
    assert!(second.read_chain_lengths.window_max <= 1, "{second:?}");
    assert!(second.read_chain_lengths.max >= 50);
    // Nothing was read since: the next window is empty, and `stats` starts no window.
    assert_eq!(db.stats().read_chain_lengths.window_max, 0);
    assert_eq!(db.sample_stats().read_chain_lengths.window_max, 0);
    drop(reader);
}

/// Found by the lab: writers' chain lengths were recorded only where something was
/// pruned or finalized, so under watermark-only (which prunes nothing) a held snapshot's
/// long chains never showed. Every write records the chain it leaves.
#[test]
fn regression_writers_chain_lengths_are_recorded_under_every_collector() {
    for gc in GarbageCollector::ALL {
        let db = Database::open(common::options_for(gc)).expect("open");
        let table = create_counter(&db, "counter");
        let key = [Value::U64(1)];
        let held = db.begin(Isolation::Snapshot);
        for i in 1..=100 {
            let mut writer = db.begin(Isolation::Snapshot);
            writer
                .update(table, &key, &[(1, Value::I64(i))])
                .expect("update");
            writer.commit().expect("commit");
        }
        let writes = db.sample_stats().write_chain_lengths;
        assert_eq!(writes.count(), 100, "{gc:?}: one length per write");
        match gc {
            GarbageCollector::Steam => assert!(writes.window_max <= 3, "{gc:?}: {writes:?}"),
            // Its background thread prunes every millisecond: how long the chain grew
            // between two rounds depends on the timing.
            GarbageCollector::Hana => assert!(writes.window_max >= 2, "{gc:?}: {writes:?}"),
            _ => assert!(writes.window_max >= 100, "{gc:?}: {writes:?}"),
        }
        drop(held);
    }
}
