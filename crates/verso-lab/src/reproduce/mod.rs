//! `verso reproduce`: named experiments that redo a paper's figure or table on this
//! machine and put the paper's reported shape next to ours (`docs/lab.md`; the papers are
//! listed in `docs/brief.md`).
//!
//! An experiment is a list of points (one [`RunConfig`] on one workload each: a collector at
//! one value of the swept parameter), run one after the other by the ordinary runner
//! ([`run_configuration`]: a fresh database per point, consistency checked after load and
//! run), then turned into [`Panel`]s: a figure of ours (PNG and SVG), what the paper reports
//! about it (numbers quoted from the paper's text), and [`Verdict`]s computed from our
//! numbers that say whether the shape agrees. [`Reproduction`] is what the JSON holds;
//! `report::write_reproduction_report` writes the HTML page.
//!
//! Every experiment has a full size (a few minutes on a 2-core machine, release build) and a
//! `quick` size (tiny data, sub-second runs) that the tests run. The experiments of the
//! Steam paper (Böttcher et al., PVLDB 13(2), 2019, §5) are in [`steam`]; those of Wu et
//! al. (PVLDB 10(7), 2017, §7) in [`wu`]; TB-Collect's (Wei et al., Electronics 2025,
//! §5.2) in [`tb`]; SI-CV's (Gottstein et al., on the disk engine) in [`sicv`].

pub mod sicv;
pub mod steam;
pub mod tb;
pub mod wu;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use verso::research::VersionRemoval;

use crate::format::{compact, thousands};
use crate::metrics::RunResult;
use crate::runner::{run_configuration, RunConfig, StopAfter, DEFAULT_SEED};
use crate::workload::{LabError, Workload};

/// Version of the reproduction JSON layout; bumped when a key changes meaning or
/// disappears.
pub const REPRODUCTION_FORMAT_VERSION: u32 = 1;

/// One named experiment.
pub struct Experiment {
    /// The name on the command line (`steam-fig7`).
    pub name: &'static str,
    /// What the paper's figure or table shows.
    pub title: &'static str,
    /// Where in the paper.
    pub paper_ref: &'static str,
    /// What the experiment compares, in one line.
    pub compares: &'static str,
    /// Our full size, in words (what `--list` and the docs say).
    pub full_scale: &'static str,
    run: fn(&ReproduceOptions, &mut dyn Write) -> Result<Reproduction, LabError>,
}

/// Every experiment, in the order `--list` shows them.
pub const EXPERIMENTS: &[Experiment] = &[
    steam::FIG7,
    steam::TABLE5,
    steam::FIG8,
    steam::FIG9,
    steam::FIG10,
    steam::FIG11,
    steam::FIG12,
    wu::FIG7,
    wu::FIG8,
    wu::FIG10,
    wu::FIG11,
    wu::FIG12,
    wu::FIG13,
    wu::FIG14,
    wu::FIG15,
    wu::FIG16,
    wu::FIG17,
    wu::FIG18,
    wu::FIG20,
    wu::FIG22,
    wu::FIG23,
    wu::FIG24,
    tb::FIG1,
    tb::FIG7,
    tb::FIG8,
    tb::FIG9,
    tb::FIG10,
    tb::FIG11,
    tb::FIG12,
    tb::FIG13,
    tb::FIG14,
    tb::FIG15B,
    sicv::TABLE2,
    sicv::FIG3,
    sicv::FIG4,
    sicv::FIG5,
    sicv::SPACE,
];

/// The experiment named `name`, or [`LabError::BadOption`] listing the known names.
pub fn experiment(name: &str) -> Result<&'static Experiment, LabError> {
    EXPERIMENTS.iter().find(|e| e.name == name).ok_or_else(|| {
        LabError::BadOption(format!(
            "unknown experiment {name:?}; known: {} (verso reproduce --list)",
            EXPERIMENTS
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The `--list` text: one line per experiment.
pub fn list() -> String {
    let width = EXPERIMENTS.iter().map(|e| e.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for e in EXPERIMENTS {
        out.push_str(&format!(
            "{:<width$}  {}: {}\n{:<width$}  compares {}; {}\n",
            e.name, e.paper_ref, e.title, "", e.compares, e.full_scale
        ));
    }
    out.push_str(
        "\nEach writes an HTML report (our figures beside the paper's numbers, with a verdict \
         per claim), a JSON file and a terminal summary; --quick runs tiny sizes in seconds.\n",
    );
    out
}

/// How to run an experiment.
#[derive(Clone, Debug)]
pub struct ReproduceOptions {
    /// Tiny data and sub-second runs (the tests use it).
    pub quick: bool,
    /// Seed of the data and of every worker's stream.
    pub seed: u64,
    /// Where to write the report; `None`: `verso-report/reproduce/<name>/`.
    pub report: Option<PathBuf>,
    /// Also write the JSON here.
    pub json: Option<PathBuf>,
    /// Draw progress bars (only on a terminal anyway).
    pub show_progress: bool,
    /// The command line, recorded in the outputs.
    pub command_line: Vec<String>,
    /// Where each point runs.
    pub points: PointProcess,
    /// How finalizing removes obsolete versions in every run (Table 5 runs both ways):
    /// by default HyPer's one version at a time, the engine the paper's collectors ran in.
    pub version_removal: VersionRemoval,
    /// Where the experiments on the disk engine (`sicv-*`) put their databases: a fresh
    /// directory per point, removed after it; `None`: the system's temporary directory.
    /// It must be on a file system that does direct I/O (not tmpfs).
    pub disk: Option<PathBuf>,
}

impl Default for ReproduceOptions {
    fn default() -> Self {
        ReproduceOptions {
            quick: false,
            seed: DEFAULT_SEED,
            report: None,
            json: None,
            show_progress: false,
            command_line: Vec::new(),
            points: PointProcess::InProcess,
            version_removal: VersionRemoval::OneVersionAtATime,
            disk: None,
        }
    }
}

/// Where the points of an experiment run.
///
/// Points run one after the other; in one process each inherits the heap the previous ones
/// grew (so the first pays for page faults the later ones do not, by 10-30% here) and the
/// process's resident memory. `verso reproduce` therefore runs each point in a fresh child
/// process of the same executable unless told `--in-process`; the tests run in process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PointProcess {
    /// In this process.
    #[default]
    InProcess,
    /// Each point in a child process of this executable: `verso reproduce <experiment>
    /// --point-index i --point-json FILE ...`, which writes the point's [`RunResult`] as
    /// JSON.
    Child {
        /// The experiment's name, passed on.
        experiment: String,
    },
    /// This process is such a child: run only point `index`, write its result to `json`,
    /// and exit.
    OnlyPoint {
        /// The point's position in the experiment's list.
        index: usize,
        /// Where to write its [`RunResult`].
        json: PathBuf,
    },
}

/// The report directory when none is given.
pub fn default_report_dir(name: &str) -> PathBuf {
    PathBuf::from("verso-report").join("reproduce").join(name)
}

/// Runs experiment `name`, prints progress and the summary to `out`, and writes the report
/// directory (and the JSON file, if asked).
pub fn reproduce(
    name: &str,
    options: &ReproduceOptions,
    out: &mut dyn Write,
) -> Result<Reproduction, LabError> {
    let experiment = experiment(name)?;
    let dir = options
        .report
        .clone()
        .unwrap_or_else(|| default_report_dir(name));
    // A point's child process writes neither; its parent checked them.
    if !matches!(options.points, PointProcess::OnlyPoint { .. }) {
        crate::report::check_outputs(
            options.json.as_deref(),
            Some(&dir),
            crate::report::REPRODUCTION_JSON,
        )?;
    }
    let started_unix_seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    writeln!(
        out,
        "reproducing {} ({}: {}){}",
        experiment.name,
        experiment.paper_ref,
        experiment.title,
        if options.quick { ", quick size" } else { "" }
    )?;
    let mut reproduction = (experiment.run)(options, out)?;
    reproduction.started_unix_seconds = started_unix_seconds;
    reproduction.command_line.clone_from(&options.command_line);
    crate::report::write_reproduction_report(&dir, &reproduction)?;
    writeln!(out)?;
    write!(
        out,
        "{}",
        crate::report::reproduction_summary(&reproduction)
    )?;
    if let Some(path) = &options.json {
        crate::report::write_reproduction_json(path, &reproduction)?;
        writeln!(out, "JSON written to {}", path.display())?;
    }
    writeln!(
        out,
        "report written to {}",
        dir.join(crate::report::INDEX_HTML).display()
    )?;
    Ok(reproduction)
}

/// What an experiment measured and how it compares with the paper: what the JSON holds
/// (`docs/lab.md` documents every key).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reproduction {
    /// [`REPRODUCTION_FORMAT_VERSION`].
    pub format_version: u32,
    /// The experiment's name (`steam-fig7`).
    pub experiment: String,
    /// What the paper's figure or table shows.
    pub title: String,
    /// The paper and where in it.
    pub paper: String,
    /// How the paper ran it (machine, threads, data, length).
    pub paper_setup: String,
    /// How we ran it (scale, threads, length), in words.
    pub our_setup: String,
    /// Whether this was the quick (test) size.
    pub quick: bool,
    /// Cores available to this process.
    pub cores: usize,
    /// The seed.
    pub seed: u64,
    /// Seconds since the Unix epoch when it started.
    pub started_unix_seconds: u64,
    /// The command line.
    pub command_line: Vec<String>,
    /// Our figures and tables, each beside what the paper reports and our verdicts.
    pub panels: Vec<Panel>,
    /// Caveats: what differs from the paper's setup, numbers we could not measure.
    pub notes: Vec<String>,
    /// Every run, in the order they ran.
    pub points: Vec<Point>,
}

impl Reproduction {
    /// Every verdict of every panel, in order.
    pub fn verdicts(&self) -> impl Iterator<Item = &Verdict> {
        self.panels.iter().flat_map(|p| &p.verdicts)
    }
}

/// One figure or table of ours, beside the paper's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    /// What it shows.
    pub title: String,
    /// Figures over time: one metric, runs overlaid (their data is the points'
    /// `samples`).
    pub time_series: Vec<OverTime>,
    /// Sweep figures, with their data.
    pub figures: Vec<Figure>,
    /// A table of our numbers beside the paper's, if the panel has one.
    pub table: Option<Table>,
    /// What the paper reports about it, quoted or with its numbers.
    pub paper: Vec<String>,
    /// Our verdicts on the paper's claims.
    pub verdicts: Vec<Verdict>,
}

/// A figure of one metric over time, some or all runs overlaid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverTime {
    /// File stem (`<key>.png`, `<key>.svg`).
    pub key: String,
    /// The metric: a sample key of the lab's report (`docs/lab.md`), e.g. `live_versions`.
    pub metric: String,
    /// The runs drawn, by series (a collector's name); empty: every run.
    pub series: Vec<String>,
    /// The caption.
    pub caption: String,
}

/// The data of a sweep figure: one line per configuration over the swept parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// File stem of the figure (`<key>.png`, `<key>.svg`).
    pub key: String,
    /// The caption.
    pub title: String,
    /// The x axis.
    pub x_label: String,
    /// The y axis.
    pub y_label: String,
    /// Whether x is on a log scale.
    pub log_x: bool,
    /// The lines.
    pub lines: Vec<FigureLine>,
}

/// One line of a [`Figure`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureLine {
    /// The legend's label (a collector's name).
    pub label: String,
    /// `[x, y]` pairs, in the order of x.
    pub points: Vec<[f64; 2]>,
}

/// A table of cells (the first row is the header).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// The column headers.
    pub header: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<String>>,
}

/// How our numbers compare with a claim of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    /// The shape (and, for ratios, the size within a factor of two) is the paper's.
    Agrees,
    /// The same direction as the paper, a clearly smaller effect.
    Weaker,
    /// Within the noise (ratios within 10% of 1): neither agrees nor differs.
    Inconclusive,
    /// The opposite of the paper's shape.
    Differs,
    /// Not judged: a quick run (tiny data, sub-second runs) is a smoke test, and its
    /// numbers say nothing about the paper's claims.
    NotJudged,
}

impl Agreement {
    /// The word used in verdict lines.
    pub fn word(self) -> &'static str {
        match self {
            Agreement::Agrees => "agrees",
            Agreement::Weaker => "same direction, weaker",
            Agreement::Inconclusive => "inconclusive (within noise)",
            Agreement::Differs => "differs",
            Agreement::NotJudged => "quick size: no verdict",
        }
    }
}

/// One claim of the paper, our numbers, and whether they agree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The paper's claim, with its numbers.
    pub paper: String,
    /// Our numbers for it.
    pub ours: String,
    /// How they compare.
    pub agreement: Agreement,
}

impl Verdict {
    /// The verdict line: our numbers and the agreement.
    pub fn line(&self) -> String {
        format!("{}: {}", self.ours, self.agreement.word())
    }
}

/// One run of an experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The line it belongs to (a collector's name).
    pub series: String,
    /// The swept parameter's value, if the experiment sweeps one.
    pub x: Option<f64>,
    /// The run (the lab's ordinary result: configuration, totals, engine counters,
    /// summary, samples).
    pub run: RunResult,
}

/// Ratios within this factor of 1 are noise on a shared 2-core machine.
pub const NOISE: f64 = 1.1;

/// The verdict on "ours is `paper_ratio` times larger" given our `ratio`: agrees if within a
/// factor of two of the paper's ratio or beyond it, weaker if above the noise, inconclusive
/// within it, differs below it.
pub fn ratio_agreement(ratio: f64, paper_ratio: f64) -> Agreement {
    if !ratio.is_finite() {
        Agreement::Inconclusive
    } else if ratio >= (paper_ratio / 2.0).max(NOISE) {
        Agreement::Agrees
    } else if ratio >= NOISE {
        Agreement::Weaker
    } else if ratio >= 1.0 / NOISE {
        Agreement::Inconclusive
    } else {
        Agreement::Differs
    }
}

/// The verdict on "about the same": agrees if `ratio` lies within `tolerance` (a factor) of
/// 1, differs otherwise.
pub fn same_agreement(ratio: f64, tolerance: f64) -> Agreement {
    if !ratio.is_finite() {
        Agreement::Inconclusive
    } else if ratio <= tolerance && ratio >= 1.0 / tolerance {
        Agreement::Agrees
    } else {
        Agreement::Differs
    }
}

/// `a / b`, infinite when `b` is 0 and `a` is not, 1 when both are.
pub fn ratio_of(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else if a > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}

/// A ratio for people: `3.1x`, `250x`, `inf`.
pub fn times(r: f64) -> String {
    if !r.is_finite() {
        "inf".to_owned()
    } else if r >= 10.0 {
        format!("{}x", thousands(r))
    } else {
        format!("{r:.2}x")
    }
}

/// One planned run.
pub(crate) struct PointPlan {
    pub series: String,
    pub x: Option<f64>,
    /// What the progress line calls the point (`hana, period 10 ms`).
    pub describe: String,
    pub workload: Box<dyn Workload>,
    pub config: RunConfig,
}

/// Runs point `index` of `experiment` in a child process and reads its result.
fn run_point_in_child(
    experiment: &str,
    index: usize,
    options: &ReproduceOptions,
    heading: &str,
) -> Result<RunResult, LabError> {
    let mut args: Vec<String> = ["reproduce", experiment].map(str::to_owned).into();
    // The child draws its bars only if this process shows them (then they come up the
    // pipe: crate::progress).
    if !options.show_progress {
        args.push("--quiet".to_owned());
    }
    args.extend([
        "--seed".to_owned(),
        options.seed.to_string(),
        "--version-removal".to_owned(),
        options.version_removal.name().to_owned(),
        "--point-index".to_owned(),
        index.to_string(),
    ]);
    if options.quick {
        args.push("--quick".to_owned());
    }
    if let Some(disk) = &options.disk {
        args.push("--disk".to_owned());
        args.push(disk.display().to_string());
    }
    crate::runner::run_in_child_process(
        &args,
        "--point-json",
        &format!("point {index}"),
        options.show_progress,
        heading,
    )
}

/// Runs every point in order, one progress line each.
pub(crate) fn run_points(
    plans: Vec<PointPlan>,
    options: &ReproduceOptions,
    out: &mut dyn Write,
) -> Result<Vec<Point>, LabError> {
    for plan in &plans {
        plan.config.validate(&*plan.workload)?;
    }
    if let PointProcess::OnlyPoint { index, json } = &options.points {
        let plan = plans.get(*index).ok_or_else(|| {
            LabError::BadOption(format!(
                "point {index} does not exist ({} points)",
                plans.len()
            ))
        })?;
        let run = run_on_fresh_disk(plan).map_err(|e| point_error(&plan.describe, e))?;
        let text =
            serde_json::to_string(&run).map_err(|e| LabError::Io(std::io::Error::other(e)))?;
        std::fs::write(json, text)?;
        // The child's work ends here; the parent builds the report.
        std::process::exit(0);
    }
    let total = plans.len();
    let mut points = Vec::with_capacity(total);
    // A child's forwarded bar is drawn on the terminal's last line, after the point's
    // heading; the heading is printed with the point's result once the bar is gone.
    let forwarding = matches!(options.points, PointProcess::Child { .. })
        && crate::progress::parent_forwards(options.show_progress).is_some();
    for (i, plan) in plans.into_iter().enumerate() {
        let heading = format!("[{:>2}/{total}] {}: ", i + 1, plan.describe);
        if !forwarding {
            write!(out, "{heading}")?;
            out.flush()?;
        }
        let run = match &options.points {
            PointProcess::Child { experiment } => {
                run_point_in_child(experiment, i, options, &heading)
                    .map_err(|e| point_error(&plan.describe, e))?
            }
            _ => run_on_fresh_disk(&plan).map_err(|e| point_error(&plan.describe, e))?,
        };
        if forwarding {
            write!(out, "{heading}")?;
        }
        let mut line = format!(
            "{} commits/s",
            compact(per_second(run.totals.oltp_commits, &run))
        );
        if run.configuration.olap_workers > 0 {
            line.push_str(&format!(
                ", {:.2} queries/s",
                per_second(run.totals.olap_queries, &run)
            ));
        }
        writeln!(
            out,
            "{line}, max chain {} (read/write), max {} live versions; loaded {:.1} s, ran {:.1} s",
            compact(max_chain(&run) as f64),
            compact(run.summary.max_live_versions as f64),
            run.load_seconds,
            run.run_seconds
        )?;
        points.push(Point {
            series: plan.series,
            x: plan.x,
            run,
        });
    }
    Ok(points)
}

/// Runs `plan`. A plan on the disk engine names the directory its database goes under
/// (`Options::disk`): the run gets a fresh directory there of its own, removed after the
/// run however it ended, so no point opens another's files (and a point run again in a
/// child process does not find its parent's).
fn run_on_fresh_disk(plan: &PointPlan) -> Result<RunResult, LabError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let Some(base) = plan.config.options.disk.clone() else {
        return run_configuration(&*plan.workload, &plan.config);
    };
    let label: String = plan
        .config
        .label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = base.join(format!(
        "verso-point-{}-{}-{label}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _remove = Remove(dir.clone());
    let mut config = plan.config.clone();
    config.options = config.options.disk(dir);
    run_configuration(&*plan.workload, &config)
}

fn point_error(point: &str, error: LabError) -> LabError {
    match error {
        LabError::Inconsistent(what) => LabError::Inconsistent(format!("{point}: {what}")),
        LabError::BadOption(what) => LabError::BadOption(format!("{point}: {what}")),
        other => other,
    }
}

/// `count` per second of the run.
pub fn per_second(count: u64, run: &RunResult) -> f64 {
    if run.run_seconds > 0.0 {
        count as f64 / run.run_seconds
    } else {
        0.0
    }
}

/// Mean OLTP commits per second over the whole run (what the paper's figures plot: means).
pub fn commits_per_second(run: &RunResult) -> f64 {
    per_second(run.totals.oltp_commits, run)
}

/// The longest chain a read walked or a writer left behind during the run.
pub fn max_chain(run: &RunResult) -> u64 {
    run.summary.max_read_chain.max(run.summary.max_write_chain)
}

/// Mean of a gauge over the run's full samples, weighted by their intervals.
pub fn sample_mean(run: &RunResult, value: impl Fn(&crate::metrics::Sample) -> f64) -> f64 {
    let interval = run.configuration.sample_interval_seconds;
    let (mut sum, mut seconds) = (0.0, 0.0);
    for sample in run.samples.iter().filter(|s| s.is_full(interval)) {
        sum += value(sample) * sample.interval_seconds;
        seconds += sample.interval_seconds;
    }
    if seconds > 0.0 {
        sum / seconds
    } else {
        run.samples.last().map_or(0.0, value)
    }
}

/// A timed stop after `seconds`.
pub(crate) fn seconds(seconds: f64) -> StopAfter {
    StopAfter::Duration(Duration::from_secs_f64(seconds))
}

/// The cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A panel of sweep figures.
pub(crate) fn sweep_panel(
    title: &str,
    figures: Vec<Figure>,
    paper: &[&str],
    verdicts: Vec<Verdict>,
) -> Panel {
    Panel {
        title: title.to_owned(),
        time_series: Vec::new(),
        figures,
        table: None,
        paper: paper.iter().map(|p| (*p).to_owned()).collect(),
        verdicts,
    }
}

/// The run of `series` at `x`.
pub(crate) fn run_at<'p>(
    points: &'p [Point],
    series: &str,
    x: Option<f64>,
) -> Option<&'p RunResult> {
    points
        .iter()
        .find(|p| p.series == series && p.x == x)
        .map(|p| &p.run)
}

/// `value` of the run of `series` at `x` (NaN if there is none).
pub(crate) fn value_at(
    points: &[Point],
    series: &str,
    x: Option<f64>,
    value: impl Fn(&RunResult) -> f64,
) -> f64 {
    run_at(points, series, x).map_or(f64::NAN, value)
}

/// A sweep figure's name and axes.
pub(crate) struct FigureSpec<'a> {
    pub(crate) key: &'a str,
    pub(crate) title: &'a str,
    pub(crate) x_label: &'a str,
    pub(crate) y_label: &'a str,
    pub(crate) log_x: bool,
}

/// A sweep figure: one line per series (in `series` order) over the points' x.
pub(crate) fn sweep_figure(
    spec: FigureSpec,
    points: &[Point],
    series: &[String],
    value: impl Fn(&RunResult) -> f64,
) -> Figure {
    let lines = series
        .iter()
        .map(|label| {
            let mut line: Vec<[f64; 2]> = points
                .iter()
                .filter(|p| &p.series == label)
                .filter_map(|p| p.x.map(|x| [x, value(&p.run)]))
                .collect();
            line.sort_by(|a, b| a[0].total_cmp(&b[0]));
            FigureLine {
                label: label.clone(),
                points: line,
            }
        })
        .collect();
    figure_of(spec, lines)
}

/// A figure of `lines` as `spec` describes it.
pub(crate) fn figure_of(spec: FigureSpec, lines: Vec<FigureLine>) -> Figure {
    Figure {
        key: spec.key.to_owned(),
        title: spec.title.to_owned(),
        x_label: spec.x_label.to_owned(),
        y_label: spec.y_label.to_owned(),
        log_x: spec.log_x,
        lines,
    }
}

/// Agrees if `ratio` is clearly above 1 (the paper's direction), differs if clearly below.
pub(crate) fn direction(ratio: f64) -> Agreement {
    ratio_agreement(ratio, 1.0)
}

pub(crate) fn verdict(
    paper: impl Into<String>,
    ours: impl Into<String>,
    agreement: Agreement,
) -> Verdict {
    Verdict {
        paper: paper.into(),
        ours: ours.into(),
        agreement,
    }
}

/// Seconds every quick run lasts, in every paper's experiments.
pub(crate) const QUICK_SECONDS: f64 = 0.2;

/// The paper an experiment module reproduces: its citation and its machine and setup.
pub(crate) struct PaperSource {
    pub(crate) citation: &'static str,
    pub(crate) machine: &'static str,
}

/// "2 cores here" and, at the quick size, the mark that it measures nothing.
fn our_machine(quick: bool) -> String {
    let mut machine = format!("{} core(s) here, shared with whatever else runs", cores());
    if quick {
        machine.push_str(&format!(
            "; QUICK SIZE: tiny data, {QUICK_SECONDS} s runs: a smoke test, not a measurement"
        ));
    }
    machine
}

/// The reproduction of `experiment` of `paper`, run with `options`: the setups in words
/// (each gets its machine appended), the panels, notes and points.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reproduction_of(
    paper: &PaperSource,
    experiment: &Experiment,
    options: &ReproduceOptions,
    paper_setup: &str,
    our_setup: &str,
    mut panels: Vec<Panel>,
    notes: Vec<String>,
    points: Vec<Point>,
) -> Reproduction {
    if options.quick {
        // Numbers of a smoke test judge nothing: the claims stay, with our numbers, unjudged.
        for verdict in panels.iter_mut().flat_map(|panel| &mut panel.verdicts) {
            verdict.agreement = Agreement::NotJudged;
        }
    }
    Reproduction {
        format_version: REPRODUCTION_FORMAT_VERSION,
        experiment: experiment.name.to_owned(),
        title: experiment.title.to_owned(),
        paper: format!("{}, {}", paper.citation, experiment.paper_ref),
        paper_setup: format!("{paper_setup}; {}", paper.machine),
        our_setup: format!("{our_setup}; {}", our_machine(options.quick)),
        quick: options.quick,
        cores: cores(),
        seed: options.seed,
        started_unix_seconds: 0,
        command_line: Vec::new(),
        panels,
        notes,
        points,
    }
}

/// The sizes of one invocation: full, or quick (tiny data, sub-second runs). Each paper's
/// module adds the workloads and configurations of its experiments.
pub(crate) struct Size<'o> {
    pub(crate) options: &'o ReproduceOptions,
}

impl Size<'_> {
    pub(crate) fn quick(&self) -> bool {
        self.options.quick
    }

    /// `full` seconds, or the quick length.
    pub(crate) fn seconds(&self, full: f64) -> f64 {
        if self.quick() {
            QUICK_SECONDS
        } else {
            full
        }
    }

    /// Every second, or every 50 ms at the quick size.
    pub(crate) fn sample_interval(&self) -> Duration {
        Duration::from_millis(if self.quick() { 50 } else { 1_000 })
    }

    /// A run of `options` with `oltp` + `olap` threads until `stop`, with this size's seed,
    /// sampling and progress bars.
    pub(crate) fn config(
        &self,
        label: String,
        options: verso::Options,
        oltp: usize,
        olap: usize,
        stop: StopAfter,
    ) -> RunConfig {
        RunConfig {
            oltp_workers: oltp,
            olap_workers: olap,
            stop,
            seed: self.options.seed,
            sample_interval: self.sample_interval(),
            show_progress: self.options.show_progress,
            ..RunConfig::with_options(label, options)
        }
    }

    /// `full`, or `quick` at the quick size.
    pub(crate) fn pick<'a, T>(&self, full: &'a [T], quick: &'a [T]) -> &'a [T] {
        if self.quick() {
            quick
        } else {
            full
        }
    }
}
