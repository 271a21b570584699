//! Paced TPC-C: terminals that key, submit and think, served by a pool of connections
//! (`verso tpcc --terminals-per-warehouse N --pacing SCALE`; DBT2's model, which SI-CV's
//! experiments run).
//!
//! Each warehouse has `N` terminals. A terminal loops: it draws a transaction type from
//! the standard mix, keys it in for the type's keying time, submits it, waits for its
//! response, and thinks for an exponentially distributed time ([`super::pacing`]). The
//! offered load is therefore fixed per warehouse and grows with the warehouses, and past
//! the point where the connections are busy all the time (the knee) submissions queue and
//! the response time rises steeply: what DBT2 shows and the closed-loop run cannot.
//!
//! Terminals are logical: thousands cost a few hundred bytes each and no thread. They
//! wait in one [`TerminalBoard`], a min-heap keyed by each terminal's next submission
//! instant. The connections are the run's OLTP worker threads (`--workers`); a free one
//! takes the earliest submission that is due, or sleeps until it is. Because the key of
//! a submitted transaction is its submission instant, the heap's due entries *are* the
//! queue of submitted transactions in submission order: one structure is both the
//! terminals' timers and the connection pool's FIFO queue. (A heap per worker thread,
//! each with its own terminals, would be a partitioned pool: a transaction would wait for
//! its own connection while another sat idle, which is not how DBT2's pool behaves.)
//!
//! Response time runs from the submission (the end of keying) to the commit, including
//! the wait for a free connection; the runner measures it (`OltpWorker::next_submission`).
//! New-Order's 1% rollbacks complete their terminal's cycle but are counted, not timed.
//! A conflict's abort is retried on the same connection with fresh inputs for the same
//! type (the lab's TPC-C never retries with the same keys), after a random back-off that
//! doubles with each conflict in a row (from [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`]): the
//! engine refuses the second writer of a row at once where PostgreSQL makes it wait for
//! the first, and a retry at once would mostly meet the same running writer again. The
//! back-offs and retries count in that transaction's response time.
//!
//! Each terminal starts at a uniformly random point of one mean cycle (keying plus
//! think), so the terminals' submissions are spread out from the first instant and the
//! run needs no ramp-up to leave out: the rate at which idle terminals submit is the
//! steady state's from the start.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use verso::{Database, Isolation};

use super::pacing::Pacing;
use super::terminal::Terminal;
use super::transactions::{NEW_ORDER, ORDER_STATUS};
use super::{Tpcc, TpccConfig, TpccWorker, TRANSACTION_KINDS};
use crate::metrics::{PacedResult, Totals};
use crate::peers::sql::{Session, TableDef};
use crate::peers::workloads::tpcc::TpccSqlWorker;
use crate::peers::workloads::SqlWorkload;
use crate::peers::PeerKind;
use crate::rng::SplitMix64;
use crate::workload::{
    AbortReason, LabError, LoadProgress, OlapWorker, OltpWorker, PacedWorkload, Submission,
    TxnOutcome, Workload,
};

/// DBT2's and SI-CV's terminals per warehouse.
pub const DBT2_TERMINALS_PER_WAREHOUSE: u32 = 20;

/// `--pacing`'s default: TPC-C's keying and think times divided by 20,000 (a New-Order is
/// keyed for 0.9 ms, a Payment followed by 0.6 ms of thought on average; a terminal's
/// mean cycle is 1.05 ms). Twenty terminals per warehouse then offer about 515,000
/// New-Orders a minute per warehouse, and the in-memory engine's two workers on this
/// 2-core machine sustain about 2.1 million closed loop (80,000 commits/s): the knee falls
/// between 4 and 8 warehouses, inside a sweep of 1 to 8 that loads in seconds and fits
/// in 4.5 GiB. docs/lab.md, "Paced TPC-C", gives the measurements and what to use on the
/// disk engine.
pub const DEFAULT_PACING: f64 = 20_000.0;

/// The most terminals a run may have (a few hundred bytes each).
pub const MAX_TERMINALS: u64 = 1_000_000;

/// How often a connection waiting for a submission looks at the run's stop flag.
const STOP_POLL: Duration = Duration::from_millis(10);

/// The longest first back-off after a write conflict: about one short transaction.
pub const FIRST_BACKOFF: Duration = Duration::from_micros(20);

/// The longest back-off after many write conflicts in a row (a synced commit's time).
pub const MAX_BACKOFF: Duration = Duration::from_millis(1);

/// How many terminals, and how fast they go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PacedOptions {
    /// Terminals per warehouse (DBT2 and SI-CV: 20).
    pub terminals_per_warehouse: u32,
    /// Keying and think times are divided by this ([`Pacing`]).
    pub pacing: f64,
}

/// Refuses what a paced run cannot combine with: a fixed rate (the terminals set the
/// load), logical clients (the connections are the workers) and no workers at all.
pub fn refuse_closed_loop_options(
    target_rate: Option<f64>,
    clients: Option<usize>,
    workers: usize,
) -> Result<(), LabError> {
    if target_rate.is_some() {
        return Err(LabError::BadOption(
            "--target-rate with --terminals-per-warehouse: the terminals' keying and think \
             times set a paced run's load; give --pacing to change it"
                .into(),
        ));
    }
    if clients.is_some() {
        return Err(LabError::BadOption(
            "--clients with --terminals-per-warehouse: the terminals are a paced run's \
             clients, and --workers is its pool of connections"
                .into(),
        ));
    }
    if workers == 0 {
        return Err(LabError::BadOption(
            "--terminals-per-warehouse with --workers 0: the workers are the connections \
             that serve the terminals; give at least one"
                .into(),
        ));
    }
    Ok(())
}

/// One terminal: its inputs, its own random stream for keying and think times, and the
/// transaction it is keying or has submitted.
struct PacedTerminal {
    /// Its number, 0-based: warehouse by warehouse.
    number: u64,
    /// Draws the transaction types and what each is asked to do, for its one warehouse.
    inputs: Terminal,
    /// Draws the think times.
    rng: SplitMix64,
    /// The type of the transaction being keyed or run.
    kind: usize,
}

/// A terminal waiting to submit, or whose submission waits for a connection.
struct Waiting {
    /// When it submits (or submitted): time since the run's epoch.
    due: Duration,
    /// The terminal's number, which breaks ties so the order is total.
    number: u64,
    terminal: Box<PacedTerminal>,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.number) == (other.due, other.number)
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest submission first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.number).cmp(&(self.due, self.number))
    }
}

/// The terminals of one run and the counts of what they did.
#[derive(Default)]
struct Schedule {
    /// When the run started: the first connection's first look (the start line has then
    /// opened). Every `due` is relative to it.
    epoch: Option<Instant>,
    /// Every terminal not being served, by its next submission.
    waiting: BinaryHeap<Waiting>,
    /// Submissions a connection took (each once, however often it was retried).
    claimed: u64,
    /// Transactions completed: committed or rolled back by the workload.
    completed: u64,
}

/// The terminals, shared by the connections.
///
/// Invariant: every terminal is either in `waiting` or claimed by exactly one connection;
/// a connection that waits for a submission sleeps no later than the earliest `due` it
/// saw, and whoever changes the earliest entry (a push, or a claim that leaves others)
/// wakes one sleeper, which then looks again.
struct TerminalBoard {
    schedule: Mutex<Schedule>,
    changed: Condvar,
}

/// A submission a connection took: the terminal and the instant it submitted.
type Claimed = (Box<PacedTerminal>, Instant);

impl TerminalBoard {
    fn lock(&self) -> MutexGuard<'_, Schedule> {
        // Nothing panics while holding the lock, so a poisoned one still holds a good state.
        self.schedule.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the earliest due submission, sleeping until one is due; `None` once `stop`
    /// is set.
    fn claim(&self, stop: &AtomicBool) -> Option<Claimed> {
        let mut schedule = self.lock();
        let epoch = *schedule.epoch.get_or_insert_with(Instant::now);
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let now = Instant::now();
            let wait = match schedule.waiting.peek() {
                Some(next) if epoch + next.due <= now => {
                    let next = schedule.waiting.pop().expect("peeked");
                    schedule.claimed += 1;
                    let another_due = schedule
                        .waiting
                        .peek()
                        .is_some_and(|after| epoch + after.due <= now);
                    drop(schedule);
                    // The earliest entry is now later than any sleeper saw, so a sleeper
                    // wakes no later than it must: wake one only if it is due already.
                    if another_due {
                        self.changed.notify_one();
                    }
                    return Some((next.terminal, epoch + next.due));
                }
                Some(next) => (epoch + next.due - now).min(STOP_POLL),
                // Every terminal is being served: a completion will wake us.
                None => STOP_POLL,
            };
            schedule = self
                .changed
                .wait_timeout(schedule, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// `terminal`'s transaction completed at `finished`: it thinks, keys its next one,
    /// and waits to submit it.
    fn complete(&self, mut terminal: Box<PacedTerminal>, finished: Instant, pacing: &Pacing) {
        let think = pacing.think_time(terminal.kind, &mut terminal.rng);
        terminal.kind = terminal.inputs.next_kind();
        let keying = pacing.keying_time(terminal.kind);
        let mut schedule = self.lock();
        let epoch = *schedule.epoch.get_or_insert(finished);
        schedule.completed += 1;
        schedule.waiting.push(Waiting {
            due: finished.saturating_duration_since(epoch) + think + keying,
            number: terminal.number,
            terminal,
        });
        drop(schedule);
        self.changed.notify_one();
    }
}

/// TPC-C driven by paced terminals: [`Tpcc`]'s tables, transactions and checks, with
/// [`PacedConnection`]s as its OLTP workers.
pub struct PacedTpcc {
    tpcc: Tpcc,
    options: PacedOptions,
    pacing: Pacing,
    board: TerminalBoard,
}

impl std::fmt::Debug for PacedTpcc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacedTpcc")
            .field("tpcc", &self.tpcc)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl PacedTpcc {
    /// TPC-C of `config` with `options`' terminals. Fails on no terminals, a pacing that
    /// is not a positive number, or more than [`MAX_TERMINALS`] terminals.
    pub fn new(config: TpccConfig, options: PacedOptions) -> Result<PacedTpcc, LabError> {
        let tpcc = Tpcc::new(config)?;
        if options.terminals_per_warehouse == 0 {
            return Err(LabError::BadOption(format!(
                "--terminals-per-warehouse 0: each warehouse needs at least one terminal \
                 (DBT2 and SI-CV use {DBT2_TERMINALS_PER_WAREHOUSE})"
            )));
        }
        let pacing = Pacing::new(options.pacing)?;
        let terminals =
            u64::from(options.terminals_per_warehouse) * u64::from(tpcc.config().warehouses);
        if terminals > MAX_TERMINALS {
            return Err(LabError::BadOption(format!(
                "--terminals-per-warehouse {} over {} warehouses: {terminals} terminals, more \
                 than the {MAX_TERMINALS} a run may have",
                options.terminals_per_warehouse,
                tpcc.config().warehouses
            )));
        }
        Ok(PacedTpcc {
            tpcc,
            options,
            pacing,
            board: TerminalBoard {
                schedule: Mutex::new(Schedule::default()),
                changed: Condvar::new(),
            },
        })
    }

    /// The terminals' options.
    pub fn options(&self) -> PacedOptions {
        self.options
    }

    /// The keying and think times.
    pub fn pacing(&self) -> Pacing {
        self.pacing
    }

    /// Terminals in all: per warehouse times warehouses.
    pub fn terminals(&self) -> u64 {
        u64::from(self.options.terminals_per_warehouse) * u64::from(self.tpcc.config().warehouses)
    }

    /// The terminals of a fresh run: each bound to one warehouse, with its own streams
    /// drawn from `seed`, and its first submission at a random point of a mean cycle.
    fn terminals_for_run(&self, seed: u64) -> Result<BinaryHeap<Waiting>, LabError> {
        let config = self.tpcc.config();
        let warehouses = config.warehouses as usize;
        let per_warehouse = u64::from(self.options.terminals_per_warehouse);
        let cycle = self.pacing.mean_cycle();
        let mut waiting = BinaryHeap::with_capacity(self.terminals() as usize);
        for number in 0..self.terminals() {
            let warehouse_index = (number / per_warehouse) as usize;
            let mut streams =
                SplitMix64::new(seed ^ 0x7061_6365_6454_6d6c ^ number.wrapping_mul(0x9E37_79B9));
            // Worker `w - 1` of W is bound to warehouse w alone (`Terminal::new`).
            let mut inputs =
                Terminal::new(config, warehouse_index, warehouses, streams.next_u64())?;
            // The terminals of a warehouse take its districts in turn for Stock-Level.
            let within_warehouse = number % per_warehouse;
            inputs.fix_stock_level_district(
                (within_warehouse % u64::from(config.districts_per_warehouse)) as i64 + 1,
            );
            let kind = inputs.next_kind();
            let phase = cycle.mul_f64(streams.next_f64());
            waiting.push(Waiting {
                due: phase,
                number,
                terminal: Box::new(PacedTerminal {
                    number,
                    inputs,
                    rng: SplitMix64::new(streams.next_u64()),
                    kind,
                }),
            });
        }
        Ok(waiting)
    }

    fn connection<R: TerminalTransactions>(&self, runner: R) -> PacedConnection<'_, R> {
        PacedConnection {
            board: &self.board,
            pacing: self.pacing,
            runner,
            claimed: None,
            conflicts_in_a_row: 0,
        }
    }
}

/// What runs a terminal's transactions on a connection: Verso's worker or a peer's.
pub trait TerminalTransactions {
    /// The worker's own inputs, which a paced terminal's stand in for during an attempt.
    fn own_terminal(&mut self) -> &mut Terminal;

    /// Runs one attempt of transaction `kind` with the worker's current inputs.
    fn run_kind(&mut self, kind: usize, isolation: Isolation) -> Result<TxnOutcome, LabError>;

    /// Runs one attempt of transaction `kind` with `terminal`'s inputs instead of the
    /// worker's own: paced terminals share a few connections.
    fn run_as(
        &mut self,
        terminal: &mut Terminal,
        kind: usize,
        isolation: Isolation,
    ) -> Result<TxnOutcome, LabError> {
        std::mem::swap(self.own_terminal(), terminal);
        let outcome = self.run_kind(kind, isolation);
        std::mem::swap(self.own_terminal(), terminal);
        outcome
    }
}

impl TerminalTransactions for TpccWorker<'_> {
    fn own_terminal(&mut self) -> &mut Terminal {
        self.terminal_mut()
    }

    fn run_kind(&mut self, kind: usize, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        self.run(kind, isolation)
    }
}

impl TerminalTransactions for TpccSqlWorker {
    fn own_terminal(&mut self) -> &mut Terminal {
        self.terminal_mut()
    }

    fn run_kind(&mut self, kind: usize, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        self.run(kind, isolation)
    }
}

/// One connection of the pool: an OLTP worker that serves whichever terminal submitted
/// earliest.
pub struct PacedConnection<'a, R> {
    board: &'a TerminalBoard,
    pacing: Pacing,
    runner: R,
    /// The submission this connection took and has not completed (after a conflict, it
    /// is retried).
    claimed: Option<Claimed>,
    /// Write conflicts in a row of the claimed submission: its next back-off's ceiling
    /// doubles with each.
    conflicts_in_a_row: u32,
}

impl<R: TerminalTransactions> OltpWorker for PacedConnection<'_, R> {
    fn next_submission(&mut self, stop: &AtomicBool) -> Result<Submission, LabError> {
        if self.claimed.is_none() {
            self.claimed = self.board.claim(stop);
        }
        Ok(match &self.claimed {
            Some((_, submitted)) => Submission::At(*submitted),
            None => Submission::Stopped,
        })
    }

    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        if self.claimed.is_none() {
            // Called without `next_submission` (not by the runner): wait as long as it takes.
            self.claimed = self.board.claim(&AtomicBool::new(false));
        }
        let (terminal, _) = self.claimed.as_mut().expect("claimed without a stop flag");
        let outcome = self
            .runner
            .run_as(&mut terminal.inputs, terminal.kind, isolation)?;
        let completed = matches!(
            outcome,
            TxnOutcome::Committed { .. }
                | TxnOutcome::Aborted {
                    reason: AbortReason::ByWorkload,
                    ..
                }
        );
        if completed {
            self.conflicts_in_a_row = 0;
            let (terminal, _) = self.claimed.take().expect("claimed");
            self.board.complete(terminal, Instant::now(), &self.pacing);
        } else {
            // A write conflict: wait a while before the retry, as a waiter for the row
            // would (the conflicting writer is likely still running).
            std::thread::sleep(backoff(self.conflicts_in_a_row, terminal.rng.next_f64()));
            self.conflicts_in_a_row = self.conflicts_in_a_row.saturating_add(1);
        }
        Ok(outcome)
    }
}

/// The back-off before retrying after `conflicts` earlier conflicts in a row, for a
/// uniform draw `uniform` in [0, 1): uniform below a ceiling that starts at
/// [`FIRST_BACKOFF`] and doubles with each conflict, up to [`MAX_BACKOFF`] (random, so
/// two connections that conflicted do not retry into each other in step).
pub fn backoff(conflicts: u32, uniform: f64) -> Duration {
    let ceiling = FIRST_BACKOFF
        .saturating_mul(1u32 << conflicts.min(16))
        .min(MAX_BACKOFF);
    ceiling.mul_f64(uniform.clamp(0.0, 1.0))
}

impl PacedWorkload for PacedTpcc {
    fn begin_run(&self, seed: u64) -> Result<(), LabError> {
        let waiting = self.terminals_for_run(seed)?;
        *self.board.lock() = Schedule {
            waiting,
            ..Schedule::default()
        };
        Ok(())
    }

    fn result(&self, totals: &Totals, run_seconds: f64, stopped_at: Instant) -> PacedResult {
        let schedule = self.board.lock();
        // Counted at the stop, not now: after it, terminals keep coming due (within a
        // millisecond at the default pacing) while the workers are joined.
        let waiting_at_end = schedule.epoch.map_or(0, |epoch| {
            let stopped = stopped_at.saturating_duration_since(epoch);
            schedule.waiting.iter().filter(|w| w.due <= stopped).count() as u64
        });
        let committed = |kind: usize| {
            totals
                .oltp_commits_by_kind
                .get(TRANSACTION_KINDS[kind])
                .copied()
                .unwrap_or(0)
        };
        let minutes = run_seconds.max(1e-9) / 60.0;
        let offered_per_minute = self.pacing.offered_per_minute(self.terminals());
        PacedResult {
            terminals_per_warehouse: self.options.terminals_per_warehouse,
            terminals: self.terminals(),
            pacing: self.pacing.factor(),
            offered_per_minute,
            // New-Order's 1% rollbacks are never new orders.
            offered_new_orders_per_minute: offered_per_minute
                * super::pacing::MIX_SHARES[NEW_ORDER]
                * (1.0 - super::pacing::NEW_ORDER_ROLLBACK_SHARE),
            submitted: schedule.claimed + waiting_at_end,
            completed: schedule.completed,
            completed_per_minute: schedule.completed as f64 / minutes,
            waiting_at_end,
            notpm: committed(NEW_ORDER) as f64 / minutes,
            order_status_committed: committed(ORDER_STATUS),
        }
    }
}

impl Workload for PacedTpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn describe(&self) -> String {
        format!(
            "{}, paced: {} terminal(s) per warehouse, keying and think times / {}",
            self.tpcc.describe(),
            self.options.terminals_per_warehouse,
            self.pacing.factor()
        )
    }

    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        self.tpcc.load(db, progress)
    }

    fn transaction_kinds(&self) -> Vec<String> {
        self.tpcc.transaction_kinds()
    }

    fn query_names(&self) -> &'static [&'static str] {
        self.tpcc.query_names()
    }

    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        let runner = self.tpcc.worker(db, worker, workers, seed)?;
        Ok(Box::new(self.connection(runner)))
    }

    fn olap_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'db>>, LabError> {
        Workload::olap_worker(&self.tpcc, db, worker, seed)
    }

    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        Workload::check_consistency(&self.tpcc, db)
    }

    fn sql(&self) -> Option<&dyn SqlWorkload> {
        Some(self)
    }

    fn paced(&self) -> Option<&dyn PacedWorkload> {
        Some(self)
    }
}

/// The peers run the same terminals over their connections.
impl SqlWorkload for PacedTpcc {
    fn tables(&self) -> Vec<TableDef> {
        SqlWorkload::tables(&self.tpcc)
    }

    fn supports(&self, peer: PeerKind) -> Result<(), String> {
        SqlWorkload::supports(&self.tpcc, peer)
    }

    fn snapshot_read(&self) -> &'static str {
        SqlWorkload::snapshot_read(&self.tpcc)
    }

    fn oltp_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'a>, LabError> {
        let runner = TpccSqlWorker::new(session, peer, self.tpcc.config(), worker, workers, seed)?;
        Ok(Box::new(self.connection(runner)))
    }

    fn olap_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        worker: usize,
        seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'a>>, LabError> {
        SqlWorkload::olap_worker(&self.tpcc, session, peer, worker, seed)
    }

    fn check_consistency(&self, session: &mut dyn Session, peer: PeerKind) -> Result<(), LabError> {
        SqlWorkload::check_consistency(&self.tpcc, session, peer)
    }
}
