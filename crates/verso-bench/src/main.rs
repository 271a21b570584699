//! `verso-bench core [--bench point-read|update|ycsb|all] [--runs 5] [--seconds 3]
//! [--rows N] [--gc steam|watermark|...] [--storage delta|append-n2o|append-o2n|time-travel]
//! [--isolation snapshot|serializable|both]
//! [--read-ratio 0.9] [--tiny] [--json FILE]`
//!
//! `verso-bench pages [--entries N] [--pool-pages N] [--threads 1,2] [--policies clock,lru2]
//! [--seconds 3] [--rounds 5] [--theta 0.9] [--write-share 0.1] [--dir DIR] [--tiny]`

/// mimalloc (v2: mimalloc 0.1.52's default, C mimalloc v3.3.2, segfaulted under threads
/// when we measured the candidate crates). It backs
/// its segments with transparent huge pages by itself: with millions of rows, TLB misses
/// cost glibc's malloc on 4 KiB pages a third of YCSB's throughput on this kind of VM, which
/// this benchmark used to work around by re-running itself with a glibc tunable. Side by
/// side with glibc on huge pages it ran 6-20% more commits/s. Only the binary chooses an
/// allocator; the engine library never does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use verso::{ConcurrencyControl, GarbageCollector, Isolation, VersionStorageKind};
use verso_bench::core::{self, Bench, Config};
use verso_bench::pages::{self, PagesConfig};
use verso_bench::{report_json, report_table, thousands, validate};

/// Benchmarks of the Verso storage engine.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Single-thread transaction benchmarks: point read, one-row update, YCSB.
    Core(CoreArgs),
    /// The disk engine's B+-tree through its buffer pool, data larger than the pool:
    /// Zipf-skewed lookups and overwrites under each eviction policy and thread count.
    Pages(PagesArgs),
}

#[derive(clap::Args, Debug)]
struct PagesArgs {
    /// Entries in the tree [default: 1,000,000; 5,000 with --tiny].
    #[arg(long)]
    entries: Option<u64>,
    /// Frames of the buffer pool [default: 2,000 (16 MB, about a tenth of the tree); 16
    /// with --tiny].
    #[arg(long)]
    pool_pages: Option<usize>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Eviction policies, comma-separated: clock, lru2.
    #[arg(long, value_delimiter = ',', default_value = "clock,lru2", value_parser = parse_policy)]
    policies: Vec<verso::disk::ReplacementPolicy>,
    /// Logging of the tree's changes, comma-separated: off (unlogged), none (the page log,
    /// never synced), sync (the page log, a dirty page's eviction waits for its fsync).
    #[arg(long, value_delimiter = ',', default_value = "off", value_parser = parse_log)]
    log: Vec<Option<verso::Durability>>,
    /// Seconds per run [default: 3; 0.05 with --tiny].
    #[arg(long)]
    seconds: Option<f64>,
    /// Rounds, each running every policy and thread count once [default: 5; 1 with --tiny].
    #[arg(long)]
    rounds: Option<usize>,
    /// Zipf skew of the keys.
    #[arg(long, default_value_t = 0.9)]
    theta: f64,
    /// Share of operations that overwrite a value.
    #[arg(long, default_value_t = 0.1)]
    write_share: f64,
    /// Directory for the tree's file (removed afterwards) [default: the temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Tiny sizes: about a second even in a debug build.
    #[arg(long)]
    tiny: bool,
}

fn parse_policy(name: &str) -> Result<verso::disk::ReplacementPolicy, String> {
    match name {
        "clock" => Ok(verso::disk::ReplacementPolicy::Clock),
        "lru2" => Ok(verso::disk::ReplacementPolicy::Lru2),
        other => Err(format!("unknown eviction policy {other:?} (clock, lru2)")),
    }
}

fn parse_log(name: &str) -> Result<Option<verso::Durability>, String> {
    match name {
        "off" => Ok(None),
        "none" => Ok(Some(verso::Durability::None)),
        "sync" => Ok(Some(verso::Durability::Sync)),
        other => Err(format!("unknown log setting {other:?} (off, none, sync)")),
    }
}

fn pages_command(args: PagesArgs) -> ExitCode {
    let dir = args.dir.unwrap_or_else(std::env::temp_dir);
    let mut config = if args.tiny {
        PagesConfig::tiny(dir)
    } else {
        PagesConfig::full(dir)
    };
    if let Some(entries) = args.entries {
        config.entries = entries.max(1);
    }
    if let Some(frames) = args.pool_pages {
        config.pool_pages = frames.max(1);
    }
    if let Some(seconds) = args.seconds {
        config.seconds = seconds;
    }
    if let Some(rounds) = args.rounds {
        config.rounds = rounds.max(1);
    }
    if !(args.theta > 0.0 && args.theta < 1.0 && (0.0..=1.0).contains(&args.write_share)) {
        eprintln!("--theta must lie strictly between 0 and 1, --write-share between 0 and 1");
        return ExitCode::FAILURE;
    }
    if args.threads.contains(&0) {
        eprintln!("--threads: every count must be at least 1");
        return ExitCode::FAILURE;
    }
    config.threads = args.threads;
    config.policies = args.policies;
    config.logs = args.log;
    config.theta = args.theta;
    config.write_share = args.write_share;
    eprintln!(
        "pages: {} entries of {} bytes, a pool of {} pages, {} round(s) of {} s per run ...",
        thousands(config.entries as f64),
        config.value_bytes,
        config.pool_pages,
        config.rounds,
        config.seconds
    );
    match pages::run(&config) {
        Ok(runs) => {
            let mut failed = false;
            for run in &runs {
                if run.lookups_found != run.lookups {
                    eprintln!(
                        "CHECK FAILED: {} of {} lookups missed",
                        run.lookups - run.lookups_found,
                        run.lookups
                    );
                    failed = true;
                }
            }
            println!("{}", pages::report(&config, &runs));
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("pages: failed: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BenchArg {
    PointRead,
    Update,
    Ycsb,
    YcsbPrefetch,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum IsolationArg {
    Snapshot,
    Serializable,
    /// Each benchmark at both levels, snapshot first, then the ratio of the medians.
    Both,
}

#[derive(clap::Args, Debug)]
struct CoreArgs {
    /// Which benchmark to run.
    #[arg(long, value_enum, default_value_t = BenchArg::All)]
    bench: BenchArg,
    /// Measured runs per benchmark [default: 5, 1 with --tiny].
    #[arg(long)]
    runs: Option<usize>,
    /// Seconds per measured run [default: 3, 0.05 with --tiny].
    #[arg(long)]
    seconds: Option<f64>,
    /// Seconds of warm-up before the first run [default: 1, 0.01 with --tiny].
    #[arg(long)]
    warmup: Option<f64>,
    /// Rows of every table [default: 1,000,000 for point-read and update, 2,000,000 for
    /// ycsb; 10,000 with --tiny].
    #[arg(long)]
    rows: Option<u64>,
    /// Garbage collector.
    #[arg(long, default_value = "steam", value_parser = parse_gc)]
    gc: GarbageCollector,
    /// Version storage: delta (the default), append-n2o, append-o2n or time-travel.
    #[arg(long, default_value = "delta", value_parser = parse_storage)]
    storage: VersionStorageKind,
    /// Concurrency-control protocol: si (the default), mvocc, mvto, mv2pl or ssn.
    #[arg(long, default_value = "si", value_parser = parse_protocol)]
    protocol: ConcurrencyControl,
    /// Isolation level of the measured transactions.
    #[arg(long, value_enum, default_value_t = IsolationArg::Snapshot)]
    isolation: IsolationArg,
    /// Share of YCSB operations that read; the rest update (0 to 1).
    #[arg(long, default_value_t = 0.9)]
    read_ratio: f64,
    /// Zipf skew of the YCSB keys (0 < theta < 1).
    #[arg(long, default_value_t = 0.6)]
    theta: f64,
    /// Seed of the workload's random numbers.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Tiny data and runs: finishes in about a second even in a debug build.
    #[arg(long)]
    tiny: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn parse_protocol(name: &str) -> Result<ConcurrencyControl, String> {
    ConcurrencyControl::from_name(name).map_err(|e| e.to_string())
}

fn parse_storage(name: &str) -> Result<VersionStorageKind, String> {
    VersionStorageKind::from_name(name).map_err(|e| e.to_string())
}

fn parse_gc(name: &str) -> Result<GarbageCollector, String> {
    GarbageCollector::from_name(name).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Core(args) => core_command(args),
        Command::Pages(args) => pages_command(args),
    }
}

fn core_command(args: CoreArgs) -> ExitCode {
    println!("heap: mimalloc (v2), which backs its segments with transparent huge pages");
    let mut config = if args.tiny {
        Config::tiny()
    } else {
        Config::full()
    };
    if let Some(runs) = args.runs {
        config.runs = runs.max(1);
    }
    if let Some(seconds) = args.seconds {
        config.seconds = seconds;
    }
    if let Some(warmup) = args.warmup {
        config.warmup_seconds = warmup;
    }
    if let Some(rows) = args.rows {
        config.rows = rows.max(1);
        config.ycsb_rows = rows.max(1);
    }
    if !(args.theta > 0.0 && args.theta < 1.0) {
        eprintln!("--theta must lie strictly between 0 and 1");
        return ExitCode::FAILURE;
    }
    config.theta = args.theta;
    if !(0.0..=1.0).contains(&args.read_ratio) {
        eprintln!("--read-ratio must lie between 0 and 1");
        return ExitCode::FAILURE;
    }
    config.ycsb_read_ratio = args.read_ratio;
    let isolations = match args.isolation {
        IsolationArg::Snapshot => vec![Isolation::Snapshot],
        IsolationArg::Serializable => vec![Isolation::Serializable],
        IsolationArg::Both => vec![Isolation::Snapshot, Isolation::Serializable],
    };
    config.gc = args.gc;
    config.storage = args.storage;
    config.protocol = args.protocol;
    config.seed = args.seed;
    let benches: Vec<Bench> = match args.bench {
        BenchArg::PointRead => vec![Bench::PointRead],
        BenchArg::Update => vec![Bench::Update],
        BenchArg::Ycsb => vec![Bench::Ycsb],
        BenchArg::YcsbPrefetch => vec![Bench::YcsbPrefetch],
        BenchArg::All => Bench::ALL.to_vec(),
    };

    let mut results = Vec::new();
    let mut failed = false;
    let runs: Vec<(Bench, Isolation)> = benches
        .iter()
        .flat_map(|&bench| isolations.iter().map(move |&isolation| (bench, isolation)))
        .collect();
    for (bench, isolation) in runs {
        config.isolation = isolation;
        eprintln!(
            "{}: loading {} rows, {} run(s) of {} s after {} s of warm-up, gc {}, {:?} ...",
            bench.name(),
            thousands(config.rows_for(bench) as f64),
            config.runs,
            config.seconds,
            config.warmup_seconds,
            config.gc.name(),
            isolation,
        );
        let result = match core::run(bench, &config) {
            Ok(result) => result,
            Err(e) => {
                eprintln!("{}: failed: {e}", bench.name());
                failed = true;
                continue;
            }
        };
        eprintln!(
            "  design {}; loaded in {:.2} s ({} rows/s)",
            result.design,
            result.load_seconds,
            thousands(result.rows as f64 / result.load_seconds.max(1e-9)),
        );
        for (i, run) in result.runs.iter().enumerate() {
            eprintln!(
                "  run {}: {} commits/s ({} commits, {} aborts, {:.3} s; {:.3} CPU-s, {} commits/CPU-s)",
                i + 1,
                thousands(run.commits_per_second()),
                run.commits,
                run.aborts,
                run.seconds,
                run.cpu_seconds,
                thousands(run.commits_per_cpu_second()),
            );
        }
        for problem in validate(&result, &config) {
            eprintln!("  CHECK FAILED: {problem}");
            failed = true;
        }
        results.push(result);
    }

    println!();
    println!("{}", report_table(&results));
    if isolations.len() == 2 {
        // Results alternate snapshot, serializable per benchmark.
        for pair in results.chunks(2) {
            if let [snapshot, serializable] = pair {
                let (snapshot_median, _, _) = snapshot.summary();
                let (serializable_median, _, _) = serializable.summary();
                println!(
                    "{}: Serializable runs at {:.1}% of Snapshot's throughput \
                     (medians {} vs {} commits/s, read ratio {})",
                    snapshot.bench.name(),
                    100.0 * serializable_median / snapshot_median.max(1e-9),
                    thousands(serializable_median),
                    thousands(snapshot_median),
                    config.ycsb_read_ratio,
                );
            }
        }
    }
    if let Some(path) = args.json {
        if let Err(e) = std::fs::write(&path, report_json(&results)) {
            eprintln!("cannot write {}: {e}", path.display());
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
