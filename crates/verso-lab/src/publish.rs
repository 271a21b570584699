//! Writing the lab's outputs so that a failure leaves nothing half-written, and nothing the
//! user named is destroyed.
//!
//! Definitions:
//! - a *destination* is a file the user asked for (`--json FILE`) or a file of a report
//!   directory (`--report DIR`: `index.html`, the JSON, a PNG and an SVG per figure);
//! - a *staging directory* is a fresh directory inside the report directory
//!   (`.verso-staging.<pid>-<n>.tmp`) that a report's files are written into first; a
//!   *temporary file* is the same beside a single destination (`.out.json.<pid>-<n>.tmp`).
//! - what a `--json` path names decides how it is written ([`Destination`]): a regular
//!   file, or nothing yet, is *replaced* (written beside it, renamed over it); anything else
//!   that can be written (a character or block device such as `/dev/null`, a FIFO, an open
//!   file descriptor such as `/dev/stdout` or a shell's `>(…)`) is written *in place*. A
//!   symbolic link is followed: the file it points at is replaced, the link stays.
//!
//! Invariants:
//! - a regular-file destination holds, at every moment, either what it held before or the
//!   whole new file: a file is written beside its destination and renamed over it, and
//!   `rename` within one directory replaces its target in one step;
//! - nothing but a regular file is ever renamed over or removed: a device node, a FIFO, a
//!   socket, a symbolic link or a directory keeps its identity (the bug this replaced:
//!   `--json /dev/full` run as root renamed a regular file over the device node);
//! - a report is moved into place only once every one of its files has been written, and only
//!   after checking that no destination is anything but a regular file (a directory makes
//!   `rename` fail; a link or a device would be replaced), so a report that fails to be
//!   written leaves its directory as it was; `index.html`, which links the rest, is moved
//!   last;
//! - a staging directory or temporary file that is not published is removed (on error and on
//!   drop; a process killed while writing leaves it behind, hidden);
//! - every error names the path it is about.
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

/// How a destination is written, decided by what its path names now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// A regular file, or no file yet: written into a temporary file in `path`'s directory
    /// and renamed over it. `path` is where the user's path leads once symbolic links are
    /// followed.
    Replace {
        /// The file replaced (or created).
        path: PathBuf,
    },
    /// Not a regular file (a device, a FIFO, an open file descriptor): opened and written
    /// as it is, never replaced.
    InPlace {
        /// The path opened.
        path: PathBuf,
        /// Append rather than truncate: an open file descriptor that leads to a regular file
        /// (`/dev/stdout` redirected to a file), whose earlier output stays.
        append: bool,
    },
}

/// An error about `path`, saying what was being done.
fn about(path: &Path, doing: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{doing} {}: {error}", path.display()))
}

/// Follows `path`'s symbolic links to what they lead to. Returns that path, and whether a
/// link on the way was an open file descriptor's (`/dev/stdout`, `/dev/fd/N`,
/// `/proc/self/fd/N`): its target is that open file, whatever its name says.
fn follow_links(path: &Path) -> io::Result<(PathBuf, bool)> {
    const MOST_LINKS: usize = 40; // as the kernel's ELOOP limit
    let mut current = path.to_owned();
    for _ in 0..MOST_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if names_a_descriptor(&current) {
                    return Ok((current, true));
                }
                let target = std::fs::read_link(&current)
                    .map_err(|e| about(&current, "cannot read the link", e))?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok((current, false)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((current, false)),
            Err(e) => return Err(about(&current, "cannot look at", e)),
        }
    }
    Err(io::Error::other(format!(
        "{}: more than {MOST_LINKS} symbolic links in a row",
        path.display()
    )))
}

/// Whether `path` is a link to an open file descriptor (`/proc/<pid>/fd/N`, `/dev/fd/N`).
fn names_a_descriptor(path: &Path) -> bool {
    let in_fd_dir = path
        .parent()
        .is_some_and(|dir| dir.file_name().is_some_and(|name| name == "fd"));
    in_fd_dir && (path.starts_with("/proc") || path.starts_with("/dev/fd"))
}

/// Decides how `path` is written and checks, before anything runs, that it can be: the
/// errors a write at the end would meet, met now (a missing or unwritable directory, a
/// read-only file, a file in a file system that takes no new files like `/proc`, a
/// directory, a socket in the way). Creates and removes a temporary file beside a file it
/// will replace; opens nothing it will write in place (opening a FIFO would stand for its
/// writer, and closing it would end its reader's input).
pub fn destination(path: &Path) -> io::Result<Destination> {
    use std::os::unix::fs::FileTypeExt;

    if path.file_name().is_none() {
        return Err(io::Error::other(format!(
            "{} names no file",
            path.display()
        )));
    }
    let (target, descriptor) = follow_links(path)?;
    let meta = match std::fs::metadata(&target) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound && !descriptor => None,
        Err(e) => return Err(about(path, "cannot look at", e)),
    };
    let kind = meta.as_ref().map(std::fs::Metadata::file_type);
    match kind {
        Some(kind) if kind.is_dir() => Err(io::Error::other(format!(
            "cannot write {}: it is a directory",
            path.display()
        ))),
        Some(kind) if kind.is_socket() => Err(io::Error::other(format!(
            "cannot write {}: it is a socket, which a file cannot be written to",
            path.display()
        ))),
        Some(kind) if descriptor || !kind.is_file() => {
            let readonly = meta.as_ref().is_some_and(|m| m.permissions().readonly());
            if readonly && !kind.is_char_device() {
                return Err(io::Error::other(format!(
                    "cannot write {}: nobody may write it",
                    path.display()
                )));
            }
            // An open descriptor is used as it is; a regular file behind it is appended to.
            let append = descriptor && kind.is_file();
            if append {
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&target)
                    .map_err(|e| about(path, "cannot write", e))?;
            }
            Ok(Destination::InPlace {
                path: if descriptor { target } else { path.to_owned() },
                append,
            })
        }
        regular_or_none => {
            if regular_or_none.is_some() {
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&target)
                    .map_err(|e| about(path, "cannot write", e))?;
            }
            let dir = target
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !dir.is_dir() {
                return Err(io::Error::other(format!(
                    "cannot write {}: {} is not an existing directory",
                    path.display(),
                    dir.display()
                )));
            }
            let probe = temporary_beside(&target);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
                .map_err(|e| {
                    about(
                        path,
                        &format!("cannot create a file in {} to replace", dir.display()),
                        e,
                    )
                })?;
            std::fs::remove_file(&probe).map_err(|e| about(&probe, "cannot remove", e))?;
            Ok(Destination::Replace { path: target })
        }
    }
}

/// A temporary name beside `target`, in its directory.
fn temporary_beside(target: &Path) -> PathBuf {
    let name = target.file_name().map_or_else(
        || "out".to_owned(),
        |name| name.to_string_lossy().into_owned(),
    );
    target.with_file_name(temporary_name(&name))
}

/// Writes `bytes` to `path` as [`destination`] decides: a regular file (or a new one) in
/// one step, into a temporary file beside it renamed over it (if this fails, the file is as
/// it was and the temporary file is gone); anything else in place. Errors name `path`.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;

    match destination(path)? {
        Destination::InPlace { path: open, append } => {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .append(append)
                .open(&open)
                .map_err(|e| about(path, "cannot open", e))?;
            file.write_all(bytes)
                .and_then(|()| file.flush())
                .map_err(|e| about(path, "cannot write", e))
        }
        Destination::Replace { path: target } => {
            let temporary = temporary_beside(&target);
            let written = std::fs::write(&temporary, bytes)
                .map_err(|e| about(&temporary, "cannot write", e))
                .and_then(|()| {
                    refuse_non_regular(&target)?;
                    std::fs::rename(&temporary, &target)
                        .map_err(|e| about(path, "cannot replace", e))
                });
            if written.is_err() {
                // Best effort: the temporary file may not exist if the write could not
                // create it.
                let _ = std::fs::remove_file(&temporary);
            }
            written
        }
    }
}

/// What a file is, in words, if it is not a regular file ("a directory", "a symbolic
/// link", …): the things a report or a `--json` file is never renamed over.
pub fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    Some(if kind.is_file() {
        return None;
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    })
}

/// Refuses to replace anything but a regular file (or nothing): `rename` would refuse a
/// directory, but replace a link, a device or a FIFO, which the user never asked for.
fn refuse_non_regular(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => match not_regular(&meta) {
            None => Ok(()),
            Some(kind) => Err(io::Error::other(format!(
                "cannot write {}: {kind} of that name is in the way, and is not replaced",
                path.display()
            ))),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(about(path, "cannot look at", e)),
    }
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
    /// moved nothing, if a destination is anything but a regular file.
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
            refuse_non_regular(&self.dir.join(name))?;
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

    /// Makes a special file with a system command (`mknod`, `mkfifo`); `false` if this
    /// machine does not let us (device nodes need root, which CI has).
    fn make(command: &str, args: &[&str]) -> bool {
        std::process::Command::new(command)
            .args(args)
            .status()
            .is_ok_and(|status| status.success())
    }

    fn file_type(path: &Path) -> std::fs::FileType {
        std::fs::symlink_metadata(path).expect("stat").file_type()
    }

    /// Run as root, `--json /dev/full` used to rename a regular file over the device node.
    /// A device is written in place: a copy of /dev/null takes the bytes, a copy of
    /// /dev/full fails with its error, naming the path, and both stay device nodes.
    #[test]
    fn regression_a_device_node_is_written_in_place_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let null = dir.path().join("null");
        let full = dir.path().join("full");
        let null_made = make("mknod", &[null.to_str().expect("utf-8"), "c", "1", "3"]);
        let full_made = make("mknod", &[full.to_str().expect("utf-8"), "c", "1", "7"]);
        if !(null_made && full_made) {
            eprintln!("skipped: mknod needs root here (CI runs as root)");
            return;
        }
        assert!(matches!(
            destination(&null),
            Ok(Destination::InPlace { path, append: false }) if path == null
        ));
        write_file(&null, b"{}").expect("/dev/null takes anything");
        let error = write_file(&full, b"{}").expect_err("/dev/full is full");
        assert!(
            error.to_string().contains(&full.display().to_string()),
            "{error}"
        );
        assert_eq!(error.kind(), io::ErrorKind::StorageFull, "{error}");
        for device in [&null, &full] {
            assert!(file_type(device).is_char_device(), "{}", device.display());
        }
        assert_eq!(
            names_in(dir.path()),
            ["full", "null"],
            "no temporary file left"
        );
    }

    /// A FIFO is written in place: its reader gets the bytes, and it stays a FIFO.
    #[test]
    fn a_fifo_is_written_in_place_for_its_reader() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("fifo");
        assert!(make("mkfifo", &[fifo.to_str().expect("utf-8")]), "mkfifo");
        assert!(matches!(
            destination(&fifo),
            Ok(Destination::InPlace { append: false, .. })
        ));
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).expect("read the fifo"))
        };
        write_file(&fifo, b"{\"ok\": true}\n").expect("write the fifo");
        assert_eq!(reader.join().expect("reader"), "{\"ok\": true}\n");
        assert!(file_type(&fifo).is_fifo());
    }

    /// A symbolic link is followed: the file it points at is replaced (whole), the link
    /// stays a link; a dangling link gets its target created.
    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("target.json");
        let link = dir.path().join("link.json");
        std::fs::write(&target, "old").expect("write");
        std::os::unix::fs::symlink("target.json", &link).expect("symlink");
        write_file(&link, b"new").expect("write through the link");
        assert!(file_type(&link).is_symlink());
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "new");

        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink("created.json", &dangling).expect("symlink");
        write_file(&dangling, b"made").expect("write through a dangling link");
        assert!(file_type(&dangling).is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("created.json")).expect("read"),
            "made"
        );
        assert_eq!(
            names_in(dir.path()),
            ["created.json", "dangling.json", "link.json", "target.json"]
        );
    }

    /// An open file descriptor (`/dev/stdout`, `/dev/fd/N`, a shell's `>(…)`) is written in
    /// place; one that leads to a regular file is appended to, keeping what is there.
    #[test]
    fn an_open_descriptor_is_written_in_place_and_a_file_behind_it_appended_to() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("out.txt");
        std::fs::write(&out, "earlier output\n").expect("write");
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&out)
            .expect("open");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let through = PathBuf::from(format!("/proc/self/fd/{fd}"));
        assert!(matches!(
            destination(&through),
            Ok(Destination::InPlace { path, append: true }) if path == through
        ));
        write_file(&through, b"{}\n").expect("write");
        assert_eq!(
            std::fs::read_to_string(&out).expect("read"),
            "earlier output\n{}\n"
        );
        assert_eq!(names_in(dir.path()), ["out.txt"]);
    }

    /// What cannot be written fails before the run, naming the path: a file in a file
    /// system that takes no new files, a directory that does not exist, a socket.
    #[test]
    fn what_would_fail_at_the_end_fails_up_front_naming_the_path() {
        let error = destination(Path::new("/proc/version")).expect_err("procfs");
        assert!(error.to_string().contains("/proc/version"), "{error}");
        let error = destination(Path::new("/no/such/dir/out.json")).expect_err("no dir");
        assert!(error.to_string().contains("/no/such/dir"), "{error}");
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        let error = destination(&socket).expect_err("a socket");
        assert!(error.to_string().contains("socket"), "{error}");
        let new = dir.path().join("new.json");
        assert!(matches!(destination(&new), Ok(Destination::Replace { path }) if path == new));
        assert_eq!(names_in(dir.path()), ["socket"], "the probe left nothing");
    }

    #[test]
    fn a_file_that_cannot_replace_a_directory_leaves_both_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out.json");
        std::fs::create_dir(&path).expect("mkdir");
        let error = write_file(&path, b"new").expect_err("a directory is in the way");
        assert!(error.to_string().contains("is a directory"), "{error}");
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
