//! Crash-consistency model test: random interleaved transactions against a reference model,
//! on the simulated disk, with a power loss (or an injected I/O error, a full disk, a
//! failed fsync that drops data) at a random operation; then the database is reopened
//! through the public API and must hold exactly the state after a prefix of the commit
//! order that contains every acknowledged commit, with indexes that agree, and keep
//! working.
//!
//! Each scenario runs twice from its seed: once without faults to count the disk
//! operations it makes, then with the crash at a uniformly chosen one of them (the run is
//! single-threaded and the database's own threads do no I/O here, so it replays exactly).
//! A quarter of the scenarios crash again during the recovery.
//!
//! Every configuration of `common::logged_configurations` (every storage × collector pair
//! of the model test, physical pointers, out-of-line values, and each protocol; all but the
//! persistent-memory storage, whose commits do not go through the log) runs
//! `CRASH_SCENARIOS` scenarios (default 16: about two thousand crash points). For a longer
//! run: `CRASH_SCENARIOS=500 cargo test --release -p verso --test crash_model`.
//!
//! `planted_bugs_are_caught` shows the test finds each bug `Options::planted_bug` plants:
//! a commit acknowledged before its sync, a rename without a directory sync.

mod common;

use common::ScanRows;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use verso::fs::{Fault, SimulatedFileSystem};
use verso::{
    ColumnType, CommitTicket, Database, Durability, Error, Isolation, Options, PlantedBug, Schema,
    TableId, Transaction, Value,
};

const KEYS: u64 = 12;
const STEPS: usize = 120;

type State = BTreeMap<u64, (i64, String)>;

fn schema() -> Schema {
    Schema::new()
        .column("k", ColumnType::U64)
        .column("v", ColumnType::I64)
        .column("tag", ColumnType::Text)
        .primary_key(&["k"])
        .index("by_tag", &["tag"])
}

fn persistent(options: &Options, fs: &SimulatedFileSystem, durability: Durability) -> Options {
    let mut options = options
        .clone()
        .path("/db")
        .file_system(Arc::new(fs.clone()))
        .durability(durability)
        .preallocate_log_segments(false)
        // Exact replay: no thread but the test's does I/O (the flusher of deferred commits
        // would, at moments of its own).
        .log_flush_thread(false)
        .checkpoint_after_log_bytes(None)
        .log_segment_bytes(4096);
    options.recovery_threads = Some(1);
    options
}

/// A committed transaction as the model sees it: the rows it left (`None`: deleted).
type Writes = BTreeMap<u64, Option<(i64, String)>>;

struct Outcome {
    /// Commits in commit order; the last may be uncertain (its commit failed after it
    /// may have become visible).
    commits: Vec<Writes>,
    /// How many of them were acknowledged durable (a prefix: a commit is acknowledged
    /// only once every earlier one is durable).
    acknowledged: usize,
    /// Whether the run stopped at an I/O failure (a crash or an injected fault).
    failed: bool,
}

fn tag(rng: &mut StdRng) -> String {
    // Sometimes long enough to live out of line.
    let len = if rng.random_bool(0.2) { 80 } else { 3 };
    let c = (b'a' + rng.random_range(0..4u8)) as char;
    std::iter::repeat_n(c, len).collect()
}

/// Runs the scenario `seed` on `db` until its steps end or a call fails with anything
/// but a conflict.
fn run_workload(db: &Database, table: TableId, seed: u64) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut open: Vec<(Transaction<'_>, Writes)> = Vec::new();
    let mut tickets: Vec<(CommitTicket, usize)> = Vec::new();
    let mut outcome = Outcome {
        commits: Vec::new(),
        acknowledged: 0,
        failed: false,
    };
    let retryable = |error: &Error| error.is_retryable() || *error == Error::TransactionAborted;
    for _ in 0..STEPS {
        let choice = rng.random_range(0..100);
        let result: Result<(), Error> = (|| {
            match choice {
                0..=14 if open.len() < 3 => {
                    let isolation = if rng.random_bool(0.2) {
                        Isolation::Serializable
                    } else {
                        Isolation::Snapshot
                    };
                    open.push((db.begin(isolation), Writes::new()));
                }
                15..=59 if !open.is_empty() => {
                    let i = rng.random_range(0..open.len());
                    let (txn, writes) = &mut open[i];
                    let k = rng.random_range(0..KEYS);
                    let v = rng.random_range(-100..100);
                    let t = tag(&mut rng);
                    match rng.random_range(0..4) {
                        0 => {
                            match txn
                                .insert(table, &[Value::U64(k), Value::I64(v), t.clone().into()])
                            {
                                Ok(()) => {
                                    writes.insert(k, Some((v, t)));
                                }
                                Err(Error::DuplicateKey { .. }) => {}
                                Err(e) => return Err(e),
                            }
                        }
                        1 => {
                            if txn.update(
                                table,
                                &[Value::U64(k)],
                                &[(1, Value::I64(v)), (2, t.clone().into())],
                            )? {
                                writes.insert(k, Some((v, t)));
                            }
                        }
                        2 => {
                            if txn.delete(table, &[Value::U64(k)])? {
                                writes.insert(k, None);
                            }
                        }
                        _ => {
                            txn.get(table, &[Value::U64(k)])?;
                        }
                    }
                }
                60..=74 if !open.is_empty() => {
                    let i = rng.random_range(0..open.len());
                    let (txn, writes) = open.swap_remove(i);
                    let deferred = rng.random_bool(0.4);
                    let wrote = !writes.is_empty();
                    if wrote {
                        // Uncertain until it returns: it may become visible and then fail.
                        outcome.commits.push(writes);
                    }
                    let position = outcome.commits.len();
                    let committed = if deferred {
                        txn.commit_deferred().map(|ticket| {
                            if wrote {
                                tickets.push((ticket, position));
                            }
                        })
                    } else {
                        txn.commit().map(|()| {
                            if wrote {
                                outcome.acknowledged = position;
                            }
                        })
                    };
                    if let Err(error) = committed {
                        if wrote && retryable(&error) {
                            outcome.commits.pop();
                        }
                        return Err(error);
                    }
                }
                75..=84 if !open.is_empty() => {
                    let i = rng.random_range(0..open.len());
                    open.swap_remove(i).0.abort();
                }
                85..=94 if !tickets.is_empty() => {
                    let i = rng.random_range(0..tickets.len());
                    let (ticket, position) = tickets.swap_remove(i);
                    ticket.wait()?;
                    outcome.acknowledged = outcome.acknowledged.max(position);
                }
                95..=96 => {
                    db.checkpoint()?;
                }
                _ => {}
            }
            Ok(())
        })();
        match result {
            Ok(()) => {}
            Err(error) if retryable(&error) => {}
            Err(_) => {
                outcome.failed = true;
                break;
            }
        }
    }
    drop(open);
    outcome
}

fn read_state(db: &Database) -> Result<State, String> {
    let table = db.table("t").map_err(|e| e.to_string())?;
    let txn = db.begin(Isolation::Snapshot);
    let rows = txn.scan(table, ..).rows().map_err(|e| e.to_string())?;
    let state: State = rows
        .iter()
        .map(|r| {
            (
                r[0].as_u64().unwrap(),
                (r[1].as_i64().unwrap(), r[2].as_text().unwrap().to_owned()),
            )
        })
        .collect();
    // The secondary index agrees with the rows.
    let by_tag = txn
        .scan_index(table, "by_tag", ..)
        .rows()
        .map_err(|e| e.to_string())?;
    let mut expected: Vec<(String, u64)> =
        state.iter().map(|(k, (_, t))| (t.clone(), *k)).collect();
    expected.sort();
    let found: Vec<(String, u64)> = by_tag
        .iter()
        .map(|r| (r[2].as_text().unwrap().to_owned(), r[0].as_u64().unwrap()))
        .collect();
    if found != expected {
        return Err(format!("index by_tag {found:?} != rows {expected:?}"));
    }
    Ok(state)
}

fn apply(state: &mut State, writes: &Writes) {
    for (k, row) in writes {
        match row {
            Some(row) => {
                state.insert(*k, row.clone());
            }
            None => {
                state.remove(k);
            }
        }
    }
}

/// Checks `found` is the state after some prefix of `outcome.commits` of at least
/// `outcome.acknowledged` commits; returns the prefix's length.
fn check_prefix(found: &State, outcome: &Outcome) -> Result<usize, String> {
    let mut state = State::new();
    let mut matches = Vec::new();
    for k in 0..=outcome.commits.len() {
        if k > 0 {
            apply(&mut state, &outcome.commits[k - 1]);
        }
        if k >= outcome.acknowledged && &state == found {
            matches.push(k);
        }
    }
    matches.first().copied().ok_or_else(|| {
        format!(
            "the recovered state {found:?} is no prefix of the {} commits with at least the {} \
             acknowledged",
            outcome.commits.len(),
            outcome.acknowledged
        )
    })
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    PowerLoss,
    Fault(Fault),
}

/// One scenario: returns `Err` with what went wrong.
fn scenario(options: &Options, seed: u64, durability: Durability) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    // Log replay on one, two or three threads (they do no I/O: the disk's operations stay
    // the same, and the scenario replayable).
    let mut options = options.clone();
    options.log_replay_threads = Some(1 + (seed % 3) as usize);
    let options = &options;
    // Count the disk operations of the run: those of creating the database and its table,
    // and those of the whole workload.
    let counting = SimulatedFileSystem::new(seed);
    let (setup, total) = {
        let db = Database::open(persistent(options, &counting, durability))
            .map_err(|e| format!("open: {e}"))?;
        let table = db.create_table("t", schema()).map_err(|e| e.to_string())?;
        let setup = counting.stats().operations;
        let outcome = run_workload(&db, table, seed);
        if outcome.failed {
            return Err("the run failed without any fault".into());
        }
        (setup, counting.stats().operations)
    };
    let fs = SimulatedFileSystem::new(seed);
    let damage = match rng.random_range(0..10) {
        0 => Damage::Fault(Fault::Eio),
        1 => Damage::Fault(Fault::NoSpace),
        2 => Damage::Fault(Fault::SyncLosesData),
        _ => Damage::PowerLoss,
    };
    // The damage strikes one of the workload's operations.
    let after = rng.random_range(1..=(total - setup).max(1));
    let outcome = {
        let db = Database::open(persistent(options, &fs, durability))
            .map_err(|e| format!("open: {e}"))?;
        let table = db.create_table("t", schema()).map_err(|e| e.to_string())?;
        match damage {
            Damage::PowerLoss => fs.crash_after(after),
            Damage::Fault(fault) => fs.fail_after(after, fault),
        }
        let outcome = run_workload(&db, table, seed);
        drop(db);
        outcome
    };
    // The machine goes down (if it has not already).
    fs.clear_faults();
    fs.crash();
    fs.restart();
    if rng.random_bool(0.25) {
        // A crash during the recovery, at a random operation of it.
        fs.crash_after(rng.random_range(1..40));
        let _ = Database::open(persistent(options, &fs, durability));
        fs.clear_faults();
        fs.crash();
        fs.restart();
    }
    recheck_after_restart(options, &fs, durability, &outcome, seed)
}

fn recheck_after_restart(
    options: &Options,
    fs: &SimulatedFileSystem,
    durability: Durability,
    outcome: &Outcome,
    seed: u64,
) -> Result<(), String> {
    let db = Database::open(persistent(options, fs, durability))
        .map_err(|e| format!("reopen after the crash: {e}"))?;
    let state = match db.table("t") {
        Ok(_) => read_state(&db)?,
        Err(_) => {
            // The table's creation was never acknowledged, nor anything after it.
            if outcome.acknowledged > 0 {
                return Err("the table is gone though commits were acknowledged".into());
            }
            db.create_table("t", schema()).map_err(|e| e.to_string())?;
            State::new()
        }
    };
    let prefix = check_prefix(&state, outcome)?;
    // It keeps working: one more commit, a clean close, and it is all there.
    let table = db.table("t").map_err(|e| e.to_string())?;
    let mut txn = db.begin(Isolation::Snapshot);
    let key = 1000 + seed;
    txn.insert(table, &[Value::U64(key), Value::I64(7), "after".into()])
        .map_err(|e| e.to_string())?;
    txn.commit()
        .map_err(|e| format!("commit after recovery: {e}"))?;
    db.close().map_err(|e| e.to_string())?;
    let db = Database::open(persistent(options, fs, durability))
        .map_err(|e| format!("reopen after the close: {e}"))?;
    let mut expected = state.clone();
    expected.insert(key, (7, "after".into()));
    let again = read_state(&db)?;
    if again != expected {
        return Err(format!(
            "after recovery (prefix {prefix}) and one more commit: {again:?} != {expected:?}"
        ));
    }
    Ok(())
}

fn scenarios() -> u64 {
    std::env::var("CRASH_SCENARIOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
}

#[test]
fn every_configuration_recovers_a_prefix_holding_every_acknowledged_commit() {
    let configurations = common::logged_configurations();
    let mut failures = Vec::new();
    let mut points = 0;
    for (c, options) in configurations.iter().enumerate() {
        for s in 0..scenarios() {
            let seed = (c as u64) << 32 | s;
            points += 1;
            if let Err(error) = scenario(options, seed, Durability::Sync) {
                failures.push(format!("{options:?} seed {seed}: {error}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {points} crash points failed; first: {}",
        failures.len(),
        failures.first().unwrap()
    );
}

/// Under `None` nothing is synced, so only a crash of the process (the OS keeps what was
/// written) must keep every acknowledged commit.
#[test]
fn durability_none_survives_a_process_crash() {
    for seed in 0..scenarios() * 4 {
        let options = Options::default();
        let fs = SimulatedFileSystem::new(seed);
        let outcome = {
            let db = Database::open(persistent(&options, &fs, Durability::None)).unwrap();
            let table = db.create_table("t", schema()).unwrap();
            let outcome = run_workload(&db, table, seed);
            // The process dies: its handles are dead, so dropping the database writes
            // nothing more.
            fs.kill_process();
            drop(db);
            outcome
        };
        assert!(!outcome.failed);
        let db = Database::open(persistent(&options, &fs, Durability::None)).unwrap();
        let state = read_state(&db).unwrap();
        check_prefix(&state, &outcome).unwrap();
    }
}

#[test]
fn planted_bugs_are_caught() {
    for bug in [
        PlantedBug::AcknowledgeBeforeSync,
        PlantedBug::RenameWithoutDirectorySync,
    ] {
        let mut options = Options::default();
        options.planted_bug = Some(bug);
        let caught = (0..400).any(|seed| scenario(&options, seed, Durability::Sync).is_err());
        assert!(caught, "{bug:?} went unnoticed in 400 scenarios");
    }
}
