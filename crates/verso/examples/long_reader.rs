//! Verso's main job until the lab's HTAP demo exists: a long analytical reader beside a busy
//! writer, once on Steam's collector and once on watermark-only, printing every second the
//! writer's throughput, the live version records, and the chain lengths writers and readers
//! meet.
//!
//! `cargo run --release --example long_reader -- [seconds per collector, default 5]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use verso::{
    ColumnType, Database, GarbageCollector, Isolation, KeyRange, Options, Schema, Stats, Value,
};

const ROWS: u64 = 10_000;
const HOT_ROWS: u64 = 100;
const INITIAL_BALANCE: i64 = 1_000;

struct Summary {
    gc: GarbageCollector,
    commits_per_s: f64,
    max_chain: u64,
    peak_live_versions: u64,
    peak_live_bytes: u64,
    scans: u64,
    scan_ms_mean: f64,
}

fn main() -> Result<(), verso::Error> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    println!(
        "A long reader holds one snapshot and scans {ROWS} accounts again and again, while a \
         writer moves money between {HOT_ROWS} hot accounts.\n"
    );
    let mut summaries = Vec::new();
    for gc in GarbageCollector::ALL {
        summaries.push(run(gc, seconds)?);
    }
    println!("\nsummary");
    println!(
        "{:<10} {:>12} {:>10} {:>14} {:>14} {:>7} {:>10}",
        "collector", "commits/s", "max chain", "peak versions", "peak bytes", "scans", "scan ms"
    );
    for s in &summaries {
        println!(
            "{:<10} {:>12.0} {:>10} {:>14} {:>14} {:>7} {:>10.1}",
            s.gc.name(),
            s.commits_per_s,
            s.max_chain,
            s.peak_live_versions,
            s.peak_live_bytes,
            s.scans,
            s.scan_ms_mean
        );
    }
    if let [steam, watermark] = &summaries[..] {
        println!(
            "\nBehind the same long reader, Steam kept chains at {} records and at most {} live \
             versions; watermark-only let them grow to {} and {} ({:.1}x the writer \
             throughput with Steam).",
            steam.max_chain,
            steam.peak_live_versions,
            watermark.max_chain,
            watermark.peak_live_versions,
            steam.commits_per_s / watermark.commits_per_s.max(1.0)
        );
    }
    Ok(())
}

fn run(gc: GarbageCollector, seconds: u64) -> Result<Summary, verso::Error> {
    // 'coop' runs on the storage it needs; every other collector on the default.
    let db = Database::open(
        Options::default()
            .garbage_collector(gc)
            .version_storage(gc.required_storage().unwrap_or_default()),
    )?;
    let accounts = db.create_table(
        "accounts",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("balance", ColumnType::I64)
            .column("owner", ColumnType::Text)
            .primary_key(&["id"]),
    )?;
    let mut load = db.begin(Isolation::Snapshot);
    for id in 0..ROWS {
        load.insert(
            accounts,
            &[
                Value::U64(id),
                Value::I64(INITIAL_BALANCE),
                Value::Text(format!("owner-{id}")),
            ],
        )?;
    }
    load.commit()?;
    println!("== {} ({})", gc.name(), db.design());
    println!(
        "{:>4} {:>12} {:>14} {:>14} {:>16} {:>16}",
        "s", "commits/s", "live versions", "live bytes", "max chain (GC)", "max chain (read)"
    );

    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let mut max_chain = 0;
    let (mut peak_versions, mut peak_bytes) = (0, 0);
    let (scans, scan_time) =
        std::thread::scope(|scope| -> Result<(u64, Duration), verso::Error> {
            let reader = scope.spawn(|| -> Result<(u64, Duration), verso::Error> {
                let long = db.begin(Isolation::Snapshot);
                let (mut scans, mut spent) = (0, Duration::ZERO);
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let mut total = 0;
                    long.scan_with(accounts, KeyRange::new(..), |row| {
                        total += row[1].as_i64().unwrap_or(0);
                        true
                    })?;
                    spent += t.elapsed();
                    scans += 1;
                    assert_eq!(total, INITIAL_BALANCE * ROWS as i64, "snapshot sum moved");
                }
                long.commit()?;
                Ok((scans, spent))
            });
            let writer = scope.spawn(|| -> Result<(), verso::Error> {
                let mut rng = 0x9E37_79B9_7F4A_7C15u64;
                while !stop.load(Ordering::Relaxed) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let (from, to) = (rng % HOT_ROWS, (rng >> 32) % HOT_ROWS);
                    if from == to {
                        continue;
                    }
                    let mut txn = db.begin(Isolation::Snapshot);
                    let balance = |txn: &verso::Transaction<'_>, id| -> Result<i64, verso::Error> {
                        Ok(txn
                            .get_with(accounts, &[Value::U64(id)], |row| row[1].as_i64())?
                            .flatten()
                            .unwrap_or(0))
                    };
                    let (a, b) = (balance(&txn, from)?, balance(&txn, to)?);
                    txn.update(accounts, &[Value::U64(from)], &[(1, Value::I64(a - 1))])?;
                    txn.update(accounts, &[Value::U64(to)], &[(1, Value::I64(b + 1))])?;
                    txn.commit()?;
                }
                Ok(())
            });
            let mut previous: Stats = db.stats();
            for second in 1..=seconds {
                std::thread::sleep(Duration::from_secs(1));
                let now = db.stats();
                max_chain = max_chain
                    .max(now.gc_chain_lengths.max)
                    .max(now.read_chain_lengths.max);
                peak_versions = peak_versions.max(now.live_versions());
                peak_bytes = peak_bytes.max(now.live_version_bytes());
                println!(
                    "{:>4} {:>12} {:>14} {:>14} {:>16} {:>16}",
                    second,
                    now.commits - previous.commits,
                    now.live_versions(),
                    now.live_version_bytes(),
                    now.gc_chain_lengths.max,
                    now.read_chain_lengths.max
                );
                previous = now;
            }
            stop.store(true, Ordering::Relaxed);
            writer.join().expect("writer thread")?;
            reader.join().expect("reader thread")
        })?;
    let end = db.stats();
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Summary {
        gc,
        commits_per_s: end.commits as f64 / elapsed,
        max_chain,
        peak_live_versions: peak_versions,
        peak_live_bytes: peak_bytes,
        scans,
        scan_ms_mean: scan_time.as_secs_f64() * 1000.0 / scans.max(1) as f64,
    })
}
