//! What a lab run tells people and machines: the summary table, the one line of what
//! differed between configurations, JSON, and the HTML report with its plots.

use std::fmt::Write as _;
use std::path::Path;

use crate::format::{bytes, compact, ratio};
use crate::metrics::{LabReport, RunResult};
use crate::plot;
use crate::workload::LabError;

/// The summary table's header and one row per run, as cells.
fn table_cells(runs: &[RunResult]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let olap = runs.iter().any(|r| r.configuration.olap_workers > 0);
    let mut header = vec!["configuration", "OLTP commits/s", "last 10 s", "aborts/s"];
    if olap {
        header.extend(["OLAP queries/s", "scanned tuples/s"]);
    }
    header.extend([
        "live versions",
        "max live versions",
        "max chain (read/write/gc)",
        "GC ms/s",
        "max RSS",
        "load s",
    ]);
    let rows = runs
        .iter()
        .map(|run| {
            let s = &run.summary;
            let c = &run.configuration;
            let mut label = c.label.clone();
            if c.hold_snapshot {
                label.push_str(" +held snapshot");
            }
            let mut row = vec![
                label,
                compact(s.oltp_commits_per_second),
                compact(s.tail_oltp_commits_per_second),
                compact(s.oltp_aborts_per_second),
            ];
            if olap {
                row.push(format!("{:.2}", s.olap_queries_per_second));
                row.push(compact(s.olap_scanned_tuples_per_second));
            }
            row.extend([
                compact(s.live_versions),
                compact(s.max_live_versions as f64),
                format!(
                    "{} / {} / {}",
                    compact(s.max_read_chain as f64),
                    compact(s.max_write_chain as f64),
                    compact(s.max_gc_chain as f64)
                ),
                format!("{:.1}", s.gc_ms_per_second),
                bytes(s.max_rss_bytes as f64),
                format!("{:.2}", run.load_seconds),
            ]);
            row
        })
        .collect();
    (header, rows)
}

/// The summary as an aligned text table: medians over the run's seconds, maxima over all.
pub fn summary_table(runs: &[RunResult]) -> String {
    let (header, rows) = table_cells(runs);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: Vec<&str>| {
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(out, "{cell:<width$}");
            } else {
                let _ = write!(out, "  {cell:>width$}");
            }
        }
        out.push('\n');
    };
    line(&mut out, header.clone());
    line(
        &mut out,
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect(),
    );
    for row in &rows {
        line(&mut out, row.iter().map(String::as_str).collect());
    }
    out.push_str("(medians over the run's seconds; \"max\" columns over all of them)\n");
    out
}

/// The longest chain readers walked or writers left behind. (The collector's chains are
/// left out: under Steam they are a writer's chain before it pruned, which no reader sees;
/// under watermark-only with a held snapshot the collector meets no chain at all.)
fn max_chain(run: &RunResult) -> u64 {
    run.summary.max_read_chain.max(run.summary.max_write_chain)
}

/// One line saying what differed between the first configuration and each other one, e.g.
/// `steam: 3.1x the OLTP throughput of watermark, max chain 3 vs 41,213, live versions
/// 210 vs 1.2M`. `None` for fewer than two runs.
pub fn comparison_line(runs: &[RunResult]) -> Option<String> {
    let (first, others) = runs.split_first()?;
    if others.is_empty() {
        return None;
    }
    let a = &first.summary;
    let parts: Vec<String> = others
        .iter()
        .map(|other| {
            let b = &other.summary;
            let mut part = format!(
                "{}: {} the OLTP throughput of {}",
                first.configuration.label,
                ratio(a.oltp_commits_per_second, b.oltp_commits_per_second),
                other.configuration.label
            );
            if first.configuration.olap_workers > 0 || other.configuration.olap_workers > 0 {
                let _ = write!(
                    part,
                    ", {} its OLAP throughput",
                    ratio(a.olap_queries_per_second, b.olap_queries_per_second)
                );
            }
            let _ = write!(
                part,
                ", max chain {} vs {}, live versions {} vs {} (at most), memory {} vs {}",
                compact(max_chain(first) as f64),
                compact(max_chain(other) as f64),
                compact(a.max_live_versions as f64),
                compact(b.max_live_versions as f64),
                bytes(a.max_rss_bytes as f64),
                bytes(b.max_rss_bytes as f64),
            );
            part
        })
        .collect();
    Some(parts.join("; "))
}

/// Writes the report as pretty-printed JSON.
pub fn write_json(path: &Path, report: &LabReport) -> Result<(), LabError> {
    let text =
        serde_json::to_string_pretty(report).map_err(|e| LabError::Io(std::io::Error::other(e)))?;
    std::fs::write(path, text + "\n")?;
    Ok(())
}

/// Reads a report written by [`write_json`].
pub fn read_json(path: &Path) -> Result<LabReport, LabError> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| LabError::Io(std::io::Error::other(e)))
}

/// Writes the HTML report into `dir` (created if missing): `index.html` with the summary
/// table and the comparison, one PNG and one SVG per metric, and `report.json`.
pub fn write_report(dir: &Path, report: &LabReport) -> Result<(), LabError> {
    std::fs::create_dir_all(dir)?;
    let metrics = plot::write_plots(dir, &report.runs)?;
    write_json(&dir.join("report.json"), report)?;

    let mut html = String::new();
    let title = format!("Verso lab: {}", report.workload);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n\
         <style>\nbody {{ font-family: sans-serif; margin: 2em; max-width: 1100px; }}\n\
         table {{ border-collapse: collapse; margin: 1em 0; }}\n\
         th, td {{ border: 1px solid #bbb; padding: 4px 8px; text-align: right; }}\n\
         th:first-child, td:first-child {{ text-align: left; }}\n\
         th {{ background: #eee; }}\nfigure {{ margin: 1.5em 0; }}\nimg {{ max-width: 100%; }}\n\
         .comparison {{ font-weight: bold; }}\ncode {{ background: #f4f4f4; }}\n</style>\n</head>\n<body>\n",
        escape(&title)
    );
    let _ = writeln!(html, "<h1>{}</h1>", escape(&title));
    let _ = writeln!(html, "<p>{}</p>", escape(&report.description));
    let _ = writeln!(
        html,
        "<p>Command: <code>{}</code></p>",
        escape(&report.command_line.join(" "))
    );
    if let Some(line) = &report.comparison {
        let _ = writeln!(html, "<p class=\"comparison\">{}</p>", escape(line));
    }
    let (header, rows) = table_cells(&report.runs);
    html.push_str("<table>\n<tr>");
    for cell in header {
        let _ = write!(html, "<th>{}</th>", escape(cell));
    }
    html.push_str("</tr>\n");
    for row in rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{}</td>", escape(&cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str(
        "</table>\n<p>Medians over the run's seconds; \"max\" columns over all of them. \
                   The data: <a href=\"report.json\">report.json</a>.</p>\n",
    );
    html.push_str("<h2>Configurations</h2>\n<ul>\n");
    for run in &report.runs {
        let c = &run.configuration;
        let _ = writeln!(
            html,
            "<li><b>{}</b>: {}, {} isolation, {} OLTP + {} OLAP worker(s){}, {:.1} s run, seed {}</li>",
            escape(&c.label),
            escape(&c.design),
            escape(&c.isolation),
            c.oltp_workers,
            c.olap_workers,
            if c.hold_snapshot { ", one snapshot held from start to end" } else { "" },
            run.run_seconds,
            c.seed
        );
    }
    html.push_str("</ul>\n<h2>Over time</h2>\n");
    for metric in metrics {
        let _ = writeln!(
            html,
            "<figure><img src=\"{key}.svg\" alt=\"{title}\"><figcaption>{title} ({unit}); \
             <a href=\"{key}.png\">PNG</a>, <a href=\"{key}.svg\">SVG</a></figcaption></figure>",
            key = metric.key,
            title = escape(metric.title),
            unit = escape(metric.unit),
        );
    }
    html.push_str("</body>\n</html>\n");
    std::fs::write(dir.join("index.html"), html)?;
    Ok(())
}

/// Escapes text for HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralizes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
