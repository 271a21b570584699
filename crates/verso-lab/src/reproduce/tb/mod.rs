//! The experiments of Wei et al.: "TB-Collect: Efficient Garbage Collection for
//! Non-Volatile Memory Online Transaction Processing Engines", Electronics 2025, §5.2,
//! scaled to a 2-core machine: Figure 8 (YCSB scalability at 50% and 100% writes, and the
//! write share), Figure 9 (skew) and Figure 10 (transaction size) here; Figure 7 (TPC-C
//! throughput, scalability and latency) in [`tpcc`].
//!
//! The paper's systems are DBx1000 under MVTO with one collector each over persistent
//! memory (its Table 2); here each is a configuration of the same engine over the same
//! emulated region (`docs/design/persistent-memory.md`: a file on tmpfs, 256-byte lines
//! counted, no delay), MVTO, serializable:
//! - NoGC: append-only NVM storage, no collection (`append-nvm` / `none`): "DBx1000 with
//!   NVM append-only storage, without garbage collection" (Table 2);
//! - TB-Collect: the tile-block storage, block-level collection (`tile-block` /
//!   `tb-collect`);
//! - Steam and N2DB: append-only NVM storage, timely version chain pruning (`append-nvm` /
//!   `tvcp`): the paper's two differ in NVM-write details it does not give, so they are
//!   one line here (`docs/design/append-nvm.md`);
//! - Zen: append-only NVM storage, background scanning (`append-nvm` / `zen`);
//! - OneShot: delta storage with partitions (`delta-nvm` / `oneshot`).
//!
//! The paper quotes throughput as a share of NoGC's, and so do the verdicts: absolute rates
//! on 2 shared cores and emulated media say nothing about 40 cores and Optane.

mod consolidation;
mod media;
mod over_time;
mod tpcc;

use std::io::Write;

use verso::pmem::PmOptions;
use verso::{
    ChainConsolidation, ConcurrencyControl, GarbageCollector, Isolation, Options,
    VersionStorageKind,
};

use super::{
    commits_per_second, direction, figure_of, ratio_of, reproduction_of, run_points,
    same_agreement, seconds, sweep_panel, verdict, Agreement, Experiment, FigureLine, FigureSpec,
    PaperSource, Point, PointPlan, ReproduceOptions, Reproduction, Size, Verdict,
};
use crate::metrics::{median, RunResult};
use crate::runner::RunConfig;
use crate::workload::{LabError, Workload};
use crate::workloads::tpcc::TpccConfig;
use crate::workloads::ycsb::{YcsbConfig, YcsbWorkload};

const PAPER: PaperSource = PaperSource {
    citation: "Wei, Li, Zhang, et al.: TB-Collect: Efficient Garbage Collection for \
               Non-Volatile Memory Online Transaction Processing Engines, Electronics 2025",
    machine: "DBx1000 under MVTO on 2 Xeon Gold 6242R (40 cores, 80 threads), 384 GB DRAM, \
              1.5 TB Intel Optane DC persistent memory in App Direct mode",
};

/// One of the paper's systems: its name in the paper and its configuration here.
#[derive(Clone, Copy)]
struct System {
    name: &'static str,
    storage: VersionStorageKind,
    gc: GarbageCollector,
    /// tb-collect's chain consolidation (the default for every other collector).
    consolidation: ChainConsolidation,
}

const NOGC: System = System {
    name: "NoGC",
    storage: VersionStorageKind::AppendNvm,
    gc: GarbageCollector::NoCollection,
    consolidation: ChainConsolidation::KeptTiles,
};
const TB: System = System {
    name: "TB-Collect",
    storage: VersionStorageKind::TileBlock,
    gc: GarbageCollector::TbCollect,
    consolidation: ChainConsolidation::KeptTiles,
};
const STEAM_N2DB: System = System {
    name: "Steam/N2DB (tvcp)",
    storage: VersionStorageKind::AppendNvm,
    gc: GarbageCollector::Tvcp,
    consolidation: ChainConsolidation::KeptTiles,
};
const ZEN: System = System {
    name: "Zen",
    storage: VersionStorageKind::AppendNvm,
    gc: GarbageCollector::Zen,
    consolidation: ChainConsolidation::KeptTiles,
};
const ONESHOT: System = System {
    name: "OneShot",
    storage: VersionStorageKind::DeltaNvm,
    gc: GarbageCollector::OneShot,
    consolidation: ChainConsolidation::KeptTiles,
};

/// TB-Collect-hash (§5.4, Figure 11): TB-Collect with OneShot's hash index instead of kept
/// tiles.
const TB_HASH: System = System {
    name: "TB-Collect-hash",
    storage: VersionStorageKind::TileBlock,
    gc: GarbageCollector::TbCollect,
    consolidation: ChainConsolidation::HashIndex,
};

/// Every system, in the order the figures list them.
const SYSTEMS: [System; 5] = [NOGC, TB, STEAM_N2DB, ZEN, ONESHOT];
/// The collecting systems other than TB-Collect: what it is compared with.
const OTHERS: [System; 3] = [STEAM_N2DB, ZEN, ONESHOT];

/// Rows of the YCSB table here (the paper gives none for Figures 8-10; its Figure 14 used
/// 5 million): 100-byte rows (10 fields of 10 bytes) and an 8-byte key, as §5.1 says.
const ROWS: u64 = 1_000_000;
/// TPC-C's warehouses in every experiment on TPC-C (the paper: 100 to 500 for 40 threads;
/// here one per thread at the most threads, so that NewOrder's district counters do not
/// decide the result).
const TPCC_WAREHOUSES: u32 = 4;
/// The paper's transaction size in Figures 8 and 9.
const OPERATIONS: usize = 20;
/// Seconds per point (the paper: not stated).
const POINT_SECONDS: f64 = 5.0;
/// The worker threads of the fixed-thread panels: this machine's cores (the paper: 40, its
/// physical cores).
const THREADS: usize = 2;

/// Figure 8a/8b's thread counts: up to twice the cores, as the paper's 10-80 on 40.
const FIG8_THREADS: [f64; 3] = [1.0, 2.0, 4.0];
const FIG8_QUICK_THREADS: [f64; 2] = [1.0, 2.0];
/// Figure 8c's write shares (the paper: 10% to 100% in steps of 10).
const FIG8_WRITE_SHARES: [f64; 5] = [0.2, 0.4, 0.6, 0.8, 1.0];
const FIG8_QUICK_WRITE_SHARES: [f64; 3] = [0.2, 0.6, 1.0];
/// Figure 9's skews.
const FIG9_THETAS: [f64; 4] = [0.0, 0.5, 0.9, 0.95];
const FIG9_QUICK_THETAS: [f64; 2] = [0.0, 0.9];
/// Figure 10's transaction sizes (the paper: 1 to 80).
const FIG10_SIZES: [f64; 6] = [1.0, 5.0, 10.0, 20.0, 40.0, 80.0];
const FIG10_QUICK_SIZES: [f64; 2] = [1.0, 20.0];

/// Runs of each point at the full size, the systems alternated within each round (every
/// system at one x, then the next x, then the next round), and the median taken: single
/// runs of a few seconds move by a third between phases of this VM.
const ROUNDS: usize = 3;

/// A share of NoGC agrees with the paper's if within this factor of it (about ±15%).
const SHARE_TOLERANCE: f64 = 1.15;

pub use consolidation::FIG11;
pub use media::{FIG1, FIG15B};
pub use over_time::{FIG12, FIG13, FIG14};
pub use tpcc::FIG7;

/// Figure 8.
pub const FIG8: Experiment = Experiment {
    name: "tb-fig8",
    title: "YCSB scalability at 50% and 100% writes, and throughput as the share of writes \
            grows",
    paper_ref: "Wei et al. §5.2, Figure 8",
    compares: "NoGC, TB-Collect, Steam/N2DB, Zen and OneShot on emulated persistent memory, \
               YCSB (20 operations, theta 0), MVTO: 1-4 threads at 50% and 100% writes, and \
               20-100% writes at 2 threads",
    full_scale: "full: 1,000,000 rows of 100 bytes, 5 s per run, 55 points of 3 runs (about \
                 25 min); quick: 2,000 rows, 0.2 s",
    run: fig8,
};

/// Figure 9.
pub const FIG9: Experiment = Experiment {
    name: "tb-fig9",
    title: "YCSB under skew: throughput as Zipf theta grows",
    paper_ref: "Wei et al. §5.2, Figure 9",
    compares: "NoGC, TB-Collect, Steam/N2DB, Zen and OneShot on emulated persistent memory, \
               YCSB (20 operations, 50% writes), MVTO, 2 threads, theta 0-0.95",
    full_scale: "full: 1,000,000 rows of 100 bytes, theta 0/0.5/0.9/0.95, 5 s per run, 20 \
                 points of 3 runs (about 9 min); quick: 2,000 rows, theta 0 and 0.9",
    run: fig9,
};

/// Figure 10.
pub const FIG10: Experiment = Experiment {
    name: "tb-fig10",
    title: "YCSB transaction size: transactions and operations per second as a transaction \
            grows",
    paper_ref: "Wei et al. §5.2, Figure 10",
    compares: "NoGC, TB-Collect, Steam/N2DB, Zen and OneShot on emulated persistent memory, \
               YCSB (theta 0, 50% writes), MVTO, 2 threads, 1-80 operations per transaction",
    full_scale: "full: 1,000,000 rows of 100 bytes, 6 sizes, 5 s per run, 30 points of 3 runs \
                 (about 13 min); quick: 2,000 rows, 1 and 20 operations",
    run: fig10,
};

/// The series name of `system` in the panel tagged `tag`.
fn series(system: System, tag: &str) -> String {
    format!("{} {tag}", system.name)
}

/// One panel of a sweep: its tag (added to the series names), its file-name key, its
/// title, the x axis, the run at each x (threads and the workload), and the emulated
/// media at each x if the panel varies it (else the default region: 256-byte lines, no
/// delay).
struct SweepPanel {
    tag: &'static str,
    key: &'static str,
    title: &'static str,
    x_label: &'static str,
    run_at: Box<dyn Fn(f64) -> Result<ThreadsAndWorkload, LabError>>,
    media_at: Option<fn(f64) -> Result<PmOptions, LabError>>,
}

/// A point's worker threads and workload.
type ThreadsAndWorkload = (usize, Box<dyn Workload>);

/// A YCSB point's threads and workload.
fn ycsb_at(threads: usize, ycsb: YcsbConfig) -> Result<ThreadsAndWorkload, LabError> {
    Ok((threads, Box::new(YcsbWorkload::new(ycsb)?)))
}

impl Size<'_> {
    /// §5.2's YCSB: 100-byte rows, `OPERATIONS` operations, theta 0, `write_share` of them
    /// updates (of one field; every storage here writes a whole new version or a whole
    /// before-image), reads of the whole row.
    fn tb_ycsb(&self, write_share: f64) -> YcsbConfig {
        let rows = if self.quick() {
            YcsbConfig::tiny().rows
        } else {
            ROWS
        };
        YcsbConfig {
            rows,
            operations: OPERATIONS,
            read_ratio: 1.0 - write_share,
            theta: 0.0,
            ..YcsbConfig::new(1)
        }
    }

    /// This size's TPC-C, with the experiment's seed.
    fn tb_tpcc(&self) -> TpccConfig {
        if self.quick() {
            TpccConfig::tiny()
        } else {
            TpccConfig::standard(TPCC_WAREHOUSES)
        }
        .with_seed(self.options.seed)
    }

    /// "TPC-C, 4 warehouses" or the quick size's.
    fn tb_tpcc_words(&self) -> String {
        if self.quick() {
            "tiny TPC-C".to_owned()
        } else {
            format!("TPC-C, {TPCC_WAREHOUSES} warehouses")
        }
    }

    /// Runs of each point of a sweep: [`ROUNDS`], or one at the quick size.
    fn rounds(&self) -> usize {
        if self.quick() {
            1
        } else {
            ROUNDS
        }
    }

    /// A serializable MVTO run of `system` with `threads` workers for `full_seconds` (or
    /// the quick length).
    fn system_config(
        &self,
        label: String,
        system: System,
        threads: usize,
        full_seconds: f64,
    ) -> RunConfig {
        let options = Options::default()
            .version_storage(system.storage)
            .garbage_collector(system.gc)
            .chain_consolidation(system.consolidation)
            .concurrency_control(ConcurrencyControl::Mvto);
        RunConfig {
            isolation: Isolation::Serializable,
            ..self.config(
                label,
                options,
                threads,
                0,
                seconds(self.seconds(full_seconds)),
            )
        }
    }

    /// Every system at every x of every panel (panels' xs given in order), `full_seconds`
    /// per point.
    fn system_sweep(
        &self,
        panels: &[(SweepPanel, &[f64])],
        full_seconds: f64,
        out: &mut dyn Write,
    ) -> Result<Vec<Point>, LabError> {
        self.sweep_of(&SYSTEMS, panels, full_seconds, out)
    }

    /// [`Size::system_sweep`] of `systems` only.
    fn sweep_of(
        &self,
        systems: &[System],
        panels: &[(SweepPanel, &[f64])],
        full_seconds: f64,
        out: &mut dyn Write,
    ) -> Result<Vec<Point>, LabError> {
        let rounds = self.rounds();
        let mut plans = Vec::new();
        for round in 1..=rounds {
            for (panel, xs) in panels {
                for &x in *xs {
                    for &system in systems {
                        let series = series(system, panel.tag);
                        let describe =
                            format!("{series}, {} {x}, round {round}/{rounds}", panel.x_label);
                        let (threads, workload) = (panel.run_at)(x)?;
                        let mut config =
                            self.system_config(describe.clone(), system, threads, full_seconds);
                        if let Some(media_at) = panel.media_at {
                            config.options = config.options.persistent_memory(media_at(x)?);
                        }
                        plans.push(PointPlan {
                            series,
                            x: Some(x),
                            describe,
                            workload,
                            config,
                        });
                    }
                }
            }
        }
        run_points(plans, self.options, out)
    }
}

/// The runs (one per round) of `system` in the panel tagged `tag` at `x`.
fn runs_of<'p>(
    points: &'p [Point],
    system: System,
    tag: &str,
    x: f64,
) -> impl Iterator<Item = &'p RunResult> {
    let series = series(system, tag);
    points
        .iter()
        .filter(move |p| p.series == series && p.x == Some(x))
        .map(|p| &p.run)
}

/// Commits/s of `system` in the panel tagged `tag` at `x`: the median over the rounds (NaN
/// without a run).
fn rate(points: &[Point], system: System, tag: &str, x: f64) -> f64 {
    median_over_rounds(points, system, tag, x, commits_per_second)
}

/// `value` of `system`'s runs in the panel tagged `tag` at `x`: the median over the rounds
/// (NaN without a run).
fn median_over_rounds(
    points: &[Point],
    system: System,
    tag: &str,
    x: f64,
    value: fn(&RunResult) -> f64,
) -> f64 {
    let values: Vec<f64> = runs_of(points, system, tag, x).map(value).collect();
    if values.is_empty() {
        f64::NAN
    } else {
        median(values)
    }
}

/// The run of median commits/s of `system` in the panel tagged `tag` at `x` (the lower
/// middle one of an even count): what the tables of one run's details (latency) show.
fn median_run<'p>(points: &'p [Point], system: System, tag: &str, x: f64) -> Option<&'p RunResult> {
    let mut runs: Vec<&RunResult> = runs_of(points, system, tag, x).collect();
    runs.sort_by(|a, b| commits_per_second(a).total_cmp(&commits_per_second(b)));
    runs.get(runs.len().saturating_sub(1) / 2).copied()
}

/// `system`'s throughput as a share of NoGC's, in the panel tagged `tag` at `x`.
fn share(points: &[Point], system: System, tag: &str, x: f64) -> f64 {
    ratio_of(rate(points, system, tag, x), rate(points, NOGC, tag, x))
}

/// The panel's two figures: commits/s, and each collector's share of NoGC's.
fn panel_figures(points: &[Point], panel: &SweepPanel, xs: &[f64]) -> Vec<super::Figure> {
    panel_figures_of(points, &SYSTEMS, panel, xs)
}

/// [`panel_figures`] of `systems` only (NoGC first).
fn panel_figures_of(
    points: &[Point],
    systems: &[System],
    panel: &SweepPanel,
    xs: &[f64],
) -> Vec<super::Figure> {
    debug_assert_eq!(systems[0].name, NOGC.name, "shares are of NoGC's");
    let line = |system: System, value: &dyn Fn(f64) -> f64| FigureLine {
        label: series(system, panel.tag),
        points: xs.iter().map(|&x| [x, value(x)]).collect(),
    };
    let rates = figure_of(
        FigureSpec {
            key: &format!("{}_rate", panel.key),
            title: &format!("{}: commits/s", panel.title),
            x_label: panel.x_label,
            y_label: "commits/s (mean of a run, median of the rounds)",
            log_x: false,
        },
        systems
            .iter()
            .map(|&system| line(system, &|x| rate(points, system, panel.tag, x)))
            .collect(),
    );
    let lines = systems[1..]
        .iter()
        .map(|&system| line(system, &|x| share(points, system, panel.tag, x)))
        .collect();
    let shares = figure_of(
        FigureSpec {
            key: &format!("{}_share", panel.key),
            title: &format!("{}: throughput as a share of NoGC's", panel.title),
            x_label: panel.x_label,
            y_label: "commits/s ÷ NoGC's",
            log_x: false,
        },
        lines,
    );
    vec![rates, shares]
}

/// "A ≈ p of NoGC": our share against the paper's, within [`SHARE_TOLERANCE`].
fn share_verdict(what: &str, paper: &str, ours: f64, paper_share: f64) -> Verdict {
    verdict(
        paper,
        format!("{what}: {:.0}% of NoGC's", ours * 100.0),
        same_agreement(ratio_of(ours, paper_share), SHARE_TOLERANCE),
    )
}

/// "TB-Collect ahead of every other collector at `x`": its rate over the best other's.
fn lead_verdict(points: &[Point], tag: &str, x: f64, paper: &str, at: &str) -> Verdict {
    let (best, best_rate) = best_other(points, tag, x);
    let lead = ratio_of(rate(points, TB, tag, x), best_rate);
    verdict(
        paper,
        format!(
            "{at}: TB-Collect {:.2}x the best other ({})",
            lead, best.name
        ),
        direction(lead),
    )
}

/// The fastest collector other than TB-Collect at `x`, and its rate.
fn best_other(points: &[Point], tag: &str, x: f64) -> (System, f64) {
    OTHERS.iter().map(|&s| (s, rate(points, s, tag, x))).fold(
        (STEAM_N2DB, f64::NAN),
        |best, next| {
            if best.1.is_nan() || next.1 > best.1 {
                next
            } else {
                best
            }
        },
    )
}

/// Each system's share of NoGC at each x, as a note.
fn shares_note(points: &[Point], tag: &str, x_label: &str, xs: &[f64]) -> String {
    let by_system: Vec<String> = SYSTEMS[1..]
        .iter()
        .map(|&system| {
            let at: Vec<String> = xs
                .iter()
                .map(|&x| format!("{:.0}%", share(points, system, tag, x) * 100.0))
                .collect();
            format!("{} {}", system.name, at.join("/"))
        })
        .collect();
    format!(
        "{tag}: share of NoGC's commits/s at {x_label} {}: {}",
        xs.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        by_system.join("; ")
    )
}

/// The run-to-run spread of every system at `x`: the slowest and fastest round's commits/s,
/// so that a reader sees how far one round can move (this VM's phases).
fn spread_note(points: &[Point], tag: &str, x_label: &str, x: f64) -> String {
    spread_note_of(points, &SYSTEMS, tag, x_label, x)
}

/// [`spread_note`] of `systems` only.
fn spread_note_of(
    points: &[Point],
    systems: &[System],
    tag: &str,
    x_label: &str,
    x: f64,
) -> String {
    let by_system: Vec<String> = systems
        .iter()
        .map(|&system| {
            let rates: Vec<f64> = runs_of(points, system, tag, x)
                .map(commits_per_second)
                .collect();
            let low = rates.iter().copied().fold(f64::NAN, f64::min);
            let high = rates.iter().copied().fold(f64::NAN, f64::max);
            format!("{} {low:.0}-{high:.0}", system.name)
        })
        .collect();
    format!(
        "{tag}: slowest-fastest round at {x_label} {x} (commits/s): {}",
        by_system.join("; ")
    )
}

/// The emulated media of every experiment that does not vary it.
const DEFAULT_MEDIA: &str = "a tmpfs file, 256-byte lines counted, no added delay";

/// Our setup: `what` (the workload and its size), then what every TB-Collect experiment
/// shares, with `seconds` per run and `rounds` runs of each point (1: one run per system,
/// one after another), over [`DEFAULT_MEDIA`].
fn our_setup(what: &str, seconds: f64, rounds: usize) -> String {
    our_setup_on(what, DEFAULT_MEDIA, seconds, rounds)
}

/// [`our_setup`] over the emulated `media` (in words).
fn our_setup_on(what: &str, media: &str, seconds: f64, rounds: usize) -> String {
    let runs = if rounds == 1 {
        "one run per system, one after another".to_owned()
    } else {
        format!(
            "{rounds} runs per point (the systems alternated within each round, the median \
             taken)"
        )
    };
    format!(
        "{what}; each system a configuration of Verso over the same emulated persistent \
         memory ({media}), MVTO, serializable, {seconds} s per run, {runs}; Steam and N2DB \
         are one configuration (tvcp)"
    )
}

/// "N rows of 100 bytes" of this size's YCSB.
fn ycsb_rows(size: &Size<'_>) -> String {
    let rows = if size.quick() {
        YcsbConfig::tiny().rows
    } else {
        ROWS
    };
    format!("{rows} rows of 100 bytes")
}

fn reproduction(
    size: &Size<'_>,
    experiment: &Experiment,
    paper_setup: &str,
    our_setup: String,
    panels: Vec<super::Panel>,
    notes: Vec<String>,
    points: Vec<Point>,
) -> Reproduction {
    reproduction_of(
        &PAPER,
        experiment,
        size.options,
        paper_setup,
        &our_setup,
        panels,
        notes,
        points,
    )
}

fn fig8(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let threads = size.pick(&FIG8_THREADS, &FIG8_QUICK_THREADS);
    let write_shares = size.pick(&FIG8_WRITE_SHARES, &FIG8_QUICK_WRITE_SHARES);
    let half = size.tb_ycsb(0.5);
    let all = size.tb_ycsb(1.0);
    let mix = size.tb_ycsb(0.5);
    let sweeps = [
        (
            SweepPanel {
                tag: "50% writes",
                key: "fig8a",
                title: "(a) YCSB, 50% writes",
                x_label: "threads",
                media_at: None,
                run_at: Box::new(move |t| ycsb_at(t as usize, half.clone())),
            },
            threads,
        ),
        (
            SweepPanel {
                tag: "100% writes",
                key: "fig8b",
                title: "(b) YCSB, 100% writes",
                x_label: "threads",
                media_at: None,
                run_at: Box::new(move |t| ycsb_at(t as usize, all.clone())),
            },
            threads,
        ),
        (
            SweepPanel {
                tag: "2 threads",
                key: "fig8c",
                title: "(c) YCSB, 2 threads, by share of writes",
                x_label: "share of writes",
                media_at: None,
                run_at: Box::new(move |w| {
                    ycsb_at(
                        THREADS,
                        YcsbConfig {
                            read_ratio: 1.0 - w,
                            ..mix.clone()
                        },
                    )
                }),
            },
            write_shares,
        ),
    ];
    let points = size.system_sweep(&sweeps, POINT_SECONDS, out)?;
    let cores = THREADS as f64;
    let most = threads.last().copied().unwrap_or(cores);
    let mut panels = Vec::new();

    // (a) 50% writes.
    let (a, a_xs) = &sweeps[0];
    let stability = |system: System| {
        ratio_of(
            rate(&points, system, a.tag, most),
            rate(&points, system, a.tag, cores),
        )
    };
    let mut verdicts = vec![
        share_verdict(
            &format!("TB-Collect at {cores} threads"),
            "TB-Collect reaches approximately 85% of NoGC's throughput",
            share(&points, TB, a.tag, cores),
            0.85,
        ),
        lead_verdict(
            &points,
            a.tag,
            cores,
            "TB-Collect is ahead of Steam, N2DB, Zen and OneShot ([fig~] at 40 threads: TB \
             0.55, Zen 0.487, OneShot 0.455, N2DB 0.44, Steam 0.43 M/s)",
            &format!("{cores} threads"),
        ),
    ];
    if most > cores {
        let tb = stability(TB);
        let worst = [STEAM_N2DB, ZEN]
            .iter()
            .map(|&s| stability(s))
            .fold(f64::NAN, f64::min);
        verdicts.push(verdict(
            "past the logical cores Steam, Zen and N2DB degrade while TB-Collect and OneShot \
             stay stable",
            format!(
                "{most} threads over {cores}: TB-Collect {tb:.2}x, OneShot {:.2}x, \
                 Steam/N2DB {:.2}x, Zen {:.2}x (TB-Collect over the worst of tvcp and zen: \
                 {:.2}x)",
                stability(ONESHOT),
                stability(STEAM_N2DB),
                stability(ZEN),
                ratio_of(tb, worst)
            ),
            direction(ratio_of(tb, worst)),
        ));
    }
    panels.push(sweep_panel(
        a.title,
        panel_figures(&points, a, a_xs),
        &[
            "\"TB-Collect ... achieving approximately 85% of NoGC's throughput\" (50% writes)",
            "Steam, Zen and N2DB degrade beyond the logical cores; OneShotGC and TB-Collect \
             stay stable",
            "[fig~] at 40 threads: NoGC 0.65, TB 0.55, Zen 0.487, OneShot 0.455, N2DB 0.44, \
             Steam 0.43 M/s; at 80: Steam 0.317",
        ],
        verdicts,
    ));

    // (b) 100% writes.
    let (b, b_xs) = &sweeps[1];
    let collecting = [TB, STEAM_N2DB, ZEN];
    let shares_b: Vec<(System, f64)> = collecting
        .iter()
        .map(|&s| (s, share(&points, s, b.tag, cores)))
        .collect();
    let similar = shares_b
        .iter()
        .all(|&(_, s)| same_agreement(ratio_of(s, 0.8), SHARE_TOLERANCE) == Agreement::Agrees);
    let oneshot_b = share(&points, ONESHOT, b.tag, cores);
    let lowest_other = shares_b.iter().map(|&(_, s)| s).fold(f64::NAN, f64::min);
    panels.push(sweep_panel(
        b.title,
        panel_figures(&points, b, b_xs),
        &[
            "\"all GC approaches perform similarly, achieving approximately 80% of NoGC's \
             throughput, except for OneShotGC\" (100% writes)",
            "[fig~] at 40 threads: NoGC 0.40, TB 0.358, Zen 0.342, N2DB 0.33, Steam 0.314, \
             OneShot 0.25 M/s",
        ],
        vec![
            verdict(
                "TB-Collect, Steam, N2DB and Zen all reach about 80% of NoGC",
                format!(
                    "{cores} threads: {}",
                    shares_b
                        .iter()
                        .map(|(s, v)| format!("{} {:.0}%", s.name, v * 100.0))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                if similar {
                    Agreement::Agrees
                } else {
                    Agreement::Differs
                },
            ),
            verdict(
                "OneShotGC is below the others at 100% writes",
                format!(
                    "OneShot {:.0}% of NoGC, the lowest of the others {:.0}%",
                    oneshot_b * 100.0,
                    lowest_other * 100.0
                ),
                direction(ratio_of(lowest_other, oneshot_b)),
            ),
        ],
    ));

    // (c) share of writes.
    let (c, c_xs) = &sweeps[2];
    let leads: Vec<(f64, f64)> = c_xs
        .iter()
        .map(|&w| {
            let (_, best) = best_other(&points, c.tag, w);
            (w, ratio_of(rate(&points, TB, c.tag, w), best))
        })
        .collect();
    let (peak_at, peak) = leads
        .iter()
        .copied()
        .fold((f64::NAN, f64::NAN), |best, next| {
            if best.1.is_nan() || next.1 > best.1 {
                next
            } else {
                best
            }
        });
    let inner = c_xs.len() > 2 && peak_at > c_xs[0] && peak_at < c_xs[c_xs.len() - 1];
    panels.push(sweep_panel(
        c.title,
        panel_figures(&points, c, c_xs),
        &[
            "TB-Collect's advantage peaks at 60% writes, \"10.2% to 20.3% higher than other \
             systems\"; the systems converge above 80% writes, except OneShotGC",
        ],
        vec![verdict(
            "TB-Collect's lead over the other collectors peaks in the middle (60% writes), \
             10-20% there",
            format!(
                "TB-Collect over the best other by share of writes: {}; largest {:.2}x at {:.0}%",
                leads
                    .iter()
                    .map(|(w, l)| format!("{:.0}% {l:.2}x", w * 100.0))
                    .collect::<Vec<_>>()
                    .join(", "),
                peak,
                peak_at * 100.0
            ),
            if !inner {
                Agreement::Differs
            } else {
                direction(peak)
            },
        )],
    ));

    let mut notes: Vec<String> = sweeps
        .iter()
        .map(|(panel, xs)| shares_note(&points, panel.tag, panel.x_label, xs))
        .collect();
    notes.push(spread_note(&points, a.tag, a.x_label, cores));
    Ok(reproduction(
        &size,
        &FIG8,
        "YCSB, one table of 100-byte tuples with 8-byte keys, 20 operations per \
         transaction, Zipf theta 0; (a) 50% writes and (b) 100% writes at 10-80 threads; \
         (c) 10-100% writes at 40 threads",
        our_setup(
            &format!(
                "YCSB of {}, 20 operations, theta 0: (a) and (b) at {} threads, (c) at \
                 {THREADS} threads and {} shares of writes",
                ycsb_rows(&size),
                threads
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
                write_shares.len()
            ),
            size.seconds(POINT_SECONDS),
            size.rounds(),
        ),
        panels,
        notes,
        points,
    ))
}

fn fig9(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let thetas = size.pick(&FIG9_THETAS, &FIG9_QUICK_THETAS);
    let base = size.tb_ycsb(0.5);
    let sweeps = [(
        SweepPanel {
            tag: "50% writes",
            key: "fig9",
            title: "YCSB, 50% writes, 2 threads, by Zipf theta",
            x_label: "Zipf theta",
            media_at: None,
            run_at: Box::new(move |theta| {
                ycsb_at(
                    THREADS,
                    YcsbConfig {
                        theta,
                        ..base.clone()
                    },
                )
            }),
        },
        thetas,
    )];
    let points = size.system_sweep(&sweeps, POINT_SECONDS, out)?;
    let (panel, xs) = &sweeps[0];
    let tag = panel.tag;
    let mut verdicts = Vec::new();
    for (theta, tb_paper, steam_paper) in [(0.5, 0.86, 0.63), (0.9, 0.81, 0.51)] {
        if !xs.contains(&theta) {
            continue;
        }
        verdicts.push(share_verdict(
            &format!("TB-Collect at theta {theta}"),
            &format!(
                "TB-Collect reaches {:.0}% of NoGC at theta {theta}",
                tb_paper * 100.0
            ),
            share(&points, TB, tag, theta),
            tb_paper,
        ));
        verdicts.push(share_verdict(
            &format!("Steam/N2DB at theta {theta}"),
            &format!("Steam only {:.0}% at theta {theta}", steam_paper * 100.0),
            share(&points, STEAM_N2DB, tag, theta),
            steam_paper,
        ));
    }
    let high = xs.last().copied().unwrap_or(0.9);
    let low = xs.first().copied().unwrap_or(0.0);
    verdicts.push(share_verdict(
        &format!("OneShot at theta {high}"),
        "OneShotGC stays around 70% of NoGC",
        share(&points, ONESHOT, tag, high),
        0.70,
    ));
    let nogc_rise = ratio_of(
        rate(&points, NOGC, tag, high),
        rate(&points, NOGC, tag, low),
    );
    verdicts.push(verdict(
        "NoGC's throughput rises with skew ([fig~] 0.65 to 0.78 M/s from theta 0 to 0.95)",
        format!("NoGC at theta {high} over theta {low}: {nogc_rise:.2}x"),
        direction(nogc_rise),
    ));
    verdicts.push(lead_verdict(
        &points,
        tag,
        high,
        "chain-traversing collectors lose under skew: TB-Collect stays ahead of Steam, N2DB, \
         Zen and OneShot",
        &format!("theta {high}"),
    ));
    let panels = vec![sweep_panel(
        panel.title,
        panel_figures(&points, panel, xs),
        &[
            "\"TB-Collect maintains 86% of NoGC's throughput at theta = 0.5 and 81% at theta = \
             0.9 ... Steam only achieves 63% and 51%\"; OneShotGC \"around 70% of NoGC\"",
            "[fig~] NoGC 0.65/0.66/0.71/0.78, TB 0.55/0.57/0.58/0.63, Steam \
             0.43/0.42/0.365/0.375 M/s at theta 0/0.5/0.9/0.95",
        ],
        verdicts,
    )];
    let notes = vec![
        shares_note(&points, tag, panel.x_label, xs),
        spread_note(&points, tag, panel.x_label, high),
    ];
    Ok(reproduction(
        &size,
        &FIG9,
        "YCSB, 100-byte tuples, 20 operations per transaction, 50% writes, 40 threads, Zipf \
         theta 0, 0.5, 0.9 (and 0.95 in the figure)",
        our_setup(
            &format!(
                "YCSB of {}, 20 operations, 50% writes, {THREADS} threads, theta {}",
                ycsb_rows(&size),
                xs.iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            ),
            size.seconds(POINT_SECONDS),
            size.rounds(),
        ),
        panels,
        notes,
        points,
    ))
}

/// Operations per second: commits/s times the transaction size.
fn operations_per_second(points: &[Point], system: System, tag: &str, size: f64) -> f64 {
    rate(points, system, tag, size) * size
}

fn fig10(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let sizes = size.pick(&FIG10_SIZES, &FIG10_QUICK_SIZES);
    let base = size.tb_ycsb(0.5);
    let sweeps = [(
        SweepPanel {
            tag: "50% writes",
            key: "fig10",
            title: "YCSB, 50% writes, 2 threads, by transaction size",
            x_label: "operations per transaction",
            media_at: None,
            run_at: Box::new(move |operations| {
                ycsb_at(
                    THREADS,
                    YcsbConfig {
                        operations: operations as usize,
                        ..base.clone()
                    },
                )
            }),
        },
        sizes,
    )];
    let points = size.system_sweep(&sweeps, POINT_SECONDS, out)?;
    let (panel, xs) = &sweeps[0];
    let tag = panel.tag;
    let mut figures = panel_figures(&points, panel, xs);
    figures.push(figure_of(
        FigureSpec {
            key: "fig10_operations",
            title: "YCSB, 50% writes, 2 threads: operations per second",
            x_label: panel.x_label,
            y_label: "operations/s (commits/s x size)",
            log_x: true,
        },
        SYSTEMS
            .iter()
            .map(|&system| FigureLine {
                label: series(system, tag),
                points: xs
                    .iter()
                    .map(|&x| [x, operations_per_second(&points, system, tag, x)])
                    .collect(),
            })
            .collect(),
    ));
    let mut verdicts = Vec::new();
    if xs.contains(&20.0) {
        verdicts.push(share_verdict(
            "TB-Collect at 20 operations",
            "TB-Collect reaches 85% of NoGC's throughput at 20 operations",
            share(&points, TB, tag, 20.0),
            0.85,
        ));
    }
    let smallest = xs.first().copied().unwrap_or(1.0);
    let largest = xs.last().copied().unwrap_or(20.0);
    // Growth of total operations from the smallest transactions to the system's peak.
    let growth = |system: System| {
        let peak = xs
            .iter()
            .map(|&x| operations_per_second(&points, system, tag, x))
            .fold(f64::NAN, f64::max);
        ratio_of(peak, operations_per_second(&points, system, tag, smallest))
    };
    let steam_growth = growth(STEAM_N2DB);
    let tb_growth = growth(TB);
    verdicts.push(verdict(
        "Steam and N2DB start with low transaction throughput (a collection at every \
         commit) and show the largest growth in total operations as transactions grow",
        format!(
            "total operations, peak over {smallest} operation(s): Steam/N2DB {steam_growth:.2}x, \
             TB-Collect {tb_growth:.2}x, Zen {:.2}x, OneShot {:.2}x, NoGC {:.2}x",
            growth(ZEN),
            growth(ONESHOT),
            growth(NOGC)
        ),
        direction(ratio_of(steam_growth, tb_growth)),
    ));
    verdicts.push(lead_verdict(
        &points,
        tag,
        smallest,
        "at one operation per transaction TB-Collect is far ahead of Steam ([fig~] Steam \
         about 0.95 M txn/s against TB-Collect's 6.8)",
        &format!("{smallest} operation(s)"),
    ));
    let decline = |system: System| {
        let peak = xs
            .iter()
            .map(|&x| operations_per_second(&points, system, tag, x))
            .fold(f64::NAN, f64::max);
        ratio_of(operations_per_second(&points, system, tag, largest), peak)
    };
    let tb_kept = decline(TB);
    let others_kept = OTHERS.iter().map(|&s| decline(s)).fold(f64::NAN, f64::max);
    verdicts.push(verdict(
        "TB-Collect's total operations decline most slowly after their peak",
        format!(
            "operations/s at {largest} operations as a share of the peak: TB-Collect {:.0}%, \
             the best other {:.0}%",
            tb_kept * 100.0,
            others_kept * 100.0
        ),
        direction(ratio_of(tb_kept, others_kept)),
    ));
    let panels = vec![sweep_panel(
        panel.title,
        figures,
        &[
            "TB-Collect reaches \"85% of NoGC's throughput at an operation count of 20\", its \
             total operations \"declining most slowly after reaching peak\"",
            "Steam and N2DB \"initially have low transaction throughput but show the most \
             significant growth in total operations\"",
            "[fig~] total operations peak: NoGC about 13.7 M/s at 30, TB about 11.8 at 30, \
             Zen about 9.7 at 20; at 1 operation Steam about 0.95 M txn/s against TB's 6.8",
        ],
        verdicts,
    )];
    let notes = vec![
        shares_note(&points, tag, panel.x_label, xs),
        spread_note(&points, tag, panel.x_label, largest),
    ];
    Ok(reproduction(
        &size,
        &FIG10,
        "YCSB, 100-byte tuples, 50% writes, Zipf theta 0, 40 threads, 1-80 operations per \
         transaction",
        our_setup(
            &format!(
                "YCSB of {}, 50% writes, theta 0, {THREADS} threads, {} operations per \
                 transaction",
                ycsb_rows(&size),
                xs.iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            ),
            size.seconds(POINT_SECONDS),
            size.rounds(),
        ),
        panels,
        notes,
        points,
    ))
}
