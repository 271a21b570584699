//! The seam between the runner and the workloads.
//!
//! A [`Workload`] creates and loads its tables, hands out per-thread OLTP and OLAP workers,
//! and checks the database's consistency after a run. The runner (threads, timing, the
//! per-second time series, `--hold-snapshot`) is the same for every workload.
//!
//! Workers are created *on* the thread that runs them (inside `std::thread::scope`), so
//! they need not be `Send`: a worker may keep a [`verso::Transaction`], which is `!Send`.

use verso::{Database, Error as EngineError, Isolation};

/// Why one attempt of an OLTP transaction did not commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// A write-write conflict (snapshot isolation's first-updater-wins).
    WriteConflict,
    /// A failed serializability validation.
    Serialization,
    /// A row lock or read timestamp refused a read or write (MVTO, MV2PL no-wait).
    LockConflict,
    /// The workload itself decided to roll back (TPC-C's 1% New-Order with an unused item).
    ByWorkload,
    /// A peer found a deadlock and rolled one of its transactions back (PostgreSQL's
    /// SQLSTATE 40P01).
    Deadlock,
    /// A peer's database was busy (SQLite's `SQLITE_BUSY` after its busy timeout, or a
    /// reader's snapshot too old to write: `SQLITE_BUSY_SNAPSHOT`).
    Busy,
}

impl AbortReason {
    /// Every reason, in the order reports list them.
    pub const ALL: [AbortReason; 6] = [
        AbortReason::WriteConflict,
        AbortReason::Serialization,
        AbortReason::LockConflict,
        AbortReason::ByWorkload,
        AbortReason::Deadlock,
        AbortReason::Busy,
    ];

    /// The name used in reports and JSON keys.
    pub fn name(self) -> &'static str {
        match self {
            AbortReason::WriteConflict => "write_conflict",
            AbortReason::Serialization => "serialization",
            AbortReason::LockConflict => "lock_conflict",
            AbortReason::ByWorkload => "by_workload",
            AbortReason::Deadlock => "deadlock",
            AbortReason::Busy => "busy",
        }
    }

    /// The reason for a retryable engine error, `None` for any other error (which is a bug
    /// in the workload or the engine and must stop the run).
    pub fn of(error: &EngineError) -> Option<AbortReason> {
        match error {
            EngineError::WriteConflict { .. } | EngineError::TransactionAborted => {
                Some(AbortReason::WriteConflict)
            }
            EngineError::SerializationFailure { .. } => Some(AbortReason::Serialization),
            EngineError::LockConflict { .. } => Some(AbortReason::LockConflict),
            _ => None,
        }
    }
}

/// What a committed transaction did, as the runner counts it (docs/lab.md, "Operations").
///
/// An operation is one row read or written: a point read of a row, each row a scan
/// returns, an insert, an update or a delete of one row. An update counts once, as YCSB
/// and pgbench count their statements (a read of the row before it, if the transaction
/// does one, counts apart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Rows read or written.
    pub operations: u64,
    /// Rows inserted minus rows deleted: what the transaction added to the tables' live
    /// rows (for [`crate::metrics::Sample::chain_length_mean`]).
    pub rows_added: i64,
}

impl Work {
    /// `operations` row operations that insert or delete nothing.
    pub fn operations(operations: u64) -> Work {
        Work {
            operations,
            rows_added: 0,
        }
    }
}

/// What one attempt of an OLTP transaction ended as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// It committed; `kind` indexes [`Workload::transaction_kinds`].
    Committed {
        /// Which transaction type ran.
        kind: usize,
        /// What it read and wrote.
        work: Work,
    },
    /// It was rolled back.
    Aborted {
        /// Which transaction type ran.
        kind: usize,
        /// Why.
        reason: AbortReason,
    },
}

/// What one analytical query did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryOutcome {
    /// Which query ran; indexes [`Workload::query_names`].
    pub query: usize,
    /// Tuples the query read from base tables (the normalization of Funke et al. that the
    /// Steam paper uses for CH-benCHmark's OLAP throughput).
    pub scanned_tuples: u64,
}

/// The most rows the row-table workloads (YCSB, key-value, scans) accept, from `--rows` or
/// `--scale`: far beyond what a machine here holds, and far from overflowing the keys.
pub const MAX_TABLE_ROWS: u64 = 1 << 40;

/// An error that stops a lab run: an unexpected engine error, a failed consistency check,
/// bad options.
#[derive(Debug)]
pub enum LabError {
    /// The engine returned an error the workload does not expect.
    Engine(EngineError),
    /// A consistency condition failed after load or after a run.
    Inconsistent(String),
    /// The options do not make sense.
    BadOption(String),
    /// Writing a report or JSON failed.
    Io(std::io::Error),
    /// A thread of the run (a worker, a loader, the snapshot holder) could not be started,
    /// or panicked instead of returning: which thread, and when.
    ThreadFailed(String),
    /// A peer (PostgreSQL, DuckDB, SQLite) could not be found, started or reached, or
    /// failed in a way no workload expects: which peer, and what it said.
    Peer(String),
    /// A fixed-rate run (`--target-rate`) committed less than
    /// `runner::TARGET_RATE_TOLERANCE` of the rate asked for: the system could not keep up,
    /// so its numbers would be compared with others' at a different rate.
    TargetRateMissed {
        /// Committed transactions per second asked for.
        target_per_second: f64,
        /// Committed transactions per second run.
        achieved_per_second: f64,
        /// Schedule the workers dropped, in seconds (`FixedRateResult`).
        behind_schedule_seconds: f64,
    },
    /// A configuration or point run in a child process of the `verso` binary failed: the
    /// child's own error (its last stderr line) or the signal that killed it.
    ChildFailed {
        /// Which run: "configuration 1", "point 3".
        what: String,
        /// How the child ended, in words (exit status, or the signal and what usually
        /// sends it).
        ended: String,
        /// What the child wrote to stderr (its error, if it could write one).
        stderr: String,
    },
}

impl LabError {
    /// The error for a child process that ended with `status` after writing `stderr`.
    pub fn child_failed(what: &str, status: std::process::ExitStatus, stderr: &str) -> Self {
        use std::os::unix::process::ExitStatusExt;
        let ended = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            // The kernel's out-of-memory killer sends SIGKILL; nothing in the lab does.
            (None, Some(9)) => "killed by signal 9 (SIGKILL), which the kernel's \
                                out-of-memory killer sends when memory runs out"
                .to_owned(),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => format!("{status}"),
        };
        LabError::ChildFailed {
            what: what.to_owned(),
            ended,
            stderr: stderr.trim().to_owned(),
        }
    }
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Engine(e) => write!(f, "engine error: {e}"),
            LabError::Inconsistent(what) => write!(f, "consistency check failed: {what}"),
            LabError::BadOption(what) => write!(f, "bad option: {what}"),
            LabError::Io(e) => write!(f, "i/o error: {e}"),
            LabError::ThreadFailed(what) => write!(f, "a thread of the run failed: {what}"),
            LabError::Peer(what) => write!(f, "peer {what}"),
            LabError::TargetRateMissed {
                target_per_second,
                achieved_per_second,
                behind_schedule_seconds,
            } => write!(
                f,
                "--target-rate {target_per_second} transactions/s not reached: {achieved_per_second:.1}/s \
                 ({:.1}% of the target, below the {:.0}% required; {behind_schedule_seconds:.2} s of \
                 schedule dropped); the system cannot keep up at this rate here: lower it",
                100.0 * achieved_per_second / target_per_second,
                100.0 * crate::runner::TARGET_RATE_TOLERANCE
            ),
            LabError::ChildFailed {
                what,
                ended,
                stderr,
            } => {
                write!(f, "the child process running {what} failed: {ended}")?;
                if !stderr.is_empty() {
                    write!(f, "; it said: {stderr}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for LabError {}

impl From<EngineError> for LabError {
    fn from(e: EngineError) -> Self {
        LabError::Engine(e)
    }
}

impl From<std::io::Error> for LabError {
    fn from(e: std::io::Error) -> Self {
        LabError::Io(e)
    }
}

/// When the transaction of an OLTP worker's next attempt was submitted
/// ([`OltpWorker::next_submission`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submission {
    /// Closed loop: as soon as the worker is free (the runner measures its latency from
    /// the previous commit, or from its `--target-rate` slot).
    ClosedLoop,
    /// A terminal submitted it at this instant (paced TPC-C); the runner measures its
    /// response time from then, so the time it queued for a free worker counts.
    At(std::time::Instant),
    /// The run stopped while the worker waited for a submission.
    Stopped,
}

/// One OLTP worker: runs one transaction attempt per call.
pub trait OltpWorker {
    /// Run one transaction (one attempt, no retry: the runner counts aborts) at `isolation`.
    /// Retryable engine errors become [`TxnOutcome::Aborted`]; any other error is returned.
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError>;

    /// Called by the runner before every attempt. A worker whose transactions are
    /// submitted by terminals on their own schedule (`workloads::tpcc::paced`) waits here
    /// until one is due, claims it, and says when it was submitted; a retry after a
    /// conflict returns the same instant. Returns [`Submission::Stopped`] once `stop` is
    /// set while it waits. The default, closed loop, returns at once.
    fn next_submission(
        &mut self,
        _stop: &std::sync::atomic::AtomicBool,
    ) -> Result<Submission, LabError> {
        Ok(Submission::ClosedLoop)
    }
}

/// A workload whose OLTP transactions are submitted by simulated terminals, each paced by
/// keying and think times, instead of as fast as the workers go (`verso tpcc
/// --terminals-per-warehouse`): the offered load is set by the terminals, and the workers
/// are the pool of connections that serve them.
pub trait PacedWorkload: Sync {
    /// Resets the terminals for a new run seeded with `seed` (each configuration's run
    /// starts from the same state).
    fn begin_run(&self, seed: u64) -> Result<(), LabError>;

    /// What the terminals offered and what became of it over the run just measured, from
    /// the runner's `totals`, its run time, and when it told the workers to stop (what
    /// was still queued then).
    fn result(
        &self,
        totals: &crate::metrics::Totals,
        run_seconds: f64,
        stopped_at: std::time::Instant,
    ) -> crate::metrics::PacedResult;
}

/// One OLAP worker: runs one analytical query per call.
pub trait OlapWorker {
    /// Run the next query of the worker's stream, at a snapshot of its own.
    fn run_one(&mut self) -> Result<QueryOutcome, LabError>;
}

/// Reports loading progress (rows loaded so far out of an expected total).
pub trait LoadProgress: Sync {
    /// Sets the expected total number of rows.
    fn set_total(&self, rows: u64);
    /// Adds `rows` loaded rows.
    fn advance(&self, rows: u64);
}

/// A load progress that shows nothing (tests).
pub struct NoProgress;

impl LoadProgress for NoProgress {
    fn set_total(&self, _rows: u64) {}
    fn advance(&self, _rows: u64) {}
}

/// When the OLTP and OLAP workers of a timed run work, as shares of its duration: OLAP
/// from `olap_from`, OLTP until `oltp_until` (DIVA's phases: OLTP only, both, OLAP only).
/// A run stopped by a count of transactions has no phases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phases {
    /// OLAP workers start at this share of the run.
    pub olap_from: f64,
    /// OLTP workers stop at this share of the run.
    pub oltp_until: f64,
}

impl Phases {
    /// Both kinds of worker for the whole run.
    pub const WHOLE_RUN: Phases = Phases {
        olap_from: 0.0,
        oltp_until: 1.0,
    };
}

/// A workload: its tables, data, transactions and queries.
pub trait Workload: Sync {
    /// The name used on the command line and in reports (`ycsb`, `tpcc`, `ch`, ...).
    fn name(&self) -> &'static str;

    /// A one-line description of the size (rows, warehouses, theta...) for reports.
    fn describe(&self) -> String;

    /// Creates the tables and loads the initial data. Deterministic in the workload's seed.
    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError>;

    /// The names of the OLTP transaction types, which [`TxnOutcome`]'s `kind` indexes (YCSB
    /// with `--operations-mix` has one per transaction size, so they are not all static).
    fn transaction_kinds(&self) -> Vec<String>;

    /// The names of the analytical queries, which [`QueryOutcome::query`] indexes; empty if
    /// the workload has none.
    fn query_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// A worker for OLTP thread number `worker` (0-based) of `workers`, with its own random
    /// stream derived from `seed`. Called on the thread that will run it.
    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError>;

    /// A worker for OLAP thread number `worker`, or `None` if the workload has no queries.
    fn olap_worker<'db>(
        &'db self,
        _db: &'db Database,
        _worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'db>>, LabError> {
        Ok(None)
    }

    /// The workload as the peers run it, in SQL (`crate::peers`), or `None` if it has no
    /// SQL form (then `--peer` refuses it).
    fn sql(&self) -> Option<&dyn crate::peers::SqlWorkload> {
        None
    }

    /// When its OLTP and OLAP workers run in a timed run ([`Phases::WHOLE_RUN`] unless it
    /// has phases).
    fn phases(&self) -> Phases {
        Phases::WHOLE_RUN
    }

    /// The terminals that submit its transactions, if it is paced ([`PacedWorkload`]);
    /// `None`, the default, runs closed loop.
    fn paced(&self) -> Option<&dyn PacedWorkload> {
        None
    }

    /// Checks the workload's consistency conditions (TPC-C clause 3.3.2 for TPC-C and CH);
    /// called after load and after every run. The default has none to check.
    fn check_consistency(&self, _db: &Database) -> Result<(), LabError> {
        Ok(())
    }
}

impl TxnOutcome {
    /// The outcome of one attempt of a transaction of type `kind` whose body (including
    /// its commit) returned `result`: committed (having done `work`), aborted for a
    /// retryable reason, or the unexpected engine error as a [`LabError`].
    pub fn of(
        kind: usize,
        work: Work,
        result: Result<(), EngineError>,
    ) -> Result<TxnOutcome, LabError> {
        match result {
            Ok(()) => Ok(TxnOutcome::Committed { kind, work }),
            Err(error) => match AbortReason::of(&error) {
                Some(reason) => Ok(TxnOutcome::Aborted { kind, reason }),
                None => Err(LabError::Engine(error)),
            },
        }
    }
}
