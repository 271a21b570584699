//! `verso-bench pages`: the disk engine's B+-tree through its buffer pool, with the data
//! larger than the pool: Zipf-skewed point lookups and value overwrites on 1..N threads,
//! under each eviction policy, rounds alternated so every configuration meets the same
//! phases of the machine.
//!
//! It measures operations per second of the tree and the pool together (latch coupling,
//! pins, the page table's lock, evictions, page checksums), and the pool's hit ratio and
//! page traffic. With `--log none` or `--log sync` the tree logs every change in the page
//! log (one log for every logged run, checkpointed at the end of each, so every page's
//! first change in a run is a full image, as after a checkpoint); under `sync` a dirty
//! page's eviction waits for the log's fsync, the write-ahead rule's cost with no commit
//! syncing the log for it. The file is on the real file system through the operating system's page
//! cache (no direct I/O), so a miss costs a copy from the cache, not a device read: it
//! measures the engine's CPU path of a miss, not a disk.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verso::disk::{
    BTree, BufferPool, BufferPoolStats, FileNo, PageLog, PageLogStats, ReplacementPolicy, Unlogged,
    WriteAheadLog,
};
use verso::fs::{FileSystem, OpenMode, RealFileSystem};
use verso::Durability;
use verso_lab::rng::SplitMix64;
use verso_lab::zipf::ScrambledZipfian;

/// What `verso-bench pages` runs.
#[derive(Clone, Debug)]
pub struct PagesConfig {
    /// Entries in the tree (keys `0..entries`, 8 bytes big-endian).
    pub entries: u64,
    /// Bytes of each value.
    pub value_bytes: usize,
    /// Frames of the pool in each run.
    pub pool_pages: usize,
    /// Worker threads, one run each per round.
    pub threads: Vec<usize>,
    /// Eviction policies, one run each per round.
    pub policies: Vec<ReplacementPolicy>,
    /// Logging of the tree's changes, one run each per round: `None` unlogged, else the
    /// page log at that durability.
    pub logs: Vec<Option<Durability>>,
    /// Seconds per run.
    pub seconds: f64,
    /// Rounds (each runs every policy × thread count once).
    pub rounds: usize,
    /// Zipf skew of the keys.
    pub theta: f64,
    /// Share of operations that overwrite the value (the rest look it up).
    pub write_share: f64,
    /// Seed of the workload.
    pub seed: u64,
    /// Where the tree's file is made (removed afterwards).
    pub dir: PathBuf,
}

impl PagesConfig {
    /// The on-demand size: about 10× more data than the pool.
    pub fn full(dir: PathBuf) -> Self {
        PagesConfig {
            entries: 1_000_000,
            value_bytes: 100,
            pool_pages: 2_000,
            threads: vec![1, 2],
            policies: vec![ReplacementPolicy::Clock, ReplacementPolicy::Lru2],
            logs: vec![None],
            seconds: 3.0,
            rounds: 5,
            theta: 0.9,
            write_share: 0.1,
            seed: 0x5EED,
            dir,
        }
    }

    /// A second's worth, for the tests.
    pub fn tiny(dir: PathBuf) -> Self {
        PagesConfig {
            entries: 5_000,
            pool_pages: 16,
            seconds: 0.05,
            rounds: 1,
            ..PagesConfig::full(dir)
        }
    }
}

/// One measured run.
#[derive(Clone, Debug)]
pub struct PagesRun {
    /// The eviction policy.
    pub policy: ReplacementPolicy,
    /// The page log's durability (`None`: unlogged).
    pub log: Option<Durability>,
    /// What the page log counted in the run (zeros when unlogged).
    pub logged: PageLogStats,
    /// Worker threads.
    pub threads: usize,
    /// Operations done.
    pub operations: u64,
    /// Lookups, and those that found their key with the value it must have.
    pub lookups: u64,
    /// Lookups that found the right entry.
    pub lookups_found: u64,
    /// Overwrites, each of an entry that existed.
    pub overwrites: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// The pool's counters for the run.
    pub pool: BufferPoolStats,
}

impl PagesRun {
    /// Operations per second.
    pub fn per_second(&self) -> f64 {
        self.operations as f64 / self.seconds.max(1e-9)
    }
}

fn value_for(key: u64, stamp: u64, bytes: usize) -> Vec<u8> {
    let mut value = vec![(stamp % 251) as u8; bytes.max(16)];
    value[..8].copy_from_slice(&key.to_be_bytes());
    value[8..16].copy_from_slice(&stamp.to_le_bytes());
    value
}

/// Opens the tree, unlogged, or logged in the page log in `log_dir` (recovered: the run
/// before checkpointed it, so there is nothing to redo). Pages carry LSNs of that log, so
/// every logged run uses the same one.
fn open_tree(
    path: &Path,
    frames: usize,
    policy: ReplacementPolicy,
    log: Option<(Durability, &Path)>,
) -> verso::Result<(BTree, Option<Arc<PageLog>>)> {
    let fs = RealFileSystem;
    let mode = if fs.exists(path).map_err(|e| io(path, e))? {
        OpenMode::ReadWrite
    } else {
        OpenMode::CreateNew
    };
    let file = fs.open(path, mode).map_err(|e| io(path, e))?;
    let page_log = match log {
        Some((durability, dir)) => {
            let recovering = PageLog::open(Arc::new(RealFileSystem), dir, durability, 64 << 20)?;
            let log = recovering.log();
            Some((log, recovering))
        }
        None => None,
    };
    let wal: Arc<dyn WriteAheadLog> = match &page_log {
        Some((log, _)) => Arc::clone(log) as Arc<dyn WriteAheadLog>,
        None => Arc::new(Unlogged),
    };
    let pool = Arc::new(BufferPool::new(frames, policy, wal));
    let number = FileNo(0);
    pool.attach(number, path, file)?;
    match page_log {
        Some((log, recovering)) => {
            recovering.redo(&pool)?;
            let tree = BTree::open_logged(pool, number, Arc::clone(&log))?;
            Ok((tree, Some(log)))
        }
        None => Ok((BTree::open(pool, number)?, None)),
    }
}

fn io(path: &Path, e: std::io::Error) -> verso::Error {
    verso::Error::Io {
        path: path.display().to_string(),
        operation: "opening the benchmark's tree",
        kind: e.kind(),
        message: e.to_string(),
    }
}

/// Loads the tree, then runs every round; removes the file at the end.
pub fn run(config: &PagesConfig) -> verso::Result<Vec<PagesRun>> {
    std::fs::create_dir_all(&config.dir).map_err(|e| io(&config.dir, e))?;
    let path = config
        .dir
        .join(format!("pages-bench-{}.tree", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let result = load_and_measure(config, &path);
    let _ = std::fs::remove_file(&path);
    result
}

fn load_and_measure(config: &PagesConfig, path: &Path) -> verso::Result<Vec<PagesRun>> {
    {
        let (tree, _) = open_tree(
            path,
            config.pool_pages.max(64),
            ReplacementPolicy::Clock,
            None,
        )?;
        for key in 0..config.entries {
            tree.insert(&key.to_be_bytes(), &value_for(key, 0, config.value_bytes))?;
        }
        tree.pool().flush()?;
    }
    let mut runs = Vec::new();
    let log_dir = path.with_extension("log");
    let _ = std::fs::remove_dir_all(&log_dir);
    let result = measure_rounds(config, path, &log_dir, &mut runs);
    let _ = std::fs::remove_dir_all(&log_dir);
    result.map(|()| runs)
}

fn measure_rounds(
    config: &PagesConfig,
    path: &Path,
    log_dir: &Path,
    runs: &mut Vec<PagesRun>,
) -> verso::Result<()> {
    for round in 0..config.rounds {
        for &log in &config.logs {
            for &policy in &config.policies {
                for &threads in &config.threads {
                    let (tree, page_log) = open_tree(
                        path,
                        config.pool_pages,
                        policy,
                        log.map(|durability| (durability, log_dir)),
                    )?;
                    let mut run = measure(config, &tree, policy, threads, round as u64)?;
                    run.log = log;
                    match &page_log {
                        Some(page_log) => {
                            run.logged = page_log.stats();
                            page_log.checkpoint(tree.pool())?;
                            page_log.close();
                        }
                        None => drop(tree.pool().flush()?),
                    }
                    runs.push(run);
                }
            }
        }
    }
    Ok(())
}

fn measure(
    config: &PagesConfig,
    tree: &BTree,
    policy: ReplacementPolicy,
    threads: usize,
    round: u64,
) -> verso::Result<PagesRun> {
    let keys = ScrambledZipfian::new(config.entries, config.theta);
    let stop = AtomicBool::new(false);
    let before = tree.pool().stats();
    let start = Instant::now();
    let per_thread: Vec<verso::Result<(u64, u64, u64)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (keys, stop, tree) = (&keys, &stop, tree.clone());
                scope.spawn(move || -> verso::Result<(u64, u64, u64)> {
                    let mut rng = SplitMix64::new(config.seed ^ (round << 32) ^ t as u64);
                    let (mut lookups, mut found, mut overwrites) = (0u64, 0u64, 0u64);
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let key = keys.next(&mut rng);
                        if rng.next_f64() < config.write_share {
                            n += 1;
                            let stamp = (t as u64) << 40 | n;
                            let old = tree.insert(
                                &key.to_be_bytes(),
                                &value_for(key, stamp, config.value_bytes),
                            )?;
                            assert!(old.is_some(), "overwrote key {key}, which was missing");
                            overwrites += 1;
                        } else {
                            lookups += 1;
                            if let Some(value) = tree.get(&key.to_be_bytes())? {
                                found += u64::from(value[..8] == key.to_be_bytes());
                            }
                        }
                    }
                    Ok((lookups, found, overwrites))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(config.seconds));
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker panicked"))
            .collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let after = tree.pool().stats();
    let (mut lookups, mut found, mut overwrites) = (0, 0, 0);
    for result in per_thread {
        let (l, f, o) = result?;
        lookups += l;
        found += f;
        overwrites += o;
    }
    // The tree is still whole and holds every key once.
    let first = tree
        .range(Bound::Unbounded, Bound::Unbounded)
        .next()
        .transpose()?
        .map(|(k, _)| k);
    assert_eq!(first, Some(0u64.to_be_bytes().to_vec()));
    Ok(PagesRun {
        policy,
        log: None,
        logged: PageLogStats::default(),
        threads,
        operations: lookups + overwrites,
        lookups,
        lookups_found: found,
        overwrites,
        seconds,
        pool: difference(&after, &before),
    })
}

fn difference(after: &BufferPoolStats, before: &BufferPoolStats) -> BufferPoolStats {
    let mut d = *after;
    d.hits -= before.hits;
    d.misses -= before.misses;
    d.pages_read -= before.pages_read;
    d.pages_written -= before.pages_written;
    d.sequential_writes -= before.sequential_writes;
    d.eviction_writes -= before.eviction_writes;
    d.evictions -= before.evictions;
    d.pages_allocated -= before.pages_allocated;
    d.file_syncs -= before.file_syncs;
    d
}

/// The name of a policy as the command line spells it.
pub fn policy_name(policy: ReplacementPolicy) -> &'static str {
    match policy {
        ReplacementPolicy::Clock => "clock",
        ReplacementPolicy::Lru2 => "lru2",
        _ => "other",
    }
}

/// The name of a log setting as the command line spells it.
pub fn log_name(log: Option<Durability>) -> &'static str {
    match log {
        None => "off",
        Some(Durability::None) => "none",
        Some(Durability::Sync) => "sync",
        Some(_) => "async",
    }
}

/// A Markdown table: per log setting, policy and thread count, the median operations per
/// second over the rounds, its range, the hit ratio, page traffic per operation, and the
/// page log's bytes and full page images per overwrite.
pub fn report(config: &PagesConfig, runs: &[PagesRun]) -> String {
    let mut out = String::from(
        "| log | policy | threads | median ops/s | min–max ops/s | hit ratio | pages read/op | pages written/op | log bytes/write | page images/write | runs |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &log in &config.logs {
        for &policy in &config.policies {
            for &threads in &config.threads {
                let mine: Vec<&PagesRun> = runs
                    .iter()
                    .filter(|r| r.log == log && r.policy == policy && r.threads == threads)
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let mut rates: Vec<f64> = mine.iter().map(|r| r.per_second()).collect();
                rates.sort_by(f64::total_cmp);
                let median = rates[rates.len() / 2];
                let ops: u64 = mine.iter().map(|r| r.operations).sum::<u64>().max(1);
                let hits: u64 = mine.iter().map(|r| r.pool.hits).sum();
                let pins: u64 = mine
                    .iter()
                    .map(|r| r.pool.hits + r.pool.misses)
                    .sum::<u64>()
                    .max(1);
                let read: u64 = mine.iter().map(|r| r.pool.pages_read).sum();
                let written: u64 = mine.iter().map(|r| r.pool.pages_written).sum();
                let writes: u64 = mine.iter().map(|r| r.overwrites).sum::<u64>().max(1);
                let log_bytes: u64 = mine.iter().map(|r| r.logged.bytes).sum();
                let images: u64 = mine.iter().map(|r| r.logged.full_page_images).sum();
                out.push_str(&format!(
                "| {} | {} | {threads} | {} | {}–{} | {:.3} | {:.3} | {:.3} | {:.0} | {:.3} | {} |\n",
                log_name(log),
                policy_name(policy),
                crate::thousands(median),
                crate::thousands(rates[0]),
                crate::thousands(rates[rates.len() - 1]),
                hits as f64 / pins as f64,
                read as f64 / ops as f64,
                written as f64 / ops as f64,
                log_bytes as f64 / writes as f64,
                images as f64 / writes as f64,
                mine.len(),
            ));
            }
        }
    }
    out
}
