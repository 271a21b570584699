//! `cargo run --release -p verso-index-bench -- [--full]`: prints a Markdown table of medians.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::Parser;
use verso_index_bench::bench::{ConfigResult, Sizes, Workload};
use verso_index_bench::keys::{InlineKey, Shape};
use verso_index_bench::{candidates, Candidate, KEY_IDS, MAP_IDS};

/// Concurrent ordered-map benchmark for Verso's indexes.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Full measurement: 2,000,000 keys, 3 runs, plus the insert-if-absent race check.
    /// Without it: tiny mode (10,000 keys, 1 run, verifying scans).
    #[arg(long)]
    full: bool,
    /// Number of runs per configuration (default: 3 with --full, 1 otherwise).
    #[arg(long)]
    runs: Option<usize>,
    /// Override the number of loaded keys.
    #[arg(long)]
    keys: Option<u64>,
    /// Maps to measure.
    #[arg(long, value_delimiter = ',', default_values_t = MAP_IDS.map(String::from))]
    maps: Vec<String>,
    /// Key representations to measure.
    #[arg(long, value_delimiter = ',', default_values_t = KEY_IDS.map(String::from))]
    key_reprs: Vec<String>,
    /// Key shapes to measure, in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = vec![8, 16, 24])]
    shapes: Vec<usize>,
    /// Before each run wait up to this many seconds for other processes to leave the CPUs
    /// (default: 30 with --full, 0 otherwise).
    #[arg(long)]
    quiet_wait: Option<u64>,
    /// Skip the insert-if-absent race check.
    #[arg(long)]
    no_race: bool,
    /// Also write the report to this file.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    for m in &args.maps {
        if !MAP_IDS.contains(&m.as_str()) {
            eprintln!("unknown map {m:?}; expected one of {MAP_IDS:?}");
            return ExitCode::FAILURE;
        }
    }
    for k in &args.key_reprs {
        if !KEY_IDS.contains(&k.as_str()) {
            eprintln!("unknown key representation {k:?}; expected one of {KEY_IDS:?}");
            return ExitCode::FAILURE;
        }
    }
    let mut shapes = Vec::new();
    for &b in &args.shapes {
        match Shape::from_bytes(b) {
            Some(s) => shapes.push(s),
            None => {
                eprintln!("unknown shape {b}; expected 8, 16 or 24");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut sizes = if args.full {
        Sizes::full()
    } else {
        Sizes::tiny()
    };
    if let Some(k) = args.keys {
        sizes.keys = k.max(1000);
    }
    if let Some(w) = args.quiet_wait {
        sizes.quiet_wait_secs = w;
    }
    let runs = args.runs.unwrap_or(if args.full { 3 } else { 1 }).max(1);
    let verify = !args.full;
    let selected: Vec<Candidate> = candidates()
        .into_iter()
        .filter(|c| {
            args.maps.iter().any(|m| m == c.map_id)
                && args.key_reprs.iter().any(|k| k == c.key_id)
                && shapes.contains(&c.shape)
        })
        .collect();

    let mut failed = false;
    let mut results = Vec::new();
    for c in &selected {
        eprintln!(
            "measuring {} / {} / {}-byte keys",
            c.map,
            c.key,
            c.shape.bytes()
        );
        if verify {
            if let Err(e) = (c.verify)(c.shape, sizes.keys.min(3_000)) {
                eprintln!("VERIFY FAILED: {e}");
                failed = true;
            }
        }
        let r = (c.run)(c.shape, &sizes, runs, verify);
        if r.errors != 0 {
            eprintln!("  {} wrong answers during the run", r.errors);
            failed = true;
        }
        eprint!("cpu  {}wall {}", row(&r, runs, true), row(&r, runs, false));
        results.push(r);
    }

    let mut races = Vec::new();
    if !args.no_race {
        for c in &selected {
            eprintln!(
                "race check {} / {} / {}-byte keys",
                c.map,
                c.key,
                c.shape.bytes()
            );
            races.push((c, (c.race)(c.shape, sizes.race_keys)));
        }
    }

    let report = render(&sizes, runs, &results, &races);
    print!("{report}");
    if let Some(path) = &args.out {
        if let Err(e) = std::fs::write(path, &report) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn render(
    sizes: &Sizes,
    runs: usize,
    results: &[ConfigResult],
    races: &[(&Candidate, verso_index_bench::bench::RaceResult)],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} keys loaded in random order; per thread: {} gets, {} inserts, {} scans of {} \
         entries, {} mixed ops; {} run(s), median (min-max).",
        sizes.keys,
        sizes.get_ops,
        sizes.insert_ops,
        sizes.scan_ops,
        sizes.scan_len,
        sizes.mixed_ops,
        runs
    );
    let _ = writeln!(
        s,
        "Million ops/s, except scans: thousand {}-entry scans/s. size_of::<InlineKey>() = {}. \
         'other CPU': cores used by other processes during the runs, mean / worst run (of 2).\n",
        sizes.scan_len,
        std::mem::size_of::<InlineKey>()
    );
    let mut header = "| map | key | bytes |".to_string();
    let mut rule = "|---|---|---|".to_string();
    for w in Workload::ALL {
        let _ = write!(header, " {} |", w.label());
        rule.push_str("---|");
    }
    header.push_str(" other CPU |");
    rule.push_str("---|");
    for (cpu, title) in [
        (
            true,
            "CPU-time rates: per thread, ops / thread CPU seconds, summed over threads",
        ),
        (false, "Wall-clock rates: ops / wall seconds"),
    ] {
        let _ = writeln!(s, "### {title}\n\n{header}\n{rule}");
        for r in results {
            s.push_str(&row(r, runs, cpu));
        }
        s.push('\n');
    }
    let errors: u64 = results.iter().map(|r| r.errors).sum();
    let _ = writeln!(s, "\nWrong answers during measured runs: {errors}.");
    if let Some(r) = results.first() {
        let _ = writeln!(
            s,
            "Mean entries per scan (first row): {:.1}.",
            r.mean_scan_len
        );
    }
    if !races.is_empty() {
        let _ = writeln!(
            s,
            "\nInsert-if-absent race: 2 threads insert the same {} fresh keys in the same order.\n",
            sizes.race_keys
        );
        let _ = writeln!(
            s,
            "| map | key | bytes | both told inserted | neither | wrong final value |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for (c, r) in races {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                c.map,
                c.key,
                c.shape.bytes(),
                r.double_wins,
                r.no_wins,
                r.wrong_final
            );
        }
    }
    s
}

/// One Markdown table row: median (min-max) per workload, then the foreign CPU load.
fn row(r: &ConfigResult, runs: usize, cpu: bool) -> String {
    let mut s = format!("| {} | {} | {} |", r.map, r.key, r.shape.bytes());
    for w in Workload::ALL {
        match r.summary(w, cpu) {
            Some((med, lo, hi)) if runs > 1 => {
                let _ = write!(s, " {} ({}-{}) |", fmt(med), fmt(lo), fmt(hi));
            }
            Some((med, _, _)) => {
                let _ = write!(s, " {} |", fmt(med));
            }
            None => s.push_str(" - |"),
        }
    }
    match r.foreign_cores {
        Some((mean, worst)) => {
            let _ = writeln!(s, " {mean:.2} / {worst:.2} |");
        }
        None => s.push_str(" ? |\n"),
    }
    s
}

fn fmt(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}
