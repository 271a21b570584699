//! Plots of the time series: one figure per metric, every configuration overlaid, as PNG
//! and SVG (plotters, with a bundled font so that no system font library is needed).

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::format::axis;
use crate::metrics::{RunResult, Sample};
use crate::workload::LabError;

/// DejaVu Sans (license: `assets/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Size of every figure, in pixels.
pub const FIGURE_SIZE: (u32, u32) = (960, 540);

/// One plotted metric.
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    /// The file name (without extension) and the JSON key it plots.
    pub key: &'static str,
    /// The figure's title.
    pub title: &'static str,
    /// The y axis.
    pub unit: &'static str,
    /// The value of a sample.
    pub value: fn(&Sample) -> f64,
    /// Whether the metric is about analytical queries (skipped when no run had any).
    pub olap: bool,
    /// Whether only Verso has it (the engine's counters): peers' runs are left out of it.
    pub verso_only: bool,
    /// Whether each run is drawn as a multiple of its first value (so that systems whose
    /// measures differ in size can be overlaid).
    pub relative: bool,
    /// Whether it is a disk series (the disk engine's, and a peer's storage counters):
    /// plotted only when a run has them.
    pub disk: bool,
}

/// Every plotted metric, in the order the report shows them.
pub const METRICS: &[Metric] = &[
    Metric {
        key: "oltp_commits_per_second",
        title: "OLTP throughput",
        unit: "commits/s",
        value: |s| s.oltp_commits_per_second,
        olap: false,
        verso_only: false,
        relative: false,
        disk: false,
    },
    Metric {
        key: "oltp_aborts_per_second",
        title: "OLTP aborts",
        unit: "aborts/s",
        value: |s| s.oltp_aborts_per_second,
        olap: false,
        verso_only: false,
        relative: false,
        disk: false,
    },
    Metric {
        key: "olap_queries_per_second",
        title: "OLAP throughput",
        unit: "queries/s",
        value: |s| s.olap_queries_per_second,
        olap: true,
        verso_only: false,
        relative: false,
        disk: false,
    },
    Metric {
        key: "olap_scanned_tuples_per_second",
        title: "OLAP scanned tuples",
        unit: "tuples/s",
        value: |s| s.olap_scanned_tuples_per_second,
        olap: true,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "growth_bytes",
        title: "Growth, each system's own measure (Verso: memory; PostgreSQL: tables and indexes; SQLite: database and WAL files; DuckDB: buffer memory)",
        unit: BYTES,
        value: |s| s.growth_bytes as f64,
        olap: false,
        verso_only: false,
        relative: false,
        disk: false,
    },
    Metric {
        key: "growth_relative",
        title: "Growth as a multiple of the run's start",
        unit: "x its first sample",
        value: |s| s.growth_bytes as f64,
        olap: false,
        verso_only: false,
        relative: true,
        disk: false,
    },
    Metric {
        key: "live_versions",
        title: "Live version records",
        unit: "versions",
        value: |s| s.live_versions as f64,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "live_version_bytes",
        title: "Live version bytes",
        unit: BYTES,
        value: |s| s.live_version_bytes as f64,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "rss_bytes",
        title: "Process memory (RSS)",
        unit: BYTES,
        value: |s| s.rss_bytes as f64,
        olap: false,
        verso_only: false,
        relative: false,
        disk: false,
    },
    Metric {
        key: "read_chain_mean",
        title: "Chain length walked by reads (mean)",
        unit: "versions",
        value: |s| s.read_chain_mean,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "read_chain_max",
        title: "Chain length walked by reads (max per interval)",
        unit: "versions",
        value: |s| s.read_chain_max as f64,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "write_chain_mean",
        title: "Chain length left behind by writers (mean)",
        unit: "versions",
        value: |s| s.write_chain_mean,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "write_chain_max",
        title: "Chain length left behind by writers (max per interval)",
        unit: "versions",
        value: |s| s.write_chain_max as f64,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "gc_chain_mean",
        title: "Chain length met by GC and writers (mean)",
        unit: "versions",
        value: |s| s.gc_chain_mean,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "gc_chain_max",
        title: "Chain length met by GC and writers (max per interval)",
        unit: "versions",
        value: |s| s.gc_chain_max as f64,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "gc_ms_per_second",
        title: "Time spent collecting garbage",
        unit: "ms/s (all threads)",
        value: |s| s.gc_ms_per_second,
        olap: false,
        verso_only: true,
        relative: false,
        disk: false,
    },
    Metric {
        key: "disk_pages_read_per_second",
        title: "Pages read from the files (buffer misses)",
        unit: "pages/s",
        value: |s| s.disk_pages_read_per_second,
        olap: false,
        verso_only: false,
        relative: false,
        disk: true,
    },
    Metric {
        key: "disk_pages_written_per_second",
        title: "Pages written to the files",
        unit: "pages/s",
        value: |s| s.disk_pages_written_per_second,
        olap: false,
        verso_only: false,
        relative: false,
        disk: true,
    },
    Metric {
        key: "disk_sequential_write_share",
        title: "Share of page writes that were sequential (block after the file's previous)",
        unit: "share",
        value: |s| s.disk_sequential_write_share,
        olap: false,
        verso_only: true,
        relative: false,
        disk: true,
    },
    Metric {
        key: "disk_pages_dirtied_per_second",
        title: "Pages dirtied (clean to dirty in the buffer pool, any cause)",
        unit: "pages/s",
        value: |s| s.disk_pages_dirtied_per_second,
        olap: false,
        verso_only: true,
        relative: false,
        disk: true,
    },
    Metric {
        key: "disk_pages_dirtied_by_new_versions_per_second",
        title: "Pages dirtied by new versions (once per page between its writes)",
        unit: "pages/s",
        value: |s| s.disk_pages_dirtied_by_new_versions_per_second,
        olap: false,
        verso_only: true,
        relative: false,
        disk: true,
    },
    Metric {
        key: "buffer_hit_ratio",
        title: "Buffer hit ratio",
        unit: "hits per page request",
        value: |s| s.buffer_hit_ratio,
        olap: false,
        verso_only: false,
        relative: false,
        disk: true,
    },
    Metric {
        key: "heap_bytes",
        title: "Heap bytes on disk",
        unit: "bytes",
        value: |s| s.heap_bytes as f64,
        olap: false,
        verso_only: false,
        relative: false,
        disk: true,
    },
    Metric {
        key: "index_bytes",
        title: "Index bytes on disk",
        unit: "bytes",
        value: |s| s.index_bytes as f64,
        olap: false,
        verso_only: false,
        relative: false,
        disk: true,
    },
    Metric {
        key: "undo_bytes",
        title: "Undo bytes in use (InnoDB's design)",
        unit: "bytes",
        value: |s| s.undo_bytes as f64,
        olap: false,
        verso_only: true,
        relative: false,
        disk: true,
    },
    Metric {
        key: "undo_history_list_length",
        title: "History list length (InnoDB's design)",
        unit: "undo logs",
        value: |s| s.undo_history_list_length as f64,
        olap: false,
        verso_only: true,
        relative: false,
        disk: true,
    },
    Metric {
        key: "dead_tuples",
        title: "Dead tuples since the last vacuum (n_dead_tup)",
        unit: "tuples",
        value: |s| s.dead_tuples as f64,
        olap: false,
        verso_only: false,
        relative: false,
        disk: true,
    },
    Metric {
        key: "tuples_pruned_per_second",
        title: "Tuples removed by pruning and vacuum",
        unit: "tuples/s",
        value: |s| s.tuples_pruned_per_second,
        olap: false,
        verso_only: true,
        relative: false,
        disk: true,
    },
    Metric {
        key: "vacuums",
        title: "Vacuums run since the start",
        unit: "vacuums",
        value: |s| s.vacuums as f64,
        olap: false,
        verso_only: false,
        relative: false,
        disk: true,
    },
];

/// The metrics worth plotting for these runs (the OLAP ones only if a run had OLAP
/// workers).
pub fn metrics_for(runs: &[RunResult]) -> Vec<Metric> {
    let olap = runs.iter().any(|r| r.configuration.olap_workers > 0);
    let disk = runs
        .iter()
        .any(|r| r.samples.iter().any(|s| s.heap_bytes > 0));
    METRICS
        .iter()
        .filter(|m| (olap || !m.olap) && (disk || !m.disk))
        .copied()
        .collect()
}

/// Line colors, one per configuration (Tableau 10: enough for every collector).
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The color of a line labelled `label`, the `i`-th of its figure: a collector keeps its
/// color in every figure (its place in `GarbageCollector::ALL`, for labels that start with
/// its name, like `hana, period 10 ms`); other labels take theirs in order.
fn color_index(label: &str, i: usize) -> usize {
    let first_word = label
        .split(|c: char| c == ',' || c.is_whitespace())
        .next()
        .unwrap_or(label);
    // The peers take the colors of collectors seldom run beside them.
    let peer = match first_word {
        "postgres" => Some(3),
        "sqlite" => Some(4),
        "duckdb" => Some(8),
        _ => None,
    };
    peer.or_else(|| {
        verso::GarbageCollector::ALL
            .iter()
            .position(|gc| gc.name() == first_word)
    })
    .unwrap_or(i)
}

/// One line of a figure: a configuration's points, drawn in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// The legend's label.
    pub label: String,
    /// The points `(x, y)`; non-finite ones are left out.
    pub points: Vec<(f64, f64)>,
}

/// How a figure is drawn: its title, axes, and whether points get markers.
#[derive(Clone, Debug, PartialEq)]
pub struct Axes {
    /// The caption.
    pub title: String,
    /// The x axis' description.
    pub x_desc: String,
    /// The y axis' description.
    pub y_desc: String,
    /// Whether x is drawn on a logarithmic scale (x values must then be above 0).
    pub log_x: bool,
    /// Whether each point gets a marker (a sweep with few points), besides the line.
    pub markers: bool,
    /// Whether y is drawn on a logarithmic scale (values below 1 drawn at 1): for series
    /// that span orders of magnitude ([`spans_decades`]).
    pub log_y: bool,
}

/// Whether the positive values of `lines` span at least `decades` orders of magnitude
/// (a chain of 1 beside one of 100,000 would be a flat line at 0 on a linear axis).
pub fn spans_decades(lines: &[Line], decades: f64) -> bool {
    let ys = lines
        .iter()
        .flat_map(|line| &line.points)
        .map(|p| p.1)
        .filter(|y| y.is_finite() && *y > 0.0);
    let (low, high) = ys.fold((f64::INFINITY, 0.0f64), |(low, high), y| {
        (low.min(y.max(1.0)), high.max(y))
    });
    high > 0.0 && (high / low).log10() >= decades
}

/// A y tick label: bytes in B/KiB/MiB/GiB, other units as numbers; on a log scale `y`
/// is a decimal logarithm.
fn y_label(axes: &Axes, y: f64) -> String {
    let y = if axes.log_y { 10f64.powf(y).round() } else { y };
    if axes.y_desc == BYTES {
        crate::format::bytes(y)
    } else {
        axis(y)
    }
}

/// The unit of metrics in bytes, whose axes are labelled in KiB, MiB and GiB.
pub const BYTES: &str = "bytes";

/// Registers the bundled font as `sans-serif` (once per process).
fn register_font() -> Result<(), LabError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(LabError::Io(std::io::Error::other(
            "the bundled font DejaVuSans.ttf could not be loaded",
        )))
    }
}

/// Writes `<key>.png` and `<key>.svg` into `dir` for each metric of [`metrics_for`];
/// returns the metrics drawn.
pub fn write_plots(dir: &Path, runs: &[RunResult]) -> Result<Vec<Metric>, LabError> {
    let metrics = metrics_for(runs);
    write_metric_plots(dir, runs, &metrics)?;
    Ok(metrics)
}

/// Writes `<key>.png` and `<key>.svg` into `dir` for each of `metrics`, every run overlaid.
pub fn write_metric_plots(
    dir: &Path,
    runs: &[RunResult],
    metrics: &[Metric],
) -> Result<(), LabError> {
    let runs: Vec<&RunResult> = runs.iter().collect();
    for metric in metrics {
        write_metric_plot(dir, metric.key, &runs, metric)?;
    }
    Ok(())
}

/// A run's name in legends and tables: its label, and whether it held a snapshot.
pub fn run_label(run: &RunResult) -> String {
    let c = &run.configuration;
    if c.hold_read_only {
        format!("{} +held read-only snapshot", c.label)
    } else if c.hold_snapshot {
        format!("{} +held snapshot", c.label)
    } else {
        c.label.clone()
    }
}

/// Writes `metric` over time as `<key>.png` and `<key>.svg` into `dir`, the runs overlaid.
pub fn write_metric_plot(
    dir: &Path,
    key: &str,
    runs: &[&RunResult],
    metric: &Metric,
) -> Result<(), LabError> {
    let axes = Axes {
        title: metric.title.to_owned(),
        x_desc: "seconds".to_owned(),
        y_desc: metric.unit.to_owned(),
        log_x: false,
        markers: false,
        log_y: false,
    };
    let lines: Vec<Line> = runs
        .iter()
        .filter(|run| !metric.verso_only || run.configuration.system == "verso")
        .map(|run| Line {
            label: run_label(run),
            points: points(run, metric),
        })
        .collect();
    // Versions (chain lengths, live versions) span orders of magnitude behind a held
    // snapshot: a log axis keeps the short chains visible beside the long ones.
    let axes = Axes {
        log_y: metric.unit == "versions" && spans_decades(&lines, 2.0),
        ..axes
    };
    write_figure(dir, key, &axes, &lines)
}

/// The metric of [`METRICS`] with this key.
pub fn metric(key: &str) -> Option<Metric> {
    METRICS.iter().find(|m| m.key == key).copied()
}

/// Writes one figure of `lines` as `dir/<key>.png` and `dir/<key>.svg`.
pub fn write_figure(dir: &Path, key: &str, axes: &Axes, lines: &[Line]) -> Result<(), LabError> {
    register_font()?;
    let (width, height) = FIGURE_SIZE;
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    draw(
        BitMapBackend::with_buffer(&mut pixels, FIGURE_SIZE).into_drawing_area(),
        axes,
        lines,
    )?;
    write_png(&dir.join(format!("{key}.png")), &pixels)?;
    let svg = dir.join(format!("{key}.svg"));
    draw(
        SVGBackend::new(&svg, FIGURE_SIZE).into_drawing_area(),
        axes,
        lines,
    )
}

/// Encodes RGB pixels of [`FIGURE_SIZE`] as a PNG file.
fn write_png(path: &Path, pixels: &[u8]) -> Result<(), LabError> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, FIGURE_SIZE.0, FIGURE_SIZE.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Unoptimized (debug) builds, which the tests use, spend 0.4 s a figure at the default
    // level and a third of it at the fast one (for files three times larger); optimized
    // builds compress at the default level in milliseconds.
    encoder.set_compression(if cfg!(debug_assertions) {
        png::Compression::Fast
    } else {
        png::Compression::Default
    });
    let mut writer = encoder.write_header().map_err(plot_error)?;
    writer.write_image_data(pixels).map_err(plot_error)?;
    writer.finish().map_err(plot_error)?;
    Ok(())
}

fn plot_error(error: impl std::fmt::Display) -> LabError {
    LabError::Io(std::io::Error::other(format!("drawing a plot: {error}")))
}

/// The points of one run: full samples only (a cut-off last interval has noisy rates).
fn points(run: &RunResult, metric: &Metric) -> Vec<(f64, f64)> {
    let interval = run.configuration.sample_interval_seconds;
    let base = if metric.relative {
        run.samples
            .first()
            .map(|s| (metric.value)(s))
            .filter(|v| *v > 0.0)
    } else {
        Some(1.0)
    };
    let Some(base) = base else {
        return Vec::new();
    };
    run.samples
        .iter()
        .filter(|s| s.is_full(interval))
        .map(|s| (s.t_seconds, (metric.value)(s) / base))
        .filter(|(_, y)| y.is_finite())
        .collect()
}

/// The x range and tick count of a figure: on a log scale, x is drawn as its decimal
/// logarithm over whole decades, one tick per decade.
fn x_range(axes: &Axes, xs: &[f64]) -> (f64, f64, usize) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !(min.is_finite() && max.is_finite()) {
        return (0.0, 1.0, 2);
    }
    if axes.log_x {
        let (low, high) = (min.floor(), max.ceil().max(min.floor() + 1.0));
        (low, high, (high - low) as usize + 1)
    } else if axes.markers {
        // A sweep: a margin around the points, so that the first and last are not on the
        // frame, and few ticks when there are few points (2 thread counts: ticks 1 and 2).
        let pad = if max > min { (max - min) * 0.05 } else { 0.5 };
        let mut distinct: Vec<f64> = xs.to_vec();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        let ticks = if distinct.len() <= 5 {
            distinct.len().max(2)
        } else {
            10
        };
        (min - pad, max + pad, ticks)
    } else {
        (0.0, max.max(1.0), 10)
    }
}

/// A tick label of the x axis (`x` is a decimal logarithm on a log scale).
fn x_label(axes: &Axes, x: f64) -> String {
    if axes.log_x {
        axis(10f64.powf(x).round())
    } else {
        axis(x)
    }
}

/// Legend entries per row, in the strip under the chart.
const LEGEND_COLUMNS: usize = 3;
/// The height of one row of the legend, in pixels.
const LEGEND_ROW: u32 = 22;

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    axes: &Axes,
    lines: &[Line],
) -> Result<(), LabError> {
    root.fill(&WHITE).map_err(plot_error)?;
    // The legend has a strip of its own under the chart, so it never covers data.
    let legend_rows = lines.len().div_ceil(LEGEND_COLUMNS) as u32;
    let (_, height) = root.dim_in_pixel();
    let (root, legend) = root.split_vertically(height.saturating_sub(legend_rows * LEGEND_ROW + 8));
    let series: Vec<Vec<(f64, f64)>> = lines
        .iter()
        .map(|line| {
            line.points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!axes.log_x || *x > 0.0))
                .map(|&(x, y)| {
                    (
                        if axes.log_x { x.log10() } else { x },
                        if axes.log_y { y.max(1.0).log10() } else { y },
                    )
                })
                .collect()
        })
        .collect();
    let xs: Vec<f64> = series.iter().flatten().map(|p| p.0).collect();
    let (x_min, x_max, x_ticks) = x_range(axes, &xs);
    let y_max = series.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
    let y_max = match (axes.log_y, y_max > 0.0) {
        (true, _) => y_max.ceil().max(1.0),
        (false, true) => y_max * 1.1,
        (false, false) => 1.0,
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(&axes.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(84)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc(axes.x_desc.as_str())
        .y_desc(if axes.log_y {
            format!("{} (log scale)", axes.y_desc)
        } else {
            axes.y_desc.clone()
        })
        .x_labels(x_ticks)
        // On a log scale, one tick per decade.
        .y_labels(if axes.log_y { y_max as usize + 1 } else { 10 })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .x_label_formatter(&|x| x_label(axes, *x))
        .y_label_formatter(&|y| y_label(axes, *y))
        .draw()
        .map_err(plot_error)?;
    for (i, (line, points)) in lines.iter().zip(series).enumerate() {
        let base = COLORS[color_index(&line.label, i) % COLORS.len()];
        // A run without a held snapshot beside the same system's held run: its baseline,
        // drawn lighter and thinner in the same color.
        let baseline = !line.label.ends_with("+held snapshot")
            && lines
                .iter()
                .any(|other| other.label == format!("{} +held snapshot", line.label));
        let (color, width) = if baseline {
            (base.mix(0.45), 1)
        } else {
            (base.mix(1.0), 2)
        };
        if axes.markers {
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(plot_error)?;
        }
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(width)))
            .map_err(plot_error)?;
        let (column, row) = (i % LEGEND_COLUMNS, i / LEGEND_COLUMNS);
        let (legend_width, _) = legend.dim_in_pixel();
        let x = 84 + column as i32 * ((legend_width as i32 - 100) / LEGEND_COLUMNS as i32);
        let y = 4 + row as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        legend
            .draw(&PathElement::new(
                vec![(x, y), (x + 24, y)],
                color.stroke_width(width + 1),
            ))
            .map_err(plot_error)?;
        legend
            .draw(&Text::new(
                line.label.clone(),
                (x + 30, y - 8),
                ("sans-serif", 15).into_font(),
            ))
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    legend.present().map_err(plot_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(label: &str, y: f64) -> Line {
        Line {
            label: label.to_owned(),
            points: (0..=60).map(|t| (f64::from(t), y)).collect(),
        }
    }

    /// Renders `lines` and returns, per line, the rightmost pixel column where its color
    /// shows.
    fn rightmost_columns(axes: &Axes, lines: &[Line]) -> Vec<Option<u32>> {
        register_font().unwrap();
        let (width, height) = FIGURE_SIZE;
        let mut pixels = vec![0u8; width as usize * height as usize * 3];
        draw(
            BitMapBackend::with_buffer(&mut pixels, FIGURE_SIZE).into_drawing_area(),
            axes,
            lines,
        )
        .unwrap();
        lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let c = COLORS[color_index(&line.label, i) % COLORS.len()];
                let mut rightmost = None;
                for y in 0..height {
                    for x in 0..width {
                        let at = (y as usize * width as usize + x as usize) * 3;
                        if pixels[at..at + 3] == [c.0, c.1, c.2] && rightmost < Some(x) {
                            // Only the chart: the legend's sample lines are below it.
                            if y < height - 3 * LEGEND_ROW {
                                rightmost = Some(x);
                            }
                        }
                    }
                }
                rightmost
            })
            .collect()
    }

    /// The legend sat in the chart's upper right corner, over the lines that ran there:
    /// behind a held snapshot, the growing series end exactly there.
    #[test]
    fn regression_legends_never_cover_data() {
        let axes = Axes {
            title: "t".into(),
            x_desc: "seconds".into(),
            y_desc: "versions".into(),
            log_x: false,
            markers: false,
            log_y: false,
        };
        let lines = [
            line("watermark +held snapshot", 100.0),
            line("steam +held snapshot", 97.0),
            line("postgres +held snapshot", 94.0),
        ];
        let (width, _) = FIGURE_SIZE;
        for (line, rightmost) in lines.iter().zip(rightmost_columns(&axes, &lines)) {
            let rightmost = rightmost.unwrap_or(0);
            assert!(
                rightmost > width - 40,
                "{}: hidden right of column {rightmost}",
                line.label
            );
        }
    }

    #[test]
    fn versions_spanning_decades_get_a_log_axis_and_bytes_read_in_mib() {
        assert!(spans_decades(&[line("a", 1.0), line("b", 100_000.0)], 2.0));
        assert!(!spans_decades(&[line("a", 10.0), line("b", 500.0)], 2.0));
        let axes = |log_y, unit: &str| Axes {
            title: String::new(),
            x_desc: String::new(),
            y_desc: unit.to_owned(),
            log_x: false,
            markers: false,
            log_y,
        };
        assert_eq!(
            y_label(&axes(false, BYTES), 3.0 * 1024.0 * 1024.0),
            "3.0 MiB"
        );
        assert_eq!(y_label(&axes(true, "versions"), 5.0), "100k");
    }
}
