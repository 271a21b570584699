//! The `verso` command line: one subcommand per workload, common options for the runner,
//! `demo`, and `reproduce`.
//!
//! [`execute`] runs a parsed command and returns what it measured; `main.rs` only parses,
//! prints errors and sets the exit status, so tests drive the same code.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};
use verso::research::{NonInline, VersionRemoval};
use verso::{
    ConcurrencyControl, GarbageCollector, IndexPointers, Isolation, Options, VersionStorageKind,
};

use crate::compare::{Compared, Design};
use crate::metrics::{LabReport, FORMAT_VERSION};
use crate::peers::{PeerKind, PeerSpec};
use crate::report::{check_outputs, comparison_line, summary_table, write_json, write_report};
use crate::reproduce::{self, PointProcess, ReproduceOptions, Reproduction};
use crate::runner::{run_configuration, RunConfig, StopAfter, DEFAULT_SEED};
use crate::workload::{LabError, Workload, MAX_TABLE_ROWS};
use crate::workloads::kv_updates::{KvConfig, KvWorkload};
use crate::workloads::scan_updates::{ScansConfig, ScansWorkload};
use crate::workloads::sysbench::{SysbenchConfig, SysbenchUpdate, SysbenchWorkload};
use crate::workloads::tpcb::{TpcbConfig, TpcbWorkload};
use crate::workloads::ycsb::{YcsbConfig, YcsbWorkload};

/// The Verso lab: the papers' workloads against the Verso engine, measured every second.
#[derive(Parser, Debug)]
#[command(name = "verso", version, about, long_about = None)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands: one per workload, and the demo.
#[derive(Subcommand, Debug)]
// In every subcommand negative numbers are values, so `--workers -1` is refused as a bad
// value of --workers rather than as an unknown argument `-1`.
pub enum Command {
    /// YCSB (Wu et al. §7.1, DBx1000): Zipf-skewed reads and updates on one table.
    #[command(allow_negative_numbers = true)]
    Ycsb {
        /// Runner options.
        #[command(flatten)]
        common: CommonArgs,
        /// `--olap-workers`.
        #[command(flatten)]
        olap: OlapArgs,
        /// `--peer`, `--postgres-url`, `--peer-dir`.
        #[command(flatten)]
        peers: PeerArgs,
        /// YCSB's parameters.
        #[command(flatten)]
        ycsb: YcsbArgs,
    },
    /// TPC-C: the five transactions in the standard mix; StockScan as the OLAP query.
    #[command(allow_negative_numbers = true)]
    Tpcc {
        /// Runner options (`--scale` is the number of warehouses).
        #[command(flatten)]
        common: CommonArgs,
        /// `--olap-workers`.
        #[command(flatten)]
        olap: OlapArgs,
        /// `--peer`, `--postgres-url`, `--peer-dir`.
        #[command(flatten)]
        peers: PeerArgs,
        /// `--terminals-per-warehouse`, `--pacing`.
        #[command(flatten)]
        paced: PacedArgs,
    },
    /// CH-benCHmark: TPC-C transactions with the 22 analytical queries beside them.
    #[command(allow_negative_numbers = true)]
    Ch {
        /// Runner options (`--scale` is the number of warehouses).
        #[command(flatten)]
        common: CommonArgs,
        /// `--olap-workers`.
        #[command(flatten)]
        olap: OlapArgs,
        /// `--peer`, `--postgres-url`, `--peer-dir`.
        #[command(flatten)]
        peers: PeerArgs,
    },
    /// Key-value updates under Zipf skew (Steam §5.5).
    #[command(allow_negative_numbers = true)]
    Kv {
        /// Runner options (`--scale`: millions of rows).
        #[command(flatten)]
        common: CommonArgs,
        /// The workload's parameters.
        #[command(flatten)]
        kv: KvArgs,
    },
    /// Full table scans mixed with updates (Steam §5.6).
    #[command(allow_negative_numbers = true)]
    Scans {
        /// Runner options (`--scale`: hundreds of thousands of rows).
        #[command(flatten)]
        common: CommonArgs,
        /// `--olap-workers`.
        #[command(flatten)]
        olap: OlapArgs,
        /// The workload's parameters.
        #[command(flatten)]
        scans: ScansArgs,
    },
    /// DIVA's sysbench-HTAP (§7.1): one-row sysbench updates beside join queries Q1-Q4,
    /// half of them in one long transaction each, in phases (OLTP only, both, OLAP only).
    #[command(allow_negative_numbers = true)]
    Sysbench {
        /// Runner options (`--scale`: ten thousands of rows per table).
        #[command(flatten)]
        common: CommonArgs,
        /// `--olap-workers` [default: 4: Q1 and Q4, each in L and S mode].
        #[command(flatten)]
        olap: OlapArgs,
        /// The workload's parameters.
        #[command(flatten)]
        sysbench: SysbenchArgs,
    },
    /// pgbench's TPC-B-like transaction (`--scale` as pgbench's: 100,000 accounts each).
    #[command(allow_negative_numbers = true)]
    Tpcb {
        /// Runner options.
        #[command(flatten)]
        common: CommonArgs,
        /// `--peer`, `--postgres-url`, `--peer-dir`.
        #[command(flatten)]
        peers: PeerArgs,
    },
    /// Verso's promise in two minutes: TPC-B with one snapshot held for the whole run, on
    /// Steam (Verso's default), on watermark-only and on every peer here (SQLite; DuckDB
    /// with the `duckdb` feature; PostgreSQL when installed), each beside a run without the
    /// snapshot; writes a report to `verso-report/`.
    #[command(allow_negative_numbers = true)]
    Demo(DemoArgs),
    /// Redo a paper's figure or table: runs the experiment, writes an HTML report with our
    /// figures beside the paper's numbers and a verdict per claim, JSON, and a summary.
    #[command(after_help = reproduce_help(), allow_negative_numbers = true)]
    Reproduce(ReproduceArgs),
    /// Open a database directory a run with --path kept (DIR/<n>-<label>), recovering it;
    /// say what recovery did and check the data: TPC-C's twelve consistency conditions,
    /// TPC-B's balance sums, and for any database one index entry per row.
    Check(CheckArgs),
}

/// `verso check`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The database's directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Write what was found as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Threads that load the checkpoint and build its indexes (default: every core).
    #[arg(long, value_name = "N")]
    pub recovery_threads: Option<usize>,
    /// Threads that replay the log (default: as many as --recovery-threads).
    #[arg(long, value_name = "N")]
    pub replay_threads: Option<usize>,
}

/// `verso reproduce --help`'s list of experiments.
fn reproduce_help() -> String {
    let mut help = String::from("Experiments (`verso reproduce --list` says more):\n");
    for e in reproduce::EXPERIMENTS {
        help.push_str(&format!("  {:<13} {}: {}\n", e.name, e.paper_ref, e.title));
    }
    help.push_str(
        "Full sizes take a few minutes each in a release build on 2 cores; --quick runs tiny \
         sizes in seconds. The report goes to verso-report/reproduce/<name>/ unless --report \
         says otherwise.",
    );
    help
}

/// `verso reproduce`'s options.
#[derive(Args, Debug, Clone)]
pub struct ReproduceArgs {
    /// The experiment, e.g. steam-fig7 (see --list).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// List the experiments and exit.
    #[arg(long, conflicts_with_all = ["name", "quick", "report", "json", "in_process"])]
    pub list: bool,
    /// Tiny data and sub-second runs: checks the experiment works, measures nothing.
    #[arg(long)]
    pub quick: bool,
    /// Where to write the report [default: verso-report/reproduce/<name>].
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Also write the results as JSON to this file (keys: docs/lab.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Seed of the data and of every worker's random stream.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Do not draw progress bars.
    #[arg(long)]
    pub quiet: bool,
    /// How finalizing removes obsolete versions: one-at-a-time (HyPer's, the engine the
    /// paper's collectors ran in) or cut (Verso's default). steam-table5 runs both.
    #[arg(long, value_name = "HOW", default_value = "one-at-a-time", value_parser = parse_removal)]
    pub version_removal: VersionRemoval,
    /// Run every point in this process, one after the other, instead of each in a fresh
    /// child process (then a point inherits the heap, and the resident memory, of the ones
    /// before it).
    #[arg(long)]
    pub in_process: bool,
    /// Where the experiments on the disk engine (sicv-*) put their databases: a fresh
    /// directory per point, removed after it; on a file system that does direct I/O (not
    /// tmpfs) [default: the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    pub disk: Option<PathBuf>,
    /// Internal: run only this point and write its result to --point-json (what the child
    /// processes do).
    #[arg(long, hide = true, requires = "point_json")]
    pub point_index: Option<usize>,
    /// Internal: where --point-index writes its result.
    #[arg(long, hide = true, requires = "point_index")]
    pub point_json: Option<PathBuf>,
}

/// An isolation level on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// Snapshot isolation.
    Snapshot,
    /// Serializable.
    Serializable,
}

impl From<IsolationArg> for Isolation {
    fn from(arg: IsolationArg) -> Isolation {
        match arg {
            IsolationArg::Snapshot => Isolation::Snapshot,
            IsolationArg::Serializable => Isolation::Serializable,
        }
    }
}

/// Options every workload takes.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Garbage collector: steam, watermark, hana, hekaton, deuteronomy, ermia or none
    /// [default: steam].
    #[arg(long, value_parser = parse_gc, help = gc_help())]
    pub gc: Option<GarbageCollector>,
    /// For tb-collect: how chains long transactions walk are kept whole when their blocks
    /// are freed: kept-tiles (TB-Collect's, the default) or hash-index (TB-Collect-hash:
    /// OneShot's version index in the region instead).
    #[arg(long, value_name = "HOW", value_parser = parse_consolidation)]
    pub chain_consolidation: Option<verso::ChainConsolidation>,
    /// Run several configurations one after the other, each on a freshly loaded database
    /// with the same seed, differing on one axis: AXIS=A,B,... with AXIS one of gc,
    /// storage, protocol, index-pointers, non-inline, eviction, placement or disk-storage
    /// (the disk engine's), design (whole engine designs: memory, disk-heap,
    /// disk-heap-eager, disk-undo, disk-undo-eager; with --disk DIR, without --gc and
    /// --disk-storage) or system (verso and peers), e.g.
    /// `--compare storage=delta,append-n2o`; a bare list compares collectors
    /// (`--compare steam,watermark`). The other axes keep their options' values.
    #[arg(long, value_name = "AXIS=A,B,...", value_parser = crate::compare::parse)]
    pub compare: Option<Compared>,
    /// Version storage of every configuration: delta (undo-log deltas, the default),
    /// append-n2o or append-o2n (append-only whole copies, newest to oldest or oldest to
    /// newest), time-travel (master in place, whole copies behind it), or, on emulated
    /// persistent memory under --protocol mvto, tile-block (TB-Collect's) or append-nvm
    /// (its baselines' append-only storage) [default: delta].
    #[arg(long, value_parser = parse_storage)]
    pub storage: Option<VersionStorageKind>,
    /// Concurrency-control protocol of every configuration: si (snapshot isolation,
    /// serializable on request; the default), mvocc, mvto, mv2pl (no-wait) or ssn
    /// (SI + serial safety net). Under all but si every transaction is serializable
    /// [default: si].
    #[arg(long, value_parser = parse_protocol)]
    pub protocol: Option<ConcurrencyControl>,
    /// What secondary-index entries point at: logical (the row; the default) or physical
    /// (each exact version, which every new version adds to every index; needs
    /// --storage append-n2o or append-o2n) [default: logical].
    #[arg(long, value_parser = parse_index_pointers)]
    pub index_pointers: Option<IndexPointers>,
    /// How rows store Text and Bytes values of 64 bytes or more (Wu et al. §4.1's
    /// non-inline attributes): packed (in the row's own allocation; the default), copied
    /// (out of line, copied by every new version) or shared (out of line, shared by the
    /// versions that leave them alone, with a reference count) [default: packed].
    #[arg(long, value_parser = parse_non_inline)]
    pub non_inline: Option<NonInline>,
    /// Which page the disk engine's buffer pool evicts (with --disk): clock (a CLOCK
    /// sweep, as PostgreSQL's) or lru2 (LRU-K with K = 2) [default: clock].
    #[arg(long, value_parser = parse_eviction, requires = "disk")]
    pub eviction: Option<verso::disk::ReplacementPolicy>,
    /// Where the disk engine's heap puts new versions (with --disk): postgres
    /// (PostgreSQL's placement, the default), co-located (SI-CV's: each writing
    /// transaction's new versions on pages of its own; HOT only onto its own page) or
    /// co-located-hot (SI-CV's with HOT kept: a HOT update claims its predecessor's page
    /// when no live transaction owns it; docs/design/buffer-pool.md).
    #[arg(long, value_parser = parse_placement, requires = "disk")]
    pub placement: Option<verso::VersionPlacement>,
    /// The disk engine's version organization (with --disk): heap (PostgreSQL's, the
    /// default) or undo (InnoDB's: rows updated in place in a clustered B+-tree, older
    /// versions as undo records, purge; with --gc vac purge alone, else Steam's pruning of
    /// undo chains too; docs/design/buffer-pool.md).
    #[arg(long, value_parser = parse_disk_storage, requires = "disk")]
    pub disk_storage: Option<verso::disk::DiskStorage>,
    /// How long InnoDB's purge leaves committed undo before it may purge it, in seconds
    /// (with --disk-storage undo, or for the undo designs of --compare design=...; DIVA's
    /// delayed purge) [default: 0].
    #[arg(long, requires = "disk")]
    pub purge_delay: Option<f64>,
    /// Separate memory spaces the version storage allocates from (Wu et al. §4.4), each
    /// growing by 512 KiB; each thread takes one by its number modulo N [default: none, the
    /// process's allocator (mimalloc, with per-thread heaps)].
    #[arg(long)]
    pub memory_spaces: Option<usize>,
    /// With --storage tile-block: the persistent-memory media's write unit in bytes, 64,
    /// 128 or 256 (TB-Collect's Table 3) [default: 256].
    #[arg(long, value_parser = parse_pm_line)]
    pub pm_line: Option<verso::pmem::LineSize>,
    /// With --storage tile-block: emulate media that write at this share of DRAM's
    /// bandwidth (0 < W <= 1; 0.5 is TB-Collect's configuration A, about 0.3 Optane) by a
    /// delay per line persisted, derived from this machine's DRAM write bandwidth measured
    /// once at start (an emulation of write bandwidth only) [default: no delay].
    #[arg(long)]
    pub pm_write_share: Option<f64>,
    /// Isolation level of the OLTP transactions (under the si protocol; under every other,
    /// each transaction is serializable, and the reports say so).
    #[arg(long, value_enum, default_value_t = IsolationArg::Snapshot)]
    pub isolation: IsolationArg,
    /// OLTP worker threads [default: 1].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Length of the run in seconds [default: 10, 1 with --tiny].
    #[arg(long, value_parser = parse_seconds, conflicts_with = "transactions")]
    pub duration: Option<f64>,
    /// Stop after this many committed OLTP transactions instead of after a time.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub transactions: Option<u64>,
    /// Run open loop at this many committed OLTP transactions per second over all workers
    /// (each worker runs its share on a fixed schedule, sleeping to each slot; latencies
    /// run from when a transaction was due). A configuration that achieves less than 95%
    /// of it fails, so that no fixed-rate comparison compares different rates. Not with
    /// several --clients per worker [default: closed loop, as fast as the system goes].
    #[arg(long, value_name = "TX/S")]
    pub target_rate: Option<f64>,
    /// Seed of the data and of every worker's random stream.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Size of the data (per workload: warehouses, pgbench scale, millions of rows...).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub scale: Option<u64>,
    /// Write the results as JSON to this file (keys: docs/lab.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML report with PNG and SVG plots into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// One idle transaction takes its snapshot when the run starts and holds it to the
    /// end (a long-running reader).
    #[arg(long)]
    pub hold_snapshot: bool,
    /// Begin that transaction declared read-only (`Database::begin_read_only`), as a
    /// careful analytical reader would: under MVOCC and MV2PL it then records nothing and
    /// holds back no commit records, under SSN it needs only what a reader can fail on.
    #[arg(long, requires = "hold_snapshot")]
    pub hold_read_only: bool,
    /// With --hold-snapshot: run every configuration (and peer) also without it, right
    /// after, as its baseline; the summary gives the held run's last 10 s as a share of it.
    #[arg(long, requires = "hold_snapshot")]
    pub baseline: bool,
    /// Stop a configuration's run early, keeping what it measured, once the process's
    /// resident memory passes this many GiB (a collector that lets versions pile up behind
    /// a held snapshot would otherwise be killed by the kernel) [default: no limit].
    #[arg(long, value_name = "GIB", value_parser = parse_gib)]
    pub memory_limit: Option<u64>,
    /// `--path`, `--durability`, `--clients`, `--checkpoint-mib`, `--async-interval-ms`.
    #[command(flatten)]
    pub durability: DurabilityArgs,
    /// Tiny sizes and a one-second run (for tests).
    #[arg(long)]
    pub tiny: bool,
    /// `--sample-ms`, `--quiet`.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// `--in-process`.
    #[command(flatten)]
    pub process: ProcessArgs,
}

/// Where Verso keeps its databases, how durable a commit is, and how many clients wait
/// for commits (docs/lab.md, "Durability").
#[derive(Args, Debug, Clone, Default)]
pub struct DurabilityArgs {
    /// Keep each Verso configuration's database in files: a fresh directory under DIR
    /// (`DIR/<n>-<label>`, which must not exist yet), with a redo log, checkpoints and
    /// recovery, kept after the run for `verso check` [default: in memory].
    #[arg(long, value_name = "DIR", conflicts_with = "disk")]
    pub path: Option<PathBuf>,
    /// Run Verso's configuration on the disk engine (PostgreSQL's version storage in 8 KiB
    /// pages through a buffer pool, autovacuum, a page log; docs/design/buffer-pool.md): a
    /// fresh directory under DIR per configuration (`DIR/<n>-<label>`, kept after the
    /// run). The in-memory design options (--storage, --gc, --cc, ...) do not apply.
    #[arg(long, value_name = "DIR")]
    pub disk: Option<PathBuf>,
    /// The disk engine's buffer pool (with --disk) [default: 128, PostgreSQL's default
    /// shared_buffers].
    #[arg(long, value_name = "MIB", requires = "disk", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub buffer_pool_mib: Option<u64>,
    /// Read and write the disk engine's pages with direct I/O (O_DIRECT), around the OS
    /// page cache, so that every page the pool evicts or misses is a device write or read
    /// (with --disk; SI-CV's experiments) [default: through the page cache].
    #[arg(long, requires = "disk")]
    pub direct_io: bool,
    /// How often the disk engine's autovacuum wakes (with --disk; 0: never)
    /// [default: 60000, PostgreSQL's autovacuum_naptime].
    #[arg(long, value_name = "MS", requires = "disk")]
    pub autovacuum_naptime_ms: Option<u64>,
    /// How durable a commit is when it returns (with --path or --disk): sync (the log
    /// synced, group commit; the default), async (synced at least every
    /// --async-interval-ms) or none (handed to the OS, never synced). With sync, a private
    /// PostgreSQL peer runs with synchronous_commit on.
    #[arg(long, value_enum)]
    pub durability: Option<DurabilityArg>,
    /// The longest time between an acknowledged commit and its sync under
    /// --durability async.
    #[arg(long, value_name = "MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub async_interval_ms: u64,
    /// Logical clients over the OLTP workers, each starting its next transaction only once
    /// its previous commit is acknowledged (Verso: deferred commits, so a worker serves
    /// several clients while their commits become durable; a peer: one connection per
    /// client) [default: one per worker].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub clients: Option<u64>,
    /// Take a checkpoint each time the log grows by this many MiB (with --path or --disk;
    /// 0: never) [default: 1024].
    #[arg(long, value_name = "MIB")]
    pub checkpoint_mib: Option<u64>,
    /// How many syncs of the log may be in flight at once (with --path): while one runs,
    /// the next group of commits is written and synced [default: 1; on this VM's disk
    /// overlapping syncs each take longer and gained nothing].
    #[arg(long, value_name = "N", requires = "path", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub log_syncs: Option<u64>,
}

/// `--durability`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DurabilityArg {
    /// Synced before commit returns.
    Sync,
    /// Synced within an interval.
    Async,
    /// Never synced.
    None,
}

impl DurabilityArgs {
    /// Gives Verso's configurations their directories and durability, and sizes every
    /// configuration's clients; peers get one worker per client, and PostgreSQL
    /// `synchronous_commit = on` under `sync`. Configurations are numbered in plan order,
    /// so a child process finds the same directory as its parent.
    fn apply(&self, configs: &mut [RunConfig]) -> Result<(), LabError> {
        let dir = self.path.as_ref().or(self.disk.as_ref());
        if dir.is_none() && (self.durability.is_some() || self.checkpoint_mib.is_some()) {
            return Err(LabError::BadOption(
                "--durability and --checkpoint-mib need --path or --disk".into(),
            ));
        }
        let durability = dir.map(|_| match self.durability {
            Some(DurabilityArg::Sync) | None => verso::Durability::Sync,
            Some(DurabilityArg::Async) => verso::Durability::Async {
                interval: Duration::from_millis(self.async_interval_ms),
            },
            Some(DurabilityArg::None) => verso::Durability::None,
        });
        let clients = self.clients.map(|c| c as usize);
        for (index, config) in configs.iter_mut().enumerate() {
            if let Some(peer) = &mut config.peer {
                peer.synchronous_commit = durability == Some(verso::Durability::Sync);
                if self.disk.is_some() {
                    // The same memory for pages as the disk engine's pool.
                    peer.shared_buffers_mib = Some(
                        self.buffer_pool_mib
                            .unwrap_or(verso::DEFAULT_BUFFER_POOL_BYTES as u64 >> 20),
                    );
                }
                if let Some(clients) = clients {
                    config.oltp_workers = clients;
                }
                continue;
            }
            if let Some(clients) = clients {
                if clients < config.oltp_workers {
                    return Err(LabError::BadOption(format!(
                        "--clients {clients} with {} workers: every worker serves at least one \
                         client",
                        config.oltp_workers
                    )));
                }
                config.clients = Some(clients);
            }
            if config.in_memory {
                // The `memory` design beside the disk designs: no directory, no log.
                continue;
            }
            if let (Some(dir), Some(durability)) = (dir, durability) {
                if self.disk.is_some() {
                    // Its design: PostgreSQL's heap or InnoDB's undo, pruned by Steam's eager
                    // rule (the default) or by PostgreSQL's horizon alone (`--gc vac`).
                    config.label = crate::compare::disk_label(
                        config.options.disk_storage,
                        config.options.garbage_collector,
                    );
                    let eviction = config.options.buffer_pool_eviction;
                    if eviction != verso::disk::ReplacementPolicy::default() {
                        config.label = format!("{}-{}", config.label, eviction.name());
                    }
                    let placement = config.options.version_placement;
                    if placement != verso::VersionPlacement::default() {
                        config.label = format!("{}-{}", config.label, placement.name());
                    }
                }
                let held = if config.hold_snapshot { "-held" } else { "" };
                // A label may hold any character (`--compare` values): only the safe ones
                // name the directory.
                let label: String = config
                    .label
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                let name = format!("{:02}-{label}{held}", index + 1);
                let options = config.options.clone();
                let options = if self.disk.is_some() {
                    options
                        .disk(dir.join(name))
                        .buffer_pool(
                            self.buffer_pool_mib
                                .map_or(verso::DEFAULT_BUFFER_POOL_BYTES, |mib| {
                                    (mib as usize) << 20
                                }),
                        )
                        .direct_io(self.direct_io)
                        .autovacuum_naptime(match self.autovacuum_naptime_ms {
                            Some(0) => None,
                            Some(ms) => Some(Duration::from_millis(ms)),
                            None => Some(Duration::from_secs(60)),
                        })
                } else {
                    options.path(dir.join(name))
                };
                config.options = options
                    .durability(durability)
                    .checkpoint_after_log_bytes(match self.checkpoint_mib {
                        Some(0) => None,
                        Some(mib) => Some(mib << 20),
                        None => Some(verso::DEFAULT_CHECKPOINT_AFTER_LOG_BYTES),
                    })
                    .log_syncs_in_flight(
                        self.log_syncs
                            .map_or(verso::DEFAULT_LOG_SYNCS_IN_FLIGHT, |n| n as usize),
                    );
            }
        }
        Ok(())
    }

    /// Refuses, before anything runs, a configuration directory that exists and holds
    /// anything.
    fn check_directories(configs: &[RunConfig]) -> Result<(), LabError> {
        for config in configs {
            if let Some(dir) = config
                .options
                .path
                .as_ref()
                .or(config.options.disk.as_ref())
            {
                crate::runner::refuse_used_directory(dir)?;
            }
        }
        Ok(())
    }
}

/// `--olap-workers`: only on the workloads that have analytical queries (`ycsb`'s
/// read-only transactions, `tpcc`'s StockScan, `ch`'s 22, `scans`' full scans), so that the
/// others' help does not list an option they would refuse.
#[derive(Args, Debug, Clone, Default)]
pub struct OlapArgs {
    /// OLAP worker threads [default: 1 for ch and for ycsb --read-only-operations, else 0].
    #[arg(long)]
    pub olap_workers: Option<usize>,
}

/// Which peers run beside Verso, and where (only on the workloads with an SQL form:
/// `ycsb`, `tpcc`, `ch`, `tpcb`).
#[derive(Args, Debug, Clone, Default)]
pub struct PeerArgs {
    /// Also run the workload on this peer, after Verso's configurations, on the same data
    /// and seed: postgres (a private server the lab starts, or --postgres-url), duckdb
    /// (cargo feature `duckdb`) or sqlite. Repeat for several.
    #[arg(long = "peer", value_name = "PEER", value_parser = parse_peer)]
    pub peers: Vec<PeerKind>,
    /// Run --peer postgres on this existing server (a libpq connection string or URL, e.g.
    /// `host=/var/run/postgresql user=me dbname=lab`) instead of a private one; the lab
    /// works in a fresh schema of its own and drops it at the end.
    #[arg(long, value_name = "URL")]
    pub postgres_url: Option<String>,
    /// Where peers make their files (a private server's cluster, SQLite's database), each
    /// in a fresh directory removed after the run [default: the system's temporary
    /// directory].
    #[arg(long, value_name = "DIR")]
    pub peer_dir: Option<PathBuf>,
}

impl PeerArgs {
    /// The peers asked for, as run specifications.
    pub fn specs(&self) -> Result<Vec<PeerSpec>, LabError> {
        if self.postgres_url.is_some() && !self.peers.contains(&PeerKind::Postgres) {
            return Err(LabError::BadOption(
                "--postgres-url is for --peer postgres, which is not asked for".into(),
            ));
        }
        let mut specs = Vec::with_capacity(self.peers.len());
        for (i, kind) in self.peers.iter().enumerate() {
            if self.peers[..i].contains(kind) {
                return Err(LabError::BadOption(format!(
                    "--peer {} is given twice",
                    kind.name()
                )));
            }
            let mut spec = PeerSpec::new(*kind);
            if *kind == PeerKind::Postgres {
                spec.postgres_url.clone_from(&self.postgres_url);
            }
            if let Some(dir) = &self.peer_dir {
                spec.dir.clone_from(dir);
            }
            specs.push(spec);
        }
        Ok(specs)
    }
}

fn parse_peer(name: &str) -> Result<PeerKind, String> {
    PeerKind::from_name(name)
}

/// How a run samples and shows progress (every workload and the demo).
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Sampling interval of the time series, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub sample_ms: u64,
    /// Do not draw progress bars.
    #[arg(long)]
    pub quiet: bool,
}

impl SamplingArgs {
    fn interval(&self) -> Duration {
        Duration::from_millis(self.sample_ms)
    }

    fn show_progress(&self) -> bool {
        !self.quiet
    }
}

/// Where the configurations of one invocation run (every workload and the demo).
#[derive(Args, Debug, Clone, Default)]
pub struct ProcessArgs {
    /// Run several configurations one after the other in this process instead of each in
    /// a fresh child process (then a configuration inherits the heap, and the resident
    /// memory, of the ones before it).
    #[arg(long)]
    pub in_process: bool,
    /// Internal: run only this configuration and write its result to --config-json (what
    /// the child processes do).
    #[arg(long, hide = true, requires = "config_json")]
    pub config_index: Option<usize>,
    /// Internal: where --config-index writes its result.
    #[arg(long, hide = true, requires = "config_index")]
    pub config_json: Option<PathBuf>,
}

/// YCSB's options; unset ones take the defaults of [`YcsbConfig::new`].
#[derive(Args, Debug, Clone)]
pub struct YcsbArgs {
    /// Rows in the table [default: 1,000,000 x scale; 2,000 with --tiny].
    #[arg(long)]
    pub rows: Option<u64>,
    /// Operations per transaction [default: 16].
    #[arg(long)]
    pub operations: Option<usize>,
    /// Mixed transaction sizes instead of --operations: OPERATIONS:SHARE pairs, e.g.
    /// 10:0.9,100:0.1 (90% of transactions with 10 operations, 10% with 100; shares sum to
    /// 1). Each transaction draws its size; each size is its own transaction type in the
    /// results ("10_operations", "100_operations").
    #[arg(long, value_name = "OPS:SHARE,...", conflicts_with = "operations")]
    pub operations_mix: Option<String>,
    /// Share of operations that read, 0 to 1 [default: 0.9].
    #[arg(long)]
    pub read_ratio: Option<f64>,
    /// Zipf skew of the keys, at least 0 (uniform) and below 1 [default: 0.6].
    #[arg(long)]
    pub theta: Option<f64>,
    /// Value fields per row [default: 10].
    #[arg(long)]
    pub fields: Option<usize>,
    /// Bytes per field (the row width is fields x field bytes) [default: 10].
    #[arg(long)]
    pub field_bytes: Option<usize>,
    /// Fields a read looks at [default: all].
    #[arg(long)]
    pub read_columns: Option<usize>,
    /// Fields an update rewrites [default: 1].
    #[arg(long)]
    pub update_columns: Option<usize>,
    /// Gives the OLAP threads (--olap-workers) serializable read-only transactions of this
    /// many point reads (Wu et al.'s heterogeneous workload) [default: none].
    #[arg(long)]
    pub read_only_operations: Option<usize>,
    /// Begins those read-only transactions declared READ ONLY (no protocol checks).
    #[arg(long, requires = "read_only_operations")]
    pub declare_read_only: bool,
    /// Secondary indexes on the table, the i-th over field i mod fields (Wu et al.'s
    /// Figures 22 and 23) [default: 0].
    #[arg(long)]
    pub secondary_indexes: Option<usize>,
}

/// Paced TPC-C's options (docs/lab.md, "Paced TPC-C").
#[derive(Args, Debug, Clone, Default)]
pub struct PacedArgs {
    /// Run TPC-C as DBT2 does: N terminals per warehouse (DBT2 and SI-CV: 20) key in,
    /// submit and think with TPC-C's times divided by --pacing, and the --workers threads
    /// are the pool of connections that serve them; reports NOTPM and response times from
    /// submission [default: closed loop].
    #[arg(long, value_name = "N")]
    pub terminals_per_warehouse: Option<u32>,
    /// With --terminals-per-warehouse: divide TPC-C's keying and think times by SCALE
    /// [default: 20000, which puts the in-memory engine's knee between 4 and 8
    /// warehouses here].
    #[arg(long, value_name = "SCALE", requires = "terminals_per_warehouse")]
    pub pacing: Option<f64>,
}

/// The key-value workload's options.
#[derive(Args, Debug, Clone)]
pub struct KvArgs {
    /// Rows in the table [default: 1,000,000 x scale; 1,000 with --tiny].
    #[arg(long)]
    pub rows: Option<u64>,
    /// Zipf skew of the keys, 0 (uniform) and up [default: 0.8].
    #[arg(long)]
    pub theta: Option<f64>,
    /// Rows each transaction increments [default: 1].
    #[arg(long)]
    pub updates_per_transaction: Option<usize>,
}

/// The scans-with-updates workload's options.
#[derive(Args, Debug, Clone)]
pub struct ScansArgs {
    /// Rows in the table [default: 100,000 x scale; 500 with --tiny].
    #[arg(long)]
    pub rows: Option<u64>,
    /// Zipf skew of the updated keys [default: 0, uniform].
    #[arg(long)]
    pub theta: Option<f64>,
    /// Percentage of each OLTP thread's transactions that scan the whole table
    /// [default: 1; 5 with --tiny].
    #[arg(long)]
    pub scan_percent: Option<f64>,
}

/// The sysbench-HTAP workload's options.
#[derive(Args, Debug, Clone)]
pub struct SysbenchArgs {
    /// Tables `sbtest1` ... [default: 12, DIVA's; 5 with --tiny]; at least 5.
    #[arg(long)]
    pub tables: Option<usize>,
    /// Rows per table [default: 10,000 x scale; 200 with --tiny].
    #[arg(long)]
    pub rows: Option<u64>,
    /// Zipf skew of the updated ids [default: 0, uniform; DIVA's Fig. 20: 1].
    #[arg(long)]
    pub theta: Option<f64>,
    /// The update: `non-index` (SET c = ?) or `index` (SET k = k + 1) [default: non-index].
    #[arg(long, value_enum)]
    pub update: Option<SysbenchUpdate>,
    /// The run's split into OLTP only, OLTP and OLAP, and OLAP only, as a ratio A:B:C
    /// [default: 1:4:1, DIVA's 10/40/10 minutes].
    #[arg(long, value_name = "A:B:C", value_parser = parse_phases)]
    pub phases: Option<[u32; 3]>,
}

fn parse_phases(text: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = text.split(':').collect();
    let bad = || format!("{text}: give three whole numbers A:B:C, such as 1:4:1");
    if parts.len() != 3 {
        return Err(bad());
    }
    let mut phases = [0u32; 3];
    for (phase, part) in phases.iter_mut().zip(parts) {
        *phase = part.trim().parse().map_err(|_| bad())?;
    }
    Ok(phases)
}

/// The demo's options.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Length of each run with the held snapshot, in seconds [default: 20, 1 with --tiny].
    #[arg(long, value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Length of each baseline run (the same system without the held snapshot), in
    /// seconds [default: 10, 1 with --tiny].
    #[arg(long, value_parser = parse_seconds)]
    pub baseline_duration: Option<f64>,
    /// Skip the baselines: each held run is then compared with its own first 10 seconds.
    #[arg(long)]
    pub no_baseline: bool,
    /// TPC-B clients (OLTP threads) [default: 2].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub workers: Option<u64>,
    /// Run PostgreSQL on this existing server instead of a private one (see `tpcb --help`).
    #[arg(long, value_name = "URL")]
    pub postgres_url: Option<String>,
    /// Where the peers make their files [default: the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    pub peer_dir: Option<PathBuf>,
    /// Leave the peers out: Verso's two collectors only.
    #[arg(long)]
    pub no_peers: bool,
    /// Where to write the report.
    #[arg(long, value_name = "DIR", default_value = "verso-report")]
    pub report: PathBuf,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Seed of the data and of every worker's random stream.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// pgbench's scale: 100,000 accounts each [default: 10].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub scale: Option<u64>,
    /// Tiny sizes and one-second runs (for tests).
    #[arg(long)]
    pub tiny: bool,
    /// `--sample-ms`, `--quiet`.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// `--in-process`.
    #[command(flatten)]
    pub process: ProcessArgs,
}

/// `--gc`'s help: every collector the engine has ([`GarbageCollector::ALL`], the
/// block-level ones, which collect the tile-block storage, and TB-Collect's baselines',
/// which collect the append-nvm and delta-nvm storages).
fn gc_help() -> String {
    format!(
        "Garbage collector: {}; for --storage tile-block: {}; for --storage append-nvm: {}; \
         for --storage delta-nvm: {} [default: {}]",
        GarbageCollector::ALL.map(GarbageCollector::name).join(", "),
        GarbageCollector::BLOCK_LEVEL
            .map(GarbageCollector::name)
            .join(", "),
        GarbageCollector::NVM_BASELINES
            .into_iter()
            .filter(|gc| gc.required_storage() == Some(VersionStorageKind::AppendNvm))
            .map(GarbageCollector::name)
            .collect::<Vec<_>>()
            .join(", "),
        GarbageCollector::OneShot.name(),
        GarbageCollector::default().name()
    )
}

fn parse_consolidation(name: &str) -> Result<verso::ChainConsolidation, String> {
    verso::ChainConsolidation::from_name(name).map_err(|e| e.to_string())
}

fn parse_removal(name: &str) -> Result<VersionRemoval, String> {
    VersionRemoval::from_name(name).map_err(|e| e.to_string())
}

fn parse_protocol(name: &str) -> Result<ConcurrencyControl, String> {
    ConcurrencyControl::from_name(name).map_err(|e| e.to_string())
}

fn parse_index_pointers(name: &str) -> Result<IndexPointers, String> {
    IndexPointers::from_name(name).map_err(|e| e.to_string())
}

fn parse_placement(name: &str) -> Result<verso::VersionPlacement, String> {
    verso::VersionPlacement::from_name(name).ok_or_else(|| {
        let names: Vec<_> = verso::VersionPlacement::ALL
            .iter()
            .map(|p| p.name())
            .collect();
        format!("unknown version placement {name:?} ({})", names.join(", "))
    })
}

fn parse_disk_storage(name: &str) -> Result<verso::disk::DiskStorage, String> {
    verso::disk::DiskStorage::from_name(name)
        .ok_or_else(|| format!("unknown disk storage {name:?} (heap, undo)"))
}

fn parse_eviction(name: &str) -> Result<verso::disk::ReplacementPolicy, String> {
    verso::disk::ReplacementPolicy::from_name(name)
}

fn parse_non_inline(name: &str) -> Result<NonInline, String> {
    NonInline::from_name(name).map_err(|e| e.to_string())
}

fn parse_pm_line(bytes: &str) -> Result<verso::pmem::LineSize, String> {
    let bytes: u32 = bytes.parse().map_err(|e| format!("{bytes:?}: {e}"))?;
    verso::pmem::LineSize::new(bytes).map_err(|e| e.to_string())
}

/// The persistent-memory region `--pm-line` and `--pm-write-share` ask for
/// ([`crate::pm_media`]).
fn persistent_memory(common: &CommonArgs) -> Result<verso::pmem::PmOptions, LabError> {
    crate::pm_media::emulated_media(common.pm_line.unwrap_or_default(), common.pm_write_share)
        .map_err(|e| match e {
            LabError::BadOption(what) => LabError::BadOption(format!("--pm-write-share: {what}")),
            other => other,
        })
}

fn parse_storage(name: &str) -> Result<VersionStorageKind, String> {
    VersionStorageKind::from_name(name).map_err(|e| e.to_string())
}

fn parse_gc(name: &str) -> Result<GarbageCollector, String> {
    GarbageCollector::from_name(name).map_err(|e| e.to_string())
}

fn parse_gib(text: &str) -> Result<u64, String> {
    let gib: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of GiB"))?;
    if gib.is_finite() && gib > 0.0 && gib <= 1024.0 * 1024.0 {
        Ok((gib * (1u64 << 30) as f64) as u64)
    } else {
        Err(format!("{text}: the limit must be above 0 GiB"))
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if seconds.is_finite() && seconds > 0.0 && seconds <= 7.0 * 24.0 * 3600.0 {
        Ok(seconds)
    } else {
        Err(format!(
            "{text}: the duration must be above 0 and at most a week"
        ))
    }
}

/// Seconds a run lasts when neither `--duration` nor `--transactions` is given.
pub const DEFAULT_DURATION_SECONDS: f64 = 10.0;
/// The same with `--tiny`.
pub const TINY_DURATION_SECONDS: f64 = 1.0;
/// Seconds each held-snapshot run of `verso demo` lasts.
pub const DEMO_DURATION_SECONDS: f64 = 20.0;
/// Seconds each baseline run of `verso demo` lasts.
pub const DEMO_BASELINE_SECONDS: f64 = 10.0;
/// `verso demo`'s TPC-B scale (pgbench's: 100,000 accounts each).
pub const DEMO_SCALE: u64 = 10;
/// `verso demo`'s TPC-B clients.
pub const DEMO_WORKERS: usize = 2;

/// What an invocation will do: a workload, the configurations to run it under, outputs.
pub struct Plan {
    /// The workload.
    pub workload: Box<dyn Workload>,
    /// One per configuration, run in order.
    pub configs: Vec<RunConfig>,
    /// `--json`.
    pub json: Option<PathBuf>,
    /// `--report`.
    pub report: Option<PathBuf>,
    /// Where the configurations run.
    pub process: ProcessArgs,
    /// Lines printed before anything runs (what the demo leaves out, and how to add it).
    pub notes: Vec<String>,
}

impl Plan {
    /// The plan for a parsed command line; options that do not fit together are
    /// [`LabError::BadOption`].
    pub fn of(command: &Command) -> Result<Plan, LabError> {
        match command {
            Command::Ycsb {
                common,
                olap,
                peers,
                ycsb,
            } => {
                let workload = YcsbWorkload::new(ycsb_config(common, ycsb)?)?;
                // The read-only transactions run on the OLAP threads: one unless told.
                let read_only = ycsb.read_only_operations.is_some();
                match olap.olap_workers {
                    Some(0) if read_only => {
                        return Err(LabError::BadOption(
                            "--read-only-operations: the read-only transactions run on the \
                             OLAP threads, and --olap-workers is 0"
                                .into(),
                        ))
                    }
                    Some(olap) if olap > 0 && !read_only => {
                        return Err(LabError::BadOption(format!(
                            "--olap-workers {olap}: YCSB's OLAP threads run read-only \
                             transactions; give --read-only-operations N"
                        )))
                    }
                    _ => {}
                }
                Plan::with(
                    Box::new(workload),
                    common,
                    (olap, usize::from(read_only)),
                    peers,
                )
            }
            Command::Kv { common, kv } => {
                let mut config = sized(common, kv.rows, KvConfig::tiny, KvConfig::new, |c| {
                    &mut c.rows
                })?;
                set(&mut config.theta, kv.theta);
                set(
                    &mut config.updates_per_transaction,
                    kv.updates_per_transaction,
                );
                Plan::with(
                    Box::new(KvWorkload::new(config)?),
                    common,
                    (&OlapArgs::default(), 0),
                    &PeerArgs::default(),
                )
            }
            Command::Scans {
                common,
                olap,
                scans,
            } => {
                let mut config = sized(
                    common,
                    scans.rows,
                    ScansConfig::tiny,
                    ScansConfig::new,
                    |c| &mut c.rows,
                )?;
                set(&mut config.theta, scans.theta);
                set(&mut config.scan_percent, scans.scan_percent);
                Plan::with(
                    Box::new(ScansWorkload::new(config)?),
                    common,
                    (olap, 0),
                    &PeerArgs::default(),
                )
            }
            Command::Sysbench {
                common,
                olap,
                sysbench,
            } => {
                let mut config = sized(
                    common,
                    sysbench.rows,
                    SysbenchConfig::tiny,
                    SysbenchConfig::new,
                    |c| &mut c.rows,
                )?;
                set(&mut config.tables, sysbench.tables);
                set(&mut config.theta, sysbench.theta);
                set(&mut config.update, sysbench.update);
                set(&mut config.phases, sysbench.phases);
                Plan::with(
                    Box::new(SysbenchWorkload::new(config)?),
                    common,
                    (olap, 4),
                    &PeerArgs::default(),
                )
            }
            Command::Tpcb { common, peers } => {
                let mut config = if common.tiny {
                    TpcbConfig::tiny()
                } else {
                    TpcbConfig::new(1)
                };
                set(&mut config.scale, common.scale);
                Plan::with(
                    Box::new(TpcbWorkload::new(config)?),
                    common,
                    (&OlapArgs::default(), 0),
                    peers,
                )
            }
            Command::Tpcc {
                common,
                olap,
                peers,
                paced,
            } => {
                let workload = tpcc_workload(common, paced)?;
                Plan::with(workload, common, (olap, 0), peers)
            }
            Command::Ch {
                common,
                olap,
                peers,
            } => {
                let workload = ch_workload(common.tiny, common.scale, common.seed)?;
                Plan::with(workload, common, (olap, 1), peers)
            }
            Command::Demo(demo) => demo_plan(demo),
            Command::Reproduce(_) => Err(LabError::BadOption(
                "`reproduce` runs named experiments (crate::reproduce), not one workload".into(),
            )),
            Command::Check(_) => Err(LabError::BadOption(
                "`check` opens a database directory (crate::check), not one workload".into(),
            )),
        }
    }

    /// The plan of a workload: `olap` is `--olap-workers` and its default for this
    /// workload (a workload without queries passes none and 0), `peers` what the workload
    /// takes of `--peer` (none, for a workload without an SQL form).
    fn with(
        workload: Box<dyn Workload>,
        common: &CommonArgs,
        (olap, default_olap_workers): (&OlapArgs, usize),
        peers: &PeerArgs,
    ) -> Result<Plan, LabError> {
        let axes = VersoAxes::of(common, peers)?;
        let stop = match (common.transactions, common.duration) {
            (Some(n), _) => StopAfter::Transactions(n),
            (None, Some(seconds)) => StopAfter::Duration(Duration::from_secs_f64(seconds)),
            (None, None) if common.tiny => {
                StopAfter::Duration(Duration::from_secs_f64(TINY_DURATION_SECONDS))
            }
            (None, None) => StopAfter::Duration(Duration::from_secs_f64(DEFAULT_DURATION_SECONDS)),
        };
        let verso_configs = axes.verso.iter().map(|(label, options, in_memory)| {
            let protocol = options.concurrency_control;
            RunConfig {
                // Under every protocol but SI each transaction is serializable, whatever
                // it asks for; the reports say what it gets.
                isolation: if protocol == ConcurrencyControl::SnapshotIsolation {
                    common.isolation.into()
                } else {
                    Isolation::Serializable
                },
                oltp_workers: common.workers.unwrap_or(1),
                olap_workers: olap.olap_workers.unwrap_or(default_olap_workers),
                stop,
                seed: common.seed,
                hold_snapshot: common.hold_snapshot,
                hold_read_only: common.hold_read_only,
                sample_interval: common.sampling.interval(),
                show_progress: common.sampling.show_progress(),
                memory_limit_bytes: common.memory_limit,
                target_rate: common.target_rate,
                in_memory: *in_memory,
                ..RunConfig::with_options(label, options.clone())
            }
        });
        let mut configs = with_baselines(
            verso_configs
                .chain(axes.peers.iter().cloned().map(|peer| RunConfig {
                    isolation: common.isolation.into(),
                    oltp_workers: common.workers.unwrap_or(1),
                    olap_workers: olap.olap_workers.unwrap_or(default_olap_workers),
                    stop,
                    seed: common.seed,
                    hold_snapshot: common.hold_snapshot,
                    hold_read_only: common.hold_read_only,
                    sample_interval: common.sampling.interval(),
                    show_progress: common.sampling.show_progress(),
                    memory_limit_bytes: common.memory_limit,
                    target_rate: common.target_rate,
                    ..RunConfig::for_peer(peer)
                }))
                .collect(),
            common.baseline,
        );
        common.durability.apply(&mut configs)?;
        if let Some((_, options, _)) = axes.verso.iter().find(|(_, options, _)| {
            options.concurrency_control != ConcurrencyControl::SnapshotIsolation
        }) {
            if !axes.peers.is_empty() {
                return Err(LabError::BadOption(format!(
                    "--protocol {} with peers: a peer runs its own concurrency control; \
                     compare peers with Verso's default protocol (si), at --isolation \
                     snapshot or serializable",
                    options.concurrency_control.name()
                )));
            }
        }
        for config in &configs {
            config.validate(&*workload)?;
        }
        Ok(Plan {
            workload,
            configs,
            json: common.json.clone(),
            report: common.report.clone(),
            process: common.process.clone(),
            notes: Vec::new(),
        })
    }
}

/// The systems a workload command runs: Verso's configurations (label, options, and
/// whether it stays in memory under `--disk`: the `memory` design), one per value of the
/// compared axis (or one), and the peers.
struct VersoAxes {
    verso: Vec<(String, Options, bool)>,
    peers: Vec<PeerSpec>,
}

impl VersoAxes {
    /// From `--gc`, `--storage`, `--protocol`, `--index-pointers`, `--non-inline`,
    /// `--memory-spaces`, the disk engine's options, `--peer` and `--compare`. Refused: an
    /// axis both compared and set by its own option (`design=` beside `--gc` or
    /// `--disk-storage`, which it sets), a value named twice, `system=` beside `--peer`, a
    /// disk design without `--disk`, and `--purge-delay` where no run has InnoDB's purge.
    fn of(common: &CommonArgs, peer_args: &PeerArgs) -> Result<VersoAxes, LabError> {
        let mut base = Options::default()
            .garbage_collector(common.gc.unwrap_or_default())
            .version_storage(common.storage.unwrap_or_default())
            .concurrency_control(common.protocol.unwrap_or_default())
            .index_pointers(common.index_pointers.unwrap_or_default())
            .non_inline(common.non_inline.unwrap_or_default())
            .buffer_pool_eviction(common.eviction.unwrap_or_default())
            .version_placement(common.placement.unwrap_or_default())
            .disk_storage(common.disk_storage.unwrap_or_default());
        if let Some(seconds) = common.purge_delay {
            if !(seconds.is_finite() && seconds >= 0.0) {
                return Err(LabError::BadOption(format!(
                    "--purge-delay {seconds}: a number of seconds, zero or more"
                )));
            }
            let undo = verso::disk::DiskStorage::Undo;
            let purges = common.disk_storage == Some(undo)
                || matches!(&common.compare, Some(Compared::Designs(designs))
                    if designs.iter().any(|d| d.disk_storage() == Some(undo)));
            if !purges {
                return Err(LabError::BadOption(format!(
                    "--purge-delay {seconds}: it delays InnoDB's purge; give --disk-storage \
                     undo, or --compare design=... naming disk-undo or disk-undo-eager"
                )));
            }
            base = base.purge_delay(std::time::Duration::from_secs_f64(seconds));
        }
        base.memory_spaces = common.memory_spaces;
        base.chain_consolidation = common.chain_consolidation.unwrap_or_default();
        if common.pm_line.is_some() || common.pm_write_share.is_some() {
            base.persistent_memory = Some(persistent_memory(common)?);
        }
        let Some(compared) = &common.compare else {
            let label = base.garbage_collector.name().to_owned();
            return Ok(VersoAxes {
                verso: vec![(label, base, false)],
                peers: peer_args.specs()?,
            });
        };
        let labels = compared.labels();
        for (i, label) in labels.iter().enumerate() {
            if labels[..i].contains(label) {
                return Err(LabError::BadOption(format!(
                    "--compare names {label} twice"
                )));
            }
        }
        let set_too = match compared {
            Compared::Collectors(_) => common.gc.is_some(),
            Compared::Storages(_) => common.storage.is_some(),
            Compared::Protocols(_) => common.protocol.is_some(),
            Compared::IndexPointers(_) => common.index_pointers.is_some(),
            Compared::NonInline(_) => common.non_inline.is_some(),
            Compared::Evictions(_) => common.eviction.is_some(),
            Compared::Placements(_) => common.placement.is_some(),
            Compared::DiskStorages(_) => common.disk_storage.is_some(),
            Compared::Designs(_) => common.gc.is_some() || common.disk_storage.is_some(),
            Compared::Systems(_) => !peer_args.peers.is_empty(),
        };
        if set_too {
            let (option, why) = match compared {
                Compared::Systems(_) => ("peer", ""),
                Compared::Designs(_) if common.gc.is_some() => ("gc", DESIGN_SETS),
                Compared::Designs(_) => ("disk-storage", DESIGN_SETS),
                other => (other.axis(), ""),
            };
            return Err(LabError::BadOption(format!(
                "--compare {axis}=... and --{option}: the compared axis takes its values \
                 from --compare only{why}",
                axis = compared.axis()
            )));
        }
        let each = |change: &dyn Fn(Options, usize) -> Options| {
            (0..labels.len())
                .map(|i| (labels[i].to_owned(), change(base.clone(), i), false))
                .collect()
        };
        let verso = match compared {
            Compared::Collectors(v) => each(&|o, i| o.garbage_collector(v[i])),
            Compared::Storages(v) => each(&|o, i| o.version_storage(v[i])),
            Compared::Protocols(v) => each(&|o, i| o.concurrency_control(v[i])),
            Compared::IndexPointers(v) => each(&|o, i| o.index_pointers(v[i])),
            Compared::NonInline(v) => each(&|o, i| o.non_inline(v[i])),
            Compared::Evictions(v) => each(&|o, i| o.buffer_pool_eviction(v[i])),
            Compared::Placements(v) => each(&|o, i| o.version_placement(v[i])),
            Compared::DiskStorages(v) => each(&|o, i| o.disk_storage(v[i])),
            Compared::Designs(v) => {
                if let Some(on_disk) = v.iter().find(|d| d.disk_storage().is_some()) {
                    if common.durability.disk.is_none() {
                        let instead = if common.durability.path.is_some() {
                            " instead of --path"
                        } else {
                            ""
                        };
                        return Err(LabError::BadOption(format!(
                            "--compare design=...: {} runs on the disk engine; give --disk \
                             DIR{instead} (each disk design gets a fresh directory under it, \
                             memory runs in memory)",
                            on_disk.name()
                        )));
                    }
                }
                v.iter()
                    .map(|design| {
                        (
                            design.name().to_owned(),
                            design_options(*design, &base),
                            design.disk_storage().is_none(),
                        )
                    })
                    .collect()
            }
            Compared::Systems(v) => {
                let spec = |kind: PeerKind| {
                    let mut spec = PeerSpec::new(kind);
                    if let Some(dir) = &peer_args.peer_dir {
                        spec.dir.clone_from(dir);
                    }
                    if kind == PeerKind::Postgres {
                        spec.postgres_url.clone_from(&peer_args.postgres_url);
                    }
                    spec
                };
                if peer_args.postgres_url.is_some() && !v.contains(&Some(PeerKind::Postgres)) {
                    return Err(LabError::BadOption(
                        "--postgres-url is for postgres, which --compare system=... does not \
                         name"
                            .into(),
                    ));
                }
                let peers = v.iter().flatten().map(|kind| spec(*kind)).collect();
                let verso = if v.contains(&None) {
                    let label = base.garbage_collector.name().to_owned();
                    vec![(label, base.clone(), false)]
                } else {
                    Vec::new()
                };
                return Ok(VersoAxes { verso, peers });
            }
        };
        Ok(VersoAxes {
            verso,
            peers: peer_args.specs()?,
        })
    }
}

/// Why `--compare design=...` refuses `--gc` and `--disk-storage`.
const DESIGN_SETS: &str = " (each design sets the collector, the disk engine's version \
                           organization, and whether it runs in memory or on disk)";

/// The options of `design`'s configuration, from the run's options `base` (which
/// `--compare design=` leaves at the default collector and disk storage): `memory` takes the
/// in-memory design options (`--storage`, `--protocol`, `--index-pointers`, `--non-inline`,
/// `--memory-spaces`, ...) and none of the disk engine's; a disk design takes its storage
/// and collector, `--eviction`, `--placement` (the heap designs: InnoDB's updates rows in
/// place) and `--purge-delay` (the undo designs), and none of the in-memory ones, which the
/// disk engine does not take. (`--buffer-pool-mib`, `--direct-io`, `--autovacuum-naptime-ms`,
/// `--durability` and `--checkpoint-mib` reach the disk designs through
/// `DurabilityArgs::apply`, which leaves `memory` in memory.)
fn design_options(design: Design, base: &Options) -> Options {
    let defaults = Options::default();
    let Some(storage) = design.disk_storage() else {
        return base
            .clone()
            .garbage_collector(design.garbage_collector())
            .buffer_pool_eviction(defaults.buffer_pool_eviction)
            .version_placement(defaults.version_placement)
            .disk_storage(defaults.disk_storage)
            .purge_delay(defaults.purge_delay);
    };
    let undo = storage == verso::disk::DiskStorage::Undo;
    defaults
        .clone()
        .garbage_collector(design.garbage_collector())
        .disk_storage(storage)
        .buffer_pool_eviction(base.buffer_pool_eviction)
        .version_placement(if undo {
            defaults.version_placement
        } else {
            base.version_placement
        })
        .purge_delay(if undo {
            base.purge_delay
        } else {
            defaults.purge_delay
        })
}

/// `verso demo`: TPC-B with one snapshot held for the whole run, on Verso's default
/// collector (Steam), on watermark-only, and on every peer this machine has, each followed
/// by a shorter run without the snapshot as its baseline. The peers that cannot run here
/// become notes that say how to add them.
fn demo_plan(demo: &DemoArgs) -> Result<Plan, LabError> {
    let mut config = if demo.tiny {
        TpcbConfig::tiny()
    } else {
        TpcbConfig::new(DEMO_SCALE)
    };
    set(&mut config.scale, demo.scale);
    let workload = TpcbWorkload::new(config)?;
    let (held_default, baseline_default) = if demo.tiny {
        (TINY_DURATION_SECONDS, TINY_DURATION_SECONDS)
    } else {
        (DEMO_DURATION_SECONDS, DEMO_BASELINE_SECONDS)
    };
    let held_seconds = demo.duration.unwrap_or(held_default);
    let baseline_seconds = demo.baseline_duration.unwrap_or(baseline_default);
    let workers = demo.workers.map_or(DEMO_WORKERS, |w| w as usize);
    let base = |config: RunConfig| RunConfig {
        oltp_workers: workers,
        olap_workers: 0,
        stop: StopAfter::Duration(Duration::from_secs_f64(held_seconds)),
        seed: demo.seed,
        hold_snapshot: true,
        sample_interval: demo.sampling.interval(),
        show_progress: demo.sampling.show_progress(),
        ..config
    };
    let mut held: Vec<RunConfig> = [GarbageCollector::Steam, GarbageCollector::WatermarkOnly]
        .into_iter()
        .map(|gc| base(RunConfig::new(gc.name(), gc)))
        .collect();
    let mut notes = Vec::new();
    if demo.postgres_url.is_some() && demo.no_peers {
        return Err(LabError::BadOption(
            "--postgres-url with --no-peers: PostgreSQL is a peer".into(),
        ));
    }
    if !demo.no_peers {
        for kind in PeerKind::ALL {
            let mut spec = PeerSpec::new(kind);
            if kind == PeerKind::Postgres {
                spec.postgres_url.clone_from(&demo.postgres_url);
            }
            if let Some(dir) = &demo.peer_dir {
                spec.dir.clone_from(dir);
            }
            match spec.validate(&workload) {
                Ok(()) => held.push(base(RunConfig::for_peer(spec))),
                // A peer the user asked for by URL must work; the others are optional.
                Err(error) if demo.postgres_url.is_some() && kind == PeerKind::Postgres => {
                    return Err(error)
                }
                Err(_) if kind == PeerKind::DuckDb => notes.push(format!(
                    "duckdb: left out. {}",
                    crate::peers::DUCKDB_FEATURE_HINT
                )),
                Err(_) if kind == PeerKind::Postgres => notes.push(format!(
                    "postgres: left out, its server programs are not installed: {}",
                    crate::peers::postgres::INSTALL_HINT
                )),
                Err(error) => notes.push(format!("{}: left out: {error}", kind.name())),
            }
        }
    }
    let mut configs = with_baselines(held, !demo.no_baseline);
    for config in &mut configs {
        if !config.hold_snapshot {
            config.stop = StopAfter::Duration(Duration::from_secs_f64(baseline_seconds));
        }
    }
    for config in &configs {
        config.validate(&workload)?;
    }
    Ok(Plan {
        workload: Box::new(workload),
        configs,
        json: demo.json.clone(),
        report: Some(demo.report.clone()),
        process: demo.process.clone(),
        notes,
    })
}

/// `configs`, each followed by itself without the held snapshot when `baseline` is set
/// (labelled "<label> unheld").
pub fn with_baselines(configs: Vec<RunConfig>, baseline: bool) -> Vec<RunConfig> {
    if !baseline {
        return configs;
    }
    configs
        .into_iter()
        .flat_map(|held| {
            let unheld = RunConfig {
                hold_snapshot: false,
                ..held.clone()
            };
            [held, unheld]
        })
        .collect()
}

fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *target = value;
    }
}

/// A row-table workload's configuration: the default (with `--tiny`, the tiny one) with
/// its rows times `--scale`, or `--rows` rows. Giving both is refused, as is a scale whose
/// rows pass [`MAX_TABLE_ROWS`].
fn sized<C>(
    common: &CommonArgs,
    rows_option: Option<u64>,
    tiny: fn() -> C,
    new: fn(u64) -> C,
    rows: fn(&mut C) -> &mut u64,
) -> Result<C, LabError> {
    let mut config = if common.tiny { tiny() } else { new(1) };
    match (common.scale, rows_option) {
        (Some(scale), Some(given)) => {
            return Err(LabError::BadOption(format!(
                "--scale {scale} and --rows {given} both set the rows; give one of them"
            )))
        }
        (Some(scale), None) => {
            let unit = *rows(&mut config);
            *rows(&mut config) = unit
                .checked_mul(scale)
                .filter(|&total| total <= MAX_TABLE_ROWS)
                .ok_or_else(|| {
                    LabError::BadOption(format!(
                        "--scale {scale} is too large: {unit} rows each would pass the \
                         {MAX_TABLE_ROWS} rows a table may have"
                    ))
                })?;
        }
        (None, Some(given)) => *rows(&mut config) = given,
        (None, None) => {}
    }
    Ok(config)
}

fn ycsb_config(common: &CommonArgs, args: &YcsbArgs) -> Result<YcsbConfig, LabError> {
    let mut config = sized(common, args.rows, YcsbConfig::tiny, YcsbConfig::new, |c| {
        &mut c.rows
    })?;
    set(&mut config.operations, args.operations);
    if let Some(mix) = &args.operations_mix {
        config.operations_mix = crate::workloads::ycsb::parse_operations_mix(mix)?;
    }
    set(&mut config.read_ratio, args.read_ratio);
    set(&mut config.theta, args.theta);
    set(&mut config.fields, args.fields);
    set(&mut config.field_bytes, args.field_bytes);
    // Reads look at every field unless told otherwise, however many fields there are.
    config.read_columns = args.read_columns.unwrap_or(config.fields);
    set(&mut config.update_columns, args.update_columns);
    set(&mut config.secondary_indexes, args.secondary_indexes);
    config.read_only =
        args.read_only_operations
            .map(|operations| crate::workloads::ycsb::ReadOnlyTransactions {
                operations,
                declared: args.declare_read_only,
            });
    Ok(config)
}

/// The TPC-C workload (`crate::workloads::tpcc`), closed loop or paced by terminals.
fn tpcc_workload(common: &CommonArgs, paced: &PacedArgs) -> Result<Box<dyn Workload>, LabError> {
    use crate::workloads::tpcc::paced::{PacedOptions, PacedTpcc, DEFAULT_PACING};
    use crate::workloads::tpcc::{Tpcc, TpccConfig};
    let config = if common.tiny {
        TpccConfig::tiny()
    } else {
        TpccConfig::standard(1)
    };
    let config = sized_tpcc(config, common.scale, common.seed)?;
    let Some(terminals_per_warehouse) = paced.terminals_per_warehouse else {
        return Ok(Box::new(Tpcc::new(config)?));
    };
    // A peer's --clients would become its connections; a paced run's are --workers.
    crate::workloads::tpcc::paced::refuse_closed_loop_options(
        common.target_rate,
        common.durability.clients.map(|c| c as usize),
        common.workers.unwrap_or(1),
    )?;
    let options = PacedOptions {
        terminals_per_warehouse,
        pacing: paced.pacing.unwrap_or(DEFAULT_PACING),
    };
    Ok(Box::new(PacedTpcc::new(config, options)?))
}

/// The CH-benCHmark workload (`crate::workloads::ch`).
fn ch_workload(tiny: bool, scale: Option<u64>, seed: u64) -> Result<Box<dyn Workload>, LabError> {
    use crate::workloads::ch::{Ch, ChConfig};
    let config = if tiny {
        ChConfig::tiny()
    } else {
        ChConfig::standard(1)
    };
    let config = sized_tpcc(config.tpcc(), scale, seed)?;
    Ok(Box::new(Ch::new(ChConfig::from_tpcc(&config))?))
}

/// `config` with `--scale` warehouses, if given, and `--seed`.
fn sized_tpcc(
    mut config: crate::workloads::tpcc::TpccConfig,
    scale: Option<u64>,
    seed: u64,
) -> Result<crate::workloads::tpcc::TpccConfig, LabError> {
    if let Some(warehouses) = scale {
        config = config.with_warehouses(warehouses_of(warehouses)?);
    }
    Ok(config.with_seed(seed))
}

fn warehouses_of(scale: u64) -> Result<u32, LabError> {
    u32::try_from(scale)
        .map_err(|_| LabError::BadOption(format!("--scale {scale}: too many warehouses")))
}

/// What a command produced.
#[derive(Debug)]
pub enum Outcome {
    /// A workload's runs (every subcommand but `reproduce`).
    Lab(LabReport),
    /// An experiment of `reproduce`.
    Reproduced(Box<Reproduction>),
    /// `reproduce --list` printed the experiments.
    Listed,
    /// `check` opened and checked a database.
    Checked(Box<crate::check::CheckReport>),
}

/// Runs a parsed command and prints what it measured to `out`: for a workload, every
/// configuration in turn, then the summary (and the comparison line), and the JSON and
/// the report if asked; for `reproduce`, the experiment (see [`crate::reproduce`]).
/// `command_line` is recorded in the outputs.
pub fn execute(
    cli: &Cli,
    command_line: Vec<String>,
    out: &mut dyn Write,
) -> Result<Outcome, LabError> {
    match &cli.command {
        Command::Reproduce(args) if args.list => {
            write!(out, "{}", reproduce::list())?;
            Ok(Outcome::Listed)
        }
        Command::Reproduce(args) => {
            let name = args.name.as_deref().ok_or_else(|| {
                LabError::BadOption("name an experiment (verso reproduce --list)".into())
            })?;
            let points = match (args.point_index, &args.point_json) {
                (Some(index), Some(json)) => PointProcess::OnlyPoint {
                    index,
                    json: json.clone(),
                },
                _ if args.in_process => PointProcess::InProcess,
                _ => PointProcess::Child {
                    experiment: name.to_owned(),
                },
            };
            let options = ReproduceOptions {
                quick: args.quick,
                seed: args.seed,
                report: args.report.clone(),
                json: args.json.clone(),
                show_progress: !args.quiet,
                command_line,
                points,
                version_removal: args.version_removal,
                disk: args.disk.clone(),
            };
            Ok(Outcome::Reproduced(Box::new(reproduce::reproduce(
                name, &options, out,
            )?)))
        }
        Command::Check(args) => {
            if let Some(json) = &args.json {
                check_outputs(Some(json), None, crate::report::REPORT_JSON)?;
            }
            let threads = crate::check::CheckOptions {
                recovery_threads: args.recovery_threads,
                replay_threads: args.replay_threads,
            };
            let report = crate::check::check(&args.dir, threads, out)?;
            if let Some(json) = &args.json {
                crate::report::write_json_of(json, &report)?;
                writeln!(out, "JSON written to {}", json.display())?;
            }
            Ok(Outcome::Checked(Box::new(report)))
        }
        _ => run_workload(cli, command_line, out).map(Outcome::Lab),
    }
}

/// Set to a configuration's index, makes the child process running it abort (SIGABRT)
/// before it runs: how the tests check that a failed child is reported as such and that
/// the configurations before it are kept. Not for use outside tests.
pub const KILL_CHILD_FOR_TESTS: &str = "VERSO_LAB_TEST_ABORT_CONFIG";

/// The child's side of [`run_configuration_in_child`]: runs configuration `index` of the
/// plan and writes its [`RunResult`] as JSON to `json`, printing nothing.
fn run_one_configuration_as_child(
    plan: &Plan,
    index: usize,
    json: &std::path::Path,
    command_line: Vec<String>,
) -> Result<LabReport, LabError> {
    let config = plan.configs.get(index).ok_or_else(|| {
        LabError::BadOption(format!(
            "configuration {index} does not exist ({} configurations)",
            plan.configs.len()
        ))
    })?;
    if std::env::var(KILL_CHILD_FOR_TESTS).is_ok_and(|killed| killed == index.to_string()) {
        std::process::abort(); // see KILL_CHILD_FOR_TESTS
    }
    let run = run_configuration(&*plan.workload, config)?;
    crate::runner::write_run_for_parent(&run, json)?;
    Ok(LabReport {
        format_version: FORMAT_VERSION,
        workload: plan.workload.name().to_owned(),
        description: plan.workload.describe(),
        started_unix_seconds: 0,
        command_line,
        runs: vec![run],
        comparison: None,
        conclusions: Vec::new(),
    })
}

/// Runs configuration `index` of this command line in a child process of this executable
/// (the same arguments plus `--config-index i --config-json FILE`) and reads its result.
fn run_configuration_in_child(
    command_line: &[String],
    index: usize,
    show_progress: bool,
) -> Result<crate::metrics::RunResult, LabError> {
    let mut args: Vec<String> = command_line.iter().skip(1).cloned().collect();
    args.extend(["--config-index".to_owned(), index.to_string()]);
    crate::runner::run_in_child_process(
        &args,
        "--config-json",
        &format!("configuration {index}"),
        show_progress,
        "",
    )
}

/// After a configuration's child process failed: prints the summary of the configurations
/// that finished before it and writes them to `--json` (the report needs every
/// configuration, so it is not written).
fn report_finished_runs(
    plan: &Plan,
    runs: &[crate::metrics::RunResult],
    command_line: &[String],
    started_unix_seconds: u64,
    out: &mut dyn Write,
) -> Result<(), LabError> {
    if runs.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nThe configurations that finished before the failure:"
    )?;
    write!(out, "{}", summary_table(runs))?;
    if let Some(path) = &plan.json {
        let report = LabReport {
            format_version: FORMAT_VERSION,
            workload: plan.workload.name().to_owned(),
            description: plan.workload.describe(),
            started_unix_seconds,
            command_line: command_line.to_vec(),
            runs: runs.to_vec(),
            comparison: None,
            conclusions: Vec::new(),
        };
        write_json(path, &report)?;
        writeln!(out, "JSON of those written to {}", path.display())?;
    }
    Ok(())
}

/// The clients and durability of a configuration, for its header line (empty in memory
/// with a client per worker).
fn durability_note(config: &RunConfig) -> String {
    let mut note = String::new();
    if let Some(clients) = config.clients.filter(|&c| c != config.oltp_workers) {
        note.push_str(&format!(", {clients} clients"));
    }
    if let (Some(dir), Some(level)) = (&config.options.disk, config.options.effective_durability())
    {
        note.push_str(&format!(
            ", disk engine in {} ({} MiB pool, {} page log{})",
            dir.display(),
            config.options.buffer_pool_bytes >> 20,
            level.name(),
            if config.options.direct_io {
                ", direct I/O"
            } else {
                ""
            }
        ));
    }
    if let (Some(path), Some(level)) = (&config.options.path, config.options.effective_durability())
    {
        if config.options.version_storage.uses_persistent_memory() {
            note.push_str(&format!(", region file in {}", path.display()));
        } else {
            note.push_str(&format!(", {} log in {}", level.name(), path.display()));
        }
    }
    note
}

/// [`execute`] for the workload subcommands.
fn run_workload(
    cli: &Cli,
    command_line: Vec<String>,
    out: &mut dyn Write,
) -> Result<LabReport, LabError> {
    let plan = Plan::of(&cli.command)?;
    if let (Some(index), Some(json)) = (plan.process.config_index, &plan.process.config_json) {
        return run_one_configuration_as_child(&plan, index, json, command_line);
    }
    check_outputs(
        plan.json.as_deref(),
        plan.report.as_deref(),
        crate::report::REPORT_JSON,
    )?;
    DurabilityArgs::check_directories(&plan.configs)?;
    let started_unix_seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    writeln!(out, "workload: {}", plan.workload.describe())?;
    for note in &plan.notes {
        writeln!(out, "note: {note}")?;
    }
    // Several configurations: each in a fresh child process unless told otherwise, so none
    // inherits the heap (and page faults already paid) or the resident memory of another.
    let in_children = plan.configs.len() > 1 && !plan.process.in_process;
    let mut runs = Vec::with_capacity(plan.configs.len());
    for (index, config) in plan.configs.iter().enumerate() {
        writeln!(
            out,
            "== {}: {} isolation, {} OLTP + {} OLAP worker(s){}{}, {}",
            config.label,
            crate::runner::isolation_name(config.isolation),
            config.oltp_workers,
            config.olap_workers,
            durability_note(config),
            match (config.hold_snapshot, config.hold_read_only) {
                (true, true) => ", holding a read-only snapshot",
                (true, false) => ", holding a snapshot",
                (false, _) => "",
            },
            match config.stop {
                StopAfter::Duration(d) => format!("{:.1} s", d.as_secs_f64()),
                StopAfter::Transactions(n) => format!("{n} transactions"),
            }
        )?;
        out.flush()?;
        let run = if in_children {
            match run_configuration_in_child(&command_line, index, config.show_progress) {
                Ok(run) => run,
                Err(error) => {
                    // Keep what the configurations before it measured (minutes of runs,
                    // often the very ones the failing configuration is compared with),
                    // then fail.
                    report_finished_runs(&plan, &runs, &command_line, started_unix_seconds, out)?;
                    return Err(error);
                }
            }
        } else {
            run_configuration(&*plan.workload, config)?
        };
        writeln!(
            out,
            "   {}: loaded in {:.2} s, ran {:.1} s, {} commits, {} aborts, {} queries; consistent after load and run",
            run.configuration.design,
            run.load_seconds,
            run.run_seconds,
            run.totals.oltp_commits,
            run.totals.oltp_aborts,
            run.totals.olap_queries,
        )?;
        if let Some(paced) = &run.paced {
            writeln!(
                out,
                "   {} terminals: NOTPM {:.0} of {:.0} offered, {} of {} submitted transactions completed",
                paced.terminals,
                paced.notpm,
                paced.offered_new_orders_per_minute,
                paced.completed,
                paced.submitted
            )?;
        }
        if let Some(why) = &run.stopped_early {
            writeln!(out, "   {why}")?;
        }
        runs.push(run);
    }
    // With held snapshots, the per-system lines say what the snapshot cost each system;
    // the pairwise line compares the held runs with one another (not with baselines).
    let conclusions = crate::report::held_snapshot_lines(&runs);
    let comparison = if runs.iter().any(|r| r.configuration.hold_snapshot) {
        let held: Vec<_> = runs
            .iter()
            .filter(|r| r.configuration.hold_snapshot)
            .cloned()
            .collect();
        comparison_line(&held)
    } else {
        comparison_line(&runs)
    };
    let report = LabReport {
        format_version: FORMAT_VERSION,
        workload: plan.workload.name().to_owned(),
        description: plan.workload.describe(),
        started_unix_seconds,
        command_line,
        runs,
        comparison,
        conclusions,
    };
    writeln!(out)?;
    write!(out, "{}", summary_table(&report.runs))?;
    if let Some(table) = crate::report::durability_table(&report.runs) {
        write!(out, "\n{table}")?;
    }
    if let Some(tables) = crate::paced_report::paced_tables(&report.runs) {
        write!(out, "\n{tables}")?;
    }
    if let Some(table) = crate::disk_report::table(&report.runs) {
        write!(out, "\n{table}")?;
    }
    if let Some(line) = &report.comparison {
        writeln!(out, "\n{line}")?;
    }
    if !report.conclusions.is_empty() {
        writeln!(out)?;
        for line in &report.conclusions {
            writeln!(out, "{line}")?;
        }
    }
    if let Some(path) = &plan.json {
        write_json(path, &report)?;
        writeln!(out, "JSON written to {}", path.display())?;
    }
    if let Some(dir) = &plan.report {
        write_report(dir, &report)?;
        writeln!(
            out,
            "report written to {}",
            dir.join(crate::report::INDEX_HTML).display()
        )?;
    }
    Ok(report)
}
