//! TB-Collect's experiments on the media (§1 and §5.3): Figure 1 (the cost of garbage
//! collection on a DRAM engine against an NVM engine) and Figure 15b (throughput on the
//! five NVM configurations of its Table 3), over TPC-C.
//!
//! The paper ran Figure 1 on two builds of its engine (DRAM and Optane) and Figure 15 in
//! MySQL on Quartz, which emulates bandwidth, line size and latency on bare metal. Here the
//! media is the region's emulation (`crate::pm_media`): a line size, which makes the write
//! accounting exact, and a delay per line persisted, which emulates a write bandwidth as a
//! share of this machine's DRAM's. Read bandwidth and latency are not emulated (Quartz's
//! read side needs hardware counters), and "DRAM" is the same storages with 64-byte lines
//! and no delay, not Verso's in-memory engine, whose collectors are other designs.

use std::io::Write;

use verso::pmem::{LineSize, PmOptions};

use super::{
    rate, reproduction, share, SweepPanel, System, NOGC, ONESHOT, STEAM_N2DB, SYSTEMS, TB, THREADS,
    ZEN,
};
use crate::metrics::RunResult;
use crate::pm_media::emulated_media;
use crate::reproduce::{
    direction, figure_of, ratio_agreement, ratio_of, same_agreement, sweep_panel, verdict,
    Experiment, FigureLine, FigureSpec, Point, ReproduceOptions, Reproduction, Size, Table,
    Verdict,
};
use crate::workload::{LabError, Workload};
use crate::workloads::tpcc::{Tpcc, TpccConfig};

/// Seconds per run (the paper: not stated).
const SECONDS: f64 = 10.0;

/// Figure 1's systems: the paper's three approaches and its baseline. PC (partition
/// clearing) is OneShot, TVCP (timely version chain pruning) Steam's and N2DB's, BS
/// (background scanning) Zen's.
const FIG1_SYSTEMS: [System; 4] = [NOGC, ONESHOT, STEAM_N2DB, ZEN];
/// Figure 1's media: DRAM (64-byte lines, no delay) and Optane as TB §5.3 describes it
/// ("50% read and 30% write performance of DRAM, along with a cache line size of 256 B").
const DRAM_TAG: &str = "DRAM-like media";
const OPTANE_TAG: &str = "Optane-like media";
const OPTANE_WRITE_SHARE: f64 = 0.3;

/// One of Table 3's NVM configurations: its name, its write bandwidth as a share of DRAM's,
/// and its line (the read share, which is not emulated, in the comment).
struct Configuration {
    name: &'static str,
    write_share: f64,
    line: LineSize,
}

/// TB Table 3 (read/write bandwidth as % of DRAM's, line): A 70/50 256 B, B 70/50 128 B,
/// C 90/70 128 B, D 90/90 128 B, E 100/100 64 B.
const TABLE3: [Configuration; 5] = [
    Configuration {
        name: "A",
        write_share: 0.5,
        line: LineSize::B256,
    },
    Configuration {
        name: "B",
        write_share: 0.5,
        line: LineSize::B128,
    },
    Configuration {
        name: "C",
        write_share: 0.7,
        line: LineSize::B128,
    },
    Configuration {
        name: "D",
        write_share: 0.9,
        line: LineSize::B128,
    },
    Configuration {
        name: "E",
        write_share: 1.0,
        line: LineSize::B64,
    },
];
/// Figure 15b's xs: the index of a configuration in [`TABLE3`].
const FIG15B_CONFIGURATIONS: [f64; 5] = [0.0, 1.0, 2.0, 3.0, 4.0];
const FIG15B_QUICK_CONFIGURATIONS: [f64; 2] = [0.0, 4.0];
/// Figure 15b's panel tag.
const FIG15B_TAG: &str = "TPC-C";

/// Figure 1.
pub const FIG1: Experiment = Experiment {
    name: "tb-fig1",
    title: "The cost of garbage collection on DRAM-like and on Optane-like media",
    paper_ref: "Wei et al. §1, Figure 1",
    compares: "NoGC, PC (OneShot), TVCP (Steam/N2DB) and BS (Zen) on TPC-C (4 warehouses), \
               2 threads, MVTO, over the emulated region with 64-byte lines and no delay \
               against 256-byte lines written at 30% of DRAM's bandwidth",
    full_scale: "full: 4 warehouses, 10 s per run, 8 points of 3 runs (about 5 min); quick: \
                 tiny TPC-C, 0.2 s",
    run: fig1,
};

/// Figure 15b.
pub const FIG15B: Experiment = Experiment {
    name: "tb-fig15b",
    title: "TPC-C throughput on the five NVM configurations of Table 3",
    paper_ref: "Wei et al. §5.3, Figure 15b and Table 3",
    compares: "NoGC, TB-Collect, TVCP (Steam/N2DB), BS (Zen) and PC (OneShot) on TPC-C (4 \
               warehouses), 2 threads, MVTO, over the emulated region at Table 3's line \
               sizes and write bandwidths (A-E)",
    full_scale: "full: 4 warehouses, 10 s per run, 25 points of 3 runs (about 16 min); quick: \
                 tiny TPC-C, configurations A and E",
    run: fig15b,
};

/// Region lines persisted per committed transaction over `run` (exact counters).
fn lines_per_commit(run: &RunResult) -> f64 {
    let lines: f64 = run
        .samples
        .iter()
        .map(|s| s.pm_lines_per_second * s.interval_seconds)
        .sum();
    ratio_of(lines, run.totals.oltp_commits as f64)
}

/// The median over the rounds of `system`'s lines per commit in the panel `tag` at `x`.
fn median_lines(points: &[Point], system: System, tag: &str, x: f64) -> f64 {
    super::median_over_rounds(points, system, tag, x, lines_per_commit)
}

/// The TPC-C of this size, and a panel's run of it at `threads` threads.
fn tpcc_at(config: TpccConfig) -> impl Fn(f64) -> Result<super::ThreadsAndWorkload, LabError> {
    move |threads| {
        Ok((
            threads as usize,
            Box::new(Tpcc::new(config.clone())?) as Box<dyn Workload>,
        ))
    }
}

/// The DRAM-like media of Figure 1: 64-byte lines, no delay.
fn dram_like(_: f64) -> Result<PmOptions, LabError> {
    emulated_media(LineSize::B64, None)
}

/// The Optane-like media of Figure 1: 256-byte lines at 30% of DRAM's write bandwidth.
fn optane_like(_: f64) -> Result<PmOptions, LabError> {
    emulated_media(LineSize::B256, Some(OPTANE_WRITE_SHARE))
}

/// Table 3's configuration at index `x`.
fn table3_media(x: f64) -> Result<PmOptions, LabError> {
    let configuration = TABLE3
        .get(x as usize)
        .ok_or_else(|| LabError::Inconsistent(format!("no configuration {x} in Table 3")))?;
    emulated_media(configuration.line, Some(configuration.write_share))
}

/// The name of Table 3's configuration at index `x`.
fn table3_name(x: f64) -> &'static str {
    TABLE3.get(x as usize).map_or("?", |c| c.name)
}

fn fig1(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let tpcc = size.tb_tpcc();
    let at = [THREADS as f64];
    let sweeps = [
        (
            SweepPanel {
                tag: DRAM_TAG,
                key: "fig1_dram",
                title: "DRAM-like media (64-byte lines, no delay)",
                x_label: "threads",
                run_at: Box::new(tpcc_at(tpcc.clone())),
                media_at: Some(dram_like),
            },
            &at[..],
        ),
        (
            SweepPanel {
                tag: OPTANE_TAG,
                key: "fig1_optane",
                title: "Optane-like media (256-byte lines, 30% of DRAM's write bandwidth)",
                x_label: "threads",
                run_at: Box::new(tpcc_at(tpcc)),
                media_at: Some(optane_like),
            },
            &at[..],
        ),
    ];
    let points = size.sweep_of(&FIG1_SYSTEMS, &sweeps, SECONDS, out)?;
    let x = at[0];
    let on = |system: System, tag: &str| share(&points, system, tag, x);
    let paper_dram = |system: System| match system.name {
        "OneShot" => "PC 88%",
        "Zen" => "BS 83%",
        "NoGC" => "100%",
        _ => "TVCP 79%",
    };
    let table = Table {
        header: vec![
            "system".into(),
            "share of NoGC's, DRAM-like".into(),
            "share of NoGC's, Optane-like".into(),
            "paper: DRAM; NVM".into(),
            "lines per commit (64 B; 256 B)".into(),
            "commits/s (DRAM-like; Optane-like)".into(),
        ],
        rows: FIG1_SYSTEMS
            .iter()
            .map(|&system| {
                vec![
                    system.name.to_owned(),
                    format!("{:.0}%", on(system, DRAM_TAG) * 100.0),
                    format!("{:.0}%", on(system, OPTANE_TAG) * 100.0),
                    format!(
                        "{}; {}",
                        paper_dram(system),
                        if system.name == "NoGC" {
                            "100%"
                        } else {
                            "56-68%"
                        }
                    ),
                    format!(
                        "{:.1}; {:.1}",
                        median_lines(&points, system, DRAM_TAG, x),
                        median_lines(&points, system, OPTANE_TAG, x)
                    ),
                    format!(
                        "{:.0}; {:.0}",
                        rate(&points, system, DRAM_TAG, x),
                        rate(&points, system, OPTANE_TAG, x)
                    ),
                ]
            })
            .collect(),
    };
    let collectors = &FIG1_SYSTEMS[1..];
    let mean_share =
        |tag: &str| collectors.iter().map(|&s| on(s, tag)).sum::<f64>() / collectors.len() as f64;
    let (dram, optane) = (mean_share(DRAM_TAG), mean_share(OPTANE_TAG));
    let mut verdicts: Vec<Verdict> = [
        (ONESHOT, 0.88, "PC"),
        (STEAM_N2DB, 0.79, "TVCP"),
        (ZEN, 0.83, "BS"),
    ]
    .iter()
    .map(|&(system, paper, name)| {
        let ours = on(system, DRAM_TAG);
        verdict(
            format!(
                "on DRAM, {name} reaches {:.0}% of NoGC's throughput",
                paper * 100.0
            ),
            format!(
                "{} on DRAM-like media: {:.0}% of NoGC's",
                system.name,
                ours * 100.0
            ),
            same_agreement(ratio_of(ours, paper), super::SHARE_TOLERANCE),
        )
    })
    .collect();
    verdicts.push(verdict(
        "on NVM the three reach \"only 56% to 68%\" of NoGC's throughput",
        format!(
            "on Optane-like media: {}",
            collectors
                .iter()
                .map(|&s| format!("{} {:.0}%", s.name, on(s, OPTANE_TAG) * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        same_agreement(ratio_of(optane, 0.62), super::SHARE_TOLERANCE),
    ));
    verdicts.push(verdict(
        "garbage collection costs more on NVM than on DRAM (the mean share of NoGC's falls \
         from 83% to about 62%: 1.34x)",
        format!(
            "mean share of NoGC's: {:.0}% DRAM-like, {:.0}% Optane-like: {:.2}x",
            dram * 100.0,
            optane * 100.0,
            ratio_of(dram, optane)
        ),
        ratio_agreement(ratio_of(dram, optane), 1.34),
    ));
    // x 0: DRAM-like, 1: Optane-like.
    let by_media = |value: &dyn Fn(System, &str) -> f64, systems: &[System]| {
        systems
            .iter()
            .map(|&system| FigureLine {
                label: system.name.to_owned(),
                points: vec![
                    [0.0, value(system, DRAM_TAG)],
                    [1.0, value(system, OPTANE_TAG)],
                ],
            })
            .collect()
    };
    let figures = vec![
        figure_of(
            FigureSpec {
                key: "fig1_share",
                title: "Throughput as a share of NoGC's, by media",
                x_label: "media (0: DRAM-like, 1: Optane-like)",
                y_label: "commits/s ÷ NoGC's",
                log_x: false,
            },
            by_media(&|s, tag| on(s, tag), collectors),
        ),
        figure_of(
            FigureSpec {
                key: "fig1_lines",
                title: "Region lines persisted per commit, by media (64-byte and 256-byte lines)",
                x_label: "media (0: DRAM-like, 1: Optane-like)",
                y_label: "lines per commit",
                log_x: false,
            },
            by_media(&|s, tag| median_lines(&points, s, tag, x), &FIG1_SYSTEMS),
        ),
    ];
    let mut panel = sweep_panel(
        &format!("TPC-C at {THREADS} threads: each collector's share of NoGC's, by media"),
        figures,
        &[
            "\"Partition clearing (PC) achieves 88% of NoGC's performance in the DRAM OLTP \
             engine, while timely version chain pruning (TVCP) and background scanning (BS) \
             achieves 79% and 83%, respectively. However, in NVM OLTP engines, their \
             performance is only 56% to 68% of the NoGC's\" (TPC-C, 100 warehouses, 40 \
             threads)",
        ],
        verdicts,
    );
    panel.table = Some(table);
    let notes = vec![
        media_note(),
        super::spread_note_of(&points, &FIG1_SYSTEMS, OPTANE_TAG, "threads", x),
        media_time_note(&points, &FIG1_SYSTEMS, OPTANE_TAG, x, optane_like(x)),
    ];
    Ok(reproduction(
        &size,
        &FIG1,
        "TPC-C, 100 warehouses, 40 threads; the same engine built for DRAM and for Optane \
         DC persistent memory",
        super::our_setup_on(
            &format!("{}, {THREADS} threads", size.tb_tpcc_words()),
            &format!(
                "a tmpfs file; two media: 64-byte lines with no delay, and 256-byte lines \
                 delayed as if written at {:.0}% of this machine's DRAM write bandwidth",
                OPTANE_WRITE_SHARE * 100.0
            ),
            size.seconds(SECONDS),
            size.rounds(),
        ),
        vec![panel],
        notes,
        points,
    ))
}

/// How much of a transaction's time the emulated media took, for each of `systems` in the
/// panel `tag` at `x` on media that delays each line by `media`: lines per commit × the
/// delay, against the time one worker spends per commit (the threads over commits/s).
fn media_time_note(
    points: &[Point],
    systems: &[System],
    tag: &str,
    x: f64,
    media: Result<PmOptions, LabError>,
) -> String {
    let delay_nanos = media.map_or(f64::NAN, |pm| pm.line_delay.as_nanos() as f64);
    let by_system: Vec<String> = systems
        .iter()
        .map(|&system| {
            let media_micros = median_lines(points, system, tag, x) * delay_nanos / 1e3;
            let commit_micros = THREADS as f64 / rate(points, system, tag, x) * 1e6;
            format!(
                "{} {media_micros:.2} of {commit_micros:.0} µs ({:.1}%)",
                system.name,
                ratio_of(media_micros, commit_micros) * 100.0
            )
        })
        .collect();
    format!(
        "{tag}: the emulated media's time per commit ({delay_nanos:.0} ns a line × lines per \
         commit) against a worker's time per commit: {}",
        by_system.join("; ")
    )
}

/// What the media emulation is, and what it is not, as a note.
fn media_note() -> String {
    format!(
        "Media: each line persisted waits L / B × (1 / w - 1), B this machine's DRAM write \
         bandwidth ({:.1} GB/s, one thread copying), L the line, w the write share: the \
         time the line takes beyond DRAM's at w of its bandwidth, per thread. Read \
         bandwidth and latency are not emulated. The paper's 40 threads share one media, \
         whose bandwidth they can saturate; 2 threads here each pay their own delay and \
         never contend for it.",
        crate::pm_media::dram_write_bandwidth() / 1e9
    )
}

fn fig15b(options: &ReproduceOptions, out: &mut dyn Write) -> Result<Reproduction, LabError> {
    let size = Size { options };
    let configurations = size.pick(&FIG15B_CONFIGURATIONS, &FIG15B_QUICK_CONFIGURATIONS);
    let tpcc = size.tb_tpcc();
    let sweeps = [(
        SweepPanel {
            tag: FIG15B_TAG,
            key: "fig15b",
            title: "TPC-C on Table 3's configurations (0-4: A-E)",
            x_label: "configuration (0-4: A-E)",
            run_at: Box::new(move |_| tpcc_at(tpcc.clone())(THREADS as f64)),
            media_at: Some(table3_media),
        },
        configurations,
    )];
    let points = size.system_sweep(&sweeps, SECONDS, out)?;
    let (panel, xs) = &sweeps[0];
    let first = xs[0];
    let last = xs[xs.len() - 1];
    let table = Table {
        header: [
            "configuration".to_owned(),
            "line; write share; delay per line".to_owned(),
        ]
        .into_iter()
        .chain(
            SYSTEMS
                .iter()
                .map(|s| format!("{}: commits/s; lines per commit", s.name)),
        )
        .collect(),
        rows: xs
            .iter()
            .map(|&x| {
                let configuration = &TABLE3[x as usize];
                // The delay every run of this configuration had: the child processes
                // inherit this process's bandwidth (crate::pm_media).
                let delay = table3_media(x).map_or(f64::NAN, |pm| pm.line_delay.as_nanos() as f64);
                [
                    configuration.name.to_owned(),
                    format!(
                        "{} B; {:.0}%; {delay:.0} ns",
                        configuration.line.bytes(),
                        configuration.write_share * 100.0
                    ),
                ]
                .into_iter()
                .chain(SYSTEMS.iter().map(|&s| {
                    format!(
                        "{:.0}; {:.1}",
                        rate(&points, s, FIG15B_TAG, x),
                        median_lines(&points, s, FIG15B_TAG, x)
                    )
                }))
                .collect()
            })
            .collect(),
    };
    let gain = |system: System, from: f64, to: f64| {
        ratio_of(
            rate(&points, system, FIG15B_TAG, to),
            rate(&points, system, FIG15B_TAG, from),
        )
    };
    let mut verdicts = Vec::new();
    if xs.contains(&1.0) {
        let pc = gain(ONESHOT, 0.0, 1.0);
        let others = [TB, STEAM_N2DB, ZEN]
            .iter()
            .map(|&s| gain(s, 0.0, 1.0))
            .fold(f64::NAN, f64::max);
        verdicts.push(verdict(
            "from 256-byte to 128-byte lines (A to B) TB-Collect, TVCP and BS gain only \
             3-5%, PC about 10% (the most: its in-place layout writes the most lines)",
            format!(
                "A to B: PC (OneShot) {pc:.2}x, the most of TB-Collect, TVCP and BS {others:.2}x"
            ),
            direction(ratio_of(pc, others)),
        ));
    }
    let tb_lead = xs
        .iter()
        .map(|&x| {
            let best = [STEAM_N2DB, ZEN, ONESHOT]
                .iter()
                .map(|&s| rate(&points, s, FIG15B_TAG, x))
                .fold(f64::NAN, f64::max);
            ratio_of(rate(&points, TB, FIG15B_TAG, x), best)
        })
        .collect::<Vec<f64>>();
    let weakest_lead = tb_lead.iter().copied().fold(f64::NAN, f64::min);
    verdicts.push(verdict(
        "TB-Collect performs best of the systems that collect on every configuration",
        format!(
            "TB-Collect over the best other, by configuration: {}",
            xs.iter()
                .zip(&tb_lead)
                .map(|(&x, lead)| format!("{} {lead:.2}x", table3_name(x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        direction(weakest_lead),
    ));
    let pc_at_e = ratio_of(
        rate(&points, ONESHOT, FIG15B_TAG, last),
        rate(&points, TB, FIG15B_TAG, last),
    );
    verdicts.push(verdict(
        "at E (DRAM's bandwidth, 64-byte lines) PC reaches about 95% of TB-Collect's \
         throughput",
        format!(
            "at {}: PC (OneShot) {:.0}% of TB-Collect's",
            table3_name(last),
            pc_at_e * 100.0
        ),
        same_agreement(ratio_of(pc_at_e, 0.95), super::SHARE_TOLERANCE),
    ));
    let nogc_gain = gain(NOGC, first, last);
    verdicts.push(verdict(
        "every system speeds up as the bandwidth grows ([fig~] NoGC 1.54 to 2.08 M, 1.35x \
         from A to E)",
        format!(
            "{} to {}: NoGC {nogc_gain:.2}x, TB-Collect {:.2}x, PC {:.2}x",
            table3_name(first),
            table3_name(last),
            gain(TB, first, last),
            gain(ONESHOT, first, last)
        ),
        ratio_agreement(nogc_gain, 1.35),
    ));
    let mut result = sweep_panel(
        panel.title,
        super::panel_figures(&points, panel, xs),
        &[
            "\"when the NVM cache line size decreases from 256 B to 128 B, the changes in \
             My_TB-Collect, My_TVCP, and My_BS are not significant, with only a 3%-5% \
             increase. My_PC shows the largest improvement, about 10%\"; at E \"My_PC shows \
             the greatest improvement, with about 95% of My_TB-Collect's performance\"; \
             \"My_TB-Collect still performs the best among the systems\"",
            "[fig~] TpmC, A-E: NoGC 1.54/1.58/1.76/1.84/2.08 M, TB 1.38/1.41/1.58/1.69/1.88 \
             M, PC 1.14/1.23/1.36/1.49/1.80 M",
        ],
        verdicts,
    );
    result.table = Some(table);
    let notes = vec![
        media_note(),
        super::shares_note(&points, FIG15B_TAG, panel.x_label, xs),
        super::spread_note(&points, FIG15B_TAG, panel.x_label, first),
        media_time_note(&points, &SYSTEMS, FIG15B_TAG, first, table3_media(first)),
        "Table 3's read bandwidths (70%, 70%, 90%, 90%, 100% of DRAM's) are not emulated; \
         the paper ran MySQL with each collector on Quartz, here the same systems as in \
         tb-fig7."
            .to_owned(),
    ];
    Ok(reproduction(
        &size,
        &FIG15B,
        "MySQL 8 with each collector, BenchmarkSQL TPC-C, 200 warehouses, 40 threads, on \
         Quartz's five NVM configurations (Table 3)",
        super::our_setup_on(
            &format!("{}, {THREADS} threads", size.tb_tpcc_words()),
            "a tmpfs file; Table 3's line sizes, each line delayed as if written at the \
             configuration's share of this machine's DRAM write bandwidth",
            size.seconds(SECONDS),
            size.rounds(),
        ),
        vec![result],
        notes,
        points,
    ))
}
