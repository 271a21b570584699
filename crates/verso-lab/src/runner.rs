//! The runner: opens a database per configuration, loads it, runs OLTP and OLAP workers
//! side by side, samples the engine every interval, and checks consistency.
//!
//! Threads of one run (all inside one `std::thread::scope`):
//! - with `hold_snapshot`, one thread begins a transaction before the workers start and
//!   keeps it open, asleep on a channel, until the last sample is taken: a long reader that
//!   pins a snapshot (what Steam's eager pruning is about) and takes no CPU from the workers
//!   ([`SnapshotHolder`]);
//! - one thread per OLTP worker and per OLAP worker; each creates its worker *on* its
//!   thread (workers may hold `!Send` transactions), reports that it is ready, and waits at
//!   the [`StartLine`] until the sampler's first reading; a thread that cannot be spawned,
//!   or dies before it reports, calls the run off and fails it
//!   ([`LabError::ThreadFailed`]) instead of leaving the others waiting;
//! - the calling thread is the sampler: every `sample_interval` it reads the workers'
//!   counters and `Database::sample_stats`, and turns the differences into a [`Sample`].
//!
//! Workers count into their own cache-line-aligned counters (no shared write on the hot
//! path); the sampler sums them. Each OLTP worker also keeps one latency histogram per
//! transaction type, merged when it ends.
//!
//! Closed loop (the default), a worker starts its next transaction as soon as the last one
//! committed. With a target rate (`RunConfig::target_rate`) it runs open loop: its
//! transactions are due on a fixed schedule ([`Pacer`]), and each one's latency runs from
//! when it was due, not from when it started, so a stall shows in the latencies of the
//! transactions it delayed instead of hiding in a pause of the schedule (coordinated
//! omission). A paced workload (`Workload::paced`, TPC-C's terminals) is open loop too:
//! its workers wait for the terminals' submissions, and each transaction's latency runs
//! from its submission (`OltpWorker::next_submission`).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use verso::research::ChainHistogram;
use verso::{Database, GarbageCollector, Isolation, Options, Stats};

use crate::peers::PeerSpec;
use crate::system::{DrivenSystem, HeldSnapshot, SnapshotSource, VersoSystem};

use crate::format::compact;
use crate::metrics::{
    Configuration, EngineTotals, FixedRateResult, LatencySummary, RunResult, Sample, Summary,
    Totals,
};
use crate::rng::SplitMix64;
use crate::workload::{
    AbortReason, LabError, LoadProgress, OlapWorker, OltpWorker, Phases, Submission, TxnOutcome,
    Workload,
};

/// When a run ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StopAfter {
    /// After this much wall time.
    Duration(Duration),
    /// After this many committed OLTP transactions in all (split evenly over the OLTP
    /// workers; OLAP workers stop when the OLTP workers are done).
    Transactions(u64),
}

/// How to run one configuration.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The name reports give this configuration.
    pub label: String,
    /// How the database is opened: the garbage collector and its settings (the background
    /// collectors' period, the epoch collectors' threshold, ...).
    pub options: Options,
    /// Isolation of the OLTP transactions.
    pub isolation: Isolation,
    /// OLTP worker threads.
    pub oltp_workers: usize,
    /// OLAP worker threads.
    pub olap_workers: usize,
    /// When the run ends.
    pub stop: StopAfter,
    /// Seed of the data and of every worker's random stream.
    pub seed: u64,
    /// Whether an idle transaction holds its snapshot from the start to the end.
    pub hold_snapshot: bool,
    /// Whether that transaction is begun declared read-only.
    pub hold_read_only: bool,
    /// How often the sampler records a [`Sample`].
    pub sample_interval: Duration,
    /// Whether to draw progress bars (they only appear on a terminal anyway).
    pub show_progress: bool,
    /// The peer this configuration runs on instead of Verso (`--peer`); `options` are then
    /// not used.
    pub peer: Option<PeerSpec>,
    /// Stop the run early, as a finished one, once the process's resident memory passes
    /// this many bytes (`--memory-limit`): a configuration that grows without bound then
    /// ends with what it measured instead of being killed by the kernel, taking the
    /// configurations after it (and other programs) with it.
    pub memory_limit_bytes: Option<u64>,
    /// Logical clients over the OLTP workers (`--clients`; `crate::clients`): each waits
    /// for its commit's acknowledgement before its next transaction. `None`: one per
    /// worker. A peer runs one connection (and worker thread) per client instead.
    pub clients: Option<usize>,
    /// Run open loop at this many committed OLTP transactions per second over all workers
    /// (`--target-rate`; [`Pacer`]); the run fails with [`LabError::TargetRateMissed`] if
    /// it achieves less than [`TARGET_RATE_TOLERANCE`] of it. `None`: closed loop.
    pub target_rate: Option<f64>,
    /// Whether a run below [`TARGET_RATE_TOLERANCE`] of `target_rate` fails: always, but
    /// for the quick size of a reproduction, which measures nothing (a stall of a few
    /// tens of milliseconds on a busy machine drops a tenth of a 0.2-second run's
    /// schedule).
    pub target_rate_enforced: bool,
    /// Whether this configuration runs in memory even when the invocation gives `--disk
    /// DIR` (the `memory` design of `--compare design=...`, beside the disk designs): it
    /// gets no directory, log or buffer pool.
    pub in_memory: bool,
}

/// The share of `--target-rate` a run must achieve, or it fails: a fixed-rate comparison
/// never silently compares different rates.
pub const TARGET_RATE_TOLERANCE: f64 = 0.95;

impl RunConfig {
    /// One OLTP worker for ten seconds, sampled every second, snapshot isolation, a
    /// database opened with `garbage_collector` and otherwise default options.
    pub fn new(label: impl Into<String>, garbage_collector: GarbageCollector) -> RunConfig {
        RunConfig::with_options(
            label,
            Options::default().garbage_collector(garbage_collector),
        )
    }

    /// As [`RunConfig::new`], with the database opened with `options`.
    pub fn with_options(label: impl Into<String>, options: Options) -> RunConfig {
        RunConfig {
            label: label.into(),
            options,
            isolation: Isolation::Snapshot,
            oltp_workers: 1,
            olap_workers: 0,
            stop: StopAfter::Duration(Duration::from_secs(10)),
            seed: DEFAULT_SEED,
            hold_snapshot: false,
            hold_read_only: false,
            sample_interval: Duration::from_secs(1),
            show_progress: false,
            peer: None,
            memory_limit_bytes: None,
            clients: None,
            target_rate: None,
            target_rate_enforced: true,
            in_memory: false,
        }
    }

    /// A configuration that runs `peer` instead of Verso, labelled with its name.
    pub fn for_peer(peer: PeerSpec) -> RunConfig {
        RunConfig {
            peer: Some(peer.clone()),
            ..RunConfig::with_options(peer.label(), Options::default())
        }
    }

    /// The garbage collector the database is opened with.
    pub fn garbage_collector(&self) -> GarbageCollector {
        self.options.garbage_collector
    }

    /// Checks the combination of options; [`LabError::BadOption`] says what is wrong.
    pub fn validate(&self, workload: &dyn Workload) -> Result<(), LabError> {
        // What `Database::open` would refuse, checked here so that a plan of several runs
        // fails before the first one.
        match &self.peer {
            None => self
                .options
                .validate()
                .map_err(|e| LabError::BadOption(format!("configuration {}: {e}", self.label)))?,
            Some(peer) => peer.validate(workload)?,
        }
        // Every worker and the held snapshot take one of the database's thread slots.
        let threads = self
            .oltp_workers
            .checked_add(self.olap_workers)
            .and_then(|workers| workers.checked_add(usize::from(self.hold_snapshot)));
        if threads.is_none_or(|threads| threads > verso::MAX_THREADS) {
            return Err(LabError::BadOption(format!(
                "--workers {} and --olap-workers {}: a database serves at most {} threads \
                 at once",
                self.oltp_workers,
                self.olap_workers,
                verso::MAX_THREADS
            )));
        }
        if self.oltp_workers == 0 && self.olap_workers == 0 {
            return Err(LabError::BadOption(
                "nothing to run: --workers and --olap-workers are both 0".into(),
            ));
        }
        if self.olap_workers > 0 && workload.query_names().is_empty() {
            return Err(LabError::BadOption(format!(
                "--olap-workers {}: the {} workload has no analytical queries",
                self.olap_workers,
                workload.name()
            )));
        }
        match self.stop {
            StopAfter::Transactions(0) => {
                return Err(LabError::BadOption(
                    "--transactions must be at least 1".into(),
                ))
            }
            StopAfter::Transactions(_) if self.oltp_workers == 0 => {
                return Err(LabError::BadOption(
                    "--transactions counts OLTP commits, but --workers is 0; use --duration".into(),
                ))
            }
            StopAfter::Duration(d) if d.is_zero() => {
                return Err(LabError::BadOption("--duration must be above 0".into()))
            }
            _ => {}
        }
        if let Some(rate) = self.target_rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(LabError::BadOption(format!(
                    "--target-rate {rate} must be a positive number of transactions per second"
                )));
            }
            if self.oltp_workers == 0 {
                return Err(LabError::BadOption(
                    "--target-rate paces OLTP transactions, but --workers is 0".into(),
                ));
            }
            if let Some(clients) = self.clients.filter(|&c| c > self.oltp_workers) {
                return Err(LabError::BadOption(format!(
                    "--target-rate with --clients {clients} over {} workers: a fixed rate \
                     paces each worker's transactions and measures each from when it was \
                     due to its commit, but several clients on a worker pipeline their \
                     commits and are acknowledged later; run a fixed rate with one client \
                     per worker (more --workers instead of --clients)",
                    self.oltp_workers
                )));
            }
            if workload.phases() != Phases::WHOLE_RUN {
                return Err(LabError::BadOption(format!(
                    "--target-rate with the {} workload's phases: its OLTP workers stop before                      the run ends, so the achieved rate over the run could not be compared                      with the target; give --phases 0:1:0",
                    workload.name()
                )));
            }
        }
        if workload.paced().is_some() {
            crate::workloads::tpcc::paced::refuse_closed_loop_options(
                self.target_rate,
                self.clients,
                self.oltp_workers,
            )?;
        }
        if self.sample_interval < Duration::from_millis(10) {
            return Err(LabError::BadOption(
                "the sampling interval must be at least 10 ms".into(),
            ));
        }
        Ok(())
    }
}

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 0x5EED;

/// Opens a fresh database for `config`, loads `workload`, checks its consistency, runs it,
/// and checks its consistency again. Any failure (an unexpected engine error, a failed
/// consistency check) is returned as an error: a run that went wrong yields no result.
pub fn run_configuration(
    workload: &dyn Workload,
    config: &RunConfig,
) -> Result<RunResult, LabError> {
    config.validate(workload)?;
    if let Some(peer) = &config.peer {
        return crate::peers::run_peer(workload, peer, config);
    }
    if let Some(dir) = config
        .options
        .path
        .as_ref()
        .or(config.options.disk.as_ref())
    {
        refuse_used_directory(dir)?;
    }
    let db = Database::open(config.options.clone())?;

    let load_bar = progress_bar(config.show_progress, 0);
    load_bar.set_prefix(format!("{} load", config.label));
    let load_start = Instant::now();
    workload.load(&db, &BarProgress(&load_bar))?;
    // The measured run starts from the loaded data on disk, as the peers' do (PostgreSQL
    // and SQLite checkpoint after their loads): otherwise the OS writes the load's pages
    // back during the run's first half-minute, and every commit's sync waits behind that
    // writeback. (A persistent-memory region has no log for a checkpoint to cut.)
    let has_a_log = config.options.path.is_some() || config.options.disk.is_some();
    if has_a_log && !config.options.version_storage.uses_persistent_memory() {
        db.checkpoint()?;
    }
    let load_seconds = load_start.elapsed().as_secs_f64();
    load_bar.finish_and_clear();
    workload
        .check_consistency(&db)
        .map_err(|e| after("the load", e))?;

    let system = VersoSystem { workload, db: &db };
    let measured = measure(&system, workload, config)?;
    workload
        .check_consistency(&db)
        .map_err(|e| after("the run", e))?;

    // A persistent database is closed (everything synced, the directory released) and
    // kept, for `verso check` to open.
    let durability_text = verso_durability(&config.options);
    let design = db.design();
    db.close()?;
    let configuration = Configuration {
        garbage_collector: config.garbage_collector().name().to_owned(),
        background_gc_period_ms: config
            .options
            .background_gc_period
            .map(|period| period.as_secs_f64() * 1e3),
        epoch_advance_threshold: config.options.epoch_advance_threshold,
        settings: format!("Options: {design}"),
        design,
        system_version: format!("Verso {}", env!("CARGO_PKG_VERSION")),
        system_isolation: match config.isolation {
            Isolation::Snapshot => "snapshot isolation".to_owned(),
            Isolation::Serializable => "serializable".to_owned(),
        },
        durability: durability_text,
        persistent_memory_media: verso_media(&config.options),
        growth_measure: if config.options.disk.is_some() {
            "the tables' files on the disk engine (heaps, free-space maps, indexes), as \
             PostgreSQL's pg_total_relation_size"
                .to_owned()
        } else {
            "resident memory of the process (RSS): Verso keeps everything in memory".to_owned()
        },
        ..configuration_of(workload, config)
    };
    Ok(result_of(configuration, load_seconds, measured, config))
}

/// Refuses a database directory that holds anything: each configuration loads a fresh
/// database, and files of an earlier run would be recovered into it.
pub(crate) fn refuse_used_directory(dir: &std::path::Path) -> Result<(), LabError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(LabError::BadOption(format!(
                "--path: {} is not empty (a database of an earlier run?); each configuration \
                 needs a fresh directory: name a new or empty --path",
                dir.display()
            ))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LabError::BadOption(format!(
            "--path: cannot read {}: {e}",
            dir.display()
        ))),
    }
}

/// The emulated media of a Verso run whose storage keeps its versions in a persistent-
/// memory region, in words for the report; empty for any other storage.
fn verso_media(options: &Options) -> String {
    if !options.version_storage.uses_persistent_memory() {
        return String::new();
    }
    let media = options.persistent_memory.clone().unwrap_or_default();
    format!(
        "{}-byte lines, {} ns added per line persisted",
        media.line.bytes(),
        media.line_delay.as_nanos()
    )
}

/// What a Verso run's durability is, in words for the report.
fn verso_durability(options: &Options) -> String {
    if let (Some(dir), Some(durability)) = (&options.disk, options.effective_durability()) {
        return format!(
            "the disk engine in {} (a {} MiB buffer pool{}), its page log {}",
            dir.display(),
            options.buffer_pool_bytes >> 20,
            if options.direct_io {
                ", pages through direct I/O"
            } else {
                ""
            },
            match durability {
                verso::Durability::Sync => "synced before each commit returns".to_owned(),
                verso::Durability::Async { interval } =>
                    format!("synced at least every {} ms", interval.as_millis()),
                _ => "written to the OS before each commit returns, never synced".to_owned(),
            }
        );
    }
    if let (Some(path), true) = (
        &options.path,
        options.version_storage.uses_persistent_memory(),
    ) {
        return format!(
            "a persistent-memory region file in {}, each commit persisted in it before it is \
             visible (no log); nothing acknowledged is lost by a process crash, nor by a power \
             loss when the file is on a disk (on a RAM-backed file system, a power loss loses \
             the region)",
            path.display()
        );
    }
    match (&options.path, options.effective_durability()) {
        (Some(path), Some(verso::Durability::Sync)) => format!(
            "sync: a redo log in {}, synced before each commit returns (group commit, \
             {}); nothing acknowledged is lost by a crash or a power loss",
            path.display(),
            match options.log_syncs_in_flight {
                1 => "one sync at a time".to_owned(),
                n => format!("at most {n} syncs in flight"),
            }
        ),
        (Some(path), Some(verso::Durability::Async { interval })) => format!(
            "async: a redo log in {}, synced at least every {} ms; a crash loses at most \
             that window of acknowledged commits",
            path.display(),
            interval.as_millis()
        ),
        (Some(path), Some(_)) => format!(
            "none: a redo log in {}, written to the OS before each commit returns, never \
             synced; survives a process crash, not a power loss",
            path.display()
        ),
        _ => "memory: no --path, nothing is written; a crash loses everything".to_owned(),
    }
}

/// The parts of a run's [`Configuration`] every system shares; the system's own parts
/// (`design`, versions, settings, durability) are left for the caller to fill in.
pub(crate) fn configuration_of(workload: &dyn Workload, config: &RunConfig) -> Configuration {
    Configuration {
        label: config.label.clone(),
        garbage_collector: String::new(),
        background_gc_period_ms: None,
        epoch_advance_threshold: None,
        isolation: isolation_name(config.isolation).to_owned(),
        design: String::new(),
        system: config
            .peer
            .as_ref()
            .map_or("verso", |peer| peer.kind.name())
            .to_owned(),
        system_version: String::new(),
        system_isolation: String::new(),
        settings: String::new(),
        durability: String::new(),
        growth_measure: String::new(),
        persistent_memory_media: String::new(),
        workload_parameters: workload.describe(),
        oltp_workers: config.oltp_workers,
        olap_workers: config.olap_workers,
        hold_snapshot: config.hold_snapshot,
        hold_read_only: config.hold_snapshot && config.hold_read_only,
        seed: config.seed,
        duration_seconds: match config.stop {
            StopAfter::Duration(d) => Some(d.as_secs_f64()),
            StopAfter::Transactions(_) => None,
        },
        transactions: match config.stop {
            StopAfter::Transactions(n) => Some(n),
            StopAfter::Duration(_) => None,
        },
        sample_interval_seconds: config.sample_interval.as_secs_f64(),
    }
}

/// A run's result from what it measured.
pub(crate) fn result_of(
    configuration: Configuration,
    load_seconds: f64,
    measured: Measured,
    config: &RunConfig,
) -> RunResult {
    let summary = Summary::of(&measured.samples, config.sample_interval.as_secs_f64());
    RunResult {
        configuration,
        load_seconds,
        stopped_early: measured.stopped_early,
        run_seconds: measured.run_seconds,
        consistent: true,
        totals: measured.totals,
        engine: measured.engine,
        summary,
        durability: measured.durability,
        latency: measured.latency,
        fixed_rate: measured.fixed_rate,
        paced: measured.paced,
        samples: measured.samples,
    }
}

/// `error` with the phase it happened after, if it is a failed consistency check.
pub(crate) fn after(phase: &str, error: LabError) -> LabError {
    match error {
        LabError::Inconsistent(what) => LabError::Inconsistent(format!("after {phase}: {what}")),
        other => other,
    }
}

/// The name of an isolation level on the command line and in reports.
pub fn isolation_name(isolation: Isolation) -> &'static str {
    match isolation {
        Isolation::Snapshot => "snapshot",
        Isolation::Serializable => "serializable",
    }
}

pub(crate) use crate::progress::progress_bar;

/// A load progress drawn on a bar.
pub(crate) struct BarProgress<'a>(pub(crate) &'a ProgressBar);

impl LoadProgress for BarProgress<'_> {
    fn set_total(&self, rows: u64) {
        self.0.set_length(rows);
    }

    fn advance(&self, rows: u64) {
        self.0.inc(rows);
    }
}

/// One worker's counters, written only by that worker, summed by the sampler.
#[repr(align(128))]
struct WorkerCounters {
    commits_by_kind: Box<[AtomicU64]>,
    /// Operations of the committed transactions.
    operations: AtomicU64,
    /// Rows the committed transactions inserted minus those they deleted.
    rows_added: AtomicI64,
    /// Schedule a paced worker gave up, in nanoseconds ([`Pacer`]).
    behind_schedule_nanos: AtomicU64,
    aborts_by_kind: Box<[AtomicU64]>,
    aborts_by_reason: [AtomicU64; AbortReason::ALL.len()],
    queries_by_name: Box<[AtomicU64]>,
    scanned_tuples: AtomicU64,
}

impl WorkerCounters {
    fn new(kinds: usize, queries: usize) -> Self {
        WorkerCounters {
            commits_by_kind: (0..kinds).map(|_| AtomicU64::new(0)).collect(),
            operations: AtomicU64::new(0),
            rows_added: AtomicI64::new(0),
            behind_schedule_nanos: AtomicU64::new(0),
            aborts_by_kind: (0..kinds).map(|_| AtomicU64::new(0)).collect(),
            aborts_by_reason: Default::default(),
            queries_by_name: (0..queries).map(|_| AtomicU64::new(0)).collect(),
            scanned_tuples: AtomicU64::new(0),
        }
    }

    fn add_to(&self, counts: &mut Counts) {
        for (sum, c) in counts
            .commits_by_kind
            .iter_mut()
            .zip(self.commits_by_kind.iter())
        {
            *sum += c.load(Ordering::Relaxed);
        }
        for (sum, c) in counts
            .aborts_by_kind
            .iter_mut()
            .zip(self.aborts_by_kind.iter())
        {
            *sum += c.load(Ordering::Relaxed);
        }
        for (sum, c) in counts
            .aborts_by_reason
            .iter_mut()
            .zip(&self.aborts_by_reason)
        {
            *sum += c.load(Ordering::Relaxed);
        }
        for (sum, c) in counts
            .queries_by_name
            .iter_mut()
            .zip(self.queries_by_name.iter())
        {
            *sum += c.load(Ordering::Relaxed);
        }
        counts.scanned_tuples += self.scanned_tuples.load(Ordering::Relaxed);
        counts.operations += self.operations.load(Ordering::Relaxed);
        counts.rows_added += self.rows_added.load(Ordering::Relaxed);
        counts.behind_schedule_nanos += self.behind_schedule_nanos.load(Ordering::Relaxed);
    }
}

fn reason_index(reason: AbortReason) -> usize {
    AbortReason::ALL
        .iter()
        .position(|r| *r == reason)
        .unwrap_or_default()
}

/// The workers' counters summed.
#[derive(Clone, Debug, Default)]
struct Counts {
    commits_by_kind: Vec<u64>,
    aborts_by_kind: Vec<u64>,
    aborts_by_reason: [u64; AbortReason::ALL.len()],
    queries_by_name: Vec<u64>,
    scanned_tuples: u64,
    operations: u64,
    rows_added: i64,
    behind_schedule_nanos: u64,
}

impl Counts {
    fn commits(&self) -> u64 {
        self.commits_by_kind.iter().sum()
    }

    fn aborts(&self) -> u64 {
        self.aborts_by_reason.iter().sum()
    }

    fn queries(&self) -> u64 {
        self.queries_by_name.iter().sum()
    }
}

/// What the threads of a run share.
struct Shared {
    stop: AtomicBool,
    error: Mutex<Option<LabError>>,
    oltp: Vec<WorkerCounters>,
    olap: Vec<WorkerCounters>,
    oltp_finished: AtomicUsize,
    /// The OLTP workers' commit latencies, merged as each worker ends (`crate::clients`).
    latency: Mutex<hdrhistogram::Histogram<u64>>,
    /// The OLTP workers' transaction latencies by type, merged as each worker ends.
    latency_by_kind: Mutex<Vec<hdrhistogram::Histogram<u64>>>,
}

impl Shared {
    /// Records the first error and stops the run.
    fn fail(&self, error: LabError) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(error);
        }
        self.stop.store(true, Ordering::Release);
    }

    fn failed(&self) -> bool {
        self.error.lock().map_or(true, |slot| slot.is_some())
    }

    fn counts(&self, kinds: usize, queries: usize) -> Counts {
        let mut counts = Counts {
            commits_by_kind: vec![0; kinds],
            aborts_by_kind: vec![0; kinds],
            queries_by_name: vec![0; queries],
            ..Counts::default()
        };
        for worker in self.oltp.iter().chain(&self.olap) {
            worker.add_to(&mut counts);
        }
        counts
    }
}

/// The engine's and the workers' counters at one instant.
struct Reading {
    at: Instant,
    counts: Counts,
    stats: Stats,
    rss_bytes: u64,
    dram_bytes: u64,
    growth_bytes: u64,
}

/// What [`measure`] measured over one run.
pub(crate) struct Measured {
    run_seconds: f64,
    samples: Vec<Sample>,
    totals: Totals,
    engine: EngineTotals,
    durability: Option<crate::metrics::DurabilityResult>,
    stopped_early: Option<String>,
    latency: std::collections::BTreeMap<String, LatencySummary>,
    fixed_rate: Option<FixedRateResult>,
    paced: Option<crate::metrics::PacedResult>,
}

/// A seed for worker `index` of a `role`, derived from the run's seed so that every
/// stream differs and is reproducible.
fn worker_seed(seed: u64, role: u64, index: usize) -> u64 {
    let mut rng =
        SplitMix64::new(seed ^ role.rotate_left(32) ^ (index as u64).wrapping_mul(0x9E37_79B9));
    rng.next_u64()
}

/// Runs `system`'s workers as `config` says and samples them: the run itself, between the
/// load and the consistency check after it. `workload` names the transaction kinds and
/// queries.
pub(crate) fn measure(
    system: &dyn DrivenSystem,
    workload: &dyn Workload,
    config: &RunConfig,
) -> Result<Measured, LabError> {
    let kinds = workload.transaction_kinds();
    let queries = workload.query_names();
    let rows_at_start = system.count_rows()?;
    let shared = Shared {
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
        oltp: (0..config.oltp_workers)
            .map(|_| WorkerCounters::new(kinds.len(), queries.len()))
            .collect(),
        olap: (0..config.olap_workers)
            .map(|_| WorkerCounters::new(kinds.len(), queries.len()))
            .collect(),
        oltp_finished: AtomicUsize::new(0),
        latency: Mutex::new(crate::clients::latency_histogram()),
        latency_by_kind: Mutex::new(
            kinds
                .iter()
                .map(|_| crate::clients::latency_histogram())
                .collect(),
        ),
    };
    // Each worker's share of the target rate: the interval between its transactions.
    let pace = config
        .target_rate
        .map(|rate| Duration::from_secs_f64(config.oltp_workers as f64 / rate));
    // Clients over the workers; a peer's are its workers (one connection each).
    let clients = config.clients.unwrap_or(config.oltp_workers);
    // A timed run's phases: how long after the start OLAP begins and OLTP ends.
    let (olap_delay, oltp_for) = match config.stop {
        StopAfter::Duration(d) => {
            let phases = workload.phases();
            (
                d.mul_f64(phases.olap_from.clamp(0.0, 1.0)),
                (phases.oltp_until < 1.0).then(|| d.mul_f64(phases.oltp_until.max(0.0))),
            )
        }
        StopAfter::Transactions(_) => (Duration::ZERO, None),
    };
    let start_line = StartLine::new();
    if let Some(paced) = workload.paced() {
        paced.begin_run(config.seed)?;
    }

    let measured = std::thread::scope(|scope| -> Result<Measured, LabError> {
        // However this closure ends (an error return, a panic), no thread of the run is
        // left waiting at the start line or running for the scope to wait for.
        let _end = EndTheRun {
            start_line: &start_line,
            stop: &shared.stop,
        };
        let holder = if config.hold_snapshot {
            Some(SnapshotHolder::begin(
                scope,
                system,
                config.isolation,
                config.hold_read_only,
            )?)
        } else {
            None
        };

        let mut crew = Crew::new(&shared, &start_line);
        for index in 0..config.oltp_workers {
            let shared = &shared;
            let quota = match config.stop {
                StopAfter::Transactions(total) => Some(split(total, config.oltp_workers, index)),
                StopAfter::Duration(_) => None,
            };
            let seed = worker_seed(config.seed, 1, index);
            let isolation = config.isolation;
            let clients = (config.peer.is_none())
                .then(|| split(clients as u64, config.oltp_workers, index) as usize);
            crew.spawn(
                scope,
                format!("OLTP worker {index}"),
                format!("verso-oltp-{index}"),
                move || system.oltp_worker(index, config.oltp_workers, seed),
                move |worker| {
                    let outcome = worker.and_then(|mut worker| {
                        drive_oltp(
                            &mut *worker,
                            isolation,
                            shared,
                            index,
                            quota,
                            clients,
                            pace,
                            oltp_for,
                        )
                    });
                    if let Err(e) = outcome {
                        shared.fail(e);
                    }
                    shared.oltp_finished.fetch_add(1, Ordering::Release);
                },
            )?;
        }
        for index in 0..config.olap_workers {
            let shared = &shared;
            let seed = worker_seed(config.seed, 2, index);
            crew.spawn(
                scope,
                format!("OLAP worker {index}"),
                format!("verso-olap-{index}"),
                move || system.olap_worker(index, seed),
                move |worker| {
                    let outcome = worker.and_then(|worker| match worker {
                        Some(mut worker) => {
                            drive_olap(&mut *worker, &shared.olap[index], &shared.stop, olap_delay)
                        }
                        None => Err(LabError::BadOption(format!(
                            "the {} workload has no analytical queries",
                            workload.name()
                        ))),
                    });
                    if let Err(e) = outcome {
                        shared.fail(e);
                    }
                },
            )?;
        }
        let workers = crew.all_ready()?;
        // The window of the first sample starts now: `sample_stats` resets the per-window
        // chain maxima the load left. Only after this first reading do the workers start
        // (else a short counted run could end before it).
        let first = read(system, &shared, kinds.len(), queries.len(), 0);
        start_line.open();
        let mut sampler = Sampler::new(config, first, &kinds, queries, rows_at_start);
        sampler.sample_until_done(system, &shared);
        shared.stop.store(true, Ordering::Release);
        let stopped_at = Instant::now();
        for (role, thread) in workers {
            if thread.join().is_err() {
                shared.fail(LabError::ThreadFailed(format!("{role} panicked")));
            }
        }
        // The last sample still sees the held snapshot; only then is it released.
        sampler.take_sample(system, &shared);
        let run_seconds = sampler
            .previous
            .at
            .duration_since(sampler.first_at)
            .as_secs_f64();
        sampler.bar.finish_and_clear();
        if let Some(holder) = holder {
            holder.release()?;
        }
        let latency = shared
            .latency
            .lock()
            .map(|latency| latency.clone())
            .unwrap_or_else(|_| crate::clients::latency_histogram());
        let latency_by_kind = shared
            .latency_by_kind
            .lock()
            .map(|histograms| {
                kinds
                    .iter()
                    .zip(histograms.iter())
                    .map(|(kind, histogram)| (kind.clone(), LatencySummary::of(histogram)))
                    .collect()
            })
            .unwrap_or_default();
        let mut measured = sampler.finish(run_seconds, &latency, latency_by_kind);
        measured.paced = workload
            .paced()
            .map(|paced| paced.result(&measured.totals, run_seconds, stopped_at));
        Ok(measured)
    })?;
    match shared.error.into_inner() {
        Ok(Some(error)) => Err(error),
        Ok(None) => match &measured.fixed_rate {
            Some(rate)
                if config.target_rate_enforced
                    && rate.achieved_per_second
                        < TARGET_RATE_TOLERANCE * rate.target_per_second =>
            {
                Err(LabError::TargetRateMissed {
                    target_per_second: rate.target_per_second,
                    achieved_per_second: rate.achieved_per_second,
                    behind_schedule_seconds: rate.behind_schedule_seconds,
                })
            }
            _ => Ok(measured),
        },
        Err(_) => Err(LabError::ThreadFailed(
            "a worker panicked while reporting an error".into(),
        )),
    }
}

/// A run's worker threads while they start. Each creates its worker on its own thread
/// (workers may hold `!Send` transactions), reports that it is ready, and waits at the start
/// line.
struct Crew<'scope> {
    shared: &'scope Shared,
    start_line: &'scope StartLine,
    ready_sender: mpsc::Sender<()>,
    ready: mpsc::Receiver<()>,
    /// Each thread with its role ("OLTP worker 0").
    workers: Vec<(String, std::thread::ScopedJoinHandle<'scope, ()>)>,
}

impl<'scope> Crew<'scope> {
    fn new(shared: &'scope Shared, start_line: &'scope StartLine) -> Self {
        let (ready_sender, ready) = mpsc::channel();
        Crew {
            shared,
            start_line,
            ready_sender,
            ready,
            workers: Vec::new(),
        }
    }

    /// Spawns worker thread `role`, named `thread_name`: it makes its worker with `create`,
    /// reports ready, waits at the start line and, unless the run is called off, hands the
    /// worker to `drive`. If the thread unwinds, the run fails at once.
    fn spawn<'env, W>(
        &mut self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        role: String,
        thread_name: String,
        create: impl FnOnce() -> W + Send + 'scope,
        drive: impl FnOnce(W) + Send + 'scope,
    ) -> Result<(), LabError> {
        let panic_fails = FailRunOnPanic {
            shared: self.shared,
            role: role.clone(),
        };
        let (start_line, ready_sender) = (self.start_line, self.ready_sender.clone());
        let thread = spawn_run_thread(scope, thread_name, move || {
            let _panic_fails = panic_fails;
            let worker = create();
            report_ready(ready_sender);
            if start_line.wait() {
                drive(worker);
            }
        })
        .map_err(|e| LabError::ThreadFailed(format!("cannot start {role}: {e}")))?;
        self.workers.push((role, thread));
        Ok(())
    }

    /// Waits until every worker has reported ready and returns them. If one died first,
    /// calls the run off, joins them all and names the ones that died.
    fn all_ready(
        self,
    ) -> Result<Vec<(String, std::thread::ScopedJoinHandle<'scope, ()>)>, LabError> {
        // Each worker reports once and drops its sender; one that died first dropped it
        // without reporting. Either way the channel ends after the last report.
        drop(self.ready_sender);
        if self.ready.iter().count() == self.workers.len() {
            return Ok(self.workers);
        }
        self.start_line.call_off();
        let died: Vec<String> = self
            .workers
            .into_iter()
            .filter_map(|(role, thread)| thread.join().is_err().then_some(role))
            .collect();
        Err(LabError::ThreadFailed(format!(
            "{} panicked before the run started",
            died.join(", ")
        )))
    }
}

/// Spawns one of a run's threads on `scope`, named `name`.
fn spawn_run_thread<'scope, 'env, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    name: String,
    body: impl FnOnce() -> T + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>> {
    #[cfg(test)]
    tests::planted_spawn_failure(&name)?;
    std::thread::Builder::new()
        .name(name)
        .spawn_scoped(scope, body)
}

/// A worker's report that its worker exists. Consumes the sender, so that once every live
/// worker has reported, the sampler's channel ends (a sender alive on a waiting worker's
/// stack would keep it open). The sampler may already have stopped listening after a spawn
/// failed; then there is no one to tell.
fn report_ready(ready: mpsc::Sender<()>) {
    let _ = ready.send(());
}

/// Where a run's workers wait until the sampler has taken its first reading, and how a run
/// that cannot start is called off.
///
/// Invariant: the line settles once, from waiting to open or to called off, and every
/// thread waiting at it wakes then. A worker that finds it called off returns without
/// running. (Two `Barrier`s stood here before. A thread that never arrived, because it
/// could not be spawned or panicked while creating its worker, left every other thread and
/// the sampler waiting forever.)
struct StartLine {
    state: Mutex<Start>,
    settled: Condvar,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    Waiting,
    Open,
    CalledOff,
}

impl StartLine {
    fn new() -> Self {
        StartLine {
            state: Mutex::new(Start::Waiting),
            settled: Condvar::new(),
        }
    }

    /// Blocks until the line settles: true if it opened, false if the run was called off.
    fn wait(&self) -> bool {
        // Nothing panics while holding the lock, so a poisoned one still holds a good state.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while *state == Start::Waiting {
            state = self
                .settled
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *state == Start::Open
    }

    /// Lets the workers start.
    fn open(&self) {
        self.settle(Start::Open);
    }

    /// Sends the waiting workers home; a line already open stays open.
    fn call_off(&self) {
        self.settle(Start::CalledOff);
    }

    fn settle(&self, outcome: Start) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if *state == Start::Waiting {
            *state = outcome;
            self.settled.notify_all();
        }
        debug_assert_ne!(*state, Start::Waiting);
    }
}

/// Fails the run at once if a worker's thread unwinds (its workload panicked), as an error
/// return does, instead of letting the other workers run on to the deadline.
struct FailRunOnPanic<'a> {
    shared: &'a Shared,
    role: String,
}

impl Drop for FailRunOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared
                .fail(LabError::ThreadFailed(format!("{} panicked", self.role)));
        }
    }
}

/// Ends a run's threads when the sampler's part of `measure` ends, however it ends: calls
/// off the start line if it is still closed and tells started workers to stop.
struct EndTheRun<'a> {
    start_line: &'a StartLine,
    stop: &'a AtomicBool,
}

impl Drop for EndTheRun<'_> {
    fn drop(&mut self) {
        self.start_line.call_off();
        self.stop.store(true, Ordering::Release);
    }
}

/// The idle long reader of `hold_snapshot`: a transaction begun on its own thread before
/// the workers start, which then blocks, doing nothing, until it is released.
///
/// Invariant: between `begin` and `release` the thread is asleep on a channel; it wakes
/// only to end its transaction. (It once polled a flag every 2 ms; on two cores each wake-up
/// preempted a worker, sometimes while it held a hot row's latch, and the other worker then
/// parked on that latch. That made the held-snapshot run slower for a reason that had
/// nothing to do with the snapshot.) Dropping the holder without `release`, as an early
/// error return does, also wakes the thread, so it can never keep its scope from ending.
struct SnapshotHolder<'scope> {
    release: mpsc::Sender<()>,
    thread: std::thread::ScopedJoinHandle<'scope, Result<(), LabError>>,
}

impl<'scope> SnapshotHolder<'scope> {
    /// The thread's name (what `/proc` shows is its first 15 bytes).
    const THREAD_NAME: &'static str = "verso-held-snapshot";

    /// Begins the transaction on a new thread of `scope` and returns once its snapshot
    /// is taken.
    fn begin<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        source: &'env (impl SnapshotSource + ?Sized),
        isolation: Isolation,
        read_only: bool,
    ) -> Result<Self, LabError> {
        let (began_sender, began) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let thread = spawn_run_thread(scope, Self::THREAD_NAME.into(), move || {
            let held: Box<dyn HeldSnapshot + '_> = match source.hold_snapshot(isolation, read_only)
            {
                Ok(held) => held,
                Err(e) => {
                    let _ = began_sender.send(Err(e.to_string()));
                    return Err(e);
                }
            };
            let _ = began_sender.send(Ok(()));
            // Blocks until `release` sends or the holder is dropped; either ends the
            // transaction.
            let _ = released.recv();
            held.end()
        })
        .map_err(|e| LabError::ThreadFailed(format!("cannot start the snapshot holder: {e}")))?;
        match began.recv() {
            Ok(Ok(())) => Ok(SnapshotHolder { release, thread }),
            // The thread returns the error itself; join it for the typed error.
            Ok(Err(_)) => match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(LabError::ThreadFailed(
                    "the snapshot holder failed to begin its transaction".into(),
                )),
            },
            Err(_) => Err(LabError::ThreadFailed(
                "the snapshot holder panicked before it began its transaction".into(),
            )),
        }
    }

    /// Ends the held transaction (it commits, having written nothing) and waits for its
    /// thread.
    fn release(self) -> Result<(), LabError> {
        // The thread may already have ended with an error; `join` reports it.
        let _ = self.release.send(());
        match self.thread.join() {
            Ok(result) => result,
            Err(_) => Err(LabError::ThreadFailed(
                "the snapshot holder panicked".into(),
            )),
        }
    }
}

/// Worker `index`'s share of `total` transactions.
fn split(total: u64, workers: usize, index: usize) -> u64 {
    let workers = workers as u64;
    total / workers + u64::from((index as u64) < total % workers)
}

/// Runs OLTP worker `index` until the run stops, its `quota` of commits is reached or
/// `for_at_most` passed (the workload's OLTP phase ended), serving `clients` logical
/// clients (`crate::clients`; `None` for a peer), one transaction every `pace` if set
/// (open loop).
#[allow(clippy::too_many_arguments)]
fn drive_oltp(
    worker: &mut dyn OltpWorker,
    isolation: Isolation,
    shared: &Shared,
    index: usize,
    quota: Option<u64>,
    clients: Option<usize>,
    pace: Option<Duration>,
    for_at_most: Option<Duration>,
) -> Result<(), LabError> {
    if let Some(clients) = clients {
        crate::clients::install(clients);
    }
    let counters = &shared.oltp[index];
    let mut latencies: Vec<hdrhistogram::Histogram<u64>> = (0..counters.commits_by_kind.len())
        .map(|_| crate::clients::latency_histogram())
        .collect();
    let result = run_oltp(
        worker,
        isolation,
        counters,
        &shared.stop,
        (quota, for_at_most.map(|d| Instant::now() + d)),
        pace.map(Pacer::new),
        &mut latencies,
    );
    // Every commit counted is acknowledged before the worker ends (or the run fails).
    let finished = crate::clients::finish();
    result?;
    if let Ok(mut merged) = shared.latency_by_kind.lock() {
        for (merged, mine) in merged.iter_mut().zip(&latencies) {
            merged
                .add(mine)
                .map_err(|e| LabError::Inconsistent(format!("transaction latencies: {e}")))?;
        }
    }
    if let (Some(latency), Ok(mut merged)) = (finished?, shared.latency.lock()) {
        merged
            .add(&latency)
            .map_err(|e| LabError::Inconsistent(format!("commit latencies: {e}")))?;
    }
    Ok(())
}

/// Runs transactions until `stop`, the `quota` of commits or the `until` instant (the
/// first two of `(quota, until)`), recording each committed one's latency in `latencies`
/// (by type): from when it was due to its commit. Closed loop a transaction is due when
/// the one before it committed, so the attempts it lost to conflicts count in its latency;
/// with a `pacer`, when its slot in the schedule comes, and its retries run at once, in
/// the same slot. An attempt is never cut: `until` is checked between attempts (an
/// aborted one is not retried after it).
fn run_oltp(
    worker: &mut dyn OltpWorker,
    isolation: Isolation,
    counters: &WorkerCounters,
    stop: &AtomicBool,
    (quota, until): (Option<u64>, Option<Instant>),
    mut pacer: Option<Pacer>,
    latencies: &mut [hdrhistogram::Histogram<u64>],
) -> Result<(), LabError> {
    let mut committed = 0u64;
    let mut due = Instant::now();
    // Whether the next attempt begins a new transaction (rather than retrying one).
    let mut new_transaction = true;
    while !stop.load(Ordering::Relaxed) && until.is_none_or(|until| Instant::now() < until) {
        if let (Some(pacer), true) = (&mut pacer, new_transaction) {
            due = pacer.next_due();
            if !sleep_until(due, stop) {
                break;
            }
        }
        // A paced worker's transactions are due when their terminals submitted them.
        match worker.next_submission(stop)? {
            Submission::ClosedLoop => {}
            Submission::At(submitted) => due = submitted,
            Submission::Stopped => break,
        }
        match worker.run_one(isolation)? {
            TxnOutcome::Committed { kind, work } => {
                let now = Instant::now();
                let counter = counters.commits_by_kind.get(kind).ok_or_else(|| {
                    LabError::Inconsistent(format!(
                        "the workload reported transaction kind {kind} of {}",
                        counters.commits_by_kind.len()
                    ))
                })?;
                counter.fetch_add(1, Ordering::Relaxed);
                counters
                    .operations
                    .fetch_add(work.operations, Ordering::Relaxed);
                counters
                    .rows_added
                    .fetch_add(work.rows_added, Ordering::Relaxed);
                let micros = u64::try_from(now.saturating_duration_since(due).as_micros())
                    .unwrap_or(u64::MAX);
                latencies[kind].saturating_record(micros.clamp(1, MAX_RECORDED_MICROS));
                match &mut pacer {
                    Some(pacer) => {
                        let dropped = pacer.committed(now);
                        if !dropped.is_zero() {
                            counters.behind_schedule_nanos.fetch_add(
                                u64::try_from(dropped.as_nanos()).unwrap_or(u64::MAX),
                                Ordering::Relaxed,
                            );
                        }
                    }
                    None => due = now,
                }
                new_transaction = true;
                committed += 1;
                if quota.is_some_and(|quota| committed >= quota) {
                    break;
                }
            }
            TxnOutcome::Aborted { kind, reason } => {
                if let Some(counter) = counters.aborts_by_kind.get(kind) {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                counters.aborts_by_reason[reason_index(reason)].fetch_add(1, Ordering::Relaxed);
                new_transaction = false;
            }
        }
    }
    Ok(())
}

/// The longest latency recorded exactly (longer ones are recorded as this): one minute,
/// the histograms' bound.
const MAX_RECORDED_MICROS: u64 = 60_000_000;

/// The least catch-up window of a [`Pacer`]: below about a millisecond a sleeping thread
/// wakes late by more than an interval (the OS's timer slack and scheduling), and a window
/// of one interval would then drop slots the worker could well have run.
const MIN_CATCH_UP: Duration = Duration::from_millis(1);

/// One OLTP worker's schedule under `--target-rate`: a token bucket that fills with one
/// token every `interval` (the target rate divided among the workers) and holds at most
/// the catch-up window's worth, `max(interval, MIN_CATCH_UP)`.
///
/// Invariants: slots are `interval` apart and `due` only moves forward; a transaction is
/// due at its slot, and the worker sleeps until then (deadline-based: sleeping to the
/// slot, not for an interval, so the time a transaction takes does not shift the
/// schedule). A worker that falls behind runs its late transactions back to back, but
/// never more than the window's worth: slots further behind are dropped, not made up in a
/// burst, and the time they spanned is reported as behind schedule. A worker that cannot
/// keep up thus runs below the target rate, which the run's check then refuses.
struct Pacer {
    interval: Duration,
    window: Duration,
    /// When the next transaction is due.
    due: Instant,
}

impl Pacer {
    fn new(interval: Duration) -> Pacer {
        debug_assert!(!interval.is_zero());
        Pacer {
            interval,
            window: interval.max(MIN_CATCH_UP),
            due: Instant::now(),
        }
    }

    /// When the next transaction is due.
    fn next_due(&self) -> Instant {
        self.due
    }

    /// The transaction due at `next_due` committed at `now`: moves to the next slot, and
    /// returns the schedule dropped because the worker was more than the window behind.
    fn committed(&mut self, now: Instant) -> Duration {
        let next = self.due + self.interval;
        let earliest = now.checked_sub(self.window).unwrap_or(next);
        if next >= earliest {
            self.due = next;
            return Duration::ZERO;
        }
        // Whole slots are dropped, so the schedule keeps its phase.
        let behind = earliest - next;
        let slots = behind.as_nanos().div_ceil(self.interval.as_nanos().max(1));
        let dropped = self
            .interval
            .checked_mul(u32::try_from(slots).unwrap_or(u32::MAX))
            .unwrap_or(behind);
        self.due = next + dropped;
        dropped
    }
}

/// Sleeps until `deadline`, waking at least every [`POLL`] to see `stop`; false if the run
/// stopped first.
fn sleep_until(deadline: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(POLL));
    }
}

/// Runs queries from `delay` after the start (the workload's OLAP phase) until `stop`.
fn drive_olap(
    worker: &mut dyn OlapWorker,
    counters: &WorkerCounters,
    stop: &AtomicBool,
    delay: Duration,
) -> Result<(), LabError> {
    if !delay.is_zero() && !sleep_until(Instant::now() + delay, stop) {
        return Ok(());
    }
    while !stop.load(Ordering::Relaxed) {
        let outcome = worker.run_one()?;
        let counter = counters.queries_by_name.get(outcome.query).ok_or_else(|| {
            LabError::Inconsistent(format!(
                "the workload reported query {} of {}",
                outcome.query,
                counters.queries_by_name.len()
            ))
        })?;
        counter.fetch_add(1, Ordering::Relaxed);
        counters
            .scanned_tuples
            .fetch_add(outcome.scanned_tuples, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads the workers' counters and the system's gauges; a growth gauge that cannot be read
/// this time keeps `last_growth_bytes`.
fn read(
    system: &dyn DrivenSystem,
    shared: &Shared,
    kinds: usize,
    queries: usize,
    last_growth_bytes: u64,
) -> Reading {
    let gauges = system.gauges();
    Reading {
        at: Instant::now(),
        counts: shared.counts(kinds, queries),
        stats: gauges.stats,
        rss_bytes: crate::memory::resident_bytes().unwrap_or(0),
        dram_bytes: crate::memory::anonymous_resident_bytes().unwrap_or(0),
        growth_bytes: gauges.growth_bytes.unwrap_or(last_growth_bytes),
    }
}

/// A counter of the log's statistics, if the database has a log.
/// A persistent-memory counter now and at the previous reading (`None` without a region).
fn region(
    now: &verso::Stats,
    before: &verso::Stats,
    counter: impl Fn(&verso::pmem::PmStats) -> u64,
) -> Option<(u64, u64)> {
    let after = counter(now.persistent_memory.as_ref()?);
    let before = before.persistent_memory.as_ref().map_or(0, &counter);
    Some((after, before.min(after)))
}

/// A sample's disk-engine fields, from the stats at the interval's end and its start
/// (`rate` turns a counter's two values into a rate per second); all 0 without one.
fn disk_sample(
    now: Option<&verso::DiskStats>,
    before: Option<&verso::DiskStats>,
    rate: &dyn Fn(u64, u64) -> f64,
) -> Sample {
    let Some(now) = now else {
        return Sample::default();
    };
    let before = before.cloned().unwrap_or_default();
    let (pool, was) = (&now.buffer_pool, &before.buffer_pool);
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    };
    let written = pool.pages_written.saturating_sub(was.pages_written);
    let requests = (pool.hits + pool.misses).saturating_sub(was.hits + was.misses);
    let page = verso::disk::PAGE_SIZE as u64;
    Sample {
        disk_pages_read_per_second: rate(pool.pages_read, was.pages_read),
        disk_pages_written_per_second: rate(pool.pages_written, was.pages_written),
        disk_sequential_write_share: share(
            pool.sequential_writes.saturating_sub(was.sequential_writes),
            written,
        ),
        disk_pages_dirtied_per_second: rate(pool.pages_dirtied, was.pages_dirtied),
        disk_pages_dirtied_by_new_versions_per_second: rate(
            pool.pages_dirtied_by_new_versions,
            was.pages_dirtied_by_new_versions,
        ),
        disk_pages_dirtied_by_old_version_stamps_per_second: rate(
            pool.pages_dirtied_by_old_version_stamps,
            was.pages_dirtied_by_old_version_stamps,
        ),
        disk_pages_dirtied_by_hint_bits_per_second: rate(
            pool.pages_dirtied_by_hint_bits,
            was.pages_dirtied_by_hint_bits,
        ),
        disk_pages_dirtied_by_index_changes_per_second: rate(
            pool.pages_dirtied_by_index_changes,
            was.pages_dirtied_by_index_changes,
        ),
        disk_pages_dirtied_by_other_changes_per_second: rate(
            pool.pages_dirtied_by_other_changes,
            was.pages_dirtied_by_other_changes,
        ),
        disk_pages_written_for_aborted_transactions_per_second: rate(
            pool.pages_written_for_aborted_transactions,
            was.pages_written_for_aborted_transactions,
        ),
        buffer_hit_ratio: share(pool.hits.saturating_sub(was.hits), requests),
        heap_bytes: now.heap_pages * page,
        index_bytes: now.index_pages * page,
        undo_bytes: now.undo.pages.saturating_sub(now.undo.free_pages) * page,
        undo_history_list_length: now.undo.history_list_length,
        dead_tuples: now.dead_tuples,
        // InnoDB's design: old versions purged, and pruned eagerly from undo chains.
        tuples_pruned_per_second: rate(
            now.heap.tuples_pruned + now.undo.records_purged + now.clustered.versions_pruned,
            before.heap.tuples_pruned
                + before.undo.records_purged
                + before.clustered.versions_pruned,
        ),
        tuples_pruned_eagerly_per_second: rate(
            now.heap.tuples_pruned_eagerly + now.clustered.versions_pruned,
            before.heap.tuples_pruned_eagerly + before.clustered.versions_pruned,
        ),
        vacuums: now.vacuums,
        ..Sample::default()
    }
}

fn durable(stats: &Stats, get: impl Fn(&verso::DurabilityStats) -> u64) -> Option<u64> {
    stats.durability.as_ref().map(get)
}

/// How often the sampler wakes to check the stop conditions and move the progress bar.
const POLL: Duration = Duration::from_millis(50);

struct Sampler<'c> {
    config: &'c RunConfig,
    kinds: &'c [String],
    /// The rows the tables held before the run (`DrivenSystem::count_rows`).
    rows_at_start: Option<u64>,
    queries: &'static [&'static str],
    first_at: Instant,
    first_stats: Stats,
    previous: Reading,
    samples: Vec<Sample>,
    bar: ProgressBar,
    /// Why the run ended before its stop condition, if it did (`memory_limit_bytes`).
    stopped_early: Option<String>,
}

impl<'c> Sampler<'c> {
    fn new(
        config: &'c RunConfig,
        first: Reading,
        kinds: &'c [String],
        queries: &'static [&'static str],
        rows_at_start: Option<u64>,
    ) -> Self {
        let bar = match config.stop {
            StopAfter::Duration(d) => progress_bar(config.show_progress, d.as_secs().max(1)),
            StopAfter::Transactions(n) => progress_bar(config.show_progress, n),
        };
        bar.set_prefix(format!("{} run", config.label));
        Sampler {
            config,
            kinds,
            rows_at_start,
            queries,
            first_at: first.at,
            first_stats: first.stats.clone(),
            previous: first,
            samples: Vec::new(),
            bar,
            stopped_early: None,
        }
    }

    /// Samples every interval until the run's stop condition holds or a worker failed.
    fn sample_until_done(&mut self, system: &dyn DrivenSystem, shared: &Shared) {
        let mut next_sample = self.first_at + self.config.sample_interval;
        loop {
            let now = Instant::now();
            let elapsed = now.duration_since(self.first_at);
            let done = shared.failed()
                || match self.config.stop {
                    StopAfter::Duration(d) => elapsed >= d,
                    StopAfter::Transactions(_) => {
                        shared.oltp_finished.load(Ordering::Acquire) == self.config.oltp_workers
                    }
                };
            if done {
                return;
            }
            if now >= next_sample {
                self.take_sample(system, shared);
                next_sample += self.config.sample_interval;
                // Checked after a sample, so that a stopped run has measured something.
                if let Some(limit) = self.config.memory_limit_bytes {
                    let resident = self.previous.rss_bytes;
                    if resident > limit {
                        self.stopped_early = Some(format!(
                            "stopped at {:.0} s: resident memory {} passed --memory-limit {}",
                            elapsed.as_secs_f64(),
                            crate::format::bytes(resident as f64),
                            crate::format::bytes(limit as f64)
                        ));
                        return;
                    }
                }
            }
            match self.config.stop {
                StopAfter::Duration(_) => self.bar.set_position(elapsed.as_secs()),
                StopAfter::Transactions(_) => {
                    let counts = shared.counts(self.kinds.len(), self.queries.len());
                    self.bar.set_position(counts.commits());
                }
            }
            let mut wake = next_sample.min(now + POLL);
            if let StopAfter::Duration(d) = self.config.stop {
                // The end of a timed run gets its own (possibly short) sample.
                wake = wake.min(self.first_at + d);
            }
            std::thread::sleep(wake.saturating_duration_since(Instant::now()));
        }
    }

    fn take_sample(&mut self, system: &dyn DrivenSystem, shared: &Shared) {
        let now = read(
            system,
            shared,
            self.kinds.len(),
            self.queries.len(),
            self.previous.growth_bytes,
        );
        let sample = self.difference(&now);
        self.bar.set_message(if self.config.peer.is_some() {
            format!(
                "{} commits/s, growth {}",
                compact(sample.oltp_commits_per_second),
                crate::format::bytes(sample.growth_bytes as f64),
            )
        } else {
            format!(
                "{} commits/s, {} live versions, max chain {}",
                compact(sample.oltp_commits_per_second),
                compact(sample.live_versions as f64),
                sample.read_chain_max.max(sample.write_chain_max),
            )
        });
        self.samples.push(sample);
        self.previous = now;
    }

    fn difference(&self, now: &Reading) -> Sample {
        let before = &self.previous;
        let interval = now.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let rate = |after: u64, before: u64| after.saturating_sub(before) as f64 / interval;
        let (s, p) = (&now.stats, &before.stats);
        let chain_mean = |after: &ChainHistogram, before: &ChainHistogram| {
            let count = after.count().saturating_sub(before.count());
            if count == 0 {
                0.0
            } else {
                after.total.saturating_sub(before.total) as f64 / count as f64
            }
        };
        let (c, q) = (&now.counts, &before.counts);
        let live_rows = self.rows_at_start.map_or(0, |rows| {
            u64::try_from(i128::from(rows) + i128::from(c.rows_added)).unwrap_or(0)
        });
        let per_row = |count: u64| {
            if live_rows == 0 {
                0.0
            } else {
                count as f64 / live_rows as f64
            }
        };
        Sample {
            t_seconds: now.at.duration_since(self.first_at).as_secs_f64(),
            interval_seconds: interval,
            oltp_commits_per_second: rate(c.commits(), q.commits()),
            oltp_commits_by_kind_per_second: self
                .kinds
                .iter()
                .enumerate()
                .map(|(i, kind)| {
                    (
                        kind.clone(),
                        rate(c.commits_by_kind[i], q.commits_by_kind[i]),
                    )
                })
                .collect(),
            oltp_operations_per_second: rate(c.operations, q.operations),
            oltp_aborts_per_second: rate(c.aborts(), q.aborts()),
            aborts_by_reason_per_second: AbortReason::ALL
                .iter()
                .enumerate()
                .map(|(i, reason)| {
                    (
                        reason.name().to_owned(),
                        rate(c.aborts_by_reason[i], q.aborts_by_reason[i]),
                    )
                })
                .collect(),
            olap_queries_per_second: rate(c.queries(), q.queries()),
            olap_scanned_tuples_per_second: rate(c.scanned_tuples, q.scanned_tuples),
            live_versions: s.live_versions(),
            live_version_bytes: s.live_version_bytes(),
            live_rows,
            chain_length_mean: if live_rows == 0 {
                0.0
            } else {
                1.0 + s.live_versions() as f64 / live_rows as f64
            },
            rss_bytes: now.rss_bytes,
            dram_bytes: now.dram_bytes,
            read_chain_mean: chain_mean(&s.read_chain_lengths, &p.read_chain_lengths),
            read_chain_max: s.read_chain_lengths.window_max,
            write_chain_mean: chain_mean(&s.write_chain_lengths, &p.write_chain_lengths),
            write_chain_max: s.write_chain_lengths.window_max,
            gc_chain_mean: chain_mean(&s.gc_chain_lengths, &p.gc_chain_lengths),
            gc_chain_max: s.gc_chain_lengths.window_max,
            version_accesses_per_tuple: per_row(
                s.version_accesses()
                    .total()
                    .saturating_sub(p.version_accesses().total()),
            ),
            collector_accesses_per_tuple: per_row(
                s.version_accesses()
                    .collector
                    .saturating_sub(p.version_accesses().collector),
            ),
            gc_ms_per_second: rate(s.gc_nanos + s.prune_nanos, p.gc_nanos + p.prune_nanos) / 1e6,
            prune_ms_per_second: rate(s.prune_nanos, p.prune_nanos) / 1e6,
            versions_created_per_second: rate(s.versions_created, p.versions_created),
            versions_pruned_per_second: rate(s.versions_pruned_eagerly, p.versions_pruned_eagerly),
            versions_reclaimed_per_second: rate(s.versions_reclaimed, p.versions_reclaimed),
            growth_bytes: now.growth_bytes,
            log_bytes_per_second: durable(s, |d| d.log_bytes).map_or(0.0, |after| {
                rate(after, durable(p, |d| d.log_bytes).unwrap_or(0))
            }),
            log_syncs_per_second: durable(s, |d| d.log_syncs).map_or(0.0, |after| {
                rate(after, durable(p, |d| d.log_syncs).unwrap_or(0))
            }),
            checkpoint_running: s.durability.as_ref().is_some_and(|d| {
                d.checkpoint_running
                    || d.checkpoints > p.durability.as_ref().map_or(0, |p| p.checkpoints)
            }),
            pm_lines_per_second: region(s, p, |r| r.lines_persisted())
                .map_or(0.0, |(a, b)| rate(a, b)),
            pm_media_bytes_per_second: region(s, p, |r| r.media_bytes_written())
                .map_or(0.0, |(a, b)| rate(a, b)),
            pm_write_amplification: match (
                region(s, p, |r| r.media_bytes_written()),
                region(s, p, |r| r.logical_bytes_stored()),
            ) {
                (Some((media, media_before)), Some((logical, logical_before)))
                    if logical > logical_before =>
                {
                    (media - media_before) as f64 / (logical - logical_before) as f64
                }
                _ => 0.0,
            },
            pm_bytes_in_use: s
                .persistent_memory
                .as_ref()
                .map_or(0, |pm| pm.blocks.frames_in_use * pm.blocks.frame_bytes),
            pm_tile_bytes: s
                .persistent_memory
                .as_ref()
                .map_or(0, |pm| pm.blocks.tile_bytes),
            pm_blocks_consolidated: s.persistent_memory.as_ref().map_or(0, |pm| {
                pm.blocks.blocks_freed_tile_kept + pm.blocks.blocks_freed_indexed
            }),
            pm_version_index_entries: s
                .persistent_memory
                .as_ref()
                .map_or(0, |pm| pm.blocks.version_index_entries),
            pm_versions_held_per_row: match &s.persistent_memory {
                Some(pm) if live_rows > 0 => pm.versions_held as f64 / live_rows as f64,
                _ => 0.0,
            },
            ..disk_sample(s.disk.as_ref(), p.disk.as_ref(), &rate)
        }
    }

    fn finish(
        self,
        run_seconds: f64,
        latency: &hdrhistogram::Histogram<u64>,
        latency_by_kind: std::collections::BTreeMap<String, LatencySummary>,
    ) -> Measured {
        let c = &self.previous.counts;
        let name = |names: &[&str], i: usize| names[i].to_owned();
        let fixed_rate = self.config.target_rate.map(|target| FixedRateResult {
            target_per_second: target,
            achieved_per_second: c.commits() as f64 / run_seconds.max(1e-9),
            behind_schedule_seconds: c.behind_schedule_nanos as f64 / 1e9,
        });
        let totals = Totals {
            oltp_commits: c.commits(),
            oltp_commits_by_kind: (0..self.kinds.len())
                .map(|i| (self.kinds[i].clone(), c.commits_by_kind[i]))
                .collect(),
            oltp_operations: c.operations,
            oltp_aborts: c.aborts(),
            oltp_aborts_by_kind: (0..self.kinds.len())
                .map(|i| (self.kinds[i].clone(), c.aborts_by_kind[i]))
                .collect(),
            aborts_by_reason: AbortReason::ALL
                .iter()
                .enumerate()
                .map(|(i, r)| (r.name().to_owned(), c.aborts_by_reason[i]))
                .collect(),
            olap_queries: c.queries(),
            olap_queries_by_name: (0..self.queries.len())
                .map(|i| (name(self.queries, i), c.queries_by_name[i]))
                .collect(),
            olap_scanned_tuples: c.scanned_tuples,
        };
        let (s, f) = (&self.previous.stats, &self.first_stats);
        let chain_mean = |after: &ChainHistogram, before: &ChainHistogram| {
            let count = after.count().saturating_sub(before.count());
            if count == 0 {
                0.0
            } else {
                after.total.saturating_sub(before.total) as f64 / count as f64
            }
        };
        let engine = EngineTotals {
            versions_created: s.versions_created.saturating_sub(f.versions_created),
            versions_pruned_eagerly: s
                .versions_pruned_eagerly
                .saturating_sub(f.versions_pruned_eagerly),
            versions_reclaimed: s.versions_reclaimed.saturating_sub(f.versions_reclaimed),
            live_versions_at_end: s.live_versions(),
            gc_seconds: s.gc_nanos.saturating_sub(f.gc_nanos) as f64 / 1e9,
            prune_seconds: s.prune_nanos.saturating_sub(f.prune_nanos) as f64 / 1e9,
            read_chain_mean: chain_mean(&s.read_chain_lengths, &f.read_chain_lengths),
            write_chain_mean: chain_mean(&s.write_chain_lengths, &f.write_chain_lengths),
            gc_chain_mean: chain_mean(&s.gc_chain_lengths, &f.gc_chain_lengths),
            reads: s
                .read_chain_lengths
                .count()
                .saturating_sub(f.read_chain_lengths.count()),
            read_versions_traversed: s
                .read_chain_lengths
                .total
                .saturating_sub(f.read_chain_lengths.total),
            gc_chain_visits: s
                .gc_chain_lengths
                .count()
                .saturating_sub(f.gc_chain_lengths.count()),
            gc_versions_traversed: s
                .gc_chain_lengths
                .total
                .saturating_sub(f.gc_chain_lengths.total),
            scan_reads: s
                .scan_chain_lengths
                .count()
                .saturating_sub(f.scan_chain_lengths.count()),
            scan_versions_traversed: s
                .scan_chain_lengths
                .total
                .saturating_sub(f.scan_chain_lengths.total),
            scan_chain_mean: chain_mean(&s.scan_chain_lengths, &f.scan_chain_lengths),
            scan_chain_max: s.scan_chain_lengths.max,
            version_retrieval_seconds: s
                .version_retrieval_nanos
                .saturating_sub(f.version_retrieval_nanos)
                as f64
                / 1e9,
            active_list_refreshes: s
                .active_list_refreshes
                .saturating_sub(f.active_list_refreshes),
            active_list_seconds: s.active_list_nanos.saturating_sub(f.active_list_nanos) as f64
                / 1e9,
            versions_pruned_in_background: s
                .versions_pruned_in_background
                .saturating_sub(f.versions_pruned_in_background),
            background_gc_seconds: s.background_gc_nanos.saturating_sub(f.background_gc_nanos)
                as f64
                / 1e9,
            background_gc_rounds: s
                .background_gc_rounds
                .saturating_sub(f.background_gc_rounds),
            transactions_handed_out: s
                .transactions_handed_out
                .saturating_sub(f.transactions_handed_out),
            epoch_advances: s.epoch_advances.saturating_sub(f.epoch_advances),
            vacuum_passes: s.vacuum_passes.saturating_sub(f.vacuum_passes),
            blocks_vacuumed: s.blocks_vacuumed.saturating_sub(f.blocks_vacuumed),
            blocks_skipped_clean: s
                .blocks_skipped_clean
                .saturating_sub(f.blocks_skipped_clean),
            rows_recorded_for_cleaning: s
                .rows_recorded_for_cleaning
                .saturating_sub(f.rows_recorded_for_cleaning),
            rows_cleaned_cooperatively: s
                .rows_cleaned_cooperatively
                .saturating_sub(f.rows_cleaned_cooperatively),
        };
        let durability = self.config.peer.is_none().then(|| {
            let (s, f) = (s.durability.as_ref(), f.durability.as_ref());
            let delta = |get: fn(&verso::DurabilityStats) -> u64| {
                s.map_or(0, get).saturating_sub(f.map_or(0, get))
            };
            let per_second = |n: u64| n as f64 / run_seconds.max(1e-9);
            let (syncs, checkpoints) = (delta(|d| d.log_syncs), delta(|d| d.checkpoints));
            let options = &self.config.options;
            let mut result = crate::metrics::DurabilityResult {
                level: options
                    .effective_durability()
                    .map_or("memory", |d| d.name())
                    .to_owned(),
                path: options
                    .path
                    .as_ref()
                    .or(options.disk.as_ref())
                    .map(|p| p.display().to_string()),
                clients: self.config.clients.unwrap_or(self.config.oltp_workers),
                commits_acknowledged: latency.len(),
                commit_latency_p50_us: latency.value_at_quantile(0.5) as f64,
                commit_latency_p99_us: latency.value_at_quantile(0.99) as f64,
                commit_latency_p999_us: latency.value_at_quantile(0.999) as f64,
                commit_latency_max_us: latency.max() as f64,
                log_bytes_per_second: per_second(delta(|d| d.log_bytes)),
                log_syncs_per_second: per_second(syncs),
                commits_per_sync: if syncs == 0 {
                    0.0
                } else {
                    delta(|d| d.log_commits) as f64 / syncs as f64
                },
                mean_sync_ms: if syncs == 0 {
                    0.0
                } else {
                    delta(|d| d.log_sync_nanos) as f64 / syncs as f64 / 1e6
                },
                checkpoints,
                checkpoint_mean_seconds: if checkpoints == 0 {
                    0.0
                } else {
                    delta(|d| d.checkpoint_nanos) as f64 / checkpoints as f64 / 1e9
                },
                ..Default::default()
            };
            result.add_checkpoint_samples(&self.samples);
            result
        });
        Measured {
            stopped_early: self.stopped_early,
            latency: latency_by_kind,
            fixed_rate,
            paced: None,
            run_seconds,
            samples: self.samples,
            totals,
            engine,
            durability,
        }
    }
}

/// Runs one configuration in a child process of this executable and reads its result:
/// `args` (without the program name) select it, and the child writes its [`RunResult`] as
/// JSON to the temporary file passed after `json_flag` ([`write_run_for_parent`]). `what`
/// names the run in errors. Used where several runs are compared, so that none inherits
/// the heap, the page faults already paid, or the resident memory of another. With
/// `show_progress`, on a terminal, the child's bars are drawn here ([`crate::progress`]),
/// after `heading`.
pub(crate) fn run_in_child_process(
    args: &[String],
    json_flag: &str,
    what: &str,
    show_progress: bool,
    heading: &str,
) -> Result<RunResult, LabError> {
    // The child draws in what the heading leaves of the line.
    let forward = crate::progress::parent_forwards(show_progress)
        .map(|width| width.saturating_sub(heading.chars().count() as u16));
    let bar = match forward {
        Some(_) => crate::progress::parent_bar(heading),
        None => ProgressBar::hidden(),
    };
    let program = std::env::current_exe()?;
    run_child(&program, args, json_flag, what, forward, &bar).map(|(run, _)| run)
}

/// [`run_in_child_process`] with the program given, and the child's progress (when
/// `forward_width` is set: the child draws its bars that wide) drawn on `bar`; returns
/// what the child's standard error held beside its result.
pub fn run_child(
    program: &std::path::Path,
    args: &[String],
    json_flag: &str,
    what: &str,
    forward_width: Option<u16>,
    bar: &ProgressBar,
) -> Result<(RunResult, crate::progress::ChildStderr), LabError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let json = std::env::temp_dir().join(format!(
        "verso-run-{}-{}.json",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .arg(json_flag)
        .arg(&json)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .env_remove(crate::progress::PROGRESS_TO_PARENT);
    if let Some(width) = forward_width {
        command.env(crate::progress::PROGRESS_TO_PARENT, width.to_string());
    }
    // The child emulates the same media as this process (crate::pm_media).
    if let Some(bandwidth) = crate::pm_media::known_dram_write_bandwidth() {
        command.env(crate::pm_media::BANDWIDTH_ENV, bandwidth.to_string());
    }
    let mut child = command.spawn()?;
    // The child's stdout is discarded and its stdin closed, so reading its stderr to the
    // end cannot wait on anything but the child itself.
    let stderr = match child.stderr.take() {
        Some(stderr) => crate::progress::forward_child_stderr(stderr, bar),
        None => Ok(Default::default()),
    };
    if stderr.is_err() {
        // Nobody reads the pipe any more: a child still writing to it would wait forever.
        let _ = child.kill();
    }
    let status = child.wait()?;
    let stderr = stderr?;
    if !status.success() {
        let _ = std::fs::remove_file(&json);
        return Err(LabError::child_failed(what, status, &stderr.text));
    }
    let text = std::fs::read_to_string(&json)?;
    let _ = std::fs::remove_file(&json);
    let run = serde_json::from_str(&text).map_err(|e| {
        LabError::Io(std::io::Error::other(format!(
            "{what}: the child's result is not a run's JSON: {e}"
        )))
    })?;
    Ok((run, stderr))
}

/// The child's side of [`run_in_child_process`]: writes `run` for the parent.
pub(crate) fn write_run_for_parent(
    run: &RunResult,
    path: &std::path::Path,
) -> Result<(), LabError> {
    let text = serde_json::to_string(run).map_err(|e| LabError::Io(std::io::Error::other(e)))?;
    std::fs::write(path, text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// The name of the run thread whose spawn is made to fail, on this thread only.
        static PLANTED_SPAWN_FAILURE: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    /// `spawn_run_thread`'s hook: fails the spawn of the thread planted on this thread, as
    /// running out of threads would.
    pub(super) fn planted_spawn_failure(name: &str) -> std::io::Result<()> {
        PLANTED_SPAWN_FAILURE.with_borrow(|planted| match planted {
            Some(planted) if planted == name => Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "planted: no more threads",
            )),
            _ => Ok(()),
        })
    }

    /// Runs `run` on its own thread and returns what it returns, or fails the test if it
    /// has not returned within `deadline` (the thread is then left behind, hung).
    fn within<T: Send + 'static>(
        deadline: Duration,
        run: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(run());
        });
        receiver
            .recv_timeout(deadline)
            .unwrap_or_else(|_| panic!("still running after {deadline:?}: it hangs"))
    }

    /// A worker thread that could not be spawned (the process was out of threads: `verso
    /// ycsb --tiny --workers 300` under `ulimit -u 100` hung) never reached the start
    /// barrier, so the workers spawned before it, and the sampler, waited there forever.
    #[test]
    fn regression_a_worker_thread_that_cannot_be_spawned_fails_the_run_instead_of_hanging() {
        use crate::workloads::kv_updates::{KvConfig, KvWorkload};
        let config = RunConfig {
            oltp_workers: 3,
            hold_snapshot: true,
            stop: StopAfter::Duration(Duration::from_secs(30)),
            sample_interval: Duration::from_millis(100),
            ..RunConfig::new("steam", GarbageCollector::Steam)
        };
        let result = within(Duration::from_secs(30), move || {
            PLANTED_SPAWN_FAILURE.set(Some("verso-oltp-2".into()));
            let workload = KvWorkload::new(KvConfig::tiny()).unwrap();
            run_configuration(&workload, &config)
        });
        assert!(
            matches!(&result, Err(LabError::ThreadFailed(what))
                if what.contains("cannot start OLTP worker 2") && what.contains("planted")),
            "{result:?}"
        );
    }

    #[test]
    fn the_start_line_lets_every_waiting_thread_go_or_sends_them_all_home() {
        for open in [true, false] {
            let line = StartLine::new();
            let went: Vec<bool> = std::thread::scope(|scope| {
                let waiting: Vec<_> = (0..3).map(|_| scope.spawn(|| line.wait())).collect();
                std::thread::sleep(Duration::from_millis(20));
                if open {
                    line.open();
                } else {
                    line.call_off();
                }
                waiting.into_iter().map(|t| t.join().unwrap()).collect()
            });
            assert_eq!(went, [open; 3]);
            // Settled once: it stays as it is, and a late arrival does not wait.
            line.call_off();
            line.open();
            assert_eq!(line.wait(), open);
        }
    }

    #[test]
    fn a_pacer_keeps_its_schedule_catches_up_one_window_and_drops_the_rest() {
        let interval = Duration::from_millis(10);
        let mut pacer = Pacer::new(interval);
        let start = pacer.next_due();
        // On time: the next slot is one interval on, nothing dropped.
        assert_eq!(
            pacer.committed(start + Duration::from_millis(3)),
            Duration::ZERO
        );
        assert_eq!(pacer.next_due(), start + interval);
        // Late by less than the window (10 ms): the slot stays, to be run at once.
        assert_eq!(
            pacer.committed(start + Duration::from_millis(25)),
            Duration::ZERO
        );
        assert_eq!(pacer.next_due(), start + 2 * interval);
        // 100 ms late: the slots more than one window behind are dropped, whole.
        let dropped = pacer.committed(start + Duration::from_millis(120));
        assert_eq!(dropped, Duration::from_millis(80));
        assert_eq!(pacer.next_due(), start + Duration::from_millis(110));
        // A high rate's window is the timer's granularity, not its 10 µs interval.
        let mut fast = Pacer::new(Duration::from_micros(10));
        let start = fast.next_due();
        assert_eq!(
            fast.committed(start + Duration::from_micros(500)),
            Duration::ZERO
        );
    }

    #[test]
    fn transactions_split_evenly_over_workers() {
        assert_eq!(
            (0..3).map(|i| split(10, 3, i)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!((0..4).map(|i| split(2, 4, i)).sum::<u64>(), 2);
    }

    #[test]
    fn worker_seeds_differ_by_role_and_index() {
        let seeds = [
            worker_seed(1, 1, 0),
            worker_seed(1, 1, 1),
            worker_seed(1, 2, 0),
            worker_seed(2, 1, 0),
        ];
        for (i, a) in seeds.iter().enumerate() {
            for b in &seeds[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(worker_seed(7, 1, 3), worker_seed(7, 1, 3));
    }

    /// Voluntary context switches of each live thread of this process named `name` (as
    /// `/proc` shows it: its first 15 bytes), by thread id.
    #[cfg(target_os = "linux")]
    fn voluntary_switches_of_threads_named(name: &str) -> std::collections::BTreeMap<u64, u64> {
        let shown = &name[..name.len().min(15)];
        let mut switches = std::collections::BTreeMap::new();
        for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
            let task = task.expect("a task entry").path();
            // A thread can end between the listing and the reads: skip it.
            let (Ok(comm), Ok(status)) = (
                std::fs::read_to_string(task.join("comm")),
                std::fs::read_to_string(task.join("status")),
            ) else {
                continue;
            };
            if comm.trim_end() != shown {
                continue;
            }
            let tid = task.file_name().unwrap().to_str().unwrap().parse().unwrap();
            let count = status
                .lines()
                .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
                .expect("status lists voluntary_ctxt_switches")
                .trim()
                .parse()
                .unwrap();
            switches.insert(tid, count);
        }
        switches
    }

    /// A database with one row, `(1, 0)` in table `t`.
    fn one_row_database() -> (Database, verso::TableId) {
        let db = Database::open(Options::default()).unwrap();
        let schema = verso::Schema::new()
            .column("id", verso::ColumnType::U64)
            .column("n", verso::ColumnType::U64)
            .primary_key(&["id"]);
        let table = db.create_table("t", schema).unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &[verso::Value::U64(1), verso::Value::U64(0)])
            .unwrap();
        txn.commit().unwrap();
        (db, table)
    }

    /// Updates the row twice, collects, and returns how many versions the row keeps behind
    /// its newest: at least one while a snapshot from before the updates is held, none
    /// once it ends.
    fn versions_kept_after_two_updates(db: &Database, table: verso::TableId) -> usize {
        for n in 1..=2 {
            let mut txn = db.begin(Isolation::Snapshot);
            assert!(txn
                .update(table, &[verso::Value::U64(1)], &[(1, verso::Value::U64(n))])
                .unwrap());
            txn.commit().unwrap();
        }
        db.collect_garbage();
        db.version_chain_length(table, &[verso::Value::U64(1)])
            .unwrap()
            .unwrap()
    }

    /// The held snapshot's thread polled a flag every 2 ms: on two cores each wake-up
    /// preempted a worker and slowed the held run for a reason unrelated to the snapshot.
    /// Now it sleeps on a channel until released.
    #[cfg(target_os = "linux")]
    #[test]
    fn regression_the_snapshot_holder_wakes_only_to_end_its_transaction() {
        let (db, table) = one_row_database();
        std::thread::scope(|scope| {
            let before = voluntary_switches_of_threads_named(SnapshotHolder::THREAD_NAME);
            let holder = SnapshotHolder::begin(scope, &db, Isolation::Snapshot, false).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let settled = voluntary_switches_of_threads_named(SnapshotHolder::THREAD_NAME);
            std::thread::sleep(Duration::from_millis(400));
            let after = voluntary_switches_of_threads_named(SnapshotHolder::THREAD_NAME);
            // Other tests' holders may share the name; ours is the one that is new and
            // alive throughout. Polling every 2 ms would have woken it about 200 times.
            let ours: Vec<u64> = settled
                .keys()
                .filter(|tid| !before.contains_key(tid) && after.contains_key(tid))
                .map(|tid| after[tid] - settled[tid])
                .collect();
            assert!(!ours.is_empty(), "the holder's thread is not in /proc");
            assert!(
                ours.iter().all(|&woke| woke <= 2),
                "the idle holder woke {ours:?} times in 400 ms"
            );
            // Asleep, it still holds its snapshot; released, it lets go of it.
            assert!(versions_kept_after_two_updates(&db, table) >= 1);
            holder.release().unwrap();
            assert_eq!(versions_kept_after_two_updates(&db, table), 0);
        });
    }

    /// `--hold-read-only`: the holder's transaction is declared read-only. Under MVOCC an
    /// undeclared one is a transaction that may still write and validate, so every writer's
    /// commit record stays while it is held; a declared one needs none of them.
    #[test]
    fn a_read_only_holder_keeps_no_commit_records_under_mvocc() {
        // A fresh database for each case: records the first case left are trimmed lazily,
        // during the second (counting across the two underflowed once).
        for read_only in [false, true] {
            let db = Database::open(
                Options::default().concurrency_control(verso::ConcurrencyControl::Mvocc),
            )
            .unwrap();
            let schema = verso::Schema::new()
                .column("id", verso::ColumnType::U64)
                .column("n", verso::ColumnType::U64)
                .primary_key(&["id"]);
            let table = db.create_table("t", schema).unwrap();
            let mut txn = db.begin(Isolation::Serializable);
            txn.insert(table, &[verso::Value::U64(1), verso::Value::U64(0)])
                .unwrap();
            txn.commit().unwrap();
            std::thread::scope(|scope| {
                let before = db.stats().live_commit_records();
                let holder =
                    SnapshotHolder::begin(scope, &db, Isolation::Serializable, read_only).unwrap();
                for n in 1..=10 {
                    let mut txn = db.begin(Isolation::Serializable);
                    assert!(txn
                        .update(table, &[verso::Value::U64(1)], &[(1, verso::Value::U64(n))])
                        .unwrap());
                    txn.commit().unwrap();
                }
                let kept = db.stats().live_commit_records().saturating_sub(before);
                if read_only {
                    // At most the trimming's lag (the newest record or two), never the ten.
                    assert!(kept <= 2, "read-only: {kept} records kept");
                } else {
                    assert_eq!(kept, 10, "may write: every record since it began");
                }
                holder.release().unwrap();
            });
        }
    }

    #[test]
    fn a_dropped_snapshot_holder_ends_its_transaction_and_thread() {
        let (db, table) = one_row_database();
        // If dropping did not wake the thread, the scope would wait for it forever.
        std::thread::scope(|scope| {
            let holder = SnapshotHolder::begin(scope, &db, Isolation::Snapshot, false).unwrap();
            assert!(versions_kept_after_two_updates(&db, table) >= 1);
            drop(holder);
        });
        assert_eq!(versions_kept_after_two_updates(&db, table), 0);
    }
}
