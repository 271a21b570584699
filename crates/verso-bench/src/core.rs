//! The core transaction benchmarks: one worker thread, committed transactions per second.
//!
//! - [`Bench::PointRead`]: begin (snapshot), `get_view` one uniformly random key, commit.
//! - [`Bench::Update`]: begin, update one column of one uniformly random row, commit.
//! - [`Bench::Ycsb`]: YCSB as DBx1000 runs it: 16 operations per transaction, 90% reads
//!   of the whole row, 10% updates of one column, keys by scrambled Zipf (theta 0.6) over
//!   2,000,000 rows of a `U64` key and ten 10-byte `Bytes` columns; the keys of one
//!   transaction are distinct and a transaction that loses a write conflict is retried
//!   with the same keys.
//! - [`Bench::YcsbPrefetch`]: the same transactions, each of which first hands its 16 keys
//!   to `Transaction::prefetch`, so that the cache misses of its lookups overlap; the
//!   reads and updates that follow are the same calls in the same order.
//!
//! Every benchmark loads its own database, warms up, then measures `runs` timed runs. It
//! also counts what it did ([`Checks`]) so that a test can tell it really ran the work
//! it names.

use std::hint::black_box;
use std::time::{Duration, Instant};

use verso::{
    ColumnType, ConcurrencyControl, Database, GarbageCollector, Isolation, Options, Schema,
    TableId, Value, ValueRef, VersionStorageKind,
};

use crate::rng::SplitMix64;
use crate::zipf::ScrambledZipfian;

/// Rows inserted per loading transaction.
pub const LOAD_BATCH: u64 = 10_000;
/// Transactions between two looks at the clock in the one-row benchmarks (a look costs
/// tens of nanoseconds; YCSB transactions are 16 times longer and look every 16).
const CLOCK_EVERY: u64 = 256;
/// Width of the YCSB value columns, in bytes.
pub const YCSB_FIELD_BYTES: usize = 10;
/// Number of YCSB value columns.
pub const YCSB_FIELDS: usize = 10;

/// One benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bench {
    /// One-row point-read transaction.
    PointRead,
    /// One-row, one-column update transaction.
    Update,
    /// YCSB transaction of 16 operations, 90% reads / 10% updates, scrambled Zipf keys.
    Ycsb,
    /// The same YCSB transaction, announcing its keys first with `Transaction::prefetch`.
    YcsbPrefetch,
}

impl Bench {
    /// Every benchmark, in report order.
    pub const ALL: [Bench; 4] = [
        Bench::PointRead,
        Bench::Update,
        Bench::Ycsb,
        Bench::YcsbPrefetch,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Bench::PointRead => "point-read",
            Bench::Update => "update",
            Bench::Ycsb => "ycsb",
            Bench::YcsbPrefetch => "ycsb-prefetch",
        }
    }

    /// Parses a name as printed by [`Bench::name`].
    pub fn from_name(name: &str) -> Option<Bench> {
        Bench::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// How to run the benchmarks.
#[derive(Clone, Debug)]
pub struct Config {
    /// Measured runs per benchmark.
    pub runs: usize,
    /// Length of one measured run.
    pub seconds: f64,
    /// Length of the warm-up before the first run.
    pub warmup_seconds: f64,
    /// Rows of the point-read and update table.
    pub rows: u64,
    /// Rows of the YCSB table.
    pub ycsb_rows: u64,
    /// Zipf skew of the YCSB keys.
    pub theta: f64,
    /// Operations per YCSB transaction.
    pub ycsb_ops: usize,
    /// Share of YCSB operations that read (the rest update).
    pub ycsb_read_ratio: f64,
    /// The garbage collector.
    pub gc: GarbageCollector,
    /// The version storage.
    pub storage: VersionStorageKind,
    /// The concurrency-control protocol.
    pub protocol: ConcurrencyControl,
    /// The isolation level of the measured transactions (loading and checks run at
    /// `Snapshot`).
    pub isolation: Isolation,
    /// Seed of the workload's random numbers.
    pub seed: u64,
}

impl Config {
    /// The full measurement: 5 runs of 3 s after 1 s of warm-up; 1,000,000 rows for the
    /// point-read and update table, 2,000,000 for YCSB.
    pub fn full() -> Config {
        Config {
            runs: 5,
            seconds: 3.0,
            warmup_seconds: 1.0,
            rows: 1_000_000,
            ycsb_rows: 2_000_000,
            theta: 0.6,
            ycsb_ops: 16,
            ycsb_read_ratio: 0.9,
            gc: GarbageCollector::Steam,
            storage: VersionStorageKind::Delta,
            protocol: ConcurrencyControl::SnapshotIsolation,
            isolation: Isolation::Snapshot,
            seed: 0x5EED,
        }
    }

    /// Tiny mode: 10,000 rows, one 0.05 s run after 0.01 s of warm-up; the three
    /// benchmarks finish in about a second in a debug build.
    pub fn tiny() -> Config {
        Config {
            runs: 1,
            seconds: 0.05,
            warmup_seconds: 0.01,
            rows: 10_000,
            ycsb_rows: 10_000,
            ..Config::full()
        }
    }

    /// Rows of the table `bench` uses.
    pub fn rows_for(&self, bench: Bench) -> u64 {
        match bench {
            Bench::PointRead | Bench::Update => self.rows,
            Bench::Ycsb | Bench::YcsbPrefetch => self.ycsb_rows,
        }
    }
}

/// One timed run (or the warm-up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Committed transactions.
    pub commits: u64,
    /// Transactions rolled back by a write conflict (and retried).
    pub aborts: u64,
    /// Wall time of the run.
    pub seconds: f64,
    /// CPU time the worker thread got during the run: below `seconds` when other
    /// processes compete for the cores.
    pub cpu_seconds: f64,
}

impl RunStats {
    /// Committed transactions per second.
    pub fn commits_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.commits as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Committed transactions per second of the worker thread's CPU time: what the rate
    /// would be with a core to itself.
    pub fn commits_per_cpu_second(&self) -> f64 {
        if self.cpu_seconds > 0.0 {
            self.commits as f64 / self.cpu_seconds
        } else {
            0.0
        }
    }
}

/// CPU time consumed so far by the calling thread, in seconds.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on
    // every Linux and BSD the crate builds for.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// What a benchmark did, summed over warm-up and runs: evidence that it ran the work it
/// names.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Checks {
    /// Point reads issued (`get_view` calls).
    pub reads: u64,
    /// Reads that found a row whose key is the one asked for.
    pub reads_found: u64,
    /// Reads that found a row with another key (must be 0).
    pub reads_wrong_row: u64,
    /// Column values the reads looked at.
    pub values_touched: u64,
    /// Updates issued.
    pub updates: u64,
    /// Updates that returned `Ok(true)`.
    pub updates_applied: u64,
    /// Keys drawn by the key generator.
    pub keys_drawn: u64,
    /// Keys drawn outside the table (must be 0).
    pub keys_out_of_range: u64,
    /// Largest key drawn.
    pub max_key: u64,
    /// Distinct keys among the first 65,536 drawn.
    pub distinct_keys_in_sample: u64,
    /// Operations per committed transaction, as counted (reads + updates).
    pub ops_per_commit: f64,
    /// Keys handed to `Transaction::prefetch` (`ycsb-prefetch` only: all of every
    /// attempt's keys).
    pub keys_prefetched: u64,
    /// Whether a fresh transaction after the runs saw the last update (the update
    /// benchmarks only; `true` when there was nothing to check).
    pub last_update_visible: bool,
}

/// A benchmark's results.
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// Which benchmark.
    pub bench: Bench,
    /// `db.design()`.
    pub design: String,
    /// Rows loaded.
    pub rows: u64,
    /// Wall time of the load.
    pub load_seconds: f64,
    /// The warm-up.
    pub warmup: RunStats,
    /// The measured runs.
    pub runs: Vec<RunStats>,
    /// What it did.
    pub checks: Checks,
}

impl BenchResult {
    /// `(median, min, max)` commits per second (of wall time) over the runs.
    pub fn summary(&self) -> (f64, f64, f64) {
        median_min_max(self.runs.iter().map(RunStats::commits_per_second).collect())
    }

    /// `(median, min, max)` commits per second of the worker's CPU time over the runs.
    pub fn cpu_summary(&self) -> (f64, f64, f64) {
        median_min_max(
            self.runs
                .iter()
                .map(RunStats::commits_per_cpu_second)
                .collect(),
        )
    }

    /// The share of the runs' wall time the worker thread was on a CPU (1.0 on an idle
    /// machine).
    pub fn cpu_share(&self) -> f64 {
        let wall: f64 = self.runs.iter().map(|r| r.seconds).sum();
        let cpu: f64 = self.runs.iter().map(|r| r.cpu_seconds).sum();
        if wall > 0.0 {
            cpu / wall
        } else {
            0.0
        }
    }

    /// Committed transactions over the measured runs.
    pub fn commits(&self) -> u64 {
        self.runs.iter().map(|r| r.commits).sum()
    }

    /// Write-conflict aborts over the measured runs.
    pub fn aborts(&self) -> u64 {
        self.runs.iter().map(|r| r.aborts).sum()
    }
}

fn median_min_max(mut rates: Vec<f64>) -> (f64, f64, f64) {
    rates.sort_by(f64::total_cmp);
    if rates.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mid = rates.len() / 2;
    let median = if rates.len() % 2 == 1 {
        rates[mid]
    } else {
        (rates[mid - 1] + rates[mid]) / 2.0
    };
    (median, rates[0], rates[rates.len() - 1])
}

/// Runs one benchmark. Errors other than write conflicts end it.
pub fn run(bench: Bench, config: &Config) -> verso::Result<BenchResult> {
    match bench {
        Bench::PointRead => run_point_read(config),
        Bench::Update => run_update(config),
        Bench::Ycsb => run_ycsb(config, false),
        Bench::YcsbPrefetch => run_ycsb(config, true),
    }
}

/// Runs `txn` (one transaction, returning the write-conflict aborts it took before it
/// committed) for `seconds` of wall time.
fn timed(
    seconds: f64,
    clock_every: u64,
    mut txn: impl FnMut() -> verso::Result<u64>,
) -> verso::Result<RunStats> {
    let length = Duration::from_secs_f64(seconds);
    let cpu_start = thread_cpu_seconds();
    let start = Instant::now();
    let mut stats = RunStats::default();
    loop {
        for _ in 0..clock_every {
            stats.aborts += txn()?;
            stats.commits += 1;
        }
        if start.elapsed() >= length {
            break;
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    stats.cpu_seconds = thread_cpu_seconds() - cpu_start;
    Ok(stats)
}

/// Runs `body` as a transaction until it commits; returns the write-conflict aborts.
fn with_retry(mut body: impl FnMut() -> verso::Result<()>) -> verso::Result<u64> {
    let mut aborts = 0;
    loop {
        match body() {
            Ok(()) => return Ok(aborts),
            Err(e) if e.is_retryable() => aborts += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Warm-up plus `config.runs` timed runs of `txn`.
fn measure(
    config: &Config,
    clock_every: u64,
    mut txn: impl FnMut() -> verso::Result<u64>,
) -> verso::Result<(RunStats, Vec<RunStats>)> {
    let warmup = timed(config.warmup_seconds, clock_every, &mut txn)?;
    let mut runs = Vec::with_capacity(config.runs);
    for _ in 0..config.runs {
        runs.push(timed(config.seconds, clock_every, &mut txn)?);
    }
    Ok((warmup, runs))
}

/// Inserts rows `0..rows` (as built by `row`), [`LOAD_BATCH`] per transaction.
fn load(
    db: &Database,
    table: TableId,
    rows: u64,
    mut row: impl FnMut(u64, &mut Vec<Value>),
) -> verso::Result<f64> {
    let start = Instant::now();
    let mut buf = Vec::new();
    let mut next = 0;
    while next < rows {
        let end = (next + LOAD_BATCH).min(rows);
        let mut txn = db.begin(Isolation::Snapshot);
        for key in next..end {
            buf.clear();
            row(key, &mut buf);
            txn.insert(table, &buf)?;
        }
        txn.commit()?;
        next = end;
    }
    Ok(start.elapsed().as_secs_f64())
}

fn open(config: &Config) -> verso::Result<Database> {
    Database::open(
        Options::default()
            .garbage_collector(config.gc)
            .version_storage(config.storage)
            .concurrency_control(config.protocol),
    )
}

/// Records a drawn key in `checks`.
#[inline]
fn note_key(checks: &mut Checks, sample: &mut Vec<u64>, key: u64, rows: u64) {
    checks.keys_drawn += 1;
    checks.keys_out_of_range += u64::from(key >= rows);
    checks.max_key = checks.max_key.max(key);
    if sample.len() < 65_536 {
        sample.push(key);
    }
}

fn distinct(sample: &mut [u64]) -> u64 {
    sample.sort_unstable();
    let mut n = 0;
    let mut last = None;
    for &k in sample.iter() {
        if last != Some(k) {
            n += 1;
            last = Some(k);
        }
    }
    n
}

/// The point-read and update table: `id U64` (key), `counter U64`, `balance I64`,
/// `name Text` (10 bytes).
fn small_table(db: &Database, config: &Config) -> verso::Result<(TableId, f64)> {
    let table = db.create_table(
        "accounts",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("counter", ColumnType::U64)
            .column("balance", ColumnType::I64)
            .column("name", ColumnType::Text)
            .primary_key(&["id"]),
    )?;
    let load_seconds = load(db, table, config.rows, |key, row| {
        row.push(Value::U64(key));
        row.push(Value::U64(0));
        row.push(Value::I64(key as i64 * 10));
        row.push(Value::Text(format!("name{key:06}")));
    })?;
    Ok((table, load_seconds))
}

fn run_point_read(config: &Config) -> verso::Result<BenchResult> {
    let db = open(config)?;
    let (table, load_seconds) = small_table(&db, config)?;
    let rows = config.rows;
    let mut rng = SplitMix64::new(config.seed);
    let mut checks = Checks::default();
    let mut sample = Vec::new();
    let mut sink = 0u64;
    let (warmup, runs) = measure(config, CLOCK_EVERY, || {
        let id = rng.below(rows);
        note_key(&mut checks, &mut sample, id, rows);
        let key = [Value::U64(id)];
        let txn = db.begin(config.isolation);
        let got = txn.get_view(table, &key, |row| {
            let (ValueRef::U64(k), ValueRef::U64(c), ValueRef::I64(b), ValueRef::Text(name)) =
                (row.get(0), row.get(1), row.get(2), row.get(3))
            else {
                return None;
            };
            Some((k, c.wrapping_add(b as u64).wrapping_add(name.len() as u64)))
        })?;
        txn.commit()?;
        checks.reads += 1;
        match got {
            Some(Some((k, v))) if k == id => {
                checks.reads_found += 1;
                checks.values_touched += 4;
                sink = sink.wrapping_add(v);
            }
            Some(_) => checks.reads_wrong_row += 1,
            None => {}
        }
        Ok(0)
    })?;
    black_box(sink);
    checks.distinct_keys_in_sample = distinct(&mut sample);
    checks.ops_per_commit = ops_per_commit(&checks, &warmup, &runs);
    checks.last_update_visible = true;
    Ok(BenchResult {
        bench: Bench::PointRead,
        design: design(&db, config),
        rows,
        load_seconds,
        warmup,
        runs,
        checks,
    })
}

fn run_update(config: &Config) -> verso::Result<BenchResult> {
    let db = open(config)?;
    let (table, load_seconds) = small_table(&db, config)?;
    let rows = config.rows;
    let counter = db.column_index(table, "counter")?;
    let mut rng = SplitMix64::new(config.seed);
    let mut checks = Checks::default();
    let mut sample = Vec::new();
    let mut sequence = 0u64;
    let mut last = (0u64, 0u64);
    let (warmup, runs) = measure(config, CLOCK_EVERY, || {
        let id = rng.below(rows);
        note_key(&mut checks, &mut sample, id, rows);
        sequence += 1;
        let key = [Value::U64(id)];
        let changes = [(counter, Value::U64(sequence))];
        let mut applied = false;
        let aborts = with_retry(|| {
            let mut txn = db.begin(config.isolation);
            applied = txn.update(table, &key, &changes)?;
            txn.commit()
        })?;
        checks.updates += 1;
        checks.updates_applied += u64::from(applied);
        last = (id, sequence);
        Ok(aborts)
    })?;
    checks.distinct_keys_in_sample = distinct(&mut sample);
    checks.ops_per_commit = ops_per_commit(&checks, &warmup, &runs);
    let txn = db.begin(Isolation::Snapshot);
    checks.last_update_visible = txn.get_view(table, &[Value::U64(last.0)], |row| {
        row.get(counter) == Value::U64(last.1)
    })? == Some(true);
    txn.commit()?;
    Ok(BenchResult {
        bench: Bench::Update,
        design: design(&db, config),
        rows,
        load_seconds,
        warmup,
        runs,
        checks,
    })
}

/// One YCSB operation.
#[derive(Clone, Copy, Debug)]
enum Op {
    Read(u64),
    /// Key, column (1..=10), seed of the new value.
    Update(u64, usize, u64),
}

/// The 10 value bytes of `(key, column)` at load time.
fn initial_field(key: u64, column: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(key.wrapping_mul(31).wrapping_add(column as u64));
    let bits = rng.next_u64().to_le_bytes();
    let mut v = Vec::with_capacity(YCSB_FIELD_BYTES);
    v.extend_from_slice(&bits);
    v.extend_from_slice(&bits[..YCSB_FIELD_BYTES - 8]);
    v
}

fn fill_field(bytes: &mut [u8], seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let a = rng.next_u64().to_le_bytes();
    let b = rng.next_u64().to_le_bytes();
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = if i < 8 { a[i] } else { b[i - 8] };
    }
}

fn run_ycsb(config: &Config, prefetch: bool) -> verso::Result<BenchResult> {
    let db = open(config)?;
    let mut schema = Schema::new().column("ycsb_key", ColumnType::U64);
    let names: Vec<String> = (0..YCSB_FIELDS).map(|i| format!("field{i}")).collect();
    for name in &names {
        schema = schema.column(name, ColumnType::Bytes);
    }
    let table = db.create_table("usertable", schema.primary_key(&["ycsb_key"]))?;
    let rows = config.ycsb_rows;
    let load_seconds = load(&db, table, rows, |key, row| {
        row.push(Value::U64(key));
        for c in 1..=YCSB_FIELDS {
            row.push(Value::Bytes(initial_field(key, c)));
        }
    })?;

    let keys = ScrambledZipfian::new(rows, config.theta);
    let mut rng = SplitMix64::new(config.seed);
    let mut checks = Checks::default();
    let mut sample = Vec::new();
    let mut ops: Vec<Op> = Vec::with_capacity(config.ycsb_ops);
    let mut chosen: Vec<u64> = Vec::with_capacity(config.ycsb_ops);
    let mut prefetch_keys: Vec<[Value; 1]> = Vec::with_capacity(config.ycsb_ops);
    // One reusable change: the engine copies it, the benchmark allocates nothing per op.
    let mut change = [(1usize, Value::Bytes(vec![0; YCSB_FIELD_BYTES]))];
    let mut sink = 0u64;
    let mut last: Option<(u64, usize, u64)> = None;
    let n_ops = config.ycsb_ops.min(rows as usize);
    let (warmup, runs) = measure(config, CLOCK_EVERY / 16, || {
        // The query, drawn once: a retry runs the same keys (as DBx1000 does).
        ops.clear();
        chosen.clear();
        while ops.len() < n_ops {
            let key = keys.next(&mut rng);
            if chosen.contains(&key) {
                continue; // DBx1000 draws distinct keys per transaction
            }
            note_key(&mut checks, &mut sample, key, rows);
            chosen.push(key);
            if rng.next_f64() < config.ycsb_read_ratio {
                ops.push(Op::Read(key));
            } else {
                let column = 1 + rng.below(YCSB_FIELDS as u64) as usize;
                ops.push(Op::Update(key, column, rng.next_u64()));
            }
        }
        if prefetch {
            prefetch_keys.clear();
            prefetch_keys.extend(chosen.iter().map(|&key| [Value::U64(key)]));
        }
        let mut reads = 0;
        let mut found = 0;
        let mut wrong = 0;
        let mut touched = 0;
        let mut updates = 0;
        let mut applied = 0;
        let aborts = with_retry(|| {
            (reads, found, wrong, touched, updates, applied) = (0, 0, 0, 0, 0, 0);
            let mut txn = db.begin(config.isolation);
            if prefetch {
                txn.prefetch(table, &prefetch_keys)?;
                checks.keys_prefetched += prefetch_keys.len() as u64;
            }
            for op in &ops {
                match *op {
                    Op::Read(key) => {
                        reads += 1;
                        let got = txn.get_view(table, &[Value::U64(key)], |row| {
                            // Touch every column of the row.
                            let mut acc = 0u64;
                            let mut seen = 0u64;
                            for v in row.iter() {
                                match v {
                                    ValueRef::U64(k) => acc = acc.wrapping_add(k),
                                    ValueRef::Bytes(b) => {
                                        acc = acc.wrapping_add(
                                            u64::from(b[0]) + u64::from(b[b.len() - 1]),
                                        )
                                    }
                                    _ => {}
                                }
                                seen += 1;
                            }
                            (row.get(0).as_u64(), seen, acc)
                        })?;
                        match got {
                            Some((Some(k), seen, acc)) if k == key => {
                                found += 1;
                                touched += seen;
                                sink = sink.wrapping_add(acc);
                            }
                            Some(_) => wrong += 1,
                            None => {}
                        }
                    }
                    Op::Update(key, column, seed) => {
                        updates += 1;
                        change[0].0 = column;
                        if let Value::Bytes(bytes) = &mut change[0].1 {
                            fill_field(bytes, seed);
                        }
                        applied += u64::from(txn.update(table, &[Value::U64(key)], &change)?);
                    }
                }
            }
            txn.commit()
        })?;
        checks.reads += reads;
        checks.reads_found += found;
        checks.reads_wrong_row += wrong;
        checks.values_touched += touched;
        checks.updates += updates;
        checks.updates_applied += applied;
        if let Some(&Op::Update(key, column, seed)) =
            ops.iter().rev().find(|op| matches!(op, Op::Update(..)))
        {
            last = Some((key, column, seed));
        }
        Ok(aborts)
    })?;
    black_box(sink);
    checks.distinct_keys_in_sample = distinct(&mut sample);
    checks.ops_per_commit = ops_per_commit(&checks, &warmup, &runs);
    checks.last_update_visible = match last {
        None => true,
        Some((key, column, seed)) => {
            let mut expected = vec![0; YCSB_FIELD_BYTES];
            fill_field(&mut expected, seed);
            let txn = db.begin(Isolation::Snapshot);
            let seen = txn.get_view(table, &[Value::U64(key)], |row| {
                row.get(column).as_bytes() == Some(&expected[..])
            })?;
            txn.commit()?;
            seen == Some(true)
        }
    };
    Ok(BenchResult {
        bench: if prefetch {
            Bench::YcsbPrefetch
        } else {
            Bench::Ycsb
        },
        design: design(&db, config),
        rows,
        load_seconds,
        warmup,
        runs,
        checks,
    })
}

/// The engine's design and the isolation level the benchmark ran at.
fn design(db: &Database, config: &Config) -> String {
    format!("{} at {:?}", db.design(), config.isolation)
}

fn ops_per_commit(checks: &Checks, warmup: &RunStats, runs: &[RunStats]) -> f64 {
    let commits = warmup.commits + runs.iter().map(|r| r.commits).sum::<u64>();
    if commits == 0 {
        0.0
    } else {
        (checks.reads + checks.updates) as f64 / commits as f64
    }
}
