//! Wu et al. §7.2's heterogeneous workload, Figures 8 and 9: read-write YCSB transactions
//! on a fixed set of threads while more threads run read-only transactions, first as
//! ordinary transactions the protocol checks (Figure 8), then declared READ ONLY (Figure
//! 9). Each of the five protocols, serializable, over append-only N2O storage and 'txn',
//! as the rest of §7.2.

use std::io::Write;

use verso::ConcurrencyControl;

use super::{protocols, rate_verdict, Size};
use crate::metrics::RunResult;
use crate::reproduce::{
    commits_per_second, direction, per_second, ratio_agreement, ratio_of, run_points,
    same_agreement, sweep_figure, sweep_panel, times, value_at, verdict, Experiment, FigureSpec,
    PointPlan, ReproduceOptions, Reproduction,
};
use crate::workload::{LabError, Workload};
use crate::workloads::ycsb::{ReadOnlyTransactions, YcsbConfig, YcsbWorkload};

const SECONDS: f64 = 3.0;
/// Read-write threads (the paper: 20 of 40 cores; here 1 of 2).
const READ_WRITE_THREADS: usize = 1;
/// Read-only threads: none, one per free core, and one more than the cores (the paper: 0
/// to 20 beside its 20 read-write threads on 40 cores).
const READ_ONLY_THREADS: [f64; 3] = [0.0, 1.0, 2.0];
const QUICK_READ_ONLY_THREADS: [f64; 2] = [0.0, 1.0];
/// Operations per transaction, read-write and read-only alike (the paper: 100).
const OPERATIONS: usize = 100;
/// The quick size's table and transactions.
const QUICK_ROWS: u64 = 20_000;
const QUICK_OPERATIONS: usize = 20;
/// The read-write portion's mixture: update-intensive (20% reads).
const READ_WRITE_READ_RATIO: f64 = 0.2;
/// The paper's high contention.
const THETA: f64 = 0.8;

/// Figures 8 and 9.
pub const FIG8: Experiment = Experiment {
    name: "wu-fig8",
    title: "Heterogeneous workload: read-write beside read-only transactions, without and \
            with the READ ONLY hint",
    paper_ref: "Wu et al. §7.2, Figures 8 and 9",
    compares: "si, mvocc, mvto, mv2pl and ssn: 1 thread of update-intensive YCSB \
               transactions (100 operations, theta 0.8) beside 0-2 threads of 100-read \
               transactions, undeclared and declared READ ONLY",
    full_scale: "full: 1,000,000 rows, 0/1/2 read-only threads, 3 s per point, 30 points \
                 (about 3 min); quick: 20,000 rows, 20 operations, 0 and 1 read-only \
                 threads, 0.2 s",
    run: fig8,
};

/// `mvto undeclared` or `mvto declared`.
fn series(protocol: ConcurrencyControl, declared: bool) -> String {
    format!("{} {}", protocol.short_name(), hint(declared))
}

fn hint(declared: bool) -> &'static str {
    if declared {
        "declared"
    } else {
        "undeclared"
    }
}

/// Read-only transactions committed per second.
fn read_only_per_second(run: &RunResult) -> f64 {
    per_second(run.totals.olap_queries, run)
}

impl Size<'_> {
    fn heterogeneous_ycsb(&self, declared: bool) -> YcsbConfig {
        let base = self.ycsb_config(READ_WRITE_READ_RATIO, THETA);
        // Quick: 100 operations on YCSB's tiny 2,000 rows let an MVTO reader's read
        // timestamps abort every write attempt of a 0.2 s run (CI saw a point commit
        // nothing); fewer operations on more rows keep the smoke test's writers committing.
        let (rows, operations) = if self.quick() {
            (QUICK_ROWS, QUICK_OPERATIONS)
        } else {
            (base.rows, OPERATIONS)
        };
        YcsbConfig {
            rows,
            operations,
            read_only: Some(ReadOnlyTransactions {
                operations,
                declared,
            }),
            ..base
        }
    }
}

fn fig8(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let readers = size.pick(&READ_ONLY_THREADS, &QUICK_READ_ONLY_THREADS);
    let run_seconds = size.seconds(SECONDS);
    let mut plans = Vec::new();
    for declared in [false, true] {
        for &threads in readers {
            for protocol in protocols() {
                let series = series(protocol, declared);
                let describe = format!("{series}, {threads} read-only thread(s)");
                let mut config = size.protocol_config(describe.clone(), protocol, run_seconds);
                config.oltp_workers = READ_WRITE_THREADS;
                config.olap_workers = threads as usize;
                plans.push(PointPlan {
                    series,
                    x: Some(threads),
                    describe,
                    workload: Box::new(YcsbWorkload::new(size.heterogeneous_ycsb(declared))?),
                    config,
                });
            }
        }
    }
    let described = YcsbWorkload::new(size.heterogeneous_ycsb(false))?.describe();
    let points = run_points(plans, options, out)?;
    // The verdicts compare no read-only thread with one: beyond that the read-only threads
    // share the cores with the read-write one.
    let (none, one) = (0.0, 1.0);
    let mut panels = Vec::new();
    for declared in [false, true] {
        let names: Vec<String> = protocols().iter().map(|p| series(*p, declared)).collect();
        let rw = |p: ConcurrencyControl, x: f64| {
            value_at(&points, &series(p, declared), Some(x), commits_per_second)
        };
        let ro = |p: ConcurrencyControl| {
            value_at(
                &points,
                &series(p, declared),
                Some(one),
                read_only_per_second,
            )
        };
        // Read-write throughput alone over beside one read-only thread.
        let rw_drop = |p: ConcurrencyControl| ratio_of(rw(p, none), rw(p, one));
        let key = format!("fig{}", if declared { 9 } else { 8 });
        let figures = vec![
            sweep_figure(
                FigureSpec {
                    key: &format!("{key}_read_write"),
                    title: "read-write transactions: commits/s by read-only threads",
                    x_label: "read-only threads",
                    y_label: "read-write commits/s (mean)",
                    log_x: false,
                },
                &points,
                &names,
                commits_per_second,
            ),
            sweep_figure(
                FigureSpec {
                    key: &format!("{key}_read_only"),
                    title: "read-only transactions: commits/s by read-only threads",
                    x_label: "read-only threads",
                    y_label: "read-only commits/s (mean)",
                    log_x: false,
                },
                &points,
                &names,
                read_only_per_second,
            ),
        ];
        let paper_three = [
            ConcurrencyControl::Mvto,
            ConcurrencyControl::Mvocc,
            ConcurrencyControl::Mv2pl,
        ];
        let best_rw_of =
            |set: &[ConcurrencyControl]| set.iter().map(|p| rw(*p, one)).fold(f64::NAN, f64::max);
        let drops = format!(
            "read-write commits/s with no read-only thread over with one: {}",
            protocols()
                .iter()
                .map(|p| format!("{} {}", p.short_name(), times(rw_drop(*p))))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let (verdicts, paper) = if !declared {
            let mvto_mv2pl =
                rw_drop(ConcurrencyControl::Mvto).min(rw_drop(ConcurrencyControl::Mv2pl));
            (
                vec![
                    verdict(
                        "the read-write throughput of MVTO and MV2PL drops as read-only threads \
                         are added (they treat readers and writers equally)",
                        drops.clone(),
                        direction(mvto_mv2pl),
                    ),
                    verdict(
                        "MVOCC achieves stable performance for the read-write portion",
                        drops,
                        same_agreement(rw_drop(ConcurrencyControl::Mvocc), 1.5),
                    ),
                    rate_verdict(
                        "MVOCC's read-only throughput is lower than MVTO's (by 2x; the \
                         absence of read locks starves read-only queries)",
                        ("mvto read-only", ro(ConcurrencyControl::Mvto)),
                        ("mvocc read-only", ro(ConcurrencyControl::Mvocc)),
                        |r| ratio_agreement(r, 2.0),
                    ),
                    rate_verdict(
                        "SI+SSN achieves a much higher read-write throughput (precise \
                         validation, fewer aborts)",
                        ("ssn", rw(ConcurrencyControl::Ssn, one)),
                        ("best of mvto, mvocc, mv2pl", best_rw_of(&paper_three)),
                        direction,
                    ),
                ],
                [
                    "YCSB theta 0.8: 20 threads of update-intensive read-write transactions, \
                     0-20 threads of read-only transactions, 100 operations each, \
                     serializable, not declared READ ONLY",
                    "\"The first is that the throughput of read-write transactions drops in \
                     Fig. 8a for the MVTO and MV2PL protocols as the number of read-only \
                     threads increases, while the throughput of read-only transactions \
                     increases in Fig. 8b. [...] The second observation is that while MVOCC \
                     achieves stable performance for the read-write portion as the number of \
                     read-only threads increases, their performance for read-only portion \
                     are lower than MVTO by 2× and 28×, respectively. [...] The third \
                     observation is that SI+SSN achieves a much higher performance for \
                     read-write transactions.\"",
                ],
            )
        } else {
            let read_only: Vec<f64> = protocols().iter().map(|p| ro(*p)).collect();
            let ro_spread = ratio_of(
                read_only.iter().copied().fold(f64::NAN, f64::max),
                read_only.iter().copied().fold(f64::NAN, f64::min),
            );
            let stable = crate::metrics::median(protocols().iter().map(|p| rw_drop(*p)));
            let others_than_mvocc = [
                ConcurrencyControl::Mvto,
                ConcurrencyControl::Mv2pl,
                ConcurrencyControl::Ssn,
            ];
            let lowest_other = others_than_mvocc
                .iter()
                .map(|p| rw(*p, one))
                .fold(f64::NAN, f64::min);
            (
                vec![
                    verdict(
                        "declared READ ONLY, the protocols' read-only throughput is the same \
                         (no conflict checks)",
                        format!(
                            "read-only commits/s with one read-only thread: {}; fastest / \
                             slowest {}",
                            protocols()
                                .iter()
                                .zip(&read_only)
                                .map(|(p, r)| format!(
                                    "{} {}",
                                    p.short_name(),
                                    crate::format::compact(*r)
                                ))
                                .collect::<Vec<_>>()
                                .join(", "),
                            times(ro_spread)
                        ),
                        same_agreement(ro_spread, 1.5),
                    ),
                    verdict(
                        "declared READ ONLY, the read-write throughput remains stable as \
                         read-only threads are added",
                        format!("{drops}; median {}", times(stable)),
                        same_agreement(stable, 1.5),
                    ),
                    rate_verdict(
                        "SI+SSN performs the best: 1.6x faster than MV2PL and MVTO",
                        ("ssn", rw(ConcurrencyControl::Ssn, one)),
                        (
                            "faster of mv2pl and mvto",
                            best_rw_of(&[ConcurrencyControl::Mv2pl, ConcurrencyControl::Mvto]),
                        ),
                        |r| ratio_agreement(r, 1.6),
                    ),
                    rate_verdict(
                        "MVOCC achieves the lowest read-write performance (validation \
                         failures)",
                        ("slowest of mvto, mv2pl, ssn", lowest_other),
                        ("mvocc", rw(ConcurrencyControl::Mvocc, one)),
                        direction,
                    ),
                ],
                [
                    "The same workload with the read-only transactions declared READ ONLY",
                    "\"The first observation is that their read-only throughput in Fig. 9b is \
                     the same because the DBMS executes these queries without checking for \
                     conflicts. And in Fig. 9a we see that their throughput for read-write \
                     transactions remains stable as the read-only queries are isolated from \
                     the read-write transactions [...] SI+SSN again performs the best because \
                     its reduced abort rate; it is 1.6× faster than MV2PL and MVTO. MVOCC \
                     achieves the lowest performance because it can result in high abort \
                     rate due to validation failure.\"",
                ],
            )
        };
        panels.push(sweep_panel(
            &format!(
                "Figure {}: read-only transactions {}",
                if declared { 9 } else { 8 },
                if declared {
                    "declared READ ONLY"
                } else {
                    "not declared"
                }
            ),
            figures,
            &paper,
            verdicts,
        ));
    }
    let notes = vec![
        "One read-write thread and 0-2 read-only threads on 2 cores (the paper: 20 and 0-20 on \
         40). The verdicts compare no read-only thread with one; with two, the threads \
         outnumber the cores and share them."
            .to_owned(),
        "A read-only transaction that loses a conflict runs again with the same keys until it \
         commits; the figure counts commits."
            .to_owned(),
        "'si' is Verso's default (snapshot isolation with precision locking at Serializable), \
         not one of the paper's protocols."
            .to_owned(),
    ];
    Ok(size.reproduction(
        &FIG8,
        "YCSB theta 0.8, 10 million rows, 100 operations per transaction; 20 read-write \
         threads (update-intensive) and 0-20 read-only threads, serializable; append-only N2O, \
         transaction-level GC",
        format!(
            "{described}; {READ_WRITE_THREADS} read-write thread and {} read-only thread(s), \
             {run_seconds} s per point, serializable; append-n2o storage, txn epochs (40 ms)",
            readers
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join("/")
        ),
        panels,
        notes,
        points,
    ))
}
