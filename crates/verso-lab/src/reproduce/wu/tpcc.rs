//! Wu et al. on TPC-C with StockScan: Figure 17 (§7.3, the three version storages as the
//! threads grow: throughput and StockScan latency) and Figures 24-25 (§7.6, the MVCC
//! configurations of the systems in Table 1).
//!
//! Every run has one OLAP thread that runs StockScan (a scan of the STOCK table counting
//! items per warehouse, in a READ ONLY snapshot) back to back, beside the TPC-C terminals,
//! as §7.6 says ("one thread to repeatedly execute the StockScan query"). A scan's mean
//! latency is the run's length over the scans it completed.

use std::io::Write;

use verso::{ConcurrencyControl, GarbageCollector, IndexPointers, Options, VersionStorageKind};

use super::{rate_verdict, Size, THREADS};
use crate::format::compact;
use crate::metrics::RunResult;
use crate::reproduce::{
    commits_per_second, direction, figure_of, ratio_agreement, ratio_of, run_points, sweep_figure,
    sweep_panel, times, value_at, verdict, Experiment, Figure, FigureLine, FigureSpec, Point,
    PointPlan, ReproduceOptions, Reproduction, Table,
};
use crate::runner::RunConfig;
use crate::workload::{LabError, Workload};
use crate::workloads::tpcc::{Tpcc, TpccConfig};

const TPCC_SECONDS: f64 = 8.0;
/// Figure 17's warehouses: one per OLTP thread at the most threads (the paper: 40
/// warehouses for up to 40 threads).
const FIG17_WAREHOUSES: u32 = THREADS as u32;
const FIG17_THREADS: [f64; 2] = [1.0, THREADS as f64];
/// Figure 17's storages, in the paper's order.
const STORAGES: [VersionStorageKind; 3] = [
    VersionStorageKind::AppendNewestToOldest,
    VersionStorageKind::TimeTravel,
    VersionStorageKind::Delta,
];
/// Figures 24-25's contention levels: warehouses for the two OLTP threads.
const CONTENTION: [(u32, &str); 2] = [(2, "low contention"), (1, "high contention")];

/// Figure 17.
pub const FIG17: Experiment = Experiment {
    name: "wu-fig17",
    title: "TPC-C with StockScan: the version storages as the threads grow",
    paper_ref: "Wu et al. §7.3, Figure 17",
    compares: "append-n2o, time-travel and delta on TPC-C (2 warehouses) with one StockScan \
               thread, 1 and 2 OLTP threads, MVTO, txn GC; commits/s and StockScan latency",
    full_scale: "full: 2 warehouses, 8 s per point, 6 points (about 1 min); quick: tiny \
                 TPC-C, 0.2 s",
    run: fig17,
};

/// Figures 24 and 25.
pub const FIG24: Experiment = Experiment {
    name: "wu-fig24",
    title: "The MVCC configurations of Table 1 on TPC-C with StockScan: throughput and scan \
            latency",
    paper_ref: "Wu et al. §7.6, Figures 24-25 (Table 1)",
    compares: "Oracle/MySQL, Postgres, HYRISE, Hekaton, MemSQL, SAP HANA, NuoDB and HyPer's \
               protocol, storage, GC and index pointers on TPC-C (2 warehouses: low \
               contention; 1: high) with 2 OLTP threads and one StockScan thread",
    full_scale: "full: 8 s per point, 16 points (about 3 min); quick: tiny TPC-C, 0.2 s",
    run: fig24,
};

/// One row of Wu et al.'s Table 1, as Verso runs it.
struct System {
    name: &'static str,
    protocol: ConcurrencyControl,
    storage: VersionStorageKind,
    gc: GarbageCollector,
    pointers: IndexPointers,
    /// Where Verso's run differs from the table, and why.
    differs: Option<&'static str>,
}

/// Table 1, in the paper's order.
fn systems() -> [System; 8] {
    use ConcurrencyControl::{Mv2pl, Mvocc};
    use GarbageCollector::{Cooperative, Hana, NoCollection, TransactionEpochs, Vacuum};
    use IndexPointers::{Logical, Physical};
    use VersionStorageKind::{AppendNewestToOldest, AppendOldestToNewest, Delta, TimeTravel};
    let system = |name, protocol, storage, gc, pointers, differs| System {
        name,
        protocol,
        storage,
        gc,
        pointers,
        differs,
    };
    [
        system("oracle/mysql", Mv2pl, Delta, Vacuum, Logical, None),
        system(
            "postgres",
            Mv2pl,
            AppendOldestToNewest,
            Vacuum,
            Physical,
            None,
        ),
        system(
            "hyrise",
            Mvocc,
            AppendNewestToOldest,
            NoCollection,
            Physical,
            None,
        ),
        system(
            "hekaton",
            Mvocc,
            AppendOldestToNewest,
            Cooperative,
            Physical,
            None,
        ),
        system(
            "memsql",
            Mvocc,
            AppendNewestToOldest,
            Vacuum,
            Physical,
            None,
        ),
        system(
            "sap hana",
            Mv2pl,
            TimeTravel,
            Hana,
            Logical,
            Some(
                "GC 'hana' (the Steam paper's HANA: a background thread pruning intervals \
                 every 1 ms) for Table 1's hybrid GC",
            ),
        ),
        system("nuodb", Mv2pl, AppendNewestToOldest, Vacuum, Logical, None),
        system("hyper", Mvocc, Delta, TransactionEpochs, Logical, None),
    ]
}

/// StockScan's mean latency in milliseconds: the run's length over the scans the one
/// StockScan thread completed (infinite if none completed).
fn scan_latency_ms(run: &RunResult) -> f64 {
    let seconds = run.configuration.duration_seconds.unwrap_or(f64::NAN);
    let scans = run.totals.olap_queries as f64;
    if scans > 0.0 {
        seconds * run.configuration.olap_workers as f64 / scans * 1e3
    } else {
        f64::INFINITY
    }
}

impl Size<'_> {
    fn tpcc_with_stock_scan(&self, warehouses: u32) -> Result<Box<dyn Workload>, LabError> {
        let config = if self.quick() {
            TpccConfig::tiny()
        } else {
            TpccConfig::standard(warehouses)
        };
        Ok(Box::new(Tpcc::new(config.with_seed(self.options.seed))?))
    }

    /// A serializable TPC-C run of `options` with `oltp` terminals and one StockScan
    /// thread.
    fn stock_scan_config(&self, label: String, options: Options, oltp: usize) -> RunConfig {
        self.serializable_run(label, options, oltp, 1, self.seconds(TPCC_SECONDS))
    }
}

fn fig17(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let mut plans = Vec::new();
    for threads in FIG17_THREADS {
        for storage in STORAGES {
            let series = storage.name().to_owned();
            let describe = format!("{series}, {threads} OLTP threads");
            let design = Options::default()
                .version_storage(storage)
                .garbage_collector(GarbageCollector::TransactionEpochs)
                .concurrency_control(ConcurrencyControl::Mvto);
            plans.push(PointPlan {
                series,
                x: Some(threads),
                describe: describe.clone(),
                workload: size.tpcc_with_stock_scan(FIG17_WAREHOUSES)?,
                config: size.stock_scan_config(describe, design, threads as usize),
            });
        }
    }
    let scale = size.tpcc_with_stock_scan(FIG17_WAREHOUSES)?.describe();
    let points = run_points(plans, options, out)?;
    let names: Vec<String> = STORAGES.iter().map(|s| s.name().to_owned()).collect();
    let figure = |key: &str, title: &str, y_label: &str, value: fn(&RunResult) -> f64| {
        sweep_figure(
            FigureSpec {
                key,
                title,
                x_label: "OLTP threads (plus one StockScan thread)",
                y_label,
                log_x: false,
            },
            &points,
            &names,
            value,
        )
    };
    let throughput = figure(
        "fig17_throughput",
        "TPC-C commits/s by storage",
        "commits/s (mean)",
        commits_per_second,
    );
    let latency = figure(
        "fig17_stock_scan_latency",
        "StockScan latency by storage",
        "ms per scan (mean)",
        scan_latency_ms,
    );
    let most = FIG17_THREADS[FIG17_THREADS.len() - 1];
    let at = |storage: VersionStorageKind, x: f64, value: fn(&RunResult) -> f64| {
        value_at(&points, storage.name(), Some(x), value)
    };
    let rate = |storage| at(storage, most, commits_per_second);
    let latency_at = |storage, x| at(storage, x, scan_latency_ms);
    let append = VersionStorageKind::AppendNewestToOldest;
    let time_travel = VersionStorageKind::TimeTravel;
    let delta = VersionStorageKind::Delta;
    let whole_copy_latency = latency_at(append, most).min(latency_at(time_travel, most));
    let verdicts = vec![
        rate_verdict(
            "append-only storage achieves better performance than the other two schemes",
            ("append-n2o", rate(append)),
            ("best other", rate(time_travel).max(rate(delta))),
            direction,
        ),
        rate_verdict(
            "time-travel suffers lower throughput",
            (
                "slower of append-n2o and delta",
                rate(append).min(rate(delta)),
            ),
            ("time-travel", rate(time_travel)),
            direction,
        ),
        verdict(
            "append-only and time-travel keep StockScan's latency 25-47% lower than delta's",
            format!(
                "at {most} OLTP threads: delta {:.1} ms, faster whole-copy storage {:.1} ms \
                 ({})",
                latency_at(delta, most),
                whole_copy_latency,
                times(ratio_of(latency_at(delta, most), whole_copy_latency))
            ),
            ratio_agreement(
                ratio_of(latency_at(delta, most), whole_copy_latency),
                1.0 / (1.0 - 0.25),
            ),
        ),
        verdict(
            "with delta storage, the scan's latency grows near-linearly with the threads",
            format!(
                "delta's StockScan latency: {:.1} ms at 1 OLTP thread, {:.1} ms at {most}",
                latency_at(delta, 1.0),
                latency_at(delta, most)
            ),
            direction(ratio_of(latency_at(delta, most), latency_at(delta, 1.0))),
        ),
    ];
    let panel = sweep_panel(
        "TPC-C with StockScan",
        vec![throughput, latency],
        &[
            "TPC-C, 40 warehouses, threads varied (up to 40), one of them running StockScan; \
             MVTO, transaction-level GC",
            "\"The results in Fig. 17a show that append-only storage achieves comparatively \
             better performance than the other two schemes. [...] Time-travel scheme suffers \
             lower throughput as it does not bring any benefits for read or write operations. \
             In Fig. 17b, we see that the append-only and time-travel schemes are better for \
             table scan queries. With delta storage, the latency of the scan queries grows \
             near-linearly with the increase of number of threads (which is bad), while the \
             append-only and time-travel schemes maintain a latency that is 25–47% lower when \
             using 40 threads.\"",
        ],
        verdicts,
    );
    Ok(size.reproduction(
        &FIG17,
        "TPC-C, 40 warehouses, up to 40 threads, StockScan; MVTO, transaction-level GC, \
         append-only / time-travel / delta",
        format!(
            "{scale}, 1 and {THREADS} OLTP threads plus one StockScan thread, {} s per point, \
             MVTO (serializable), txn epochs (40 ms)",
            size.seconds(TPCC_SECONDS)
        ),
        vec![panel],
        vec![
            "With two cores, the run at two OLTP threads puts three threads on two cores: \
             StockScan shares a core with a terminal."
                .to_owned(),
            "Verso's delta storage reads the newest version in place; a scan applies \
             before-images only for rows changed after its snapshot began."
                .to_owned(),
        ],
        points,
    ))
}

/// A bar figure: one bar per series at its position in `names`.
pub(super) fn bars(
    spec: FigureSpec,
    points: &[Point],
    names: &[String],
    value: impl Fn(&RunResult) -> f64,
) -> Figure {
    let lines = names
        .iter()
        .enumerate()
        .map(|(i, name)| FigureLine {
            label: name.clone(),
            points: points
                .iter()
                .filter(|p| &p.series == name)
                .map(|p| [i as f64, value(&p.run)])
                .collect(),
        })
        .collect();
    figure_of(spec, lines)
}

fn system_series(system: &System, contention: &str) -> String {
    format!("{} {contention}", system.name)
}

fn fig24(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let systems = systems();
    let mut plans = Vec::new();
    for (warehouses, contention) in CONTENTION {
        for system in &systems {
            let series = system_series(system, contention);
            let design = Options::default()
                .version_storage(system.storage)
                .garbage_collector(system.gc)
                .concurrency_control(system.protocol)
                .index_pointers(system.pointers);
            plans.push(PointPlan {
                series: series.clone(),
                x: None,
                describe: series.clone(),
                workload: size.tpcc_with_stock_scan(warehouses)?,
                config: size.stock_scan_config(series, design, THREADS),
            });
        }
    }
    let points = run_points(plans, options, out)?;
    let rate = |name: &str| value_at(&points, name, None, commits_per_second);
    let latency = |name: &str| value_at(&points, name, None, scan_latency_ms);
    let mut panels = Vec::new();
    for (warehouses, contention) in CONTENTION {
        let names: Vec<String> = systems
            .iter()
            .map(|s| system_series(s, contention))
            .collect();
        let key = contention.replace(' ', "_");
        let x_label = format!(
            "configuration ({})",
            systems
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let panel_bars =
            |figure: &str, what: &str, y_label: &str, metric: fn(&RunResult) -> f64| {
                bars(
                    FigureSpec {
                        key: &format!("{figure}_{key}"),
                        title: &format!("{what}, {contention} ({warehouses} warehouses)"),
                        x_label: &x_label,
                        y_label,
                        log_x: false,
                    },
                    &points,
                    &names,
                    metric,
                )
            };
        let throughput = panel_bars(
            "fig24",
            "TPC-C commits/s",
            "commits/s (mean)",
            commits_per_second,
        );
        let scan = panel_bars(
            "fig25",
            "StockScan latency",
            "ms per scan (mean)",
            scan_latency_ms,
        );
        let of = |name: &str| {
            system_series(
                systems
                    .iter()
                    .find(|s| s.name == name)
                    .expect("a Table 1 system"),
                contention,
            )
        };
        let highest = |names: &[&str], value: &dyn Fn(&str) -> f64| {
            names.iter().map(|n| value(&of(n))).fold(f64::NAN, f64::max)
        };
        let lowest = |names: &[&str], value: &dyn Fn(&str) -> f64| {
            names.iter().map(|n| value(&of(n))).fold(f64::NAN, f64::min)
        };
        let mv2pl_best = ["oracle/mysql", "nuodb"];
        let mvocc = ["hyrise", "memsql", "hyper"];
        let o2n = ["postgres", "hekaton"];
        let others: Vec<&str> = systems
            .iter()
            .map(|s| s.name)
            .filter(|n| !o2n.contains(n))
            .collect();
        let delta = ["oracle/mysql", "hyper"];
        let not_delta: Vec<&str> = systems
            .iter()
            .map(|s| s.name)
            .filter(|n| !delta.contains(n))
            .collect();
        let verdicts = vec![
            rate_verdict(
                "the Oracle/MySQL and NuoDB configurations perform the best",
                (
                    "slower of oracle/mysql and nuodb",
                    lowest(&mv2pl_best, &rate),
                ),
                (
                    "best of the rest",
                    systems
                        .iter()
                        .map(|s| s.name)
                        .filter(|n| !mv2pl_best.contains(n))
                        .map(|n| rate(&of(n)))
                        .fold(f64::NAN, f64::max),
                ),
                direction,
            ),
            rate_verdict(
                "HYRISE, MemSQL and HyPer's (MVOCC) configurations yield lower performance \
                 (than Oracle/MySQL and NuoDB)",
                (
                    "slower of oracle/mysql and nuodb",
                    lowest(&mv2pl_best, &rate),
                ),
                ("best of hyrise, memsql, hyper", highest(&mvocc, &rate)),
                direction,
            ),
            rate_verdict(
                "Postgres and Hekaton's configurations (append-only O2N) lead to the worst \
                 performance",
                ("slowest of the others", lowest(&others, &rate)),
                ("faster of postgres and hekaton", highest(&o2n, &rate)),
                direction,
            ),
            verdict(
                "StockScan's latency is the worst with delta storage (Oracle/MySQL, HyPer)",
                format!(
                    "StockScan ms: the faster delta configuration {}, the slowest other {}",
                    compact(lowest(&delta, &latency)),
                    compact(highest(&not_delta, &latency))
                ),
                direction(ratio_of(
                    lowest(&delta, &latency),
                    highest(&not_delta, &latency),
                )),
            ),
        ];
        let mut panel = sweep_panel(
            &format!("TPC-C with StockScan, {contention} ({warehouses} warehouses)"),
            vec![throughput, scan],
            &[
                "TPC-C, low and high contention, one thread running StockScan repeatedly; \
                 Peloton configured as each system of Table 1",
                "\"As shown in Fig. 24, the DBMS performs the best on both the low-contention \
                 and high-contention workloads with the Oracle/MySQL and NuoDB configurations. \
                 [...] HYRISE, MemSQL, and HyPer's configurations yield relatively lower \
                 performance, as the use of MVOCC protocol can bring high overhead due to the \
                 read-set traversal required by the validation phase. Postgres and Hekaton's \
                 configurations lead to the worst performance, and the major reason is that \
                 the use of append-only storage with O2N ordering severely restricts the \
                 scalability of the system. [...] But the latency results in Fig. 25 show that \
                 the DBMS's performance is the worst with delta storage.\"",
            ],
            verdicts,
        );
        panel.table = Some(Table {
            header: [
                "configuration",
                "protocol / storage / GC / pointers",
                "commits/s",
                "StockScan ms",
            ]
            .map(str::to_owned)
            .into(),
            rows: systems
                .iter()
                .map(|s| {
                    let name = system_series(s, contention);
                    vec![
                        s.name.to_owned(),
                        format!(
                            "{} / {} / {} / {}",
                            s.protocol.short_name(),
                            s.storage.name(),
                            s.gc.name(),
                            s.pointers.name()
                        ),
                        compact(rate(&name)),
                        format!("{:.1}", latency(&name)),
                    ]
                })
                .collect(),
        });
        panels.push(panel);
    }
    let mut notes: Vec<String> = systems
        .iter()
        .filter_map(|s| s.differs.map(|d| format!("{}: {d}.", s.name)))
        .collect();
    notes.push(
        "Two OLTP threads and the StockScan thread share two cores. StockScan runs declared \
         READ ONLY (`Database::begin_read_only`); docs/design/protocols.md says what each \
         protocol checks of such a transaction."
            .to_owned(),
    );
    let scale = size.tpcc_with_stock_scan(CONTENTION[0].0)?.describe();
    Ok(size.reproduction(
        &FIG24,
        "TPC-C low and high contention, one StockScan thread; Peloton as Oracle/MySQL, \
         Postgres, HYRISE, Hekaton, MemSQL, SAP HANA, NuoDB and HyPer (Table 1)",
        format!(
            "{scale} (low contention; high: 1 warehouse), {THREADS} OLTP threads plus one \
             StockScan thread, {} s per point, serializable",
            size.seconds(TPCC_SECONDS)
        ),
        panels,
        notes,
        points,
    ))
}
