//! The experiments of Gottstein, Petrov and Buchmann: "SI-CV: Snapshot Isolation With
//! Co-Located Versions" (§6), on the disk engine: Table 2 (maximum NOTPM), Figures 3-5
//! (NOTPM, average response time and Order-Status transactions as the warehouses grow) from
//! one warehouse sweep of paced TPC-C here, and the space claim in [`space`].
//!
//! The paper's two systems are PostgreSQL 8.4.2's snapshot isolation with its own placement
//! of new versions (SI) and with SI-CV's, each writing transaction's new versions on pages
//! of its own (SI-CV). Here both are the disk engine (PostgreSQL's heap, buffer pool and
//! page log; `docs/design/buffer-pool.md`) under PostgreSQL's pruning rule (`vac`), with
//! `VersionPlacement::PostgreSql` or `VersionPlacement::CoLocated`, a buffer pool small
//! beside the data, page files through direct I/O, commits synced, and DBT2's terminals:
//! 20 per warehouse, TPC-C's keying and think times divided by a pacing factor.
//!
//! Every report carries the device-independent counters (pages dirtied per commit by
//! cause, pages written per commit and per New-Order, the sequential share of writes,
//! pages written for aborted transactions) as its primary result: a virtual disk may lack
//! an SSD's random/sequential write asymmetry, which is what the paper's throughput gain
//! rests on.

mod space;
#[cfg(test)]
mod tests;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use verso::{Durability, GarbageCollector, Options, VersionPlacement};

use super::{
    direction, ratio_agreement, ratio_of, reproduction_of, run_points, same_agreement, seconds,
    sweep_figure, sweep_panel, verdict, Agreement, Experiment, Figure, FigureLine, FigureSpec,
    Panel, PaperSource, Point, PointPlan, ReproduceOptions, Reproduction, Size, Table, Verdict,
    NOISE,
};
use crate::disk_report::PagesPerCommit;
use crate::metrics::RunResult;
use crate::runner::{RunConfig, StopAfter};
use crate::workload::{LabError, Workload};
use crate::workloads::tpcc::paced::{PacedOptions, PacedTpcc, DBT2_TERMINALS_PER_WAREHOUSE};
use crate::workloads::tpcc::TpccConfig;

pub use space::SPACE;

const PAPER: PaperSource = PaperSource {
    citation: "Gottstein, Petrov, Buchmann: SI-CV: Snapshot Isolation With Co-Located \
               Versions (TU Darmstadt)",
    machine: "PostgreSQL 8.4.2 on an Intel Core 2 Duo 3 GHz (2 cores), 512 MB RAM, 64-bit \
              Ubuntu Server; an Intel X25-E 64 GB SSD and a 7200 RPM SATA2 HDD; 24 MB \
              shared buffers, simple vacuums on, a nominal database of 31 GB",
};

/// The paper's two systems: its name for each, and the placement that is it here.
#[derive(Clone, Copy)]
struct System {
    name: &'static str,
    placement: VersionPlacement,
}

/// PostgreSQL's SI with PostgreSQL's placement.
const SI: System = System {
    name: "SI",
    placement: VersionPlacement::PostgreSql,
};
/// SI-CV: co-located placement.
const SI_CV: System = System {
    name: "SI-CV",
    placement: VersionPlacement::CoLocated,
};
const SYSTEMS: [System; 2] = [SI, SI_CV];

/// The connections serving the terminals: this machine's cores (the paper: 20; on 2 cores
/// 20 threads spend their time in abort storms, docs/lab.md "Paced TPC-C").
const CONNECTIONS: usize = 2;

/// TPC-C's keying and think times are divided by this (a terminal's mean cycle of 21 s
/// becomes 210 ms; 20 terminals offer about 95 transactions, 43 New-Orders, a second per
/// warehouse). Chosen so that the knee of the disk engine with a 2 MiB pool and direct I/O
/// on this 2-core machine falls inside the sweep (docs/lab.md, "SI-CV").
const PACING: f64 = 100.0;
/// The quick size's pacing: a quick point ends after a few hundred transactions, soon.
const QUICK_PACING: f64 = 2_000.0;

/// The warehouses of the sweep (the paper: up to 270 on the SSD; its knee lay between 180
/// and 230).
const WAREHOUSES: [f64; 5] = [1.0, 2.0, 4.0, 6.0, 8.0];
const QUICK_WAREHOUSES: [f64; 2] = [1.0, 2.0];

/// Seconds per point (the paper: two hours, plus a ramp-up).
const POINT_SECONDS: f64 = 30.0;
/// The quick size's points: committed transactions per warehouse.
const QUICK_TRANSACTIONS_PER_WAREHOUSE: u64 = 150;

/// The buffer pool, fixed over the sweep as the paper's 24 MB shared buffers: 2 MiB beside
/// about 160 MiB of data per warehouse (0.15% at 8 warehouses; the paper: 24 MB for 31 GB,
/// 0.08%).
const POOL_BYTES: usize = 2 << 20;
/// The quick size's pool: about half of tiny TPC-C's 2 MiB (a smaller one writes a
/// transaction's own page back between its versions, and the counters show little).
const QUICK_POOL_BYTES: usize = 1 << 20;

/// How often autovacuum wakes: PostgreSQL's minute, scaled down with the run (2 h to
/// 30 s) as far as a vacuum's cost allows.
const AUTOVACUUM_NAPTIME: Duration = Duration::from_secs(2);

/// The knee: the first warehouse count at which SI completes less than this share of the
/// New-Orders its terminals offer (with instant responses).
const KNEE_SHARE: f64 = 0.8;

/// Table 2.
pub const TABLE2: Experiment = Experiment {
    name: "sicv-table2",
    title: "Maximum transaction throughput (NOTPM), SI vs SI-CV",
    paper_ref: "Gottstein et al. §6, Table 2",
    compares: "SI (PostgreSQL's placement) and SI-CV (co-located placement) on the disk \
               engine, paced TPC-C (20 terminals per warehouse, times / 100, 2 connections), \
               a 2 MiB pool, direct I/O: the most NOTPM over a sweep of 1-8 warehouses, with \
               the pages per commit by cause",
    full_scale: "full: 1, 2, 4, 6, 8 warehouses, 30 s per point, 10 points (about 12 min); \
                 quick: tiny TPC-C, 1 and 2 warehouses, 150 transactions per warehouse",
    run: table2,
};

/// Figure 3.
pub const FIG3: Experiment = Experiment {
    name: "sicv-fig3",
    title: "Transaction throughput (New-Orders per minute) as the warehouses grow, SI vs SI-CV",
    paper_ref: "Gottstein et al. §6, Figure 3",
    compares: "SI and SI-CV on the disk engine, paced TPC-C over 1-8 warehouses (20 terminals \
               each, times / 100, 2 connections), a 2 MiB pool, direct I/O: NOTPM and the \
               NOTPM offered, with the pages per commit by cause",
    full_scale: "full: 1, 2, 4, 6, 8 warehouses, 30 s per point, 10 points (about 12 min); \
                 quick: tiny TPC-C, 1 and 2 warehouses, 150 transactions per warehouse",
    run: fig3,
};

/// Figure 4.
pub const FIG4: Experiment = Experiment {
    name: "sicv-fig4",
    title: "Average response time as the warehouses grow, SI vs SI-CV",
    paper_ref: "Gottstein et al. §6, Figure 4",
    compares: "SI and SI-CV on the disk engine, paced TPC-C over 1-8 warehouses (the sweep of \
               sicv-fig3): mean response time of all transactions and of New-Order, with the \
               pages per commit by cause",
    full_scale: "full: 1, 2, 4, 6, 8 warehouses, 30 s per point, 10 points (about 12 min); \
                 quick: tiny TPC-C, 1 and 2 warehouses, 150 transactions per warehouse",
    run: fig4,
};

/// Figure 5.
pub const FIG5: Experiment = Experiment {
    name: "sicv-fig5",
    title: "Completed Order-Status transactions per run as the warehouses grow, SI vs SI-CV",
    paper_ref: "Gottstein et al. §6, Figure 5",
    compares: "SI and SI-CV on the disk engine, paced TPC-C over 1-8 warehouses (the sweep of \
               sicv-fig3): committed Order-Status transactions per run, with the pages per \
               commit by cause",
    full_scale: "full: 1, 2, 4, 6, 8 warehouses, 30 s per point, 10 points (about 12 min); \
                 quick: tiny TPC-C, 1 and 2 warehouses, 150 transactions per warehouse",
    run: fig5,
};

impl Size<'_> {
    /// Where the points' databases go (each point gets a fresh directory under it:
    /// `reproduce::run_points`).
    fn disk_base(&self) -> PathBuf {
        self.options.disk.clone().unwrap_or_else(std::env::temp_dir)
    }

    fn pool_bytes(&self) -> usize {
        if self.quick() {
            QUICK_POOL_BYTES
        } else {
            POOL_BYTES
        }
    }

    fn pacing(&self) -> f64 {
        if self.quick() {
            QUICK_PACING
        } else {
            PACING
        }
    }

    /// TPC-C of `warehouses` at this size, with the experiment's seed.
    fn sicv_tpcc(&self, warehouses: u32) -> TpccConfig {
        if self.quick() {
            TpccConfig::tiny()
        } else {
            TpccConfig::standard(warehouses)
        }
        .with_warehouses(warehouses)
        .with_seed(self.options.seed)
    }

    /// The disk engine as `system`: PostgreSQL's pruning rule, this size's pool, page
    /// files through direct I/O, commits synced, autovacuum every
    /// [`AUTOVACUUM_NAPTIME`].
    fn sicv_options(&self, system: System) -> Options {
        Options::default()
            .garbage_collector(GarbageCollector::Vacuum)
            .disk(self.disk_base())
            .buffer_pool(self.pool_bytes())
            .direct_io(true)
            .version_placement(system.placement)
            .autovacuum_naptime(Some(AUTOVACUUM_NAPTIME))
            .durability(Durability::Sync)
            .checkpoint_after_log_bytes(Some(verso::DEFAULT_CHECKPOINT_AFTER_LOG_BYTES))
    }

    /// A run of `system` on `workload`'s database until `stop`, [`CONNECTIONS`] workers.
    fn sicv_config(&self, label: String, system: System, stop: StopAfter) -> RunConfig {
        self.config(label, self.sicv_options(system), CONNECTIONS, 0, stop)
    }

    /// When a point of the sweep ends: after [`POINT_SECONDS`], or at the quick size after
    /// [`QUICK_TRANSACTIONS_PER_WAREHOUSE`] commits per warehouse (a 0.2 s run of a debug
    /// build on a busy machine may commit too few to count an Order-Status).
    fn sweep_stop(&self, warehouses: f64) -> StopAfter {
        if self.quick() {
            StopAfter::Transactions(QUICK_TRANSACTIONS_PER_WAREHOUSE * warehouses as u64)
        } else {
            seconds(POINT_SECONDS)
        }
    }

    /// How long a point of the sweep runs, in words.
    fn sweep_length(&self) -> String {
        if self.quick() {
            format!("{QUICK_TRANSACTIONS_PER_WAREHOUSE} committed transactions per warehouse")
        } else {
            format!("{POINT_SECONDS} s")
        }
    }

    /// The warehouse sweep: both systems at each count, SI first.
    fn sicv_sweep(&self, out: &mut dyn Write) -> Result<Vec<Point>, LabError> {
        let mut plans = Vec::new();
        for &w in self.pick(&WAREHOUSES, &QUICK_WAREHOUSES) {
            for system in SYSTEMS {
                let workload = PacedTpcc::new(
                    self.sicv_tpcc(w as u32),
                    PacedOptions {
                        terminals_per_warehouse: DBT2_TERMINALS_PER_WAREHOUSE,
                        pacing: self.pacing(),
                    },
                )?;
                let describe = format!("{}, {w} warehouses", system.name);
                plans.push(PointPlan {
                    series: system.name.to_owned(),
                    x: Some(w),
                    describe: describe.clone(),
                    workload: Box::new(workload) as Box<dyn Workload>,
                    config: self.sicv_config(describe, system, self.sweep_stop(w)),
                });
            }
        }
        run_points(plans, self.options, out)
    }
}

/// The warehouses the points ran at, ascending.
fn warehouses(points: &[Point]) -> Vec<f64> {
    let mut xs: Vec<f64> = points.iter().filter_map(|p| p.x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs
}

/// The run of `system` at `w` warehouses.
fn run_of(points: &[Point], system: System, w: f64) -> Option<&RunResult> {
    super::run_at(points, system.name, Some(w))
}

/// `value` of `system`'s run at `w` (NaN without one).
fn value(points: &[Point], system: System, w: f64, value: impl Fn(&RunResult) -> f64) -> f64 {
    run_of(points, system, w).map_or(f64::NAN, value)
}

/// Committed New-Orders per minute (0 for a run that was not paced).
fn notpm(run: &RunResult) -> f64 {
    run.paced.as_ref().map_or(0.0, |p| p.notpm)
}

/// The New-Orders per minute the terminals offered.
fn offered_notpm(run: &RunResult) -> f64 {
    run.paced
        .as_ref()
        .map_or(0.0, |p| p.offered_new_orders_per_minute)
}

/// Committed Order-Status transactions in the run.
fn order_status(run: &RunResult) -> f64 {
    run.paced
        .as_ref()
        .map_or(0.0, |p| p.order_status_committed as f64)
}

/// Mean response time of every committed transaction, in milliseconds (the types' means
/// weighted by their counts; NaN without one).
fn mean_response_ms(run: &RunResult) -> f64 {
    let (sum, count) = run.latency.values().fold((0.0, 0u64), |(sum, count), l| {
        (sum + l.mean * l.count as f64, count + l.count)
    });
    if count == 0 {
        f64::NAN
    } else {
        sum / count as f64 / 1e3
    }
}

/// Mean New-Order response time in milliseconds (NaN without one).
fn new_order_response_ms(run: &RunResult) -> f64 {
    run.latency
        .get("NewOrder")
        .filter(|l| l.count > 0)
        .map_or(f64::NAN, |l| l.mean / 1e3)
}

/// The knee: the first warehouse count at which SI completed less than [`KNEE_SHARE`] of
/// the NOTPM offered; `None` if it kept up over the whole sweep.
fn knee(points: &[Point]) -> Option<f64> {
    warehouses(points).into_iter().find(|&w| {
        let share = ratio_of(
            value(points, SI, w, notpm),
            value(points, SI, w, offered_notpm),
        );
        share < KNEE_SHARE
    })
}

/// The largest warehouse count below the knee (the last point if there is no knee), or
/// `None` if the knee is the first point.
fn below_knee(points: &[Point]) -> Option<f64> {
    let xs = warehouses(points);
    match knee(points) {
        Some(k) => xs.into_iter().rev().find(|&w| w < k),
        None => xs.last().copied(),
    }
}

/// "at 4 warehouses" style words for the knee.
fn knee_words(points: &[Point]) -> String {
    match knee(points) {
        Some(k) => format!(
            "SI's knee (completing under {:.0}% of the NOTPM offered) at {k} warehouses",
            KNEE_SHARE * 100.0
        ),
        None => format!(
            "no knee: SI completed at least {:.0}% of the NOTPM offered at every point",
            KNEE_SHARE * 100.0
        ),
    }
}

/// Agrees if the two are the same within `tolerance` at the largest warehouse count below
/// the knee; inconclusive if there is none.
fn equal_below_knee(
    points: &[Point],
    claim: &str,
    what: &str,
    measure: fn(&RunResult) -> f64,
    tolerance: f64,
) -> Verdict {
    match below_knee(points) {
        Some(w) => {
            let (si, cv) = (
                value(points, SI, w, measure),
                value(points, SI_CV, w, measure),
            );
            let ratio = ratio_of(cv, si);
            verdict(
                claim,
                format!(
                    "{what} at {w} warehouses (below the knee): SI {}, SI-CV {}: {}",
                    number(si),
                    number(cv),
                    super::times(ratio)
                ),
                same_agreement(ratio, tolerance),
            )
        }
        None => verdict(
            claim,
            format!("{what}: no point below the knee ({})", knee_words(points)),
            Agreement::Inconclusive,
        ),
    }
}

/// A number for people: thousands separated at 100 and above, two decimals below.
fn number(x: f64) -> String {
    if !x.is_finite() {
        "-".to_owned()
    } else if x.abs() >= 100.0 {
        crate::format::thousands(x)
    } else {
        format!("{x:.2}")
    }
}

/// The series' lines of `measure` over the warehouses.
fn figure(
    points: &[Point],
    key: &str,
    title: &str,
    y_label: &str,
    measure: fn(&RunResult) -> f64,
) -> Figure {
    sweep_figure(
        FigureSpec {
            key,
            title,
            x_label: "warehouses",
            y_label,
            log_x: false,
        },
        points,
        &SYSTEMS.map(|s| s.name.to_owned()),
        measure,
    )
}

/// The most NOTPM of `system` over the sweep, and where.
fn max_notpm(points: &[Point], system: System) -> (f64, f64) {
    warehouses(points)
        .into_iter()
        .map(|w| (value(points, system, w, notpm), w))
        .fold((f64::NAN, f64::NAN), |best, (n, w)| {
            if best.0.is_nan() || n > best.0 {
                (n, w)
            } else {
                best
            }
        })
}

/// Table 2's panel: the most NOTPM of each system beside the paper's.
fn table2_panel(points: &[Point]) -> Panel {
    let (si, si_w) = max_notpm(points, SI);
    let (cv, cv_w) = max_notpm(points, SI_CV);
    let ratio = ratio_of(cv, si);
    let table = Table {
        header: vec![
            "device".into(),
            "SI NOTPM (warehouses)".into(),
            "SI-CV NOTPM (warehouses)".into(),
            "SI-CV over SI".into(),
        ],
        rows: vec![
            vec![
                "paper: SSD (Intel X25-E)".into(),
                "2500 (270)".into(),
                "3588 (270)".into(),
                "+43.5% by its numbers (printed: +30.3%)".into(),
            ],
            vec![
                "paper: HDD (7200 RPM)".into(),
                "210 (80)".into(),
                "219 (80)".into(),
                "+4.3% by its numbers (printed: +3.8%)".into(),
            ],
            vec![
                "ours: virtual disk, direct I/O".into(),
                format!("{} ({si_w})", number(si)),
                format!("{} ({cv_w})", number(cv)),
                format!("{:+.1}%", (ratio - 1.0) * 100.0),
            ],
            vec![
                "ours: HDD".into(),
                "not run".into(),
                "not run".into(),
                "no HDD on this machine".into(),
            ],
        ],
    };
    let mut panel = sweep_panel(
        "Table 2: maximum NOTPM over the warehouse sweep",
        vec![figure(
            points,
            "table2_notpm",
            "NOTPM over the warehouses (the maximum of each line is Table 2's)",
            "New-Orders per minute",
            notpm,
        )],
        &[
            "SSD: SI 2500, SI-CV 3588 NOTPM, both at 270 warehouses; printed \"+30.3%\", but \
             3588 / 2500 is +43.5% (30.3% is the gain over SI-CV's number)",
            "HDD: SI 210, SI-CV 219 NOTPM at 80 warehouses; printed \"+3.8%\" (219 / 210 is \
             +4.3%)",
            "\"These show a performance increase of 30% with SI-CV on SSDs\"; the gain comes \
             from \"the reduction of random writes, at the cost of more random reads\"",
        ],
        vec![
            verdict(
                "SSD: SI-CV's maximum NOTPM is 1.435x SI's (3588 vs 2500)",
                format!(
                    "SI {} at {si_w} warehouses, SI-CV {} at {cv_w}: {}",
                    number(si),
                    number(cv),
                    super::times(ratio)
                ),
                ratio_agreement(ratio, 3588.0 / 2500.0),
            ),
            verdict(
                "HDD: SI-CV 219 vs SI 210 NOTPM (+4%)",
                "not run: this machine has no HDD (and no seek emulation)",
                Agreement::Inconclusive,
            ),
        ],
    );
    panel.table = Some(table);
    panel
}

/// Figure 3's panel: NOTPM (and the NOTPM offered) over the warehouses.
fn fig3_panel(points: &[Point]) -> Panel {
    let xs = warehouses(points);
    let mut notpm_figure = figure(
        points,
        "fig3_notpm",
        "New-Orders per minute over the warehouses (paced TPC-C)",
        "New-Orders per minute",
        notpm,
    );
    notpm_figure.lines.push(FigureLine {
        label: "offered".into(),
        points: xs
            .iter()
            .map(|&w| [w, value(points, SI, w, offered_notpm)])
            .collect(),
    });
    let table = Table {
        header: vec![
            "warehouses".into(),
            "NOTPM offered".into(),
            "SI NOTPM (share of offered)".into(),
            "SI-CV NOTPM (share of offered)".into(),
            "SI-CV over SI".into(),
        ],
        rows: xs
            .iter()
            .map(|&w| {
                let offered = value(points, SI, w, offered_notpm);
                let cell = |system| {
                    let n = value(points, system, w, notpm);
                    format!("{} ({:.0}%)", number(n), ratio_of(n, offered) * 100.0)
                };
                vec![
                    w.to_string(),
                    number(offered),
                    cell(SI),
                    cell(SI_CV),
                    super::times(ratio_of(
                        value(points, SI_CV, w, notpm),
                        value(points, SI, w, notpm),
                    )),
                ]
            })
            .collect(),
    };
    let top = xs.last().copied().unwrap_or(f64::NAN);
    let past_knee = match knee(points) {
        Some(k) if k < top => {
            let growth = |system| {
                ratio_of(
                    value(points, system, top, notpm),
                    value(points, system, k, notpm),
                )
            };
            let (si, cv) = (growth(SI), growth(SI_CV));
            verdict(
                "past the knee SI's NOTPM stops growing or falls while SI-CV's keeps growing",
                format!(
                    "NOTPM from {k} to {top} warehouses: SI {}, SI-CV {}",
                    super::times(si),
                    super::times(cv)
                ),
                direction(ratio_of(cv, si)),
            )
        }
        _ => verdict(
            "past the knee SI's NOTPM stops growing or falls while SI-CV's keeps growing",
            format!("{}: no two points at or past it", knee_words(points)),
            Agreement::Inconclusive,
        ),
    };
    let at_top = ratio_of(
        value(points, SI_CV, top, notpm),
        value(points, SI, top, notpm),
    );
    let mut panel = sweep_panel(
        "Figure 3: NOTPM as the warehouses (the offered load) grow",
        vec![notpm_figure],
        &[
            "\"On an under-committed system with enough free resources (Figure 3, Warehouses \
             <= 180) SI and SI-CV perform equally well\"",
            "\"A further increase of the load (Figure 3, Warehouses >= 230) brings SI into \
             thrashing; ... the transactional throughput does not increase further and begins \
             to deteriorate ... The throughput of SI-CV grows steadily for the same range of \
             loads. SI-CV achieves up to 30% higher transactional throughput\"",
        ],
        vec![
            equal_below_knee(
                points,
                "below the knee SI and SI-CV perform equally well",
                "NOTPM",
                notpm,
                NOISE,
            ),
            past_knee,
            verdict(
                "at the highest load SI-CV's NOTPM is up to 30% above SI's",
                format!(
                    "at {top} warehouses: SI {}, SI-CV {}: {} ({})",
                    number(value(points, SI, top, notpm)),
                    number(value(points, SI_CV, top, notpm)),
                    super::times(at_top),
                    knee_words(points)
                ),
                ratio_agreement(at_top, 1.3),
            ),
        ],
    );
    panel.table = Some(table);
    panel
}

/// Figure 4's panel: mean response time over the warehouses.
fn fig4_panel(points: &[Point]) -> Panel {
    let xs = warehouses(points);
    let table = Table {
        header: vec![
            "warehouses".into(),
            "SI mean, all / New-Order (ms)".into(),
            "SI-CV mean, all / New-Order (ms)".into(),
            "SI over SI-CV (all)".into(),
        ],
        rows: xs
            .iter()
            .map(|&w| {
                let cell = |system| {
                    format!(
                        "{} / {}",
                        number(value(points, system, w, mean_response_ms)),
                        number(value(points, system, w, new_order_response_ms))
                    )
                };
                vec![
                    w.to_string(),
                    cell(SI),
                    cell(SI_CV),
                    super::times(ratio_of(
                        value(points, SI, w, mean_response_ms),
                        value(points, SI_CV, w, mean_response_ms),
                    )),
                ]
            })
            .collect(),
    };
    let top = xs.last().copied().unwrap_or(f64::NAN);
    let at_top = ratio_of(
        value(points, SI, top, mean_response_ms),
        value(points, SI_CV, top, mean_response_ms),
    );
    let rise = match below_knee(points) {
        Some(w) if w < top => {
            let r = ratio_of(
                value(points, SI, top, mean_response_ms),
                value(points, SI, w, mean_response_ms),
            );
            verdict(
                "past the knee SI's response time rises steeply (\"exponentially\")",
                format!(
                    "SI's mean response at {top} warehouses over {w} (below the knee): {}",
                    super::times(r)
                ),
                direction(r),
            )
        }
        _ => verdict(
            "past the knee SI's response time rises steeply (\"exponentially\")",
            format!("{}: no point below and above it", knee_words(points)),
            Agreement::Inconclusive,
        ),
    };
    let mut panel = sweep_panel(
        "Figure 4: average response time as the warehouses grow",
        vec![figure(
            points,
            "fig4_response_time",
            "Mean response time of every committed transaction, from submission (ms)",
            "mean response time (ms)",
            mean_response_ms,
        )],
        &[
            "\"on an under-committed system both SI and SI-CV have similar response times. \
             SI-CV, however, can support higher transactional loads at significantly lower \
             response times\"",
            "past the knee SI's response times \"increase exponentially\"; \"SI-CV provides up \
             to 30% higher transactional throughput at sub-second response times\" at >= 230 \
             warehouses; the abstract: \"response times that are multiple factors lower\"",
        ],
        vec![
            equal_below_knee(
                points,
                "below the knee SI and SI-CV have similar response times",
                "mean response (ms)",
                mean_response_ms,
                1.25,
            ),
            rise,
            verdict(
                "at the highest load SI-CV's response times are multiple factors lower than \
                 SI's",
                format!(
                    "at {top} warehouses: SI {} ms, SI-CV {} ms: SI {}",
                    number(value(points, SI, top, mean_response_ms)),
                    number(value(points, SI_CV, top, mean_response_ms)),
                    super::times(at_top)
                ),
                ratio_agreement(at_top, 2.0),
            ),
        ],
    );
    panel.table = Some(table);
    panel
}

/// Figure 5's panel: committed Order-Status transactions per run.
fn fig5_panel(points: &[Point]) -> Panel {
    let xs = warehouses(points);
    let total = |system| {
        xs.iter()
            .map(|&w| value(points, system, w, order_status))
            .sum::<f64>()
    };
    let (si, cv) = (total(SI), total(SI_CV));
    let ratio = ratio_of(cv, si);
    let table = Table {
        header: vec![
            "warehouses".into(),
            "SI Order-Status".into(),
            "SI-CV Order-Status".into(),
            "SI-CV over SI".into(),
        ],
        rows: xs
            .iter()
            .map(|&w| {
                let (a, b) = (
                    value(points, SI, w, order_status),
                    value(points, SI_CV, w, order_status),
                );
                vec![
                    w.to_string(),
                    number(a),
                    number(b),
                    super::times(ratio_of(b, a)),
                ]
            })
            .collect(),
    };
    let mut panel = sweep_panel(
        "Figure 5: completed Order-Status transactions per run",
        vec![figure(
            points,
            "fig5_order_status",
            "Committed Order-Status transactions per run",
            "Order-Status transactions",
            order_status,
        )],
        &[
            "\"the total number of executed ORDER_STATUS transactions with SI and SI-CV for \
             each two hour test run\": \"read performance of SI-CV remains unaffected by the \
             version collocation changes\"; conclusion (e): \"equally good or better\"",
        ],
        vec![verdict(
            "SI-CV completes as many Order-Status transactions as SI or more",
            format!(
                "over the sweep: SI {}, SI-CV {}: {}",
                number(si),
                number(cv),
                super::times(ratio)
            ),
            if ratio >= 1.0 / NOISE {
                Agreement::Agrees
            } else {
                Agreement::Differs
            },
        )],
    );
    panel.table = Some(table);
    panel
}

/// `system`'s page counters pooled over all its runs (each run's per-commit counts
/// weighted by its commits), or `None` without any.
fn pooled(points: &[Point], system: System) -> Option<PagesPerCommit> {
    let runs: Vec<PagesPerCommit> = points
        .iter()
        .filter(|p| p.series == system.name)
        .filter_map(|p| PagesPerCommit::of(&p.run))
        .collect();
    let commits: f64 = runs.iter().map(|p| p.commits).sum();
    if commits <= 0.0 {
        return None;
    }
    let mean = |f: fn(&PagesPerCommit) -> f64| {
        runs.iter().map(|p| f(p) * p.commits).sum::<f64>() / commits
    };
    let written: f64 = runs.iter().map(|p| p.written * p.commits).sum();
    let sequential: f64 = runs
        .iter()
        .map(|p| p.written * p.commits * p.sequential_share)
        .sum();
    let new_orders: f64 = runs
        .iter()
        .filter_map(|p| Some(p.written * p.commits / p.written_per_new_order?))
        .sum();
    Some(PagesPerCommit {
        commits,
        dirtied: mean(|p| p.dirtied),
        new_versions: mean(|p| p.new_versions),
        old_version_stamps: mean(|p| p.old_version_stamps),
        hint_bits: mean(|p| p.hint_bits),
        index_changes: mean(|p| p.index_changes),
        other_changes: mean(|p| p.other_changes),
        written: written / commits,
        sequential_share: if written > 0.0 {
            sequential / written
        } else {
            0.0
        },
        written_for_aborted_transactions: runs
            .iter()
            .map(|p| p.written_for_aborted_transactions)
            .sum(),
        written_per_new_order: (new_orders > 0.0).then(|| written / new_orders),
    })
}

/// One row of the counters' table.
fn counter_row(what: String, p: &PagesPerCommit) -> Vec<String> {
    let per = |x: f64| format!("{x:.2}");
    vec![
        what,
        per(p.dirtied),
        per(p.new_versions),
        per(p.old_version_stamps),
        per(p.hint_bits),
        per(p.index_changes),
        per(p.other_changes),
        per(p.written),
        p.written_per_new_order.map_or("-".to_owned(), per),
        format!("{:.1}%", 100.0 * p.sequential_share),
        format!("{:.0}", p.written_for_aborted_transactions),
    ]
}

/// A measure of a run's page counters (NaN without them).
fn pages(run: &RunResult, f: fn(&PagesPerCommit) -> f64) -> f64 {
    PagesPerCommit::of(run).map_or(f64::NAN, |p| f(&p))
}

fn new_version_pages(run: &RunResult) -> f64 {
    pages(run, |p| p.new_versions)
}

fn written_per_new_order(run: &RunResult) -> f64 {
    pages(run, |p| p.written_per_new_order.unwrap_or(f64::NAN))
}

/// The panel every report carries: the device-independent counters, SI beside SI-CV,
/// pooled over every run and run by run (by `x_label`), with SI-CV's claims about them.
fn counters_panel(points: &[Point], x_label: &str) -> Panel {
    let mut rows = Vec::new();
    for system in SYSTEMS {
        if let Some(p) = pooled(points, system) {
            rows.push(counter_row(format!("{}, all runs", system.name), &p));
        }
    }
    for w in warehouses(points) {
        for system in SYSTEMS {
            if let Some(p) = run_of(points, system, w).and_then(PagesPerCommit::of) {
                rows.push(counter_row(format!("{}, {w} {x_label}", system.name), &p));
            }
        }
    }
    let table = Table {
        header: [
            "pages per commit",
            "dirtied",
            "new versions",
            "stamps",
            "hint bits",
            "index",
            "other",
            "written",
            "written / New-Order",
            "sequential writes",
            "written for aborted (pages, in all)",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows,
    };
    let (si, cv) = (
        pooled(points, SI).unwrap_or_default(),
        pooled(points, SI_CV).unwrap_or_default(),
    );
    let fewer = |claim: &str, what: &str, f: fn(&PagesPerCommit) -> f64| {
        let ratio = ratio_of(f(&si), f(&cv));
        verdict(
            claim,
            format!(
                "{what}: SI {:.2}, SI-CV {:.2}: SI {}",
                f(&si),
                f(&cv),
                super::times(ratio)
            ),
            direction(ratio),
        )
    };
    let stamps = ratio_of(cv.old_version_stamps, si.old_version_stamps);
    let sequential = ratio_of(cv.sequential_share, si.sequential_share);
    let aborted = verdict(
        "a page holding only an aborted SI-CV transaction's versions is never written (\"if \
         T_j aborts Block2 is not written\"); SI's shared pages are written anyway",
        format!(
            "pages written whose changes were all one aborted transaction's, in all: SI {:.0}, \
             SI-CV {:.0}",
            si.written_for_aborted_transactions, cv.written_for_aborted_transactions
        ),
        if cv.written_for_aborted_transactions == 0.0 {
            Agreement::Agrees
        } else if cv.written_for_aborted_transactions * NOISE < si.written_for_aborted_transactions
        {
            Agreement::Weaker
        } else {
            Agreement::Differs
        },
    );
    let mut panel = sweep_panel(
        "Device-independent counters, the primary result: pages per commit by cause, SI vs \
         SI-CV",
        vec![
            figure(
                points,
                "pages_new_versions_per_commit",
                "Pages dirtied by new versions per commit",
                "pages per commit",
                new_version_pages,
            ),
            figure(
                points,
                "pages_written_per_new_order",
                "Pages written per committed New-Order (the whole mix's writes)",
                "pages per New-Order",
                written_per_new_order,
            ),
        ],
        &[
            "SI-CV \"collocate[s] all versions created by one transaction and group[s] them \
             into adjacent blocks. This not only minimizes the random writes, possibly \
             converting them into sequential writes, but also uses potentially more random \
             reads\"",
            "the stamps on old versions (t_xmax) are written in place under both (Listing 1, \
             lines 9-10); the paper reports no page counts, only NOTPM, response times and \
             space",
        ],
        vec![
            fewer(
                "SI-CV's new versions dirty fewer pages per commit (a transaction's versions \
                 share its own page)",
                "pages dirtied by new versions per commit",
                |p| p.new_versions,
            ),
            fewer(
                "SI-CV writes fewer pages per committed New-Order",
                "pages written per New-Order",
                |p| p.written_per_new_order.unwrap_or(f64::NAN),
            ),
            verdict(
                "SI-CV turns random writes into sequential ones",
                format!(
                    "sequential share of page writes: SI {:.1}%, SI-CV {:.1}%",
                    100.0 * si.sequential_share,
                    100.0 * cv.sequential_share
                ),
                direction(sequential),
            ),
            verdict(
                "the stamps on old versions stay where they are: as many pages per commit \
                 under both",
                format!(
                    "pages dirtied by stamps per commit: SI {:.2}, SI-CV {:.2}: {}",
                    si.old_version_stamps,
                    cv.old_version_stamps,
                    super::times(stamps)
                ),
                same_agreement(stamps, 1.25),
            ),
            aborted,
        ],
    );
    panel.table = Some(table);
    panel
}

/// The notes every SI-CV report carries.
fn notes(size: &Size<'_>, points: &[Point]) -> Vec<String> {
    let data = points
        .iter()
        .filter_map(|p| p.run.samples.last())
        .map(|s| s.heap_bytes + s.index_bytes)
        .max()
        .unwrap_or(0);
    let pool = size.pool_bytes();
    vec![
        "A virtual disk may lack an SSD's random/sequential write asymmetry (the paper's X25-E: \
         random writes 5-10x slower than reads; Table 1), which is what SI-CV's throughput gain \
         rests on, so NOTPM and response times may show no difference, or one of another \
         cause. The device-independent counters are the primary result: pages dirtied per \
         commit by cause (new versions, stamps on old versions, hint bits, index, other), \
         pages written per commit and per New-Order, the sequential share of the writes, and \
         pages written for aborted transactions."
            .to_owned(),
        format!(
            "Scale: a {} KiB buffer pool, the same at every point as the paper's 24 MB, beside {} \
             MiB of heap and indexes at the end of the largest run ({:.2}% of it; the paper: \
             24 MB for 31 GB, 0.08%). Page files through direct I/O (O_DIRECT), so every page \
             the pool evicts or misses is a device write or read; the page log is buffered and \
             synced at every commit (group commit).",
            pool >> 10,
            data >> 20,
            100.0 * ratio_of(pool as f64, data as f64)
        ),
        format!(
            "Paced TPC-C as DBT2: {DBT2_TERMINALS_PER_WAREHOUSE} terminals per warehouse, \
             TPC-C's keying and think times divided by {} (a terminal's mean cycle of 21 s is \
             {:.0} ms), served by {CONNECTIONS} connections (the paper: 20; on 2 cores 20 \
             threads spend their time in abort storms, since the engine aborts the second \
             writer of a row at once where PostgreSQL makes it wait). {} per point instead of \
             two hours; no ramp-up to leave out (terminals start spread over a cycle).",
            size.pacing(),
            21_000.0 / size.pacing(),
            size.sweep_length()
        ),
        "Both systems are the disk engine under PostgreSQL's pruning rule (vac) with \
         autovacuum every 2 s (the paper: PostgreSQL 8.4.2 with simple vacuums), differing only \
         in where new versions go."
            .to_owned(),
        "What the engine decides where the paper is silent (docs/design/buffer-pool.md, \
         \"SI-CV's co-located placement\"): under co-located placement an update stays on its \
         predecessor's page (HOT) only if that page is the updater's own, so most updates are \
         cold (a new entry in every index, a dead tuple only vacuum frees); and an owned page \
         is written back as any other (eviction, checkpoint), not forced or grouped at commit. \
         A variant that claims the predecessor's page for a HOT update, and a write of a \
         transaction's own pages together at commit, are not built in the engine."
            .to_owned(),
        "The paper's HDD column is not run: this machine has no HDD and the lab no seek \
         emulation."
            .to_owned(),
        knee_words(points),
    ]
}

/// "SI and SI-CV on the disk engine ..." for the sweep.
fn sweep_setup(size: &Size<'_>) -> String {
    let xs = size.pick(&WAREHOUSES, &QUICK_WAREHOUSES);
    format!(
        "{} at {} warehouses; SI (PostgreSQL's placement) and SI-CV (co-located) on the disk \
         engine, a {} KiB pool, direct I/O, commits synced; paced TPC-C, {DBT2_TERMINALS_PER_WAREHOUSE} \
         terminals per warehouse, times / {}, {CONNECTIONS} connections; {} per point, one \
         run each; {VIRTUAL_DISK}",
        if size.quick() { "tiny TPC-C" } else { "TPC-C" },
        xs.iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        size.pool_bytes() >> 10,
        size.pacing(),
        size.sweep_length()
    )
}

/// What every setup says of the device.
const VIRTUAL_DISK: &str = "on this machine's virtual disk, which may lack an SSD's \
    random/sequential write asymmetry: throughput differences may not appear, and the pages \
    per commit by cause are the primary result";

const SWEEP_PAPER_SETUP: &str = "DBT2 (TPC-C) with 20 terminals per warehouse and 20 \
    connections, two hours per run plus a ramp-up, warehouses growing to 270 (SSD) and 80 \
    (HDD)";

/// Runs the sweep and builds the report with `primary` first, then the counters.
fn sweep_experiment(
    experiment: &Experiment,
    primary: fn(&[Point]) -> Panel,
    options: &ReproduceOptions,
    out: &mut dyn Write,
) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let points = size.sicv_sweep(out)?;
    let panels = vec![primary(&points), counters_panel(&points, "warehouses")];
    let notes = notes(&size, &points);
    Ok(reproduction_of(
        &PAPER,
        experiment,
        options,
        SWEEP_PAPER_SETUP,
        &sweep_setup(&size),
        panels,
        notes,
        points,
    ))
}

fn table2(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    sweep_experiment(&TABLE2, table2_panel, options, out)
}

fn fig3(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    sweep_experiment(&FIG3, fig3_panel, options, out)
}

fn fig4(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    sweep_experiment(&FIG4, fig4_panel, options, out)
}

fn fig5(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    sweep_experiment(&FIG5, fig5_panel, options, out)
}
