//! Runs the tiny mode of every benchmark through the library and checks that each one ran
//! the work it names: transactions committed, reads found the rows they asked for, updates
//! applied, keys in range. A benchmark that measures something else is a defect.

use verso::GarbageCollector;
use verso_bench::core::{self, Bench, BenchResult, Config, YCSB_FIELDS};
use verso_bench::zipf::ScrambledZipfian;
use verso_bench::{report_json, report_table, validate};

/// The tiny mode under `gc`, on the version storage it needs if it needs one ('coop':
/// append-o2n), else the default.
fn run_tiny(bench: Bench, gc: GarbageCollector) -> (Config, BenchResult) {
    let config = Config {
        gc,
        storage: gc.required_storage().unwrap_or_default(),
        ..Config::tiny()
    };
    let result = core::run(bench, &config).unwrap_or_else(|e| panic!("{bench:?}: {e}"));
    (config, result)
}

fn assert_common(config: &Config, r: &BenchResult) {
    let what = format!("{} / {}", r.bench.name(), r.design);
    assert!(
        r.design.contains(config.gc.name()),
        "{what}: design does not name the collector {}",
        config.gc.name()
    );
    assert_eq!(r.rows, config.rows_for(r.bench), "{what}: rows");
    assert_eq!(r.runs.len(), config.runs, "{what}: runs");
    assert!(r.load_seconds > 0.0, "{what}: load time");
    for run in &r.runs {
        assert!(run.commits > 0, "{what}: a run committed nothing");
        assert!(run.seconds >= config.seconds, "{what}: a run was cut short");
        assert!(run.commits_per_second() > 0.0);
    }
    let (median, min, max) = r.summary();
    assert!(
        min > 0.0 && min <= median && median <= max,
        "{what}: summary"
    );
    let c = &r.checks;
    assert!(c.keys_drawn > 0, "{what}: no keys drawn");
    assert_eq!(c.keys_out_of_range, 0, "{what}: keys out of range");
    assert!(c.max_key < r.rows, "{what}: max key {}", c.max_key);
    assert_eq!(c.reads_wrong_row, 0, "{what}: reads found the wrong row");
    assert_eq!(c.reads_found, c.reads, "{what}: reads missed their row");
    assert_eq!(c.updates_applied, c.updates, "{what}: updates not applied");
    assert!(c.last_update_visible, "{what}: last update not visible");
    let problems = validate(r, config);
    assert!(problems.is_empty(), "{what}: {problems:?}");
}

#[test]
fn point_read_reads_one_row_per_transaction() {
    for gc in GarbageCollector::ALL {
        let (config, r) = run_tiny(Bench::PointRead, gc);
        assert_common(&config, &r);
        let c = &r.checks;
        let commits = r.warmup.commits + r.commits();
        assert_eq!(c.reads, commits, "one read per transaction");
        assert_eq!(c.reads_found, commits, "every read found its row");
        assert_eq!(c.updates, 0, "a read-only benchmark updated");
        assert_eq!(c.values_touched, 4 * c.reads, "reads touch the whole row");
        assert_eq!(r.aborts(), 0);
        // Uniform keys: d draws over n rows hit about n (1 - e^(-d/n)) distinct rows.
        let draws = c.keys_drawn.min(65_536) as f64;
        let rows = r.rows as f64;
        let expected = rows * (1.0 - (-draws / rows).exp());
        assert!(
            c.distinct_keys_in_sample as f64 > 0.9 * expected,
            "{} distinct keys in {draws} uniform draws, expected about {expected:.0}",
            c.distinct_keys_in_sample
        );
    }
}

#[test]
fn update_updates_one_row_per_transaction() {
    for gc in GarbageCollector::ALL {
        let (config, r) = run_tiny(Bench::Update, gc);
        assert_common(&config, &r);
        let c = &r.checks;
        let commits = r.warmup.commits + r.commits();
        assert_eq!(c.updates, commits, "one update per transaction");
        assert_eq!(c.updates_applied, commits, "every update returned Ok(true)");
        assert_eq!(c.reads, 0);
        // One thread: nobody to conflict with.
        assert_eq!(r.aborts(), 0);
    }
}

#[test]
fn ycsb_runs_sixteen_operations_of_ninety_percent_reads() {
    for gc in GarbageCollector::ALL {
        let (config, r) = run_tiny(Bench::Ycsb, gc);
        assert_eq!(r.checks.keys_prefetched, 0, "plain YCSB prefetches nothing");
        assert_ycsb(&config, &r);
    }
}

/// The prefetching variant runs the same transactions, and hands every attempt's keys to
/// the hint first.
#[test]
fn ycsb_prefetch_runs_the_same_transactions_and_prefetches_their_keys() {
    for gc in GarbageCollector::ALL {
        let (config, r) = run_tiny(Bench::YcsbPrefetch, gc);
        assert_eq!(r.bench, Bench::YcsbPrefetch);
        let attempts = r.warmup.commits + r.commits() + r.warmup.aborts + r.aborts();
        assert_eq!(r.checks.keys_prefetched, 16 * attempts);
        assert_ycsb(&config, &r);
    }
}

fn assert_ycsb(config: &Config, r: &BenchResult) {
    assert_common(config, r);
    let c = &r.checks;
    let commits = r.warmup.commits + r.commits();
    assert_eq!(config.ycsb_ops, 16);
    assert_eq!(
        c.reads + c.updates,
        16 * commits,
        "16 operations per transaction"
    );
    assert!((c.ops_per_commit - 16.0).abs() < 1e-9);
    assert!(c.updates > 0 && c.updates_applied == c.updates);
    let read_share = c.reads as f64 / (c.reads + c.updates) as f64;
    assert!(
        (read_share - 0.9).abs() < 0.05,
        "read share {read_share}, expected 0.9"
    );
    assert_eq!(
        c.values_touched,
        c.reads * (1 + YCSB_FIELDS as u64),
        "reads touch the key and all ten fields"
    );
    // Keys are drawn once per operation (a retry reuses them).
    assert_eq!(c.keys_drawn, c.reads + c.updates);
    // Zipf(0.6) over 10,000 rows is mildly skewed: many distinct keys, but fewer than
    // draws once the draws outnumber the rows.
    let draws = c.keys_drawn.min(65_536);
    assert!(
        c.distinct_keys_in_sample > draws.min(r.rows) / 10,
        "only {} distinct keys in {draws} draws",
        c.distinct_keys_in_sample
    );
    assert!(c.distinct_keys_in_sample <= draws.min(r.rows));
}

#[test]
fn ycsb_generator_is_what_the_benchmark_uses() {
    let config = Config::tiny();
    let generator = ScrambledZipfian::new(config.ycsb_rows, config.theta);
    assert_eq!(generator.items(), config.ycsb_rows);
    assert_eq!(generator.ranks().theta(), 0.6);
    let mut rng = verso_bench::rng::SplitMix64::new(config.seed);
    for _ in 0..100_000 {
        assert!(generator.next(&mut rng) < config.ycsb_rows);
    }
}

#[test]
fn reports_name_every_benchmark() {
    let config = Config {
        seconds: 0.01,
        warmup_seconds: 0.0,
        ..Config::tiny()
    };
    let results: Vec<BenchResult> = Bench::ALL
        .into_iter()
        .map(|b| core::run(b, &config).unwrap())
        .collect();
    let table = report_table(&results);
    let json = report_json(&results);
    for b in Bench::ALL {
        assert!(table.contains(&format!("| {} |", b.name())), "{table}");
        assert!(
            json.contains(&format!("\"bench\": \"{}\"", b.name())),
            "{json}"
        );
    }
    assert!(table.contains("delta/steam/"), "{table}");
}

/// Every benchmark runs on every version storage too, doing the work it names.
#[test]
fn every_benchmark_runs_on_every_version_storage() {
    for storage in verso::VersionStorageKind::ALL {
        for bench in Bench::ALL {
            let config = Config {
                storage,
                ..Config::tiny()
            };
            let r = core::run(bench, &config).unwrap_or_else(|e| panic!("{bench:?}: {e}"));
            assert!(
                r.design.starts_with(&format!("{}/", storage.name())),
                "{}",
                r.design
            );
            assert_common(&config, &r);
        }
    }
}

#[test]
fn pages_runs_the_tree_through_a_pool_smaller_than_its_data() {
    use verso_bench::pages::{self, PagesConfig};
    let dir = std::env::temp_dir().join(format!("verso-pages-tiny-{}", std::process::id()));
    let mut config = PagesConfig::tiny(dir.clone());
    config.logs = vec![None, Some(verso::Durability::None)];
    let runs = pages::run(&config).unwrap();
    assert_eq!(
        runs.len(),
        config.logs.len() * config.policies.len() * config.threads.len()
    );
    for run in &runs {
        assert!(run.operations > 0 && run.lookups > 0, "{run:?}");
        assert_eq!(
            run.lookups_found, run.lookups,
            "lookups missed their entries"
        );
        assert_eq!(run.operations, run.lookups + run.overwrites);
        // 5,000 entries of 100 bytes are about 70 leaves: 16 frames must evict and read.
        assert!(
            run.pool.evictions > 0 && run.pool.pages_read > 0,
            "{:?}",
            run.pool
        );
        assert!(run.pool.hit_ratio() > 0.0 && run.pool.hit_ratio() < 1.0);
        // A logged run logs every overwrite; an unlogged one nothing.
        match run.log {
            None => assert_eq!(run.logged.records, 0),
            Some(_) => assert!(
                run.logged.records >= run.overwrites && run.logged.full_page_images > 0,
                "{:?}",
                run.logged
            ),
        }
    }
    let table = pages::report(&config, &runs);
    assert!(
        table.contains("| off | clock | 1 |") && table.contains("| none | lru2 | 2 |"),
        "{table}"
    );
    // The tree's file is removed.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir(&dir).unwrap();
}
