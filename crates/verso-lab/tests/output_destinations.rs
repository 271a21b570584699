//! What `--json` names is never destroyed: the `verso` binary writes a device node, a FIFO or
//! an open descriptor in place, follows a symbolic link, and refuses before the run what it
//! could not write after it. (The kinds one by one: `publish.rs`'s unit tests.)

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn verso(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the verso binary runs")
}

/// A tiny run writing its JSON to `json`.
fn tiny_run_to(json: &Path) -> Output {
    verso(&["kv", "--tiny", "--json", json.to_str().expect("utf-8 path")])
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn mknod(path: &Path, major: &str, minor: &str) -> bool {
    Command::new("mknod")
        .args([path.to_str().expect("utf-8 path"), "c", major, minor])
        .status()
        .is_ok_and(|status| status.success())
}

/// Run as root, `verso … --json /dev/full` renamed a regular file over the device node.
/// Now a copy of /dev/full made in a temporary directory stays a device, and the error
/// names it; a copy of /dev/null takes the JSON.
#[test]
fn regression_json_to_a_device_node_leaves_the_device() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (null, full) = (dir.path().join("null"), dir.path().join("full"));
    if !(mknod(&null, "1", "3") && mknod(&full, "1", "7")) {
        eprintln!("skipped: mknod needs root here (CI runs as root)");
        return;
    }
    let output = tiny_run_to(&full);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains(&full.display().to_string()),
        "the error names the path: {}",
        text(&output)
    );
    let output = tiny_run_to(&null);
    assert!(output.status.success(), "{}", text(&output));
    for device in [&null, &full] {
        let kind = std::fs::symlink_metadata(device).expect("stat").file_type();
        assert!(kind.is_char_device(), "{} was replaced", device.display());
    }
}

/// A FIFO's reader gets the JSON; the FIFO stays a FIFO.
#[test]
fn json_to_a_fifo_reaches_its_reader() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|status| status.success());
    assert!(made, "mkfifo");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).expect("read the FIFO"))
    };
    let output = tiny_run_to(&fifo);
    assert!(output.status.success(), "{}", text(&output));
    let json: serde_json::Value =
        serde_json::from_str(&reader.join().expect("the reader")).expect("JSON through the FIFO");
    assert_eq!(json["workload"], "kv", "{json}");
    let kind = std::fs::symlink_metadata(&fifo).expect("stat").file_type();
    assert!(kind.is_fifo());
}

/// `--json /dev/stdout` (an open descriptor, here a pipe) puts the JSON after the summary.
#[test]
fn json_to_stdout_follows_the_summary() {
    let output = verso(&["kv", "--tiny", "--json", "/dev/stdout"]);
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let start = stdout.find("\n{").expect("a JSON object after the summary") + 1;
    let json: serde_json::Value = serde_json::Deserializer::from_str(&stdout[start..])
        .into_iter()
        .next()
        .expect("a JSON object")
        .expect("valid JSON");
    assert_eq!(json["workload"], "kv");
}

/// A symbolic link is followed: its target gets the JSON, the link stays.
#[test]
fn json_through_a_symlink_replaces_its_target() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (target, link) = (dir.path().join("target.json"), dir.path().join("link.json"));
    std::fs::write(&target, "old").expect("write");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let output = tiny_run_to(&link);
    assert!(output.status.success(), "{}", text(&output));
    assert!(std::fs::symlink_metadata(&link)
        .expect("stat")
        .file_type()
        .is_symlink());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&target).expect("read")).expect("JSON");
    assert_eq!(json["workload"], "kv");
}

/// What could not be written after the run is refused before it, naming the option and the
/// path (the run would print its summary first).
#[test]
fn json_that_cannot_be_written_is_refused_before_the_run() {
    let output = verso(&["kv", "--tiny", "--json", "/proc/version"]);
    assert!(!output.status.success());
    let all = text(&output);
    assert!(all.contains("--json /proc/version"), "{all}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("commits"),
        "nothing ran: {all}"
    );
}

/// A report directory holding something that is not a regular file where the report
/// writes one (a FIFO or a link named `index.html`) is refused before the run, and what is
/// there stays as it was.
#[test]
fn a_report_over_a_special_file_is_refused_before_the_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (kind, make) in [
        (
            "a FIFO",
            &(|path: &Path| {
                Command::new("mkfifo")
                    .arg(path)
                    .status()
                    .expect("mkfifo")
                    .success()
            }) as &dyn Fn(&Path) -> bool,
        ),
        ("a symbolic link", &|path: &Path| {
            std::os::unix::fs::symlink("elsewhere.html", path).is_ok()
        }),
    ] {
        let report = dir.path().join(kind.replace(' ', "-"));
        std::fs::create_dir(&report).expect("mkdir");
        let page = report.join("index.html");
        assert!(make(&page), "{kind}");
        let output = verso(&["kv", "--tiny", "--report", report.to_str().expect("utf-8")]);
        assert!(!output.status.success(), "{}", text(&output));
        assert!(
            text(&output).contains(&format!("holds {kind} named index.html")),
            "{}",
            text(&output)
        );
        let meta = std::fs::symlink_metadata(&page).expect("still there");
        assert!(meta.file_type().is_fifo() || meta.file_type().is_symlink());
    }
}
