//! The tiny mode of the YCSB benchmark at `Isolation::Serializable` (the comparison the
//! `--isolation both` flag makes): it runs, validates (one worker: nothing to conflict
//! with, so nothing fails validation), and names the isolation level in its design.

use verso::Isolation;
use verso_bench::core::{self, Bench, Config};
use verso_bench::validate;

#[test]
fn ycsb_runs_at_serializable_at_both_read_ratios() {
    for read_ratio in [0.9, 0.5] {
        let config = Config {
            isolation: Isolation::Serializable,
            ycsb_read_ratio: read_ratio,
            ..Config::tiny()
        };
        let result = core::run(Bench::Ycsb, &config).expect("tiny ycsb");
        assert!(
            result.design.ends_with("at Serializable"),
            "{}",
            result.design
        );
        assert!(result.runs.iter().all(|run| run.commits > 0));
        assert_eq!(result.aborts(), 0, "a lone worker never fails validation");
        let problems = validate(&result, &config);
        assert!(problems.is_empty(), "{problems:?}");
        let c = &result.checks;
        let updates_share = c.updates as f64 / (c.reads + c.updates) as f64;
        assert!(
            (updates_share - (1.0 - read_ratio)).abs() < 0.1,
            "read ratio {read_ratio}: updates were {updates_share:.2} of the operations"
        );
    }
}
