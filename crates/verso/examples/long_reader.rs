//! Verso's promise in one program: a long analytical reader beside a busy writer, run once
//! on Steam's collector (the default) and once on watermark-only (HyPer's, which prunes only
//! below the oldest snapshot). Every second it prints the writer's throughput, the live
//! version records and the longest version chains met; at the end a summary of both runs
//! and what differed.
//!
//! `cargo run --release --example long_reader -- [seconds per collector, default 5]`
//!
//! The reader holds one snapshot for the whole run and scans every account again and
//! again (the balances it sums never move: it reads its snapshot). The writer moves money
//! between a hundred hot accounts. Behind the long reader, watermark-only keeps every
//! version the writer makes; Steam prunes the ones no snapshot can see the moment it next
//! writes the row, so its chains stay a few records long.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use verso::{ColumnType, Database, GarbageCollector, IntoRow, Isolation, Options, Schema, Value};

const ROWS: u64 = 10_000;
const HOT_ROWS: u64 = 100;
const INITIAL_BALANCE: i64 = 1_000;
/// The two collectors compared: the default, and the one most engines behave like.
const COLLECTORS: [GarbageCollector; 2] =
    [GarbageCollector::Steam, GarbageCollector::WatermarkOnly];

/// What one run measured.
#[derive(Debug)]
struct Summary {
    gc: GarbageCollector,
    commits_per_s: f64,
    /// The longest version chain the collector or a reader met.
    max_chain: u64,
    peak_live_versions: u64,
    peak_live_bytes: u64,
    /// Whole scans the long reader finished, and their mean time.
    scans: u64,
    scan_ms_mean: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = match std::env::args().nth(1) {
        None => 5,
        Some(arg) => arg
            .parse()
            .map_err(|_| format!("the argument is seconds per collector, not {arg:?}"))?,
    };
    let mut out = std::io::stdout().lock();
    compare(
        Duration::from_secs(seconds),
        Duration::from_secs(1),
        &mut out,
    )?;
    Ok(())
}

/// Runs the long reader and the writer for `run_for` on each collector, printing a line
/// every `sample_every`, then the summary and the conclusion.
fn compare(
    run_for: Duration,
    sample_every: Duration,
    out: &mut impl Write,
) -> Result<[Summary; 2], Box<dyn std::error::Error>> {
    writeln!(
        out,
        "A long reader holds one snapshot and scans {ROWS} accounts again and again, while a \
         writer moves money between {HOT_ROWS} hot accounts.\n"
    )?;
    let steam = run(COLLECTORS[0], run_for, sample_every, out)?;
    let watermark = run(COLLECTORS[1], run_for, sample_every, out)?;
    writeln!(out, "\nsummary")?;
    writeln!(
        out,
        "{:<10} {:>12} {:>10} {:>14} {:>14} {:>7} {:>10}",
        "collector", "commits/s", "max chain", "peak versions", "peak bytes", "scans", "scan ms"
    )?;
    for s in [&steam, &watermark] {
        writeln!(
            out,
            "{:<10} {:>12.0} {:>10} {:>14} {:>14} {:>7} {:>10.1}",
            s.gc.name(),
            s.commits_per_s,
            s.max_chain,
            s.peak_live_versions,
            s.peak_live_bytes,
            s.scans,
            s.scan_ms_mean
        )?;
    }
    writeln!(out, "\n{}", conclusion(&steam, &watermark))?;
    Ok([steam, watermark])
}

/// What the two runs show, in a sentence, from what they measured.
fn conclusion(steam: &Summary, watermark: &Summary) -> String {
    let throughput = steam.commits_per_s / watermark.commits_per_s.max(1.0);
    format!(
        "Behind the same long reader, Steam kept chains at {} records and at most {} live \
         versions; watermark-only let them grow to {} and {}. The writer ran {throughput:.1}x \
         as fast with Steam.",
        steam.max_chain,
        steam.peak_live_versions,
        watermark.max_chain,
        watermark.peak_live_versions,
    )
}

fn run(
    gc: GarbageCollector,
    run_for: Duration,
    sample_every: Duration,
    out: &mut impl Write,
) -> Result<Summary, Box<dyn std::error::Error>> {
    let db = Database::open(Options::default().garbage_collector(gc))?;
    let accounts = db.create_table(
        "accounts",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("balance", ColumnType::I64)
            .column("owner", ColumnType::Text)
            .primary_key(&["id"]),
    )?;
    db.run(Isolation::Snapshot, |load| {
        for id in 0..ROWS {
            load.insert(
                accounts,
                &(id, INITIAL_BALANCE, format!("owner-{id}")).into_row(),
            )?;
        }
        Ok(())
    })?;
    writeln!(out, "== {} ({})", gc.name(), db.design())?;
    writeln!(
        out,
        "{:>6} {:>12} {:>14} {:>14} {:>16} {:>16}",
        "s", "commits/s", "live versions", "live bytes", "max chain (GC)", "max chain (read)"
    )?;

    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let mut max_chain = 0;
    let (mut peak_versions, mut peak_bytes) = (0, 0);
    let (scans, scan_time) = std::thread::scope(|scope| -> verso::Result<(u64, Duration)> {
        // Each thread begins its own transactions: a transaction belongs to the thread
        // that began it.
        let reader = scope.spawn(|| -> verso::Result<(u64, Duration)> {
            let long = db.begin_read_only(Isolation::Snapshot);
            let (mut scans, mut spent) = (0, Duration::ZERO);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let mut total = 0;
                for row in long.scan(accounts, ..)? {
                    total += row?.get::<i64>("balance")?;
                }
                spent += t.elapsed();
                scans += 1;
                assert_eq!(
                    total,
                    INITIAL_BALANCE * ROWS as i64,
                    "the snapshot's sum moved"
                );
            }
            long.commit()?;
            Ok((scans, spent))
        });
        let writer = scope.spawn(|| -> verso::Result<()> {
            let mut rng = 0x9E37_79B9_7F4A_7C15u64;
            while !stop.load(Ordering::Relaxed) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let (from, to) = (rng % HOT_ROWS, (rng >> 32) % HOT_ROWS);
                if from == to {
                    continue;
                }
                db.run(Isolation::Snapshot, |txn| {
                    let balance = |txn: &verso::Transaction<'_>, id: u64| -> verso::Result<i64> {
                        let row = txn.get_row(accounts, &[Value::U64(id)])?;
                        row.map_or(Ok(0), |row| row.get("balance"))
                    };
                    let (a, b) = (balance(txn, from)?, balance(txn, to)?);
                    txn.update(accounts, &[Value::U64(from)], &[(1, Value::I64(a - 1))])?;
                    txn.update(accounts, &[Value::U64(to)], &[(1, Value::I64(b + 1))])?;
                    Ok(())
                })?;
            }
            Ok(())
        });
        let mut previous = db.stats();
        let mut sampled = Duration::ZERO;
        while sampled < run_for {
            std::thread::sleep(sample_every);
            sampled += sample_every;
            let now = db.stats();
            max_chain = max_chain
                .max(now.gc_chain_lengths.max)
                .max(now.read_chain_lengths.max);
            peak_versions = peak_versions.max(now.live_versions());
            peak_bytes = peak_bytes.max(now.live_version_bytes());
            let rate = (now.commits - previous.commits) as f64 / sample_every.as_secs_f64();
            let _ = writeln!(
                out,
                "{:>6.1} {:>12.0} {:>14} {:>14} {:>16} {:>16}",
                sampled.as_secs_f64(),
                rate,
                now.live_versions(),
                now.live_version_bytes(),
                now.gc_chain_lengths.max,
                now.read_chain_lengths.max
            );
            previous = now;
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().expect("the writer thread")?;
        reader.join().expect("the reader thread")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The example compares exactly the two collectors its header names and prints its
    /// conclusion (it used to run all ten collectors, so the two-run conclusion never
    /// printed). A short run, as the test suite runs it.
    #[test]
    fn regression_the_example_compares_steam_with_watermark_only_and_concludes() {
        let mut out = Vec::new();
        let [steam, watermark] = compare(
            Duration::from_millis(600),
            Duration::from_millis(200),
            &mut out,
        )
        .expect("the example runs");
        let text = String::from_utf8(out).expect("text");
        assert_eq!(
            (steam.gc, watermark.gc),
            (GarbageCollector::Steam, GarbageCollector::WatermarkOnly)
        );
        assert_eq!(text.matches("== ").count(), 2, "two runs:\n{text}");
        assert!(
            text.trim_end().ends_with(&conclusion(&steam, &watermark)),
            "the conclusion closes the output:\n{text}"
        );
        for run in [&steam, &watermark] {
            assert!(run.scans > 0 && run.commits_per_s > 0.0, "{run:?}");
        }
    }
}
