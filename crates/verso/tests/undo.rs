//! InnoDB's design on the disk engine (`Options::disk_storage(DiskStorage::Undo)`,
//! `verso::disk::clustered`, `verso::disk::undo`): rows updated in place with undo records
//! chained newest to oldest, readers applying undo backwards, purge freeing the undo of
//! transactions every snapshot has passed (and delete-marked rows and entries), purge's
//! delay, rollback at an abort and in recovery after a crash. Every shared suite runs this
//! design too (`common::disk_configurations`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use verso::disk::DiskStorage;
use verso::fs::SimulatedFileSystem;
use verso::{
    ColumnType, Database, Durability, Error, GarbageCollector, Isolation, KeyRange, Options,
    Schema, TableId, Value,
};

const DIR: &str = "/undo-db";

fn options(fs: &Arc<SimulatedFileSystem>) -> Options {
    Options::default()
        .disk(DIR)
        .disk_storage(DiskStorage::Undo)
        .garbage_collector(GarbageCollector::Vacuum)
        .file_system(fs.clone())
        .buffer_pool(64 * verso::disk::PAGE_SIZE)
        .durability(Durability::Sync)
        .log_segment_bytes(1 << 20)
        .autovacuum_naptime(None)
}

fn accounts(db: &Database, rows: i64) -> TableId {
    let schema = Schema::new()
        .column("id", ColumnType::I64)
        .column("balance", ColumnType::I64)
        .column("branch", ColumnType::I64)
        .primary_key(&["id"])
        .index("by_branch", &["branch"]);
    let table = db.create_table("accounts", schema).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..rows {
        txn.insert(
            table,
            &[Value::I64(id), Value::I64(100), Value::I64(id % 4)],
        )
        .unwrap();
    }
    txn.commit().unwrap();
    table
}

fn balance(txn: &verso::Transaction<'_>, table: TableId, id: i64) -> Option<i64> {
    txn.get(table, &[Value::I64(id)])
        .unwrap()
        .map(|row| row[1].as_i64().unwrap())
}

fn set_balance(db: &Database, table: TableId, id: i64, value: i64) {
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(table, &[Value::I64(id)], &[(1, Value::I64(value))])
        .unwrap());
    txn.commit().unwrap();
}

/// The ids of the rows `txn` finds through `by_branch` under `branch`.
fn ids_in_branch(txn: &verso::Transaction<'_>, table: TableId, branch: i64) -> Vec<i64> {
    txn.scan_index(
        table,
        "by_branch",
        KeyRange::prefix(vec![Value::I64(branch)]),
    )
    .unwrap()
    .map(|row| row.unwrap().into_values()[0].as_i64().unwrap())
    .collect()
}

fn stats(db: &Database) -> verso::disk::UndoStats {
    db.stats().disk.expect("a disk database").undo
}

/// A reader whose snapshot predates many in-place updates reaches its version by applying
/// undo records backwards (one hop per newer version), while a new reader reads the row in
/// place; the history list holds every committed update while the old snapshot lives, and
/// purge empties it and frees the undo pages once it ends.
#[test]
fn an_old_snapshot_reads_through_undo_and_purge_waits_for_it() {
    let fs = Arc::new(SimulatedFileSystem::new(1));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, 10);
    let old = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(balance(&old, table, 3), Some(100));
    for value in 1..=30 {
        set_balance(&db, table, 3, value);
    }
    db.collect_garbage();
    let held = stats(&db);
    assert_eq!(held.history_list_length, 30, "{held:?}");
    assert_eq!(
        db.version_chain_length(table, &[Value::I64(3)]).unwrap(),
        Some(30)
    );
    let hops = db.stats().disk.unwrap().clustered.undo_hops;
    assert_eq!(balance(&old, table, 3), Some(100));
    assert_eq!(db.stats().disk.unwrap().clustered.undo_hops - hops, 30);
    let new = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(balance(&new, table, 3), Some(30));
    drop(new);
    drop(old);
    db.collect_garbage();
    let purged = stats(&db);
    assert_eq!(purged.history_list_length, 0, "{purged:?}");
    assert_eq!(purged.free_pages, purged.pages, "{purged:?}");
    assert_eq!(
        db.version_chain_length(table, &[Value::I64(3)]).unwrap(),
        Some(0)
    );
    let live = db.stats();
    assert_eq!(live.live_versions(), 0, "{live:?}");
}

/// Undo pages are shared, as InnoDB reuses a committed log's page for the next logs: a
/// transaction that writes one small record takes a frame on the open page, not a page of
/// its own. Behind a held snapshot (purge alone, which the snapshot holds back), 400
/// one-row transactions take a handful of pages (one page each before pages were
/// shared); the held reader still reads every row's old version, and a crash in the
/// middle of shared pages recovers each owner's records from its frames.
#[test]
fn small_transactions_share_undo_pages() {
    const COMMITS: i64 = 400;
    let fs = Arc::new(SimulatedFileSystem::new(11));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, COMMITS);
    let held = db.begin_read_only(Isolation::Snapshot);
    for id in 0..COMMITS {
        set_balance(&db, table, id, 1_000 + id);
    }
    // One transaction left running over the shared pages when the power goes.
    let mut running = db.begin(Isolation::Snapshot);
    for id in 0..10 {
        assert!(running
            .update(table, &[Value::I64(id)], &[(1, Value::I64(-1))])
            .unwrap());
    }
    let undo = stats(&db);
    let in_use = undo.pages - undo.free_pages;
    assert_eq!(undo.history_list_length, COMMITS as u64, "{undo:?}");
    assert!(
        in_use * (verso::disk::PAGE_SIZE as u64) < COMMITS as u64 * 200,
        "{in_use} undo pages in use for {COMMITS} one-row commits: {undo:?}"
    );
    for id in (0..COMMITS).step_by(37) {
        assert_eq!(balance(&held, table, id), Some(100));
    }
    fs.crash();
    drop(running);
    drop(held);
    drop(db);
    fs.restart();
    let db = Database::open(options(&fs)).unwrap();
    let table = db.table("accounts").unwrap();
    let check = db.begin_read_only(Isolation::Snapshot);
    for id in 0..COMMITS {
        assert_eq!(balance(&check, table, id), Some(1_000 + id), "row {id}");
    }
    drop(check);
    db.collect_garbage();
    let undo = stats(&db);
    assert_eq!(undo.history_list_length, 0, "{undo:?}");
    assert_eq!(undo.free_pages, undo.pages, "{undo:?}");
}

/// An insert's undo record serves only a rollback (InnoDB keeps insert undo apart and
/// frees it at commit): at commit it is done, so a transaction that inserts many rows and
/// updates one keeps, behind a held snapshot, the pages of its update's record only.
#[test]
fn an_insert_s_undo_is_done_at_commit_even_beside_an_update() {
    let fs = Arc::new(SimulatedFileSystem::new(12));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, 1);
    let held = db.begin_read_only(Isolation::Snapshot);
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 1..=600 {
        txn.insert(
            table,
            &[Value::I64(id), Value::I64(100), Value::I64(id % 4)],
        )
        .unwrap();
    }
    assert!(txn
        .update(table, &[Value::I64(0)], &[(1, Value::I64(7))])
        .unwrap());
    let before = stats(&db);
    assert!(
        before.pages - before.free_pages >= 4,
        "600 insert records take pages: {before:?}"
    );
    txn.commit().unwrap();
    db.collect_garbage();
    let after = stats(&db);
    assert_eq!(
        after.history_list_length, 1,
        "the update waits for purge: {after:?}"
    );
    assert!(
        after.pages - after.free_pages <= 2,
        "the update's record's page (and the open one) only: {after:?}"
    );
    assert_eq!(balance(&held, table, 0), Some(100));
    assert_eq!(balance(&held, table, 600), None);
    drop(held);
    db.collect_garbage();
    let purged = stats(&db);
    assert_eq!(purged.free_pages, purged.pages, "{purged:?}");
}

/// Undo pages are reused once purged: a long run of updates with purge in between keeps
/// the undo file at a few pages.
#[test]
fn purge_reuses_undo_pages_once_no_snapshot_needs_them() {
    let fs = Arc::new(SimulatedFileSystem::new(2));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, 10);
    for round in 0..400 {
        set_balance(&db, table, round % 10, round);
        if round % 20 == 19 {
            db.collect_garbage();
        }
    }
    db.collect_garbage();
    let undo = stats(&db);
    assert_eq!(undo.history_list_length, 0);
    assert!(undo.pages <= 25, "{undo:?}");
    assert_eq!(undo.logs_purged, 400, "{undo:?}");
}

/// The purge delay keeps committed undo in the history list for that long (DIVA's
/// delayed purge); without it the background worker purges within a few ticks.
#[test]
fn the_background_purge_honours_the_purge_delay() {
    for (delay, kept) in [(Duration::ZERO, false), (Duration::from_secs(3600), true)] {
        let fs = Arc::new(SimulatedFileSystem::new(3));
        let db = Database::open(
            options(&fs)
                .autovacuum_naptime(Some(Duration::from_millis(10)))
                .purge_delay(delay),
        )
        .unwrap();
        let table = accounts(&db, 10);
        for round in 0..50 {
            set_balance(&db, table, round % 10, round);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !kept && stats(&db).history_list_length > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if kept {
            std::thread::sleep(Duration::from_millis(200));
        }
        let undo = stats(&db);
        assert_eq!(
            undo.history_list_length > 0,
            kept,
            "delay {delay:?}: {undo:?}"
        );
        if kept {
            assert_eq!(undo.history_list_length, 50, "{undo:?}");
            // `collect_garbage` purges without the delay.
            db.collect_garbage();
            assert_eq!(stats(&db).history_list_length, 0);
        }
    }
}

/// A change of an indexed column delete-marks the old entry and adds the new one: an old
/// snapshot finds the row under its old key, a new one under the new key, neither under
/// the other; purge removes the marked entry once no snapshot can need it; a delete marks
/// every entry and purge removes the row and its entries.
#[test]
fn secondary_entries_are_delete_marked_and_purged() {
    let fs = Arc::new(SimulatedFileSystem::new(4));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, 8);
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 8);
    let old = db.begin_read_only(Isolation::Snapshot);
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(table, &[Value::I64(1)], &[(2, Value::I64(3))])
        .unwrap());
    txn.commit().unwrap();
    let new = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(ids_in_branch(&old, table, 1), vec![1, 5]);
    assert_eq!(ids_in_branch(&old, table, 3), vec![3, 7]);
    assert_eq!(ids_in_branch(&new, table, 1), vec![5]);
    assert_eq!(ids_in_branch(&new, table, 3), vec![1, 3, 7]);
    drop(new);
    db.collect_garbage();
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 9);
    drop(old);
    db.collect_garbage();
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 8);

    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn.delete(table, &[Value::I64(5)]).unwrap());
    txn.commit().unwrap();
    let now = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(ids_in_branch(&now, table, 1), Vec::<i64>::new());
    assert_eq!(balance(&now, table, 5), None);
    drop(now);
    assert_eq!(db.primary_index_entries(table).unwrap(), 8);
    db.collect_garbage();
    assert_eq!(db.primary_index_entries(table).unwrap(), 7);
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 7);
    let clustered = db.stats().disk.unwrap().clustered;
    assert_eq!(
        (clustered.rows_purged, clustered.entries_purged),
        (1, 2),
        "{clustered:?}"
    );
}

/// An abort puts back every row it changed in place, with its index entries: an update
/// that moved a row to another key, a delete, an insert, and an insert over a deleted row.
#[test]
fn an_abort_rolls_back_in_place_changes_and_their_entries() {
    let fs = Arc::new(SimulatedFileSystem::new(5));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, 8);
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn.delete(table, &[Value::I64(6)]).unwrap());
    txn.commit().unwrap();
    let before = common::all_rows(&db, table);
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(
            table,
            &[Value::I64(1)],
            &[(2, Value::I64(3)), (1, Value::I64(7))]
        )
        .unwrap());
    assert!(txn
        .update(table, &[Value::I64(1)], &[(2, Value::I64(2))])
        .unwrap());
    assert!(txn.delete(table, &[Value::I64(2)]).unwrap());
    txn.insert(table, &[Value::I64(50), Value::I64(1), Value::I64(1)])
        .unwrap();
    txn.insert(table, &[Value::I64(6), Value::I64(9), Value::I64(0)])
        .unwrap();
    assert_eq!(ids_in_branch(&txn, table, 1), vec![5, 50]);
    txn.abort();
    assert_eq!(common::all_rows(&db, table), before);
    let check = db.begin_read_only(Isolation::Snapshot);
    for branch in 0..4 {
        let expected: Vec<i64> = before
            .iter()
            .filter(|row| row[2].as_i64() == Some(branch))
            .map(|row| row[0].as_i64().unwrap())
            .collect();
        assert_eq!(
            ids_in_branch(&check, table, branch),
            expected,
            "branch {branch}"
        );
    }
    drop(check);
    db.collect_garbage();
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 7);
    assert_eq!(db.primary_index_entries(table).unwrap(), 7);
    let undo = stats(&db);
    assert_eq!(undo.logs_rolled_back, 1, "{undo:?}");
    assert_eq!(undo.free_pages, undo.pages, "{undo:?}");
}

/// First-updater-wins over rows changed in place: a row another running transaction
/// changed, or one changed by a transaction that committed after this one began, is a
/// write conflict; the loser's own in-place changes are rolled back.
#[test]
fn a_second_updater_conflicts_and_its_changes_roll_back() {
    let fs = Arc::new(SimulatedFileSystem::new(6));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, 4);
    let mut first = db.begin(Isolation::Snapshot);
    let mut second = db.begin(Isolation::Snapshot);
    assert!(second
        .update(table, &[Value::I64(2)], &[(1, Value::I64(-2))])
        .unwrap());
    assert!(first
        .update(table, &[Value::I64(1)], &[(1, Value::I64(1))])
        .unwrap());
    assert!(matches!(
        second.update(table, &[Value::I64(1)], &[(1, Value::I64(2))]),
        Err(Error::WriteConflict { .. })
    ));
    first.commit().unwrap();
    let check = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(balance(&check, table, 1), Some(1));
    assert_eq!(
        balance(&check, table, 2),
        Some(100),
        "the loser's update is rolled back"
    );
    drop(check);
    let mut late = db.begin(Isolation::Snapshot);
    set_balance(&db, table, 3, 33);
    assert!(matches!(
        late.update(table, &[Value::I64(3)], &[(1, Value::I64(0))]),
        Err(Error::WriteConflict { .. })
    ));
}

/// A database keeps the storage it was created with: opened with the other, it is refused
/// with a typed error, and opens again with its own.
#[test]
fn a_database_opened_with_the_other_storage_is_refused() {
    let fs = Arc::new(SimulatedFileSystem::new(7));
    let db = Database::open(options(&fs)).unwrap();
    accounts(&db, 2);
    db.close().unwrap();
    let heap = options(&fs).disk_storage(DiskStorage::Heap);
    match Database::open(heap) {
        Err(Error::UnsupportedConfiguration { reason }) => {
            assert!(reason.contains("undo"), "{reason}")
        }
        other => panic!("{:?}", other.map(|db| db.design())),
    }
    let db = Database::open(options(&fs)).unwrap();
    assert_eq!(db.design(), "disk-undo/purge/si-first-updater-wins");
    assert_eq!(
        common::all_rows(&db, db.table("accounts").unwrap()).len(),
        2
    );
    // The undo design's own refusals.
    for refused in [
        options(&fs).version_placement(verso::disk::VersionPlacement::CoLocated),
        Options::default().purge_delay(Duration::from_secs(1)),
        Options::default().disk_storage(DiskStorage::Undo),
    ] {
        assert!(matches!(
            Database::open(refused),
            Err(Error::UnsupportedConfiguration { .. })
        ));
    }
}

/// Power cuts at random moments of a run of inserts, updates that move rows between
/// index keys, deletes, aborts, checkpoints and background purge, on a simulated disk
/// that loses, tears and reorders what was not synced: after recovery (redo, then the
/// rollback of every transaction the cut left uncommitted, whose in-place changes may
/// have reached the disk) the rows are those of a prefix of the commits that holds every
/// acknowledged one, the secondary index agrees with them, and purge then empties the
/// history list and frees every undo page.
#[test]
fn power_cuts_roll_back_what_never_committed_and_lose_nothing_acknowledged() {
    let seeds: u64 = std::env::var("UNDO_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let mut cut_mid_work = 0;
    for seed in 0..seeds {
        let fs = Arc::new(SimulatedFileSystem::new(9100 + seed));
        // Even seeds prune undo chains eagerly, odd ones leave them to purge.
        let gc = if seed % 2 == 0 {
            GarbageCollector::Steam
        } else {
            GarbageCollector::Vacuum
        };
        let options = || {
            options(&fs)
                .garbage_collector(gc)
                .buffer_pool(24 * verso::disk::PAGE_SIZE)
                .log_segment_bytes(64 << 10)
                .autovacuum_naptime(Some(Duration::from_millis(5)))
        };
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        type State = std::collections::BTreeMap<i64, (i64, i64)>;
        let mut state: State = (0..30).map(|id| (id, (100, id % 4))).collect();
        // The state after each commit, and whether the commit was acknowledged.
        let mut after: Vec<(State, bool)> = Vec::new();
        let initial = state.clone();
        {
            let db = Database::open(options()).unwrap();
            let table = accounts(&db, 30);
            let mut running = None;
            fs.crash_after(50 + next() % 2500);
            'run: for n in 0..3000i64 {
                // A rollback the cut failed stops the database.
                let Ok(mut txn) = db.try_begin(Isolation::Snapshot) else {
                    break;
                };
                let mut draft = state.clone();
                for _ in 0..1 + next() % 4 {
                    let id = (next() % 40) as i64;
                    let result = match (next() % 4, draft.contains_key(&id)) {
                        (0, true) => txn.delete(table, &[Value::I64(id)]).map(|deleted| {
                            assert!(deleted);
                            draft.remove(&id);
                        }),
                        (_, false) => txn
                            .insert(table, &[Value::I64(id), Value::I64(n), Value::I64(n % 4)])
                            .map(|()| {
                                draft.insert(id, (n, n % 4));
                            }),
                        (moved, true) => {
                            let branch = if moved == 1 {
                                (n + id) % 4
                            } else {
                                draft[&id].1
                            };
                            txn.update(
                                table,
                                &[Value::I64(id)],
                                &[(1, Value::I64(n)), (2, Value::I64(branch))],
                            )
                            .map(|updated| {
                                assert!(updated);
                                draft.insert(id, (n, branch));
                            })
                        }
                    };
                    match result {
                        Ok(()) => {}
                        // The running transaction below holds the row: rolled back.
                        Err(Error::WriteConflict { .. }) => continue 'run,
                        Err(_) => break 'run,
                    }
                }
                if next() % 6 == 0 {
                    txn.abort();
                    continue;
                }
                match txn.commit() {
                    Ok(()) => {
                        state = draft;
                        after.push((state.clone(), true));
                    }
                    Err(_) => {
                        after.push((draft, false));
                        break;
                    }
                }
                if n % 40 == 0 && db.checkpoint().is_err() {
                    break;
                }
                if n % 7 == 0 {
                    // A transaction left running (maybe at the cut), its change in place;
                    // the one before it aborts now.
                    let Ok(mut open) = db.try_begin(Isolation::Snapshot) else {
                        break;
                    };
                    let id = (next() % 30) as i64;
                    let _ = open.update(table, &[Value::I64(id)], &[(2, Value::I64(9))]);
                    running = Some(open);
                }
            }
            cut_mid_work += usize::from(fs.is_crashed());
            fs.crash();
            fs.clear_faults();
            // Its rollback after the cut fails: recovery rolls it back.
            drop(running);
        }
        fs.restart();
        let db = Database::open(options()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let table = db.table("accounts").unwrap();
        let rows: State = common::all_rows(&db, table)
            .iter()
            .map(|row| {
                let v = |i: usize| row[i].as_i64().unwrap();
                (v(0), (v(1), v(2)))
            })
            .collect();
        let acknowledged = after
            .iter()
            .rposition(|(_, acked)| *acked)
            .map_or(0, |at| at + 1);
        let mut candidates = vec![if acknowledged == 0 {
            initial.clone()
        } else {
            after[acknowledged - 1].0.clone()
        }];
        candidates.extend(after[acknowledged..].iter().map(|(s, _)| s.clone()));
        assert!(
            candidates.contains(&rows),
            "seed {seed}: the rows are no prefix of the commits holding the {acknowledged} \
             acknowledged ones"
        );
        let txn = db.begin_read_only(Isolation::Snapshot);
        for branch in 0..10 {
            let expected: Vec<i64> = rows
                .iter()
                .filter(|(_, (_, b))| *b == branch)
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(ids_in_branch(&txn, table, branch), expected, "seed {seed}");
        }
        drop(txn);
        db.collect_garbage();
        let undo = stats(&db);
        assert_eq!(undo.history_list_length, 0, "seed {seed}: {undo:?}");
        assert_eq!(undo.free_pages, undo.pages, "seed {seed}: {undo:?}");
        assert_eq!(
            db.secondary_index_entries(table, "by_branch").unwrap(),
            rows.len(),
            "seed {seed}: purge left marked entries"
        );
        db.close().unwrap();
    }
    assert!(
        cut_mid_work as u64 >= seeds / 2,
        "cut mid-work {cut_mid_work} times"
    );
}

/// Found by the power cuts (seed 9): a change that moved a row back to a key an earlier
/// change had delete-marked unmarked that entry; purge of the earlier change then found it
/// unmarked and left it; the rollback of the later change marked it again, and no purge
/// was left to remove it. Rollback now removes an entry it would mark again when no
/// version a snapshot may need has its key.
#[test]
fn regression_a_rolled_back_update_leaves_no_marked_entry_behind() {
    let fs = Arc::new(SimulatedFileSystem::new(8));
    let db = Database::open(options(&fs)).unwrap();
    let table = accounts(&db, 4);
    let mut mover = db.begin(Isolation::Snapshot);
    assert!(mover
        .update(table, &[Value::I64(1)], &[(2, Value::I64(2))])
        .unwrap());
    mover.commit().unwrap();
    let mut back = db.begin(Isolation::Snapshot);
    assert!(back
        .update(table, &[Value::I64(1)], &[(2, Value::I64(1))])
        .unwrap());
    db.collect_garbage();
    back.abort();
    db.collect_garbage();
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 4);
    let check = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(ids_in_branch(&check, table, 1), Vec::<i64>::new());
    assert_eq!(ids_in_branch(&check, table, 2), vec![1, 2]);
}

/// Steam's rule on undo chains behind a held snapshot: every row's chain keeps the version
/// the snapshot sees and the newest, whatever the number of updates since, and the undo
/// pages whose records were all unlinked are freed before purge (which the snapshot holds
/// back) could reach them; purge alone keeps every version. The held reader reads its
/// versions all along, under both.
#[test]
fn eager_pruning_keeps_undo_chains_short_behind_a_held_snapshot() {
    // Eager pruning keeps a few pages whatever the number of rounds (the held versions,
    // merged once, on the long lane; each lane's open page); purge alone one more page
    // for every 110-odd updates.
    const ROUNDS: i64 = 2_400;
    let mut in_use = Vec::new();
    for gc in [GarbageCollector::Steam, GarbageCollector::Vacuum] {
        let fs = Arc::new(SimulatedFileSystem::new(10));
        let db = Database::open(options(&fs).garbage_collector(gc)).unwrap();
        let table = accounts(&db, 10);
        let held = db.begin_read_only(Isolation::Snapshot);
        // Enough updates that purge alone fills several shared undo pages.
        for round in 0..ROUNDS {
            set_balance(&db, table, round % 10, round);
        }
        for id in 0..10 {
            assert_eq!(balance(&held, table, id), Some(100), "{gc:?}");
        }
        let chain = db.version_chain_length(table, &[Value::I64(3)]).unwrap();
        let undo = stats(&db);
        if gc == GarbageCollector::Steam {
            // The newest, the one it replaced (pruned at the row's next change, as Steam
            // prunes), and the held snapshot's (240 updates of the row since).
            assert_eq!(chain, Some(2), "{undo:?}");
            assert!(undo.records_pruned >= 1_000, "{undo:?}");
            assert!(undo.pages_freed_eagerly > 0, "{undo:?}");
        } else {
            assert_eq!(chain, Some(ROUNDS as usize / 10), "{undo:?}");
            assert_eq!(undo.records_pruned, 0, "{undo:?}");
        }
        in_use.push(undo.pages - undo.free_pages);
        drop(held);
        db.collect_garbage();
        let undo = stats(&db);
        assert_eq!(undo.history_list_length, 0, "{gc:?}: {undo:?}");
        assert_eq!(undo.free_pages, undo.pages, "{gc:?}: {undo:?}");
        let live = db.stats();
        assert_eq!(live.live_versions(), 0, "{gc:?}: {live:?}");
    }
    assert!(
        4 * in_use[0] < in_use[1],
        "undo pages in use, eager and purge alone: {in_use:?}"
    );
}

/// Behind a held snapshot a page is freed only when every record on it is done, so eager
/// pruning saves undo space only if the records it prunes do not share pages with records
/// the snapshot needs: each transaction updates a hot row (pruned at its next update) and
/// a cold one (updated once: its before-image is the version the snapshot reads). Records
/// of changes that pruned, and merged ones, go to the short lane's pages, which empty and
/// are freed; the cold rows' records fill the long lane's. Eager pruning then keeps
/// clearly fewer pages than purge alone (with one lane it kept more: the merged records
/// pinned beside the cold rows').
#[test]
fn eager_pruning_frees_the_pages_of_hot_rows_beside_cold_rows_a_snapshot_needs() {
    const ROUNDS: i64 = 1_200;
    let mut in_use = Vec::new();
    for gc in [GarbageCollector::Steam, GarbageCollector::Vacuum] {
        let undo = hot_and_cold_behind_a_held_snapshot(13, gc, ROUNDS, ROUNDS, |round| round);
        in_use.push(undo.pages - undo.free_pages);
    }
    assert!(
        3 * in_use[0] < 2 * in_use[1],
        "undo pages in use behind the snapshot, eager and purge alone: {in_use:?}"
    );
}

/// TPC-B's accounts behind a held snapshot: rows rewritten now and then, far apart, beside
/// a hot row. A cold row's third change prunes its second version, so the version the
/// snapshot reads is written again, merged; it must then stay on the long lane, and be
/// written only once while the snapshot lives (a merged record holds its whole row, so
/// later prunes keep it), and the cold row's own records must not pin the short lane's
/// pages. Eager pruning then keeps fewer pages than purge alone (it kept more when merged
/// and pruned records of cold rows went to the short lane, rewritten at every change).
#[test]
fn eager_pruning_of_rows_rewritten_far_apart_keeps_fewer_pages_than_purge_alone() {
    const COLD: i64 = 1_500;
    const PASSES: i64 = 4;
    let mut in_use = Vec::new();
    for gc in [GarbageCollector::Steam, GarbageCollector::Vacuum] {
        let undo =
            hot_and_cold_behind_a_held_snapshot(17, gc, COLD, COLD * PASSES, |round| round % COLD);
        if gc == GarbageCollector::Steam {
            // Each row's held version merged once, not at every change since.
            assert!(undo.records_merged <= (10 + COLD) as u64, "{undo:?}");
        }
        in_use.push(undo.pages - undo.free_pages);
    }
    assert!(
        in_use[0] < in_use[1],
        "undo pages in use behind the snapshot, eager and purge alone: {in_use:?}"
    );
}

/// Behind a held snapshot, under `gc`, on the simulated disk of `seed`: `rounds`
/// transactions each update hot row `round % 10` and cold row `10 + cold(round)` of
/// `10 + cold_rows` accounts. The held reader still reads the rows as loaded; returns the
/// undo counters then, and checks that once the snapshot ends and purge runs every undo
/// page is free.
fn hot_and_cold_behind_a_held_snapshot(
    seed: u64,
    gc: GarbageCollector,
    cold_rows: i64,
    rounds: i64,
    cold: impl Fn(i64) -> i64,
) -> verso::disk::UndoStats {
    let fs = Arc::new(SimulatedFileSystem::new(seed));
    let db = Database::open(options(&fs).garbage_collector(gc)).unwrap();
    let table = accounts(&db, 10 + cold_rows);
    let held = db.begin_read_only(Isolation::Snapshot);
    for round in 0..rounds {
        let mut txn = db.begin(Isolation::Snapshot);
        for id in [round % 10, 10 + cold(round)] {
            assert!(txn
                .update(table, &[Value::I64(id)], &[(1, Value::I64(round))])
                .unwrap());
        }
        txn.commit().unwrap();
    }
    db.collect_garbage();
    for id in [3, 10, 10 + cold_rows / 2, 9 + cold_rows] {
        assert_eq!(balance(&held, table, id), Some(100), "{gc:?}");
    }
    let undo = stats(&db);
    drop(held);
    db.collect_garbage();
    let after = stats(&db);
    assert_eq!(after.free_pages, after.pages, "{gc:?}: {after:?}");
    undo
}

/// Found by review of the whole merged records: a row whose whole version and all its
/// index keys do not fit one undo record (a 1,700-byte text in four indexes) could not be
/// updated behind a held snapshot once a prune wrote its held version again:
/// `EntryTooLarge` at the third update, and at every later update or delete of the row
/// until the snapshot ended. Such a version is now merged as a delta of the newer one.
#[test]
fn regression_a_wide_row_s_held_version_too_large_whole_is_merged_as_a_delta() {
    let fs = Arc::new(SimulatedFileSystem::new(19));
    let db = Database::open(options(&fs).garbage_collector(GarbageCollector::Steam)).unwrap();
    let schema = Schema::new()
        .column("id", ColumnType::I64)
        .column("n", ColumnType::I64)
        .column("t", ColumnType::Text)
        .column("m", ColumnType::I64)
        .primary_key(&["id"])
        .index("by_t", &["t"])
        .index("by_t_id", &["t", "id"])
        .index("by_id_t", &["id", "t"])
        .index("by_t_n", &["t", "n"]);
    let table = db.create_table("wide", schema).unwrap();
    let text = "x".repeat(1_700);
    let mut load = db.begin(Isolation::Snapshot);
    load.insert(
        table,
        &[
            Value::I64(1),
            Value::I64(0),
            Value::Text(text.clone()),
            Value::I64(0),
        ],
    )
    .unwrap();
    load.commit().unwrap();
    let held = db.begin_read_only(Isolation::Snapshot);
    for round in 1..6 {
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn
            .update(table, &[Value::I64(1)], &[(3, Value::I64(round))])
            .unwrap());
        txn.commit().unwrap();
    }
    assert!(stats(&db).records_merged > 0);
    let m_of = |txn: &verso::Transaction<'_>| {
        txn.get(table, &[Value::I64(1)]).unwrap().expect("the row")[3].clone()
    };
    assert_eq!(m_of(&held), Value::I64(0));
    let mut delete = db.begin(Isolation::Snapshot);
    assert!(delete.delete(table, &[Value::I64(1)]).unwrap());
    delete.commit().unwrap();
    assert_eq!(m_of(&held), Value::I64(0));
    drop(held);
    db.collect_garbage();
    for index in ["by_t", "by_t_id", "by_id_t", "by_t_n"] {
        assert_eq!(
            db.secondary_index_entries(table, index).unwrap(),
            0,
            "{index}"
        );
    }
    let undo = stats(&db);
    assert_eq!(undo.free_pages, undo.pages, "{undo:?}");
}

/// Found by the power cuts (seed 14, eager pruning): a transaction's prune wrote a kept
/// version again (merged) into its log, carrying the duty to remove an index entry only
/// that version still had (the record that had the duty was unlinked); the cut ended the
/// transaction, recovery rolled it back and freed its log, and the entry stayed marked for
/// good. Recovery now queues rolled-back logs for purge, which removes it.
#[test]
fn regression_recovery_purges_what_a_rolled_back_log_merged() {
    let fs = Arc::new(SimulatedFileSystem::new(11));
    let eager = || options(&fs).garbage_collector(GarbageCollector::Steam);
    {
        let db = Database::open(eager()).unwrap();
        let table = accounts(&db, 4);
        let held = db.begin_read_only(Isolation::Snapshot);
        // v1 moves row 1 from branch 1 to 2 (its record marks the branch-1 entry); v2.
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn
            .update(table, &[Value::I64(1)], &[(2, Value::I64(2))])
            .unwrap());
        txn.commit().unwrap();
        set_balance(&db, table, 1, 1);
        // v3's prune drops v1 and writes v0 (branch 1, which `held` sees) again, merged,
        // into the running transaction's log; a commit of another row syncs the log.
        let mut running = db.begin(Isolation::Snapshot);
        assert!(running
            .update(table, &[Value::I64(1)], &[(1, Value::I64(2))])
            .unwrap());
        assert!(stats(&db).records_merged > 0);
        set_balance(&db, table, 2, 2);
        fs.crash();
        drop(running);
        drop(held);
    }
    fs.restart();
    let db = Database::open(eager()).unwrap();
    let table = db.table("accounts").unwrap();
    db.collect_garbage();
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 4);
    let check = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(balance(&check, table, 1), Some(1));
    assert_eq!(ids_in_branch(&check, table, 2), vec![1, 2]);
}

/// Found by the model test (eager pruning): a delete's record, unlinked when an insert
/// over the deleted row pruned the chain, freed its page before purge reached it; the
/// insert aborted, its rollback made the delete the row's newest version again, and no
/// purge was left to remove the row. A delete's record now keeps its page until purge.
#[test]
fn regression_a_delete_s_record_unlinked_by_pruning_still_removes_its_row() {
    let fs = Arc::new(SimulatedFileSystem::new(12));
    let db = Database::open(options(&fs).garbage_collector(GarbageCollector::Steam)).unwrap();
    let table = accounts(&db, 2);
    // `held` sees the loaded version; an update then the delete follow, so the insert's
    // prune drops the updated version (no snapshot sees it) and unlinks the delete's
    // record, while `held` keeps the delete unsettled through the insert's rollback.
    let held = db.begin_read_only(Isolation::Snapshot);
    set_balance(&db, table, 1, 7);
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn.delete(table, &[Value::I64(1)]).unwrap());
    txn.commit().unwrap();
    let mut again = db.begin(Isolation::Snapshot);
    again
        .insert(table, &[Value::I64(1), Value::I64(5), Value::I64(1)])
        .unwrap();
    assert!(stats(&db).records_pruned > 0);
    again.abort();
    assert_eq!(balance(&held, table, 1), Some(100));
    drop(held);
    db.collect_garbage();
    assert_eq!(db.primary_index_entries(table).unwrap(), 1);
    assert_eq!(db.secondary_index_entries(table, "by_branch").unwrap(), 1);
    let live = db.stats();
    assert_eq!(live.live_versions(), 0, "{live:?}");
}

/// Found by the model test (purge alone): a committed delete's log was purged while an
/// insert over the deleted row, still running, covered it (the delete was not the row's
/// newest version, so purge left the row); the insert aborted and its rollback made the
/// delete newest again, with no purge left to remove the row. A rollback that revives a
/// delete every snapshot sees now removes the row itself.
#[test]
fn regression_a_rollback_that_revives_a_purged_delete_removes_the_row() {
    for gc in [GarbageCollector::Vacuum, GarbageCollector::Steam] {
        let fs = Arc::new(SimulatedFileSystem::new(13));
        let db = Database::open(options(&fs).garbage_collector(gc)).unwrap();
        let table = accounts(&db, 2);
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn.delete(table, &[Value::I64(1)]).unwrap());
        txn.commit().unwrap();
        let mut again = db.begin(Isolation::Snapshot);
        again
            .insert(table, &[Value::I64(1), Value::I64(5), Value::I64(1)])
            .unwrap();
        db.collect_garbage();
        again.abort();
        db.collect_garbage();
        assert_eq!(db.primary_index_entries(table).unwrap(), 1, "{gc:?}");
        assert_eq!(
            db.secondary_index_entries(table, "by_branch").unwrap(),
            1,
            "{gc:?}"
        );
        let check = db.begin_read_only(Isolation::Snapshot);
        assert_eq!(balance(&check, table, 1), None);
        drop(check);
        let live = db.stats();
        assert_eq!(live.live_versions(), 0, "{gc:?}: {live:?}");
    }
}
