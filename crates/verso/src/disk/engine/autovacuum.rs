//! The disk engine's background worker: autovacuum and the checkpointer.
//!
//! Every naptime it vacuums each table whose dead tuples passed PostgreSQL's threshold
//! (`DiskTable::needs_vacuum`: 50 plus a fifth of the tuples its last vacuum left), as
//! PostgreSQL's launcher and workers do for one database; and every tick (at most a
//! second) it takes a checkpoint once the page log grew by `checkpoint_after_log_bytes`
//! since the last one (PostgreSQL's `max_wal_size`), so recovery replays a bounded log and
//! its segments are freed. In InnoDB's design it also purges every tick
//! (`DiskEngine::purge`). It holds the engine only while it works (a weak reference
//! between rounds), and stops when asked or when the engine is gone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::DiskEngine;
use crate::{Error, Result};
use parking_lot::{Condvar, Mutex};

/// The running worker.
pub(crate) struct Worker {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    stop: AtomicBool,
    wake: Mutex<()>,
    woken: Condvar,
    vacuums: AtomicU64,
    checkpoints: AtomicU64,
}

impl Worker {
    pub(crate) fn start(
        engine: Weak<DiskEngine>,
        naptime: Option<Duration>,
        checkpoint_after_log_bytes: Option<u64>,
    ) -> Result<Self> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            wake: Mutex::new(()),
            woken: Condvar::new(),
            vacuums: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
        });
        let worker_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("verso-autovacuum".into())
            .spawn(move || run(&worker_shared, &engine, naptime, checkpoint_after_log_bytes))
            .map_err(|e| Error::Io {
                path: "(thread)".into(),
                operation: "starting the autovacuum worker",
                kind: e.kind(),
                message: e.to_string(),
            })?;
        Ok(Worker {
            shared,
            thread: Some(thread),
        })
    }

    /// Vacuums the worker ran.
    pub(crate) fn vacuums(&self) -> u64 {
        self.shared.vacuums.load(Ordering::Relaxed)
    }

    /// Stops the worker and waits for a round in progress to end.
    pub(crate) fn stop(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _wake = self.shared.wake.lock();
            self.shared.woken.notify_all();
        }
        if let Some(thread) = self.thread.take() {
            // The engine's last handle may be dropped by the worker itself (it upgrades
            // its weak reference for a round): never join from that thread.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

fn run(
    shared: &Shared,
    engine: &Weak<DiskEngine>,
    naptime: Option<Duration>,
    checkpoint_after_log_bytes: Option<u64>,
) {
    let tick = naptime.map_or(Duration::from_secs(1), |n| n.min(Duration::from_secs(1)));
    let mut last_vacuum = std::time::Instant::now();
    let mut log_bytes_at_checkpoint = 0;
    loop {
        {
            let mut wake = shared.wake.lock();
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            shared.woken.wait_for(&mut wake, tick);
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        if engine.check_open().is_err() {
            return;
        }
        if let Some(every) = checkpoint_after_log_bytes {
            let bytes = engine.log.stats().bytes;
            if bytes.saturating_sub(log_bytes_at_checkpoint) >= every {
                // A checkpoint that failed (a page write's I/O error) is tried again next
                // tick; one that failed the log ends the worker at the next `check_open`.
                if engine.checkpoint().is_ok() {
                    log_bytes_at_checkpoint = bytes;
                    shared.checkpoints.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        // InnoDB's design: purge every tick (InnoDB's purge threads run continuously). An
        // error (an I/O error, a failed log) leaves the logs queued for the next tick.
        if engine.undo.is_some() {
            let _ = engine.purge(false);
        }
        let Some(naptime) = naptime else { continue };
        if last_vacuum.elapsed() < naptime {
            continue;
        }
        last_vacuum = std::time::Instant::now();
        for entry in engine.tables() {
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            if entry.table.needs_vacuum() {
                // An error (an I/O error, a failed log) ends this round; the next call on
                // the database reports the log's failure to its caller.
                if entry.table.vacuum(&engine.txns).is_err() {
                    break;
                }
                shared.vacuums.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
