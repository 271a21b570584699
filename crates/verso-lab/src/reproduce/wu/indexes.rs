//! Wu et al. §7.5, index management: Figure 22 (logical against physical pointers as the
//! secondary indexes grow, under low and high contention) and Figure 23 (eight secondary
//! indexes, as the threads grow).
//!
//! As in §7.5 every run is update-intensive YCSB under MVTO (serializable) over
//! append-only newest-to-oldest storage, "the only scheme that supports physical index
//! pointers", with transaction-level GC (Peloton's 40 ms epochs, 'txn'). The `i`-th
//! secondary index covers attribute `i mod 10` (`crate::workloads::ycsb`); an update
//! rewrites one attribute, so under logical pointers it adds an entry to the indexes of
//! that attribute only, under physical pointers to every index.

use std::io::Write;

use verso::{ConcurrencyControl, GarbageCollector, IndexPointers, Options, VersionStorageKind};

use super::{rate_verdict, Size, FIG7_MIXES, THREADS};
use crate::reproduce::{
    commits_per_second, direction, ratio_agreement, ratio_of, run_points, sweep_figure,
    sweep_panel, times, value_at, verdict, Experiment, FigureSpec, Point, PointPlan,
    ReproduceOptions, Reproduction,
};
use crate::runner::RunConfig;
use crate::workload::{LabError, Workload};
use crate::workloads::ycsb::{YcsbConfig, YcsbWorkload};

const INDEX_SECONDS: f64 = 3.0;
/// Rows of the table: a fiftieth of the paper's 10 million, so that a point with 20
/// secondary indexes loads in seconds.
const INDEX_ROWS: u64 = 200_000;
/// §7.5's contention levels, as in §7.3.
const CONTENTION: [(f64, &str); 2] = [(0.2, "low contention"), (0.8, "high contention")];

/// Figure 22's index counts.
const FIG22_INDEXES: [f64; 6] = [1.0, 4.0, 8.0, 12.0, 16.0, 20.0];
const FIG22_QUICK_INDEXES: [f64; 2] = [1.0, 8.0];
/// Figure 23's index count and thread counts.
const FIG23_INDEXES: usize = 8;
const FIG23_THREADS: [f64; 2] = [1.0, THREADS as f64];

/// Figure 22.
pub const FIG22: Experiment = Experiment {
    name: "wu-fig22",
    title: "Index management: logical vs physical pointers as the secondary indexes grow",
    paper_ref: "Wu et al. §7.5, Figure 22",
    compares: "logical and physical index pointers on update-intensive YCSB (10 operations), \
               theta 0.2 and 0.8, 1-20 secondary indexes, MVTO, append-n2o, txn GC, 2 threads",
    full_scale: "full: 200,000 rows, 1/4/8/12/16/20 indexes, 3 s per point, 24 points (about \
                 2 min); quick: 2,000 rows, 1 and 8 indexes, 0.2 s",
    run: fig22,
};

/// Figure 23.
pub const FIG23: Experiment = Experiment {
    name: "wu-fig23",
    title: "Index management: logical vs physical pointers with eight secondary indexes as \
            the threads grow",
    paper_ref: "Wu et al. §7.5, Figure 23",
    compares: "logical and physical index pointers on update-intensive YCSB (10 operations), \
               8 secondary indexes, theta 0.2 and 0.8, 1 and 2 threads, MVTO, append-n2o, \
               txn GC",
    full_scale: "full: 200,000 rows, 3 s per point, 8 points (under a minute); quick: 2,000 \
                 rows, 0.2 s",
    run: fig23,
};

fn series(pointers: IndexPointers, contention: &str) -> String {
    format!("{} {contention}", pointers.name())
}

/// The update-intensive mixture's read share.
fn update_intensive() -> f64 {
    FIG7_MIXES
        .iter()
        .find(|(_, mix)| *mix == "update-intensive")
        .map(|(read_ratio, _)| *read_ratio)
        .expect("Figure 7 has an update-intensive mixture")
}

impl Size<'_> {
    /// §7.5's run: MVTO, serializable, 'txn', append-n2o, under `pointers`.
    fn index_config(
        &self,
        label: String,
        pointers: IndexPointers,
        threads: usize,
        run_seconds: f64,
    ) -> RunConfig {
        let options = Options::default()
            .version_storage(VersionStorageKind::AppendNewestToOldest)
            .garbage_collector(GarbageCollector::TransactionEpochs)
            .concurrency_control(ConcurrencyControl::Mvto)
            .index_pointers(pointers);
        self.serializable_run(label, options, threads, 0, run_seconds)
    }

    /// §7.5's YCSB: update-intensive, 10 operations of one attribute, Zipf `theta`, with
    /// `indexes` secondary indexes.
    fn index_ycsb(&self, theta: f64, indexes: usize) -> YcsbConfig {
        let base = self.ycsb_config(update_intensive(), theta);
        YcsbConfig {
            rows: if self.quick() { base.rows } else { INDEX_ROWS },
            secondary_indexes: indexes,
            ..base
        }
    }

    /// Runs both pointer schemes at every x under both contention levels; `point` gives
    /// the YCSB and the thread count of one x.
    fn pointer_sweep(
        &self,
        xs: &[f64],
        point: impl Fn(f64, f64) -> (YcsbConfig, usize),
        out: &mut dyn Write,
    ) -> Result<Vec<Point>, LabError> {
        let run_seconds = self.seconds(INDEX_SECONDS);
        let mut plans = Vec::new();
        for (theta, contention) in CONTENTION {
            for &x in xs {
                for pointers in IndexPointers::ALL {
                    let (ycsb, threads) = point(theta, x);
                    let series = series(pointers, contention);
                    let indexes = ycsb.secondary_indexes;
                    let describe = format!("{series}, {indexes} indexes, {threads} threads");
                    plans.push(PointPlan {
                        series,
                        x: Some(x),
                        describe: describe.clone(),
                        workload: Box::new(YcsbWorkload::new(ycsb)?),
                        config: self.index_config(describe, pointers, threads, run_seconds),
                    });
                }
            }
        }
        run_points(plans, self.options, out)
    }
}

/// Logical over physical commits/s under `contention` at `x`.
fn logical_over_physical(points: &[Point], contention: &str, x: f64) -> f64 {
    let rate = |pointers| {
        value_at(
            points,
            &series(pointers, contention),
            Some(x),
            commits_per_second,
        )
    };
    ratio_of(rate(IndexPointers::Logical), rate(IndexPointers::Physical))
}

/// One panel's throughput figure: both schemes under `contention`.
fn pointer_figure(
    points: &[Point],
    figure: &str,
    contention: &str,
    title: &str,
    x_label: &str,
) -> crate::reproduce::Figure {
    let names: Vec<String> = IndexPointers::ALL
        .iter()
        .map(|p| series(*p, contention))
        .collect();
    sweep_figure(
        FigureSpec {
            key: &format!("{figure}_{}", contention.replace(' ', "_")),
            title: &format!("{title}: commits/s"),
            x_label,
            y_label: "commits/s (mean)",
            log_x: false,
        },
        points,
        &names,
        commits_per_second,
    )
}

fn rates_at(points: &[Point], contention: &str, x: f64) -> [(&'static str, f64); 2] {
    IndexPointers::ALL.map(|pointers| {
        (
            pointers.name(),
            value_at(
                points,
                &series(pointers, contention),
                Some(x),
                commits_per_second,
            ),
        )
    })
}

fn ratios_by_x(points: &[Point], contention: &str, xs: &[f64], unit: &str) -> String {
    xs.iter()
        .map(|x| {
            format!(
                "{x} {unit}: {}",
                times(logical_over_physical(points, contention, *x))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

const NOTES: [&str; 2] = [
    "Verso's physical entry holds the exact version (an Arc of it) beside the row; a reader \
     that follows it takes the row's shared latch and checks that its snapshot reads exactly \
     that version (it sees the version and not the newer one after it). Versions carry no end \
     timestamp, so for a version behind the newest that check finds the newer neighbour in \
     the chain by address.",
    "Nothing in these runs reads through a secondary index (as in the paper's YCSB): what \
     the figures measure is what keeping the indexes costs the writers, and the collector \
     removing each unlinked version's entries.",
];

fn fig22(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let xs = size.pick(&FIG22_INDEXES, &FIG22_QUICK_INDEXES);
    let points = size.pointer_sweep(
        xs,
        |theta, indexes| (size.index_ycsb(theta, indexes as usize), THREADS),
        out,
    )?;
    let (first, last) = (xs[0], xs[xs.len() - 1]);
    let mut panels = Vec::new();
    for (theta, contention) in CONTENTION {
        let figure = pointer_figure(
            &points,
            "fig22",
            contention,
            &format!("YCSB update-intensive, {contention} (theta {theta})"),
            "secondary indexes",
        );
        let [logical, physical] = rates_at(&points, contention, last);
        let (claim, paper_ratio) = if theta > 0.5 {
            (
                "under high contention, logical pointers achieve 25% higher performance \
                 than physical pointers",
                1.25,
            )
        } else {
            (
                "under low contention, the gap grows to 40% with 20 secondary indexes",
                1.4,
            )
        };
        let growth = ratio_of(
            logical_over_physical(&points, contention, last),
            logical_over_physical(&points, contention, first),
        );
        let verdicts = vec![
            rate_verdict(
                &format!("{claim} (ours at {last} indexes)"),
                logical,
                physical,
                |r| ratio_agreement(r, paper_ratio),
            ),
            verdict(
                "the gap grows with the number of secondary indexes",
                format!(
                    "logical / physical commits/s by index count: {} (growth {})",
                    ratios_by_x(&points, contention, xs, "indexes"),
                    times(growth)
                ),
                direction(growth),
            ),
        ];
        panels.push(sweep_panel(
            &format!("Update-intensive YCSB, {contention}"),
            vec![figure],
            &[
                "YCSB update-intensive, 10 million rows, 40 threads; MVTO, append-only N2O, \
                 number of secondary indexes varied",
                "\"The results in Fig. 22b show that under high contention, logical pointer \
                 achieves 25% higher performance compared to physical pointer scheme. Under \
                 low contention, Fig. 22a shows that the performance gap is enlarged to 40% \
                 with the number of secondary indexes increased to 20.\"",
            ],
            verdicts,
        ));
    }
    let workload = YcsbWorkload::new(size.index_ycsb(CONTENTION[0].0, last as usize))?.describe();
    Ok(size.reproduction(
        &FIG22,
        "YCSB update-intensive, 10 million rows, 40 threads, 0.2 and 0.8 theta; MVTO, \
         append-only N2O, transaction-level GC, 1-20 secondary indexes",
        format!(
            "{workload} (indexes varied: {}; theta 0.2 and 0.8), {THREADS} threads, {} s per \
             point, MVTO (serializable), append-n2o, txn epochs (40 ms)",
            index_list(xs),
            size.seconds(INDEX_SECONDS)
        ),
        panels,
        NOTES.map(str::to_owned).to_vec(),
        points,
    ))
}

fn index_list(xs: &[f64]) -> String {
    xs.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("/")
}

fn fig23(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let xs = &FIG23_THREADS;
    let points = size.pointer_sweep(
        xs,
        |theta, threads| (size.index_ycsb(theta, FIG23_INDEXES), threads as usize),
        out,
    )?;
    let (first, last) = (xs[0], xs[xs.len() - 1]);
    let mut panels = Vec::new();
    for (theta, contention) in CONTENTION {
        let figure = pointer_figure(
            &points,
            "fig23",
            contention,
            &format!(
                "YCSB update-intensive, {FIG23_INDEXES} secondary indexes, {contention} \
                 (theta {theta})"
            ),
            "threads",
        );
        let [logical, physical] = rates_at(&points, contention, last);
        let shrink = ratio_of(
            logical_over_physical(&points, contention, first),
            logical_over_physical(&points, contention, last),
        );
        let mut verdicts = Vec::new();
        if theta > 0.5 {
            verdicts.push(rate_verdict(
                &format!(
                    "for the high contention workload, logical pointers' throughput is 45% \
                     higher than physical pointers' (ours at {last} threads)"
                ),
                logical,
                physical,
                |r| ratio_agreement(r, 1.45),
            ));
        } else {
            verdicts.push(rate_verdict(
                &format!(
                    "logical pointers are ahead under low contention too (ours at {last} threads)"
                ),
                logical,
                physical,
                direction,
            ));
        }
        verdicts.push(verdict(
            "the gap decreases as the threads increase",
            format!(
                "logical / physical commits/s by threads: {} (first over last {})",
                ratios_by_x(&points, contention, xs, "threads"),
                times(shrink)
            ),
            direction(shrink),
        ));
        panels.push(sweep_panel(
            &format!("Update-intensive YCSB, {FIG23_INDEXES} secondary indexes, {contention}"),
            vec![figure],
            &[
                "YCSB update-intensive, 8 secondary indexes, threads varied; MVTO, \
                 append-only N2O",
                "\"Fig. 23 further shows the advantage of logical pointers. The results show \
                 that for the high contention workload, the DBMS's throughput when using \
                 logical pointers is 45% higher than the throughput of physical pointers. This \
                 performance gap decreases in both the low contention and high contention \
                 workloads with the increase of number of threads.\"",
            ],
            verdicts,
        ));
    }
    let workload = YcsbWorkload::new(size.index_ycsb(CONTENTION[0].0, FIG23_INDEXES))?.describe();
    Ok(size.reproduction(
        &FIG23,
        "YCSB update-intensive, 10 million rows, 8 secondary indexes, threads varied (up to \
         40); MVTO, append-only N2O, transaction-level GC",
        format!(
            "{workload} (theta 0.2 and 0.8), 1 and {THREADS} threads (this machine's cores), \
             {} s per point, MVTO (serializable), append-n2o, txn epochs (40 ms)",
            size.seconds(INDEX_SECONDS)
        ),
        panels,
        NOTES.map(str::to_owned).to_vec(),
        points,
    ))
}
