//! The disk engine's tables in PostgreSQL's design (`verso::disk::DiskTable`): a heap,
//! a primary index and a secondary index, against a model of snapshot isolation over many
//! interleaved transactions (inserts with their uniqueness check, HOT and non-HOT
//! updates, deletes, point reads, range scans in both directions over both indexes,
//! commits, aborts and vacuum), through a pool far smaller than the data.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use verso::disk::{
    BTree, CommitLog, DiskTable, DiskTransaction, DiskTransactions, FileNo, FreeSpaceMap, HeapFile,
    Pruning, RowKeys, VersionPlacement,
};
use verso::{Durability, Error};

mod disk_common;

use disk_common::{disk, open_pool_with_files, Rng};

/// Rows: key (u64, big-endian: the primary key's encoding), then a secondary value (u64),
/// then padding.
struct Keys;

impl RowKeys for Keys {
    fn primary_key(&self, row: &[u8]) -> verso::Result<Vec<u8>> {
        Ok(row[..8].to_vec())
    }
    fn index_key(&self, index: usize, row: &[u8]) -> verso::Result<Vec<u8>> {
        assert_eq!(index, 0);
        Ok(row[8..16].to_vec())
    }
}

fn row(key: u64, secondary: u64, pad: usize) -> Vec<u8> {
    let mut bytes = key.to_be_bytes().to_vec();
    bytes.extend_from_slice(&secondary.to_be_bytes());
    bytes.resize(16 + pad, (key % 251) as u8);
    bytes
}

fn key_of(row: &[u8]) -> u64 {
    u64::from_be_bytes(row[..8].try_into().unwrap())
}

fn secondary_of(row: &[u8]) -> u64 {
    u64::from_be_bytes(row[8..16].try_into().unwrap())
}

struct Opened {
    txns: Arc<DiskTransactions>,
    table: Arc<DiskTable>,
}

fn open(seed: u64) -> Opened {
    // Odd seeds prune eagerly (Steam's rule), even ones by PostgreSQL's horizon alone.
    let pruning = if seed % 2 == 1 {
        Pruning::Eager
    } else {
        Pruning::Horizon
    };
    open_with(seed, pruning)
}

fn open_with(seed: u64, pruning: Pruning) -> Opened {
    open_placed(seed, pruning, VersionPlacement::PostgreSql)
}

fn open_placed(seed: u64, pruning: Pruning, placement: VersionPlacement) -> Opened {
    let fs = disk(seed);
    let files = [
        ("/db/xact", FileNo(1)),
        ("/db/heap", FileNo(2)),
        ("/db/heap.fsm", FileNo(3)),
        ("/db/pk", FileNo(4)),
        ("/db/sec", FileNo(5)),
    ];
    let (log, pool, _) = open_pool_with_files(&fs, 16, Durability::None, &files).unwrap();
    let commit_log = CommitLog::open(Arc::clone(&pool), FileNo(1), Arc::clone(&log)).unwrap();
    let txns = DiskTransactions::open(commit_log).unwrap();
    let fsm = FreeSpaceMap::open(Arc::clone(&pool), FileNo(3)).unwrap();
    let heap = HeapFile::open(Arc::clone(&pool), FileNo(2), fsm, Arc::clone(&log))
        .unwrap()
        .with_pruning(pruning)
        .with_placement(placement);
    let primary = BTree::open_logged(Arc::clone(&pool), FileNo(4), Arc::clone(&log)).unwrap();
    let secondary = BTree::open_logged(Arc::clone(&pool), FileNo(5), Arc::clone(&log)).unwrap();
    let table = DiskTable::new("t", heap, primary, vec![secondary], Box::new(Keys));
    Opened {
        txns: Arc::new(txns),
        table: Arc::new(table),
    }
}

struct Open<'a> {
    txn: DiskTransaction<'a>,
    writes: HashMap<u64, Option<Vec<u8>>>,
}

/// Committed history per key: (commit timestamp, the row then).
type History = BTreeMap<u64, Vec<(u64, Option<Vec<u8>>)>>;

fn view(history: &History, open: &Open<'_>, key: u64) -> Option<Vec<u8>> {
    if let Some(own) = open.writes.get(&key) {
        return own.clone();
    }
    history
        .get(&key)?
        .iter()
        .rev()
        .find(|(ts, _)| *ts < open.txn.start())
        .and_then(|(_, row)| row.clone())
}

fn written_unseen(history: &History, opens: &[Open<'_>], me: usize, key: u64) -> bool {
    if opens[me].writes.contains_key(&key) {
        return false;
    }
    let start = opens[me].txn.start();
    opens
        .iter()
        .enumerate()
        .any(|(i, o)| i != me && o.writes.contains_key(&key))
        || history
            .get(&key)
            .is_some_and(|h| h.iter().any(|(ts, _)| *ts >= start))
}

fn bound(kind: u64, key: u64) -> Bound<u64> {
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

fn bytes(bound: Bound<u64>) -> Bound<Vec<u8>> {
    bound.map(|k| k.to_be_bytes().to_vec())
}

fn as_ref(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Every answer of the table is the model's: reads, scans over either index in either
/// direction, and the refusals (duplicate key, write conflict) of inserts, updates and
/// deletes, while vacuum runs between transactions.
#[test]
fn tables_answer_as_snapshot_isolation_says() {
    let seeds: u64 = std::env::var("DISK_TABLE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let mut counts = [0u64; 6]; // duplicates, conflicts, hot-capable updates, scans, vacuums, index scans
    for seed in 0..seeds {
        let o = open(300 + seed);
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut history: History = BTreeMap::new();
        let mut opens: Vec<Open<'_>> = Vec::new();
        const KEYS: u64 = 60;
        for step in 0..1500 {
            let roll = rng.next() % 100;
            if opens.is_empty() || (roll < 6 && opens.len() < 4) {
                opens.push(Open {
                    txn: o.txns.begin().unwrap(),
                    writes: HashMap::new(),
                });
                continue;
            }
            let me = (rng.next() % opens.len() as u64) as usize;
            let key = rng.next() % KEYS;
            let ctx = format!("seed {seed} step {step} key {key}");
            let mut failed = false;
            match roll {
                0..=19 => {
                    let new = row(key, rng.next() % 8, (rng.next() % 300) as usize);
                    // A write meets the key's newest change first: another's unseen write is
                    // a conflict, whatever this snapshot sees (the in-memory engine's rule).
                    let expected = if written_unseen(&history, &opens, me, key) {
                        Err(Error::WriteConflict { table: "t".into() })
                    } else if view(&history, &opens[me], key).is_some() {
                        Err(Error::DuplicateKey { table: "t".into() })
                    } else {
                        Ok(())
                    };
                    let got = o.table.insert(&mut opens[me].txn, &new).map(drop);
                    assert_eq!(got, expected, "{ctx}: insert");
                    match got {
                        Ok(()) => {
                            opens[me].writes.insert(key, Some(new));
                        }
                        Err(Error::DuplicateKey { .. }) => counts[0] += 1,
                        Err(_) => {
                            counts[1] += 1;
                            failed = true;
                        }
                    }
                }
                20..=49 => {
                    let exists = view(&history, &opens[me], key).is_some();
                    let conflict = written_unseen(&history, &opens, me, key);
                    let k = key.to_be_bytes();
                    let got = if roll < 42 {
                        let old = view(&history, &opens[me], key);
                        // Keep the secondary value half the time: HOT may apply.
                        let secondary = match &old {
                            Some(old) if rng.next() % 2 == 0 => {
                                counts[2] += 1;
                                secondary_of(old)
                            }
                            _ => rng.next() % 8,
                        };
                        let new = row(key, secondary, (rng.next() % 300) as usize);
                        let got = o.table.update(&mut opens[me].txn, &k, &new);
                        if got == Ok(true) {
                            opens[me].writes.insert(key, Some(new));
                        }
                        got
                    } else {
                        let got = o
                            .table
                            .delete(&mut opens[me].txn, &k)
                            .map(|old| old.is_some());
                        if got == Ok(true) {
                            opens[me].writes.insert(key, None);
                        }
                        got
                    };
                    let expected = if conflict {
                        Err(Error::WriteConflict { table: "t".into() })
                    } else {
                        Ok(exists)
                    };
                    assert_eq!(got, expected, "{ctx}: update or delete");
                    if got.is_err() {
                        counts[1] += 1;
                        failed = true;
                    }
                }
                50..=59 => {
                    let got = o.table.get(&opens[me].txn, &key.to_be_bytes()).unwrap();
                    assert_eq!(
                        got.map(|(_, r)| r),
                        view(&history, &opens[me], key),
                        "{ctx}: get"
                    );
                }
                60..=69 => {
                    let (low, high) = (
                        bound(rng.next() % 3, rng.next() % KEYS),
                        bound(rng.next() % 3, rng.next() % KEYS),
                    );
                    let descending = rng.next() % 2 == 0;
                    let mut got = Vec::new();
                    if roll < 65 {
                        counts[3] += 1;
                        let (l, h) = (bytes(low), bytes(high));
                        o.table
                            .scan(
                                &opens[me].txn,
                                as_ref(&l),
                                as_ref(&h),
                                descending,
                                &mut |k, r| {
                                    assert_eq!(k, &r[..8]);
                                    got.push(r.to_vec());
                                    Ok(true)
                                },
                            )
                            .unwrap();
                        let mut expected: Vec<Vec<u8>> = (0..KEYS)
                            .filter(|k| std::ops::RangeBounds::contains(&(low, high), k))
                            .filter_map(|k| view(&history, &opens[me], k))
                            .collect();
                        if descending {
                            expected.reverse();
                        }
                        assert_eq!(got, expected, "{ctx}: scan {low:?}..{high:?}");
                    } else {
                        counts[5] += 1;
                        let (low, high) = (bound(low_kind(&low), rng.next() % 8), bound(2, 8));
                        let (l, h) = (bytes(low), bytes(high));
                        o.table
                            .scan_index(
                                0,
                                &opens[me].txn,
                                as_ref(&l),
                                as_ref(&h),
                                descending,
                                &mut |k, r| {
                                    assert_eq!(k, &r[8..16]);
                                    got.push(r.to_vec());
                                    Ok(true)
                                },
                            )
                            .unwrap();
                        let mut rows: Vec<Vec<u8>> = (0..KEYS)
                            .filter_map(|k| view(&history, &opens[me], k))
                            .filter(|r| {
                                std::ops::RangeBounds::contains(&(low, high), &secondary_of(r))
                            })
                            .collect();
                        // Index order: the secondary value, then the address; compare as
                        // sets within each secondary value.
                        rows.sort_by_key(|r| secondary_of(r));
                        if descending {
                            rows.reverse();
                        }
                        let values = |rows: &[Vec<u8>]| {
                            rows.iter().map(|r| secondary_of(r)).collect::<Vec<_>>()
                        };
                        assert_eq!(values(&got), values(&rows), "{ctx}: index scan order");
                        let (mut a, mut b) = (got.clone(), rows);
                        a.sort();
                        b.sort();
                        assert_eq!(a, b, "{ctx}: index scan rows");
                    }
                }
                70..=84 => {
                    let open = opens.swap_remove(me);
                    let (ts, _) = open.txn.commit().unwrap();
                    for (key, row) in open.writes {
                        history.entry(key).or_default().push((ts, row));
                    }
                }
                85..=94 => opens.swap_remove(me).txn.abort().unwrap(),
                _ => {
                    counts[4] += 1;
                    o.table.vacuum(&o.txns).unwrap();
                    o.table.heap().check().unwrap();
                    o.table.primary_index().check().unwrap();
                    o.table.index(0).unwrap().check().unwrap();
                }
            }
            if failed {
                // A conflict ends the transaction, as the in-memory engine's rule has it.
                opens.swap_remove(me).txn.abort().unwrap();
            }
        }
    }
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
}

fn low_kind(bound: &Bound<u64>) -> u64 {
    match bound {
        Bound::Unbounded => 0,
        Bound::Included(_) => 1,
        Bound::Excluded(_) => 2,
    }
}

/// A vacuum frees what no snapshot needs from the heap and from both indexes: after a
/// round of updates that change the secondary key (every one non-HOT, an entry in each
/// index), then a vacuum with no snapshot held, each index has exactly one entry per row.
#[test]
fn vacuum_removes_the_index_entries_of_dead_versions() {
    let o = open(400);
    const ROWS: u64 = 300;
    let mut txn = o.txns.begin().unwrap();
    for key in 0..ROWS {
        o.table.insert(&mut txn, &row(key, 0, 50)).unwrap();
    }
    txn.commit().unwrap();
    for round in 1..=3 {
        let mut txn = o.txns.begin().unwrap();
        for key in 0..ROWS {
            assert!(o
                .table
                .update(&mut txn, &key.to_be_bytes(), &row(key, round, 50))
                .unwrap());
        }
        txn.commit().unwrap();
    }
    let entries =
        |tree: &verso::disk::BTree| tree.range(Bound::Unbounded, Bound::Unbounded).count() as u64;
    assert_eq!(entries(o.table.primary_index()), ROWS * 4);
    let stats = o.table.vacuum(&o.txns).unwrap();
    assert_eq!(stats.dead_lines_freed, ROWS * 3, "{stats:?}");
    assert_eq!(entries(o.table.primary_index()), ROWS);
    assert_eq!(entries(o.table.index(0).unwrap()), ROWS);
    let txn = o.txns.begin().unwrap();
    for key in 0..ROWS {
        let (_, r) = o.table.get(&txn, &key.to_be_bytes()).unwrap().unwrap();
        assert_eq!(secondary_of(&r), 3);
        assert_eq!(key_of(&r), key);
    }
}

/// Found by a review of eager pruning on disk: an insert's uniqueness check read the key's
/// index entries, then their chains. Between the two, another transaction updated the key
/// cold (a new version elsewhere, with a new entry) and committed, and a reader's prune
/// removed the version the check's entry led to (no snapshot sees it: the inserter began
/// before its creator committed). The check saw nothing of the key and the insert made a
/// second row with it. Now the check reads the entries again and finds the new one (DT4):
/// a write conflict (the key was written after the inserter began), as under PostgreSQL's
/// rule, which keeps that version for the inserter's snapshot.
#[test]
fn regression_an_insert_meets_a_key_cold_updated_while_it_checked() {
    for pruning in [Pruning::Eager, Pruning::Horizon] {
        let o = open_with(99, pruning);
        const K: u64 = 7;
        let mut fill = o.txns.begin().unwrap();
        for filler in 0..5 {
            o.table
                .insert(&mut fill, &row(1000 + filler, 0, 1142))
                .unwrap();
        }
        o.table.insert(&mut fill, &row(2000, 0, 400)).unwrap();
        fill.commit().unwrap();
        let mut inserter = o.txns.begin().unwrap();
        let mut first = o.txns.begin().unwrap();
        o.table.insert(&mut first, &row(K, 1, 1000)).unwrap();
        first.commit().unwrap();
        let (txns, table) = (Arc::clone(&o.txns), Arc::clone(&o.table));
        o.table.inject_after_index_read(Box::new(move || {
            // Its secondary key changes: a cold update, to another page (page 0 is full).
            let mut updater = txns.begin().unwrap();
            assert!(table
                .update(&mut updater, &K.to_be_bytes(), &row(K, 2, 1000))
                .unwrap());
            updater.commit().unwrap();
            // A reader of another row of page 0 prunes the page on access.
            let reader = txns.begin().unwrap();
            let other = 1000u64.to_be_bytes();
            assert_eq!(
                key_of(&table.get(&reader, &other).unwrap().unwrap().1),
                1000
            );
        }));
        let result = o.table.insert(&mut inserter, &row(K, 3, 10));
        assert!(
            matches!(result, Err(Error::WriteConflict { .. })),
            "{pruning:?}: {result:?}"
        );
        drop(inserter);
        let later = o.txns.begin().unwrap();
        let k = K.to_be_bytes();
        let mut seen = 0;
        o.table
            .scan(
                &later,
                Bound::Included(&k[..]),
                Bound::Included(&k[..]),
                false,
                &mut |_, _| {
                    seen += 1;
                    Ok(true)
                },
            )
            .unwrap();
        assert_eq!(seen, 1, "{pruning:?}");
        if pruning == Pruning::Eager {
            assert!(
                o.table.heap().stats().tuples_pruned_eagerly > 0,
                "the interleaving ran"
            );
        }
    }
}

/// The same check when the key is updated HOT instead (a review of the second read's
/// skip): the new version adds no index entry, so the primary index's count of completed
/// inserts does not move and the check does not read the entries again. It needs not:
/// the new version is on the chain the check reads, reached through the root's redirect
/// once the prune removed the old one. A write conflict, as under PostgreSQL's rule.
#[test]
fn an_insert_meets_a_key_updated_hot_and_pruned_while_it_checked() {
    for pruning in [Pruning::Eager, Pruning::Horizon] {
        let o = open_with(103, pruning);
        const K: u64 = 7;
        // Fill page 0 so that K's first version fits, its second fits beside it, and
        // then the page is nearly full (pruned on access).
        let mut fill = o.txns.begin().unwrap();
        for filler in 0..6 {
            o.table
                .insert(&mut fill, &row(1000 + filler, 0, 1140))
                .unwrap();
        }
        fill.commit().unwrap();
        let mut inserter = o.txns.begin().unwrap();
        let mut first = o.txns.begin().unwrap();
        o.table.insert(&mut first, &row(K, 1, 200)).unwrap();
        first.commit().unwrap();
        let (txns, table) = (Arc::clone(&o.txns), Arc::clone(&o.table));
        let inserts_before = o.table.primary_index().inserts_completed();
        o.table.inject_after_index_read(Box::new(move || {
            // No indexed column changes: a HOT update, on page 0.
            let mut updater = txns.begin().unwrap();
            assert!(table
                .update(&mut updater, &K.to_be_bytes(), &row(K, 1, 210))
                .unwrap());
            updater.commit().unwrap();
            // A reader of another row of page 0 prunes the page on access.
            let reader = txns.begin().unwrap();
            let other = 1000u64.to_be_bytes();
            assert_eq!(
                key_of(&table.get(&reader, &other).unwrap().unwrap().1),
                1000
            );
        }));
        let result = o.table.insert(&mut inserter, &row(K, 3, 10));
        assert!(
            matches!(result, Err(Error::WriteConflict { .. })),
            "{pruning:?}: {result:?}"
        );
        let stats = o.table.heap().stats();
        assert_eq!(stats.hot_updates, 1, "{pruning:?}: the update was HOT");
        assert_eq!(
            o.table.primary_index().inserts_completed(),
            inserts_before,
            "{pruning:?}: a HOT update adds no entry"
        );
        if pruning == Pruning::Eager {
            assert!(stats.tuples_pruned_eagerly > 0, "the interleaving ran");
        }
    }
}

/// Found by a review (by reading) of the fix above: its re-read compared addresses, and
/// vacuum can free an address the check read and a newer version take it. Here the key
/// has a deleted version at X and a live one at Y (inserted after the checker began);
/// after the check read X's chain, vacuum removes X (dead to every snapshot) and frees its
/// line, another transaction updates the row cold onto X's freed line and commits, and a
/// reader's prune removes Y's version (no snapshot sees it). The check then finds nothing
/// at Y, and the entries it reads again name the same addresses. Vacuum's count of freed
/// lines makes it read again: a write conflict, not a second row with the key.
#[test]
fn regression_a_key_check_reads_again_when_vacuum_freed_an_address_it_read() {
    use verso::disk::Tid;
    let o = open_with(101, Pruning::Eager);
    const K: u64 = 9;
    let k = K.to_be_bytes();
    let mut first = o.txns.begin().unwrap();
    o.table.insert(&mut first, &row(K, 1, 3000)).unwrap();
    o.table.insert(&mut first, &row(500, 0, 3000)).unwrap();
    first.commit().unwrap();
    let mut deleter = o.txns.begin().unwrap();
    assert!(o.table.delete(&mut deleter, &k).unwrap().is_some());
    deleter.commit().unwrap();
    let mut checker = o.txns.begin().unwrap();
    let mut again = o.txns.begin().unwrap();
    // Page 0 has no room left for it: the new row goes to a new page, with a filler that
    // leaves that page nearly full.
    let y = o.table.insert(&mut again, &row(K, 2, 2500)).unwrap();
    o.table.insert(&mut again, &row(501, 0, 5000)).unwrap();
    again.commit().unwrap();
    assert_eq!(y.block, 1);
    let x = Tid { block: 0, line: 1 };
    let (txns, table) = (Arc::clone(&o.txns), Arc::clone(&o.table));
    o.table.inject_after_first_chain(Box::new(move || {
        table.vacuum(&txns).unwrap();
        let mut updater = txns.begin().unwrap();
        assert!(table.update(&mut updater, &k, &row(K, 3, 2500)).unwrap());
        updater.commit().unwrap();
        let reader = txns.begin().unwrap();
        assert!(table.get(&reader, &501u64.to_be_bytes()).unwrap().is_some());
    }));
    let result = o.table.insert(&mut checker, &row(K, 4, 10));
    // The interleaving ran: the update's version took X's line, Y's was pruned.
    let at_x = o.table.heap().versions(x).unwrap();
    assert_eq!(at_x.len(), 1, "{at_x:?}");
    assert_eq!(key_of(&at_x[0].2), K);
    assert_eq!(secondary_of(&at_x[0].2), 3);
    assert!(o.table.heap().versions(y).unwrap().is_empty());
    assert!(
        matches!(result, Err(Error::WriteConflict { .. })),
        "{result:?}"
    );
}

/// SI-CV's dropped pages leave no index entry behind (co-located placement): a
/// transaction fills pages of its own with rows, moves some to a new secondary key (new
/// entries in both indexes) and aborts; `DiskTable::drop_aborted_pages` drops its pages
/// and removes every entry naming a tuple on them from both indexes first (the entries of
/// rows committed before are kept), and the keys go in again afterwards. Fails when the
/// removal is skipped (a primary entry survives, naming a line of a page that reads as
/// new).
#[test]
fn an_aborted_owner_s_dropped_pages_leave_no_index_entry() {
    let o = open_placed(60, Pruning::Horizon, VersionPlacement::CoLocated);
    let entries =
        |tree: &verso::disk::BTree| tree.range(Bound::Unbounded, Bound::Unbounded).count();
    let mut txn = o.txns.begin().unwrap();
    // Rows enough to leave their page too full for the next writer's rows, so that every
    // page it takes is new (a page the map offered would hold these, and stay).
    for key in 0..4 {
        o.table.insert(&mut txn, &row(key, key, 1900)).unwrap();
    }
    let xid = txn.xid().unwrap();
    txn.commit().unwrap();
    o.table.heap().release(xid).unwrap();
    let mut txn = o.txns.begin().unwrap();
    for key in 100..130 {
        o.table.insert(&mut txn, &row(key, key, 400)).unwrap();
    }
    for key in 100..110u64 {
        assert!(o
            .table
            .update(&mut txn, &key.to_be_bytes(), &row(key, key + 1000, 400))
            .unwrap());
    }
    let xid = txn.xid().unwrap();
    let owned = o.table.heap().pages_owned_by(xid).len();
    assert!(owned >= 2, "{owned} pages");
    txn.abort().unwrap();
    assert_eq!(o.table.drop_aborted_pages(xid).unwrap(), owned as u64);
    o.table.heap().release(xid).unwrap();
    for key in 100..130u64 {
        assert!(
            !o.table.has_entries(&key.to_be_bytes()).unwrap(),
            "an entry of aborted key {key} outlived its page"
        );
    }
    assert_eq!(entries(o.table.primary_index()), 4);
    assert_eq!(entries(o.table.index(0).unwrap()), 4);
    // The keys again, on the pages dropped (offered as new).
    let pages = o.table.heap().pages().unwrap();
    let mut txn = o.txns.begin().unwrap();
    for key in 100..130 {
        o.table.insert(&mut txn, &row(key, key, 400)).unwrap();
    }
    let xid = txn.xid().unwrap();
    txn.commit().unwrap();
    o.table.heap().release(xid).unwrap();
    assert_eq!(o.table.heap().pages().unwrap(), pages, "the heap grew");
    assert_eq!(entries(o.table.primary_index()), 34);
    assert_eq!(entries(o.table.index(0).unwrap()), 34);
    o.table.heap().check().unwrap();
}
