//! What every `verso reproduce` experiment's quick size must produce, shared by the
//! reproduction tests.

use std::collections::BTreeSet;
use std::path::Path;

use verso_lab::report::REPRODUCTION_JSON;
use verso_lab::reproduce::{reproduce, ReproduceOptions, Reproduction};

/// A sentence a person reads has no doubled apostrophe (`'Ermia''s`) and no run of spaces
/// (a line continuation that kept the next line's indentation).
pub fn assert_clean_text(name: &str, text: &str) {
    assert!(
        !text.contains("''") && !text.contains("  ") && text.trim() == text,
        "{name}: {text:?}"
    );
}

/// Runs experiment `name` at its quick size into a temporary directory; checks what every
/// experiment must produce, and returns the reproduction and what it printed.
pub fn quick(name: &str) -> (Reproduction, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("report");
    let json = dir.path().join("out.json");
    let options = ReproduceOptions {
        quick: true,
        report: Some(report.clone()),
        json: Some(json.clone()),
        command_line: vec!["verso".into(), "reproduce".into(), name.into()],
        // The disk engine's experiments (sicv-*) open their page files with direct I/O,
        // which a temporary directory on tmpfs may refuse: the build's file system does it.
        disk: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/reproduce-disk-tests")),
        ..ReproduceOptions::default()
    };
    let mut out = Vec::new();
    let reproduction =
        reproduce(name, &options, &mut out).unwrap_or_else(|e| panic!("{name}: {e}"));
    let printed = String::from_utf8(out).expect("utf-8 output");

    assert_eq!(reproduction.experiment, name);
    assert!(reproduction.quick);
    assert!(reproduction.cores >= 1);
    assert!(
        reproduction.paper_setup.contains("cores"),
        "the paper's machine"
    );
    assert!(reproduction.our_setup.contains("QUICK SIZE"));
    assert!(!reproduction.panels.is_empty());
    assert!(
        reproduction.verdicts().count() > 0,
        "{name}: no claim at all"
    );
    // A quick run measures nothing: it judges no claim (it printed verdicts before).
    for verdict in reproduction.verdicts() {
        assert_eq!(
            verdict.line(),
            format!("{}: quick size: no verdict", verdict.ours),
            "{name}"
        );
    }
    for word in [": agrees", ": differs", "weaker", "inconclusive"] {
        assert!(
            !printed.contains(word),
            "{name} printed a verdict: {printed}"
        );
    }
    let mut texts = vec![
        &reproduction.title,
        &reproduction.paper_setup,
        &reproduction.our_setup,
    ];
    texts.extend(&reproduction.notes);
    for panel in &reproduction.panels {
        texts.push(&panel.title);
        texts.extend(&panel.paper);
        texts.extend(panel.verdicts.iter().flat_map(|v| [&v.paper, &v.ours]));
    }
    for text in texts {
        assert_clean_text(name, text);
    }
    for panel in &reproduction.panels {
        assert!(
            !panel.paper.is_empty(),
            "{name}: {} quotes nothing",
            panel.title
        );
    }
    for point in &reproduction.points {
        assert!(
            point.run.totals.oltp_commits > 0,
            "{name}: {} committed nothing",
            point.run.configuration.label
        );
        assert!(point.run.run_seconds > 0.0);
        assert!(!point.run.samples.is_empty());
        assert!(point.run.consistent);
        if point.run.configuration.olap_workers > 0 {
            assert!(
                point.run.totals.olap_queries > 0 && point.run.totals.olap_scanned_tuples > 0,
                "{name}: {} ran no query",
                point.run.configuration.label
            );
        }
    }

    // The report: the page, the JSON, and every figure it names, as PNG and SVG.
    let html = std::fs::read_to_string(report.join("index.html")).expect("index.html");
    assert!(html.contains(REPRODUCTION_JSON));
    assert!(html.contains("What the paper reports"));
    let mut keys: Vec<String> = Vec::new();
    for panel in &reproduction.panels {
        keys.extend(panel.figures.iter().map(|f| f.key.clone()));
        keys.extend(panel.time_series.iter().map(|t| t.key.clone()));
    }
    assert!(!keys.is_empty(), "{name}: no figure");
    for key in &keys {
        for extension in ["png", "svg"] {
            let file = report.join(format!("{key}.{extension}"));
            let size = std::fs::metadata(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
                .len();
            assert!(size > 1_000, "{}: {size} bytes", file.display());
        }
        assert!(
            html.contains(&format!("{key}.svg")),
            "{name}: {key} not shown"
        );
    }
    for verdict in reproduction.verdicts() {
        assert!(
            html.contains(&verdict_html_text(&verdict.ours)),
            "{name}: verdict missing from the page: {}",
            verdict.ours
        );
        assert!(
            printed.contains(&verdict.line()),
            "{name}: {}",
            verdict.line()
        );
    }
    for path in [report.join(REPRODUCTION_JSON), json] {
        let parsed: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("json")).expect("valid");
        assert_eq!(parsed["format_version"], 1);
        assert_eq!(parsed["experiment"], name);
        assert_eq!(
            parsed["points"].as_array().map(Vec::len),
            Some(reproduction.points.len())
        );
        assert!(parsed["panels"][0]["verdicts"].is_array());
        assert!(parsed["points"][0]["run"]["engine"]["gc_versions_traversed"].is_u64());
    }
    assert_documented(&serde_json::to_value(&reproduction).expect("to JSON"));
    assert!(
        printed.contains("verdicts (ours vs the paper's shape)"),
        "{printed}"
    );
    assert!(printed.contains("report written to"), "{printed}");
    (reproduction, printed)
}

/// Every object key of the reproduction's JSON is documented in docs/lab.md (as in
/// `lab_runner.rs`; the maps keyed by the workload's own names are skipped).
pub fn assert_documented(value: &serde_json::Value) {
    fn keys(value: &serde_json::Value, out: &mut BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    out.insert(key.clone());
                    if key == "latency" {
                        // Keyed by transaction type; each type's summary has documented keys.
                        if let serde_json::Value::Object(by_kind) = inner {
                            by_kind.values().for_each(|summary| keys(summary, out));
                        }
                    } else if !(key.contains("_by_kind")
                        || key.contains("_by_name")
                        || key.contains("_by_reason"))
                    {
                        keys(inner, out);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| keys(item, out)),
            _ => {}
        }
    }
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/lab.md"))
        .expect("docs/lab.md");
    let mut all = BTreeSet::new();
    keys(value, &mut all);
    for key in all {
        assert!(
            docs.contains(&format!("| `{key}` |")),
            "JSON key {key} is not documented in docs/lab.md"
        );
    }
}

/// The text of `ours` as the HTML page escapes it.
pub fn verdict_html_text(text: &str) -> String {
    verso_lab::report::escape(text)
}
