//! A persistent database through the public API: what survives a close, a drop, a crash;
//! what is refused; what the counters say. The crash-consistency model test is
//! `crash_model.rs`; the process-kill loop is `crash_kill.rs`.

mod common;

use std::path::{Path, PathBuf};

use common::Cleanup;
use std::sync::Arc;
use std::time::Duration;

use verso::fs::{Fault, FileSystem, SimulatedFileSystem};
use verso::{ColumnType, Database, Durability, Error, Isolation, Options, Schema, Value};

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir(&format!("durability-{name}"))
}

fn accounts_schema() -> Schema {
    Schema::new()
        .column("id", ColumnType::U64)
        .column("owner", ColumnType::Text)
        .column("balance", ColumnType::I64)
        .primary_key(&["id"])
        .index("by_owner", &["owner"])
}

fn sim_options(fs: &SimulatedFileSystem) -> Options {
    sim_options_from(Options::default(), fs)
}

/// `base` (a configuration) as a persistent database on the simulated disk.
fn sim_options_from(base: Options, fs: &SimulatedFileSystem) -> Options {
    base.path("/db")
        .file_system(Arc::new(fs.clone()))
        .preallocate_log_segments(false)
        .checkpoint_after_log_bytes(None)
        .log_segment_bytes(8192)
}

/// The rows of a scan, collected (the iterator's first error, if any).
fn all_rows(scan: verso::Result<verso::Scan<'_, '_>>) -> verso::Result<Vec<Vec<Value>>> {
    scan?.map(|row| row.map(verso::Row::into_values)).collect()
}

fn balances(db: &Database) -> Vec<(u64, String, i64)> {
    let table = db.table("accounts").unwrap();
    let txn = db.begin(Isolation::Snapshot);
    let rows = all_rows(txn.scan(table, ..)).unwrap();
    rows.into_iter()
        .map(|row| {
            (
                row[0].as_u64().unwrap(),
                row[1].as_text().unwrap().to_owned(),
                row[2].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn tables_rows_and_indexes_survive_close_and_reopen_on_the_real_file_system() {
    let dir = temp_dir("reopen");
    let _cleanup = Cleanup(dir.clone());
    let db = Database::open(Options::default().path(&dir)).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..100u64 {
        txn.insert(
            accounts,
            &[
                Value::U64(id),
                format!("o{}", id % 7).into(),
                Value::I64(10),
            ],
        )
        .unwrap();
    }
    txn.commit().unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    txn.update(accounts, &[Value::U64(3)], &[(2, Value::I64(99))])
        .unwrap();
    txn.delete(accounts, &[Value::U64(4)]).unwrap();
    txn.commit().unwrap();
    let before = balances(&db);
    db.close().unwrap();

    let db = Database::open(Options::default().path(&dir)).unwrap();
    assert_eq!(balances(&db), before);
    let accounts = db.table("accounts").unwrap();
    let txn = db.begin(Isolation::Snapshot);
    let by_owner =
        all_rows(txn.scan_index(accounts, "by_owner", vec!["o3".into()]..=vec!["o3".into()]))
            .unwrap();
    assert_eq!(by_owner.len(), 14, "ids 3, 10, ..., 94 (4 is o4)");
    assert_eq!(
        txn.get(accounts, &[Value::U64(3)]).unwrap().unwrap()[2],
        Value::I64(99)
    );
    drop(txn);
    let recovery = db.stats().durability.unwrap().recovery;
    assert!(!recovery.created);
    assert_eq!(recovery.log_commits_replayed, 2);
    db.close().unwrap();
}

#[test]
fn a_second_open_of_the_same_directory_is_refused_until_the_first_closes() {
    let dir = temp_dir("locked");
    let _cleanup = Cleanup(dir.clone());
    let db = Database::open(Options::default().path(&dir)).unwrap();
    let error = Database::open(Options::default().path(&dir)).unwrap_err();
    assert!(matches!(error, Error::DatabaseLocked { .. }), "{error}");
    let clone = db.clone();
    db.close().unwrap();
    assert_eq!(
        clone.create_table("t", accounts_schema()).unwrap_err(),
        Error::DatabaseClosed
    );
    let again = Database::open(Options::default().path(&dir)).unwrap();
    again.close().unwrap();
}

/// Regression: the directory's lock was an `flock`, which belongs to the open file
/// description, and a child process that any thread forks shares the descriptions of every
/// open file until it execs. A database closed while another thread's child was between its
/// fork and its exec stayed locked for as long as that child took to exec: reopening it got
/// `DatabaseLocked` (the kill loops of `tb_recovery.rs` fork children while its other tests
/// reopen their directories). A process's own lock must go when its last handle does,
/// whatever its children hold.
#[test]
fn regression_a_child_forked_while_the_database_was_open_does_not_keep_its_lock() {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;

    let dir = temp_dir("forked");
    let _cleanup = Cleanup(dir.clone());
    let db = Database::open(Options::default().path(&dir)).unwrap();
    let (mut forked, mut forked_signal) = std::io::pipe().unwrap();
    let mut command = std::process::Command::new("true");
    // SAFETY: the closure runs in the forked child before it execs: it writes one byte to a
    // pipe and sleeps (`write` and `nanosleep`, both async-signal-safe); it allocates nothing
    // and takes no lock.
    unsafe {
        command.pre_exec(move || {
            forked_signal.write_all(b"f")?;
            std::thread::sleep(Duration::from_millis(1500));
            Ok(())
        });
    }
    // `spawn` returns once the child has exec'd, so it runs beside this thread.
    let spawner = std::thread::spawn(move || command.status());
    let mut byte = [0u8];
    forked.read_exact(&mut byte).unwrap();
    // The child now holds copies of this process's descriptors, the lock file's among them.
    db.close().unwrap();
    let reopened = Database::open(Options::default().path(&dir))
        .expect("the lock goes with the last handle, whatever a forked child holds");
    reopened.close().unwrap();
    assert!(spawner.join().unwrap().unwrap().success());
}

/// The lock excludes other processes too: a child process opening the directory while this
/// one holds it gets `DatabaseLocked`, and opens it once this one has closed it.
#[test]
fn another_process_cannot_open_a_directory_this_one_holds() {
    let dir = temp_dir("other-process");
    let _cleanup = Cleanup(dir.clone());
    let db = Database::open(Options::default().path(&dir)).unwrap();
    let child_open = || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "open_the_directory_in_a_child",
                "--ignored",
                "--nocapture",
            ])
            .env("VERSO_CHILD_OPEN_DIR", &dir)
            .output()
            .unwrap()
    };
    let refused = child_open();
    let said = String::from_utf8_lossy(&refused.stdout).into_owned();
    assert!(said.contains("child open: locked"), "{said}");
    db.close().unwrap();
    let opened = child_open();
    let said = String::from_utf8_lossy(&opened.stdout).into_owned();
    assert!(said.contains("child open: opened"), "{said}");
}

/// Run by `another_process_cannot_open_a_directory_this_one_holds` in a child process.
#[test]
#[ignore = "a child process of another_process_cannot_open_a_directory_this_one_holds"]
fn open_the_directory_in_a_child() {
    let Some(dir) = std::env::var_os("VERSO_CHILD_OPEN_DIR") else {
        return;
    };
    match Database::open(Options::default().path(PathBuf::from(dir))) {
        Ok(db) => {
            db.close().unwrap();
            println!("child open: opened");
        }
        Err(Error::DatabaseLocked { .. }) => println!("child open: locked"),
        Err(other) => println!("child open: failed: {other}"),
    }
}

#[test]
fn dropping_the_last_handle_keeps_everything_committed() {
    let fs = SimulatedFileSystem::new(1);
    {
        let db = Database::open(sim_options(&fs).durability(Durability::None)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(accounts, &[Value::U64(1), "a".into(), Value::I64(5)])
            .unwrap();
        txn.commit().unwrap();
    }
    // A power loss right after a clean drop: the drop synced the log.
    fs.crash();
    fs.restart();
    let db = Database::open(sim_options(&fs)).unwrap();
    assert_eq!(balances(&db), [(1, "a".to_owned(), 5)]);
}

#[test]
fn checkpoints_cover_the_log_and_recovery_replays_only_what_follows() {
    let fs = SimulatedFileSystem::new(2);
    let db = Database::open(sim_options(&fs)).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    for batch in 0..20u64 {
        let mut txn = db.begin(Isolation::Snapshot);
        for i in 0..10 {
            let id = batch * 10 + i;
            txn.insert(
                accounts,
                &[Value::U64(id), "x".into(), Value::I64(id as i64)],
            )
            .unwrap();
        }
        txn.commit().unwrap();
    }
    let report = db.checkpoint().unwrap();
    assert_eq!(report.rows, 200);
    for id in 0..5u64 {
        let mut txn = db.begin(Isolation::Snapshot);
        txn.update(accounts, &[Value::U64(id)], &[(2, Value::I64(-1))])
            .unwrap();
        txn.commit().unwrap();
    }
    let before = balances(&db);
    let segments_before: Vec<_> = fs
        .files()
        .into_iter()
        .filter(|f| f.to_string_lossy().contains("log-"))
        .collect();
    assert!(
        segments_before.len() <= 2,
        "segments below the checkpoint were released: {segments_before:?}"
    );
    drop(db);
    let db = Database::open(sim_options(&fs)).unwrap();
    assert_eq!(balances(&db), before);
    let recovery = db.stats().durability.unwrap().recovery;
    assert_eq!(recovery.checkpoint_rows, 200);
    assert_eq!(recovery.log_commits_replayed, 5);
}

#[test]
fn an_unknown_format_version_is_refused_with_a_clear_error() {
    let fs = SimulatedFileSystem::new(3);
    drop(Database::open(sim_options(&fs)).unwrap());
    fs.overwrite_durably(Path::new("/db/MANIFEST"), 8, &[7, 0, 0, 0])
        .unwrap();
    let error = Database::open(sim_options(&fs)).unwrap_err();
    assert!(
        matches!(
            error,
            Error::UnsupportedFormat {
                found: 7,
                supported: 1,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_failed_fsync_loses_durability_for_good_and_reopening_recovers_the_acknowledged() {
    let fs = SimulatedFileSystem::new(4);
    let db = Database::open(sim_options(&fs)).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(accounts, &[Value::U64(1), "a".into(), Value::I64(1)])
        .unwrap();
    txn.commit().unwrap();
    // The next operation is the write of the next batch, the one after its sync.
    fs.fail_after(2, Fault::SyncLosesData);
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(accounts, &[Value::U64(2), "b".into(), Value::I64(2)])
        .unwrap();
    let error = txn.commit().unwrap_err();
    assert!(matches!(error, Error::DurabilityLost { .. }), "{error}");
    // Every later call fails; nothing is acknowledged any more.
    let txn = db.begin(Isolation::Snapshot);
    assert!(matches!(
        txn.get(accounts, &[Value::U64(1)]),
        Err(Error::DurabilityLost { .. })
    ));
    drop(txn);
    assert!(matches!(db.checkpoint(), Err(Error::DurabilityLost { .. })));
    drop(db);
    fs.crash();
    fs.restart();
    let db = Database::open(sim_options(&fs)).unwrap();
    assert_eq!(balances(&db), [(1, "a".to_owned(), 1)]);
}

#[test]
fn in_memory_options_refuse_what_needs_a_path() {
    assert!(matches!(
        Database::open(Options::default().durability(Durability::None)),
        Err(Error::UnsupportedConfiguration { .. })
    ));
    let db = Database::open(Options::default()).unwrap();
    assert!(matches!(
        db.checkpoint(),
        Err(Error::UnsupportedConfiguration { .. })
    ));
    let t = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(t, &[Value::U64(1), "a".into(), Value::I64(1)])
        .unwrap();
    let ticket = txn.commit_deferred().unwrap();
    assert!(ticket.is_durable());
    ticket.wait().unwrap();
    assert!(db.stats().durability.is_none());
}

#[test]
fn async_durability_syncs_within_its_interval() {
    let fs = SimulatedFileSystem::new(5);
    let options = sim_options(&fs).durability(Durability::Async {
        interval: Duration::from_millis(20),
    });
    let db = Database::open(options).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(accounts, &[Value::U64(1), "a".into(), Value::I64(1)])
        .unwrap();
    txn.commit().unwrap();
    let tail = db.stats().durability.unwrap().log_tail;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db.stats().durability.unwrap().log_durable < tail {
        assert!(std::time::Instant::now() < deadline, "never synced");
        std::thread::sleep(Duration::from_millis(5));
    }
    fs.crash();
    drop(db);
    fs.restart();
    let db = Database::open(sim_options(&fs)).unwrap();
    assert_eq!(balances(&db), [(1, "a".to_owned(), 1)]);
}

#[test]
fn deferred_commits_are_visible_at_once_and_durable_once_their_ticket_is() {
    let fs = SimulatedFileSystem::new(6);
    let db = Database::open(sim_options(&fs)).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let syncs_before = db.stats().durability.unwrap().log_syncs;
    let mut tickets = Vec::new();
    for id in 0..10u64 {
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(accounts, &[Value::U64(id), "a".into(), Value::I64(1)])
            .unwrap();
        tickets.push(txn.commit_deferred().unwrap());
    }
    assert_eq!(balances(&db).len(), 10, "visible before durable");
    // Nobody waits: the flusher, woken by the deferred commits, makes them durable.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !tickets.iter().all(|t| t.is_durable()) {
        assert!(
            std::time::Instant::now() < deadline,
            "deferred commits never became durable without a wait"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let syncs = db.stats().durability.unwrap().log_syncs - syncs_before;
    assert!(
        (1..=10).contains(&syncs),
        "at most a sync per request: {syncs}"
    );
    for ticket in tickets {
        ticket.wait().unwrap();
    }
    fs.crash();
    drop(db);
    fs.restart();
    let db = Database::open(sim_options(&fs)).unwrap();
    assert_eq!(balances(&db).len(), 10);
}

/// The automatic checkpoint waits for the log to grow by its threshold or by a quarter of
/// the current checkpoint's size, whichever is more: a large database is not rewritten
/// after every threshold's worth of log. The size comes from the checkpoint recovery
/// loaded, then from each new one.
#[test]
fn automatic_checkpoints_wait_for_a_quarter_of_the_checkpoints_size_of_log() {
    let fs = SimulatedFileSystem::new(21);
    let insert = |db: &Database, ids: std::ops::Range<u64>| {
        let accounts = db.table("accounts").unwrap();
        for id in ids {
            let mut txn = db.begin(Isolation::Snapshot);
            txn.insert(accounts, &[Value::U64(id), "owner".into(), Value::I64(1)])
                .unwrap();
            txn.commit().unwrap();
        }
    };
    // A database of a few thousand rows and its checkpoint, taken by hand.
    let size = {
        let db = Database::open(sim_options(&fs)).unwrap();
        db.create_table("accounts", accounts_schema()).unwrap();
        insert(&db, 0..3000);
        let size = db.checkpoint().unwrap().bytes;
        db.close().unwrap();
        size
    };
    assert!(
        size > 64 * 1024,
        "a checkpoint far larger than the threshold: {size}"
    );
    let db = Database::open(sim_options(&fs).checkpoint_after_log_bytes(Some(1024))).unwrap();
    let stats = || db.stats().durability.unwrap();
    assert_eq!(stats().recovery.checkpoint_bytes, size);
    // Log of far over the threshold but under a quarter of the size: no checkpoint.
    let start = stats().log_tail;
    let mut id = 1_000_000;
    while stats().log_tail - start < size / 8 {
        insert(&db, id..id + 10);
        id += 10;
    }
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        stats().checkpoints,
        0,
        "a checkpoint after {} bytes of log (threshold 1 KiB, checkpoint {size} bytes)",
        stats().log_tail - start
    );
    // Past a quarter of the size: one comes.
    while stats().log_tail - start < size / 4 + 4096 {
        insert(&db, id..id + 10);
        id += 10;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while stats().checkpoints == 0 {
        assert!(std::time::Instant::now() < deadline, "no checkpoint came");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Found in a lab run: a database closed while its automatic checkpoint was writing
/// returned at once and released the directory while the checkpoint went on writing (a
/// 2.8 GB temporary file was left behind; had it finished, it would have renamed its file
/// and rewritten the manifest of a directory another process could have opened by then).
/// `close` now stops a running checkpoint and waits for it.
#[test]
fn regression_close_stops_a_running_checkpoint_and_leaves_nothing_behind() {
    let dir = std::env::temp_dir().join(format!("verso-close-checkpoint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = || {
        Options::default()
            .path(&dir)
            .checkpoint_after_log_bytes(None)
    };
    const ROWS: u64 = 200_000;
    let db = Database::open(options()).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    for batch in 0..ROWS / 1000 {
        let mut txn = db.begin(Isolation::Snapshot);
        for id in batch * 1000..(batch + 1) * 1000 {
            txn.insert(accounts, &[Value::U64(id), "owner".into(), Value::I64(1)])
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let temporaries = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".tmp"))
            .collect::<Vec<_>>()
    };
    let checkpointer = db.clone();
    let running = std::thread::spawn(move || checkpointer.checkpoint());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while temporaries().is_empty() {
        assert!(
            !running.is_finished(),
            "the checkpoint ended before it was seen writing"
        );
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_micros(200));
    }
    db.close().unwrap();
    assert_eq!(
        temporaries(),
        Vec::<String>::new(),
        "the checkpoint left its file"
    );
    match running.join().unwrap() {
        Err(Error::DatabaseClosed) => {}
        other => panic!("the checkpoint went on after close: {other:?}"),
    }
    // The directory is free at once and holds everything.
    let db = Database::open(options()).unwrap();
    assert_eq!(balances(&db).len() as u64, ROWS);
    assert_eq!(db.stats().durability.unwrap().recovery.checkpoint_rows, 0);
    db.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flusher thread's work under power losses: whatever a ticket said was durable
/// (without anyone waiting for it) survives, and what survives is a prefix of the commit
/// order.
#[test]
fn what_the_flusher_made_durable_survives_a_power_loss() {
    let mut seen_in_all = 0;
    for seed in 0..12u64 {
        let fs = SimulatedFileSystem::new(100 + seed);
        let db = Database::open(sim_options(&fs)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut tickets = Vec::new();
        for id in 0..40u64 {
            let mut txn = db.begin(Isolation::Snapshot);
            txn.insert(accounts, &[Value::U64(id), "a".into(), Value::I64(1)])
                .unwrap();
            tickets.push((id, txn.commit_deferred().unwrap()));
            if id % (seed + 3) == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        let seen_durable: Vec<u64> = tickets
            .iter()
            .filter(|(_, ticket)| ticket.is_durable())
            .map(|(id, _)| *id)
            .collect();
        fs.crash();
        drop(tickets);
        drop(db);
        fs.restart();
        let db = Database::open(sim_options(&fs)).unwrap();
        let ids: Vec<u64> = balances(&db).into_iter().map(|(id, _, _)| id).collect();
        assert_eq!(
            ids,
            (0..ids.len() as u64).collect::<Vec<_>>(),
            "seed {seed}: a prefix of the commits"
        );
        assert!(
            seen_durable.iter().all(|id| ids.contains(id)),
            "seed {seed}: a ticket seen durable was lost: {seen_durable:?} vs {ids:?}"
        );
        seen_in_all += seen_durable.len();
    }
    assert!(
        seen_in_all > 0,
        "the flusher made nothing durable: nothing was checked"
    );
}

/// Found by the crash model test: a checkpoint at the same snapshot as the current one
/// (no commit between them, though the log moved: a table was created) had the same file
/// name, and its rename replaced the file the durable manifest still named, with a
/// checkpoint of another log position; a crash before the new manifest left the two
/// disagreeing, and `open` refused the database as corrupt. Crashes at every operation of
/// the second checkpoint must leave a database that opens.
#[test]
fn regression_a_second_checkpoint_at_the_same_snapshot_never_replaces_the_named_file() {
    let setup = |fs: &SimulatedFileSystem| {
        let db = Database::open(sim_options(fs)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(accounts, &[Value::U64(1), "a".into(), Value::I64(1)])
            .unwrap();
        txn.commit().unwrap();
        db.checkpoint().unwrap();
        db.create_table("other", accounts_schema()).unwrap();
        db
    };
    let operations = {
        let fs = SimulatedFileSystem::new(7);
        let db = setup(&fs);
        let before = fs.stats().operations;
        db.checkpoint().unwrap();
        fs.stats().operations - before
    };
    for (seed, crash_at) in (0..20).flat_map(|seed| (1..=operations + 1).map(move |at| (seed, at)))
    {
        let fs = SimulatedFileSystem::new(seed);
        let db = setup(&fs);
        fs.crash_after(crash_at);
        let _ = db.checkpoint();
        drop(db);
        fs.clear_faults();
        fs.crash();
        fs.restart();
        let db = Database::open(sim_options(&fs)).unwrap_or_else(|e| {
            panic!("seed {seed}: crash at operation {crash_at} of the checkpoint: {e}")
        });
        assert_eq!(balances(&db), [(1, "a".to_owned(), 1)]);
        assert!(db.table("other").is_ok());
    }
}

/// Found by the crash model test: a crash while a new log segment was being created left
/// its name durable (file systems often persist directory entries without being asked)
/// but not its header, and `open` refused the log as corrupt. Nothing can be in such a
/// segment (records go in only after its header and name are synced): recovery removes
/// it. An older segment without a header is still corruption.
#[test]
fn regression_an_interrupted_segment_creation_leaves_a_database_that_opens() {
    use verso::fs::OpenMode;
    let fs = SimulatedFileSystem::new(8);
    {
        let db = Database::open(sim_options(&fs)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(accounts, &[Value::U64(1), "a".into(), Value::I64(1)])
            .unwrap();
        txn.commit().unwrap();
        db.close().unwrap();
    }
    let newest = Path::new("/db/log-00000000ffff0000.wal");
    fs.open(newest, OpenMode::CreateNew).unwrap();
    fs.sync_dir(Path::new("/db")).unwrap();
    let db = Database::open(sim_options(&fs)).unwrap();
    assert_eq!(balances(&db), [(1, "a".to_owned(), 1)]);
    assert!(
        db.stats()
            .durability
            .unwrap()
            .recovery
            .unfinished_segment_removed
    );
    assert!(!fs.exists(newest).unwrap());
    db.close().unwrap();

    // An empty segment before the newest is not an interrupted creation.
    let older = Path::new("/db/log-0000000000000008.wal");
    fs.open(older, OpenMode::CreateNew).unwrap();
    assert!(matches!(
        Database::open(sim_options(&fs)),
        Err(Error::Corruption { .. })
    ));
}

/// Found by the regression test above, intermittently: the checkpoint's loader threads
/// raced at its end block. One read it and moved the reading position back to it for the
/// final check; another, reading in between, found the position at the end of the file
/// and failed the recovery with "the end block is missing". Reopening a checkpointed
/// database many times on several loader threads must always succeed.
#[test]
fn regression_loader_threads_racing_at_the_checkpoints_end_never_fail_a_recovery() {
    let fs = SimulatedFileSystem::new(9);
    let mut options = sim_options(&fs);
    options.recovery_threads = Some(4);
    let db = Database::open(options.clone()).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(accounts, &[Value::U64(1), "a".into(), Value::I64(1)])
        .unwrap();
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    db.close().unwrap();
    for attempt in 0..300 {
        let db = Database::open(options.clone()).unwrap_or_else(|e| panic!("open {attempt}: {e}"));
        db.close().unwrap();
    }
}

/// Under `Async { interval }` a power loss loses at most the commits of the last interval
/// (plus the time the sync itself takes; the test allows the background thread a generous
/// margin for scheduling on a loaded machine), and what survives is a prefix.
#[test]
fn async_durability_loses_at_most_its_interval_in_a_power_loss() {
    let interval = Duration::from_millis(20);
    let margin = Duration::from_millis(500);
    let fs = SimulatedFileSystem::new(10);
    let options = sim_options(&fs).durability(Durability::Async { interval });
    let db = Database::open(options).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    std::thread::sleep(interval * 3); // the table's record is synced
    let mut committed = Vec::new();
    let began = std::time::Instant::now();
    let mut id = 0u64;
    while began.elapsed() < Duration::from_millis(1500) {
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(accounts, &[Value::U64(id), "a".into(), Value::I64(1)])
            .unwrap();
        txn.commit().unwrap();
        committed.push((id, std::time::Instant::now()));
        id += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    fs.crash();
    let crashed_at = std::time::Instant::now();
    drop(db);
    fs.restart();
    let db = Database::open(sim_options(&fs)).unwrap();
    let found: Vec<u64> = balances(&db).iter().map(|(id, _, _)| *id).collect();
    assert_eq!(
        found,
        (0..found.len() as u64).collect::<Vec<_>>(),
        "a prefix of the commits"
    );
    let old_enough = committed
        .iter()
        .filter(|(_, at)| crashed_at.duration_since(*at) > interval + margin)
        .count();
    assert!(
        found.len() >= old_enough,
        "{} commits survived; {old_enough} were older than the interval and the margin",
        found.len()
    );
}

/// Several committers and two or three log syncs in flight at once (the leaders overlap
/// their syncs, which return in another order than they took effect in), small segments
/// (rotations wait for the syncs in flight), then a power loss, or a sync that fails and
/// loses its data followed by a power loss, at a moment that varies by seed: every commit
/// that returned is there after the reopen, each thread's commits survive as a prefix of
/// its own sequence, and the database keeps working. It fails if `durable` follows the
/// syncs in the order they return rather than the order they were issued.
#[test]
fn overlapping_syncs_lose_no_acknowledged_commit() {
    const THREADS: u64 = 4;
    let (mut acknowledged_in_all, mut most_in_flight, mut failed_syncs) = (0, 0, 0);
    for seed in 0..16u64 {
        let syncs_in_flight = 2 + (seed % 2) as usize;
        let fs = SimulatedFileSystem::new(300 + seed);
        // Syncs that take a while to return, and a varying while: they overlap and
        // return out of order.
        fs.set_sync_latency(Duration::from_micros(50), Duration::from_micros(1500));
        let db = Database::open(sim_options(&fs).log_syncs_in_flight(syncs_in_flight)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let faults_before = fs.stats().faults_injected;
        let acknowledged: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let committers: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let db = &db;
                    scope.spawn(move || {
                        let mut acknowledged = Vec::new();
                        for i in 0..100_000u64 {
                            let id = thread * 1_000_000 + i;
                            let mut txn = db.begin(Isolation::Snapshot);
                            let inserted =
                                txn.insert(accounts, &[Value::U64(id), "o".into(), Value::I64(1)]);
                            if inserted.and_then(|()| txn.commit()).is_err() {
                                break;
                            }
                            acknowledged.push(id);
                        }
                        acknowledged
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(5 + seed * 3 % 17));
            if seed % 2 == 1 {
                // A sync that drops what it was to write: nothing more is acknowledged,
                // and what was is durable.
                fs.fail_sync_after(1 + seed % 3);
                std::thread::sleep(Duration::from_millis(10));
            }
            fs.crash();
            committers.into_iter().map(|c| c.join().unwrap()).collect()
        });
        let stats = fs.stats();
        most_in_flight = most_in_flight.max(stats.max_syncs_in_flight);
        failed_syncs += stats.faults_injected - faults_before;
        drop(db);
        fs.restart();
        let db = Database::open(sim_options(&fs)).unwrap();
        let ids: std::collections::BTreeSet<u64> =
            balances(&db).into_iter().map(|(id, _, _)| id).collect();
        for (thread, acknowledged) in acknowledged.iter().enumerate() {
            let thread = thread as u64;
            for id in acknowledged {
                assert!(
                    ids.contains(id),
                    "seed {seed}: acknowledged commit {id} was lost"
                );
            }
            let survived = ids.iter().filter(|id| *id / 1_000_000 == thread).count() as u64;
            assert!(
                (0..survived).all(|i| ids.contains(&(thread * 1_000_000 + i))),
                "seed {seed}: thread {thread}'s commits survived as a prefix"
            );
            acknowledged_in_all += acknowledged.len();
        }
        let accounts = db.table("accounts").unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(accounts, &[Value::U64(u64::MAX), "z".into(), Value::I64(0)])
            .unwrap();
        txn.commit().unwrap();
    }
    assert!(
        acknowledged_in_all > 0,
        "nothing was acknowledged: nothing was checked"
    );
    assert!(
        most_in_flight >= 2,
        "the syncs never overlapped: {most_in_flight}"
    );
    assert!(
        failed_syncs > 0,
        "no sync failed: the failure path was not checked"
    );
}

/// Log replay splits the operations over threads by row (primary key): every row's
/// operations must apply in log order on one thread, and a table created in the middle of
/// the log must exist before any commit after it applies. A workload that churns few keys
/// (insert, update, delete, insert again, many times each, across the replay's batches)
/// in two tables, the second created halfway, replayed on 1 to 4 threads, must recover
/// exactly the model's rows and indexes.
#[test]
fn log_replay_on_several_threads_recovers_exactly_what_was_committed() {
    for threads in 1..=4usize {
        churn_then_replay(Options::default(), threads, 3_000, 40 + threads as u64);
    }
}

/// The same, shorter, on two threads in every configuration of the suites (each protocol
/// and collector, whose transactions the replay threads run side by side).
#[test]
fn log_replay_on_two_threads_recovers_what_was_committed_in_every_configuration() {
    for (c, options) in common::logged_configurations().into_iter().enumerate() {
        churn_then_replay(options, 2, 400, 100 + c as u64);
    }
}

fn churn_then_replay(base: Options, threads: usize, transactions: usize, seed: u64) {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use std::collections::BTreeMap;
    let configuration = format!("{base:?}");
    let with_fs = |fs: &SimulatedFileSystem| {
        let mut options = sim_options_from(base.clone(), fs);
        options.log_replay_threads = Some(threads);
        options
    };

    fn pairs_schema() -> Schema {
        Schema::new()
            .column("a", ColumnType::I64)
            .column("b", ColumnType::Text)
            .column("x", ColumnType::F64)
            .primary_key(&["a", "b"])
            .index("by_x", &["x"])
    }
    type Model = BTreeMap<(i64, String), BTreeMap<u64, (String, i64)>>;
    fn key_of(table: usize, k: u64) -> (i64, String) {
        if table == 0 {
            (0, String::new())
        } else {
            ((k % 7) as i64 - 3, format!("b{}", k / 7))
        }
    }
    {
        let fs = SimulatedFileSystem::new(seed);
        let db = Database::open(with_fs(&fs)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut pairs = None;
        // Model: accounts id -> (owner, balance); pairs (a, b) -> x (as i64 bits).
        let mut model: [BTreeMap<u64, (String, i64)>; 2] = Default::default();
        let mut rng = StdRng::seed_from_u64(7);
        let mut operations = 0u64;
        for n in 0..transactions {
            if n == transactions / 2 {
                pairs = Some(db.create_table("pairs", pairs_schema()).unwrap());
            }
            let mut txn = db.begin(Isolation::Snapshot);
            for _ in 0..rng.random_range(1..=4) {
                let table = match pairs {
                    Some(_) if rng.random_bool(0.5) => 1,
                    _ => 0,
                };
                let k = rng.random_range(0..60u64);
                let owner = format!("o{}", rng.random_range(0..5));
                let amount = rng.random_range(-1_000..1_000i64);
                let id = if table == 0 { accounts } else { pairs.unwrap() };
                let (a, b) = key_of(table, k);
                let key: Vec<Value> = if table == 0 {
                    vec![Value::U64(k)]
                } else {
                    vec![Value::I64(a), b.clone().into()]
                };
                let row = |owner: &str, amount: i64| -> Vec<Value> {
                    if table == 0 {
                        vec![Value::U64(k), owner.into(), Value::I64(amount)]
                    } else {
                        vec![
                            Value::I64(a),
                            b.clone().into(),
                            Value::F64(amount as f64 / 4.0),
                        ]
                    }
                };
                match model[table].get(&k).cloned() {
                    None => {
                        txn.insert(id, &row(&owner, amount)).unwrap();
                        model[table].insert(k, (owner, amount));
                    }
                    Some(_) if rng.random_bool(0.3) => {
                        assert!(txn.delete(id, &key).unwrap());
                        model[table].remove(&k);
                    }
                    Some((old_owner, _)) => {
                        let (column, owner) = if table == 0 && rng.random_bool(0.5) {
                            (1, owner)
                        } else {
                            (2, old_owner)
                        };
                        let change = if column == 1 {
                            Value::from(owner.clone())
                        } else if table == 0 {
                            Value::I64(amount)
                        } else {
                            Value::F64(amount as f64 / 4.0)
                        };
                        assert!(txn.update(id, &key, &[(column, change)]).unwrap());
                        let entry = model[table].get_mut(&k).unwrap();
                        entry.0 = owner;
                        if column == 2 {
                            entry.1 = amount;
                        }
                    }
                }
                operations += 1;
            }
            txn.commit().unwrap();
        }
        // A power loss: everything acknowledged under `Sync` is in the log, and no
        // checkpoint holds any of it.
        fs.crash();
        drop(db);
        fs.restart();
        let db = Database::open(with_fs(&fs)).unwrap();
        let recovery = db.stats().durability.unwrap().recovery;
        assert_eq!(recovery.log_replay_threads, threads as u32);
        assert_eq!(recovery.log_commits_replayed, transactions as u64);
        assert_eq!(recovery.log_operations_replayed, operations);
        let accounts = db.table("accounts").unwrap();
        let txn = db.begin(Isolation::Snapshot);
        let expected_accounts: Vec<Vec<Value>> = model[0]
            .iter()
            .map(|(k, (owner, amount))| {
                vec![Value::U64(*k), owner.as_str().into(), Value::I64(*amount)]
            })
            .collect();
        assert_eq!(
            all_rows(txn.scan(accounts, ..)).unwrap(),
            expected_accounts,
            "{threads} threads, {configuration}"
        );
        let mut by_owner: Vec<(String, u64)> = model[0]
            .iter()
            .map(|(k, (owner, _))| (owner.clone(), *k))
            .collect();
        by_owner.sort();
        let found: Vec<(String, u64)> = all_rows(txn.scan_index(accounts, "by_owner", ..))
            .unwrap()
            .into_iter()
            .map(|row| {
                (
                    row[1].as_text().unwrap().to_owned(),
                    row[0].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            found, by_owner,
            "{threads} threads, {configuration}: index by_owner"
        );
        let pairs = db.table("pairs").unwrap();
        let mut expected_pairs: Model = BTreeMap::new();
        for (k, row) in &model[1] {
            expected_pairs
                .entry(key_of(1, *k))
                .or_default()
                .insert(*k, row.clone());
        }
        let expected: Vec<Vec<Value>> = expected_pairs
            .iter()
            .flat_map(|((a, b), rows)| {
                rows.values().map(move |(_, amount)| {
                    vec![
                        Value::I64(*a),
                        b.as_str().into(),
                        Value::F64(*amount as f64 / 4.0),
                    ]
                })
            })
            .collect();
        assert_eq!(
            all_rows(txn.scan(pairs, ..)).unwrap(),
            expected,
            "{threads} threads, {configuration}"
        );
        let by_x = all_rows(txn.scan_index(pairs, "by_x", ..)).unwrap();
        assert_eq!(
            by_x.len(),
            expected.len(),
            "{threads} threads, {configuration}: index by_x"
        );
        assert!(
            by_x.windows(2)
                .all(|w| w[0][2].as_f64() <= w[1][2].as_f64()),
            "{threads} threads, {configuration}: index by_x in order"
        );
        drop(txn);
        db.close().unwrap();
    }
}

#[test]
fn zero_recovery_or_replay_threads_are_refused() {
    let fs = SimulatedFileSystem::new(50);
    for replay in [false, true] {
        let mut options = sim_options(&fs);
        if replay {
            options.log_replay_threads = Some(0);
        } else {
            options.recovery_threads = Some(0);
        }
        match Database::open(options) {
            Err(Error::UnsupportedConfiguration { reason }) => {
                assert!(reason.contains("at least one thread"), "{reason}")
            }
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
    }
    assert!(fs.files().is_empty(), "a refused open creates nothing");
}
