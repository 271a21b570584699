//! What a peer leaves on the machine, and how it is removed however the run ends.
//!
//! A private PostgreSQL server and a peer's data directory are removed by their owners'
//! `Drop` when the run ends or fails. An interrupted run (Ctrl-C, `kill`) never reaches
//! those `Drop`s, and a server started by `pg_ctl` runs in a session of its own, so the
//! terminal's Ctrl-C does not reach it either. So each such thing is registered here while
//! it exists, and the first registration installs a handler for SIGINT, SIGTERM and SIGHUP
//! that runs every registered cleanup and then exits with status 130.
//!
//! Invariant: a registered cleanup is idempotent (stopping a stopped server and removing a
//! removed directory do nothing), because the handler and a `Drop` may both run it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once, PoisonError};

/// One thing to undo.
#[derive(Clone, Debug)]
pub enum Cleanup {
    /// Stop the server of this data directory (`pg_ctl stop -m immediate`, or SIGKILL to
    /// its postmaster), then remove `dir`, which holds the data directory.
    StopPostgres {
        /// `pg_ctl`.
        pg_ctl: PathBuf,
        /// The data directory.
        data: PathBuf,
        /// The directory that holds it, its socket and its log.
        dir: PathBuf,
        /// The user (and group) the server runs as, if not the lab's own.
        run_as: Option<(u32, u32)>,
    },
    /// Remove this directory and everything in it.
    RemoveDir(PathBuf),
}

impl Cleanup {
    /// Does it. Errors are ignored: there is no one left to tell, and what could be done
    /// was done.
    pub fn run(&self) {
        match self {
            Cleanup::StopPostgres {
                pg_ctl,
                data,
                dir,
                run_as,
            } => {
                stop_postgres(pg_ctl, data, *run_as);
                remove_dir(dir);
            }
            Cleanup::RemoveDir(dir) => remove_dir(dir),
        }
    }
}

/// Removes `dir` and everything in it. A server's last processes may still be writing
/// while it is removed (the removal then fails on a directory that is no longer empty):
/// it is tried again for up to two seconds.
pub fn remove_dir(dir: &Path) {
    for _ in 0..20 {
        if !dir.exists() || std::fs::remove_dir_all(dir).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Stops the server of `data` at once: `pg_ctl stop -m immediate`, and if that fails while
/// its postmaster still runs, SIGKILL to the postmaster (its children exit when it does).
pub fn stop_postgres(pg_ctl: &Path, data: &Path, run_as: Option<(u32, u32)>) {
    let pid_file = data.join("postmaster.pid");
    if !pid_file.exists() {
        return;
    }
    let mut command = std::process::Command::new(pg_ctl);
    command
        .args(["stop", "-m", "immediate", "-w", "-t", "30", "-s", "-D"])
        .arg(data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some((uid, gid)) = run_as {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(gid);
    }
    let stopped = command.status().is_ok_and(|status| status.success());
    if !stopped {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.lines().next()?.trim().parse::<u32>().ok())
        {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

type Registry = Vec<(u64, Cleanup)>;

static REGISTRY: Mutex<Registry> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);
static HANDLER: Once = Once::new();
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Exit status of a run ended by a signal after its cleanups ran (128 + SIGINT).
pub const INTERRUPTED_EXIT_STATUS: i32 = 130;

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A registered cleanup; dropping it unregisters it (its owner has done it by then).
#[derive(Debug)]
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        registry().retain(|(id, _)| *id != self.0);
    }
}

/// Registers `cleanup` to run if the process is interrupted before the registration is
/// dropped, and installs the signal handler the first time.
pub fn register(cleanup: Cleanup) -> Registration {
    HANDLER.call_once(|| {
        // Another handler may already be installed (a program embedding the lab); its
        // owner then decides what an interrupt does, and the `Drop`s still clean up.
        let _ = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, Ordering::SeqCst);
            let pending: Registry = std::mem::take(&mut *registry());
            for (_, cleanup) in pending.iter().rev() {
                cleanup.run();
            }
            eprintln!(
                "verso: interrupted; stopped and removed {} peer resource(s)",
                pending.len()
            );
            std::process::exit(INTERRUPTED_EXIT_STATUS);
        });
    });
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    registry().push((id, cleanup));
    Registration(id)
}

/// Whether an interrupt's cleanup has begun. The run it interrupted may fail at the same
/// time (its server vanished under it); [`wait_if_interrupted`] then lets the handler finish
/// and end the process with its own status.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// If an interrupt's cleanup has begun, waits for it: the handler ends the process (status
/// [`INTERRUPTED_EXIT_STATUS`]) when it is done. Returns at once otherwise.
pub fn wait_if_interrupted() {
    while interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A fresh directory for a peer's files: `parent/verso-<what>-<pid>-<n>`, created (never
/// reused: an existing one is an error that says it is in use), private to its owner.
pub fn fresh_dir(parent: &Path, what: &str) -> Result<PathBuf, std::io::Error> {
    use std::os::unix::fs::PermissionsExt;
    let dir = parent.join(format!(
        "verso-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot create {}: {e}{}",
                dir.display(),
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    " (in use by another run?)"
                } else {
                    ""
                }
            ),
        )
    })?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}
