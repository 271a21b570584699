//! Writing the lab's outputs so that a failure leaves nothing half-written.
//!
//! Definitions:
//! - a *destination* is a file the user asked for (`--json FILE`) or a file of a report
//!   directory (`--report DIR`: `index.html`, the JSON, a PNG and an SVG per figure);
//! - a *staging directory* is a fresh directory inside the report directory
//!   (`.verso-staging.<pid>-<n>.tmp`) that a report's files are written into first; a
//!   *temporary file* is the same beside a single destination (`.out.json.<pid>-<n>.tmp`).
//!
//! Invariants:
//! - every destination holds, at every moment, either what it held before or the whole new
//!   file: a file is written beside its destination and renamed over it, and `rename` within
//!   one directory replaces its target in one step;
//! - a report is moved into place only once every one of its files has been written, and only
//!   after checking that no destination is a directory (the one thing that makes `rename`
//!   over an existing name fail), so a report that fails to be written leaves its directory
//!   as it was; `index.html`, which links the rest, is moved last;
//! - a staging directory or temporary file that is not published is removed (on error and on
//!   drop; a process killed while writing leaves it behind, hidden).
//!
//! Only a `rename` that fails after those checks passed could leave part of a report moved
//! (it needs no space, so a full disk does not cause it); the error then says so.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes the temporary names of one process's threads (the tests write reports from
/// several threads at once).
static NEXT_TEMPORARY: AtomicU64 = AtomicU64::new(0);

/// A name no other writer in this or another process is using at the same time.
fn temporary_name(stem: &str) -> String {
    let n = NEXT_TEMPORARY.fetch_add(1, Ordering::Relaxed);
    format!(".{stem}.{}-{n}.tmp", std::process::id())
}

/// Writes `bytes` to `path` in one step: into a temporary file beside it, then renamed over
/// it. If this fails, `path` is as it was and the temporary file is gone.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} names no file", path.display())))?;
    let temporary = path.with_file_name(temporary_name(&name.to_string_lossy()));
    let written = std::fs::write(&temporary, bytes).and_then(|()| {
        refuse_directory(path)?;
        std::fs::rename(&temporary, path)
    });
    if written.is_err() {
        // Best effort: the temporary file may not exist if the write could not create it.
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// The error for replacing a directory with a file, which `rename` would refuse too, but
/// with a message that names the path.
fn refuse_directory(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Err(io::Error::other(format!(
            "cannot write {}: a directory of that name is in the way",
            path.display()
        )));
    }
    Ok(())
}

/// A report being written: its files go into a staging directory inside the report
/// directory, and [`Staging::publish`] moves them into place together. Dropped without
/// publishing, it removes the staging directory and what it holds.
#[derive(Debug)]
pub struct Staging {
    /// The report directory.
    dir: PathBuf,
    /// The staging directory, inside `dir`.
    staging: PathBuf,
}

impl Staging {
    /// Creates `dir` if missing, and a fresh staging directory inside it.
    pub fn new(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let staging = dir.join(temporary_name("verso-staging"));
        std::fs::create_dir(&staging)?;
        Ok(Staging {
            dir: dir.to_owned(),
            staging,
        })
    }

    /// Where to write the report's files.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Moves every staged file into the report directory, replacing files of the same name,
    /// with `last` (the page that links the others) moved after all the rest. Fails, having
    /// moved nothing, if a destination is a directory.
    pub fn publish(self, last: &str) -> io::Result<()> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.staging)? {
            let entry = entry?;
            debug_assert!(
                entry.file_type()?.is_file(),
                "a report stages only files: {}",
                entry.path().display()
            );
            names.push(entry.file_name());
        }
        // The page that links the others goes last, so it never links a file not yet there.
        names.sort_by_key(|name| name == last);
        for name in &names {
            refuse_directory(&self.dir.join(name))?;
        }
        for (moved, name) in names.iter().enumerate() {
            std::fs::rename(self.staging.join(name), self.dir.join(name)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "moving {} into {}: {e} (the report is incomplete: {moved} of its {} \
                         files were moved)",
                        name.to_string_lossy(),
                        self.dir.display(),
                        names.len()
                    ),
                )
            })?;
        }
        Ok(())
        // Dropping `self` removes the now empty staging directory.
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Best effort: an error here leaves a hidden directory behind, never a half report.
        let _ = std::fs::remove_dir_all(&self.staging);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_is_replaced_whole_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old").expect("write");
        write_file(&path, b"new").expect("replace");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
        assert_eq!(names_in(dir.path()), ["out.json"]);
    }

    #[test]
    fn a_file_that_cannot_replace_a_directory_leaves_both_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out.json");
        std::fs::create_dir(&path).expect("mkdir");
        let error = write_file(&path, b"new").expect_err("a directory is in the way");
        assert!(
            error.to_string().contains("a directory of that name"),
            "{error}"
        );
        assert!(path.is_dir());
        assert_eq!(names_in(dir.path()), ["out.json"]);
    }

    #[test]
    fn a_published_report_replaces_the_old_files_and_adds_the_new() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("index.html"), "old page").expect("write");
        std::fs::write(dir.path().join("kept.txt"), "kept").expect("write");
        let staging = Staging::new(dir.path()).expect("staging");
        std::fs::write(staging.path().join("index.html"), "new page").expect("write");
        std::fs::write(staging.path().join("a.svg"), "<svg/>").expect("write");
        staging.publish("index.html").expect("publish");
        assert_eq!(names_in(dir.path()), ["a.svg", "index.html", "kept.txt"]);
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("read");
        assert_eq!(read("index.html"), "new page");
        assert_eq!(read("kept.txt"), "kept");
    }

    #[test]
    fn a_report_that_cannot_be_published_moves_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("b.svg")).expect("mkdir");
        std::fs::write(dir.path().join("index.html"), "old page").expect("write");
        let staging = Staging::new(dir.path()).expect("staging");
        for name in ["a.svg", "b.svg", "index.html"] {
            std::fs::write(staging.path().join(name), "new").expect("write");
        }
        let error = staging
            .publish("index.html")
            .expect_err("b.svg is a directory");
        assert!(error.to_string().contains("b.svg"), "{error}");
        assert_eq!(names_in(dir.path()), ["b.svg", "index.html"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("index.html")).expect("read"),
            "old page"
        );
    }

    #[test]
    fn a_dropped_staging_directory_is_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let staging = Staging::new(dir.path()).expect("staging");
        std::fs::write(staging.path().join("a.png"), "x").expect("write");
        drop(staging);
        assert!(names_in(dir.path()).is_empty());
    }
}
