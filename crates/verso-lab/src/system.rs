//! The seam between the runner and what it drives: "a system the lab can drive".
//!
//! The runner (threads, start line, sampling, the held snapshot, the time series) is the
//! same for every system. A [`DrivenSystem`] is one loaded database of one system: Verso's
//! own [`verso::Database`] with a [`Workload`] ([`VersoSystem`]), or a peer, PostgreSQL,
//! DuckDB or SQLite, running the same workload through its own SQL (`crate::peers`).
//!
//! Invariants every system keeps:
//! - a worker is created on the thread that runs it and stays there (workers need not be
//!   `Send`: Verso's keep a `Transaction`, the peers' a connection);
//! - a held snapshot is begun and ended on the holder's own thread, and has *read*
//!   something before [`SnapshotSource::hold_snapshot`] returns, so its snapshot is taken
//!   (PostgreSQL and SQLite take a snapshot at the first read, not at `BEGIN`);
//! - [`DrivenSystem::gauges`] is cheap enough to call every sampling interval from the
//!   sampler's thread while the workers run.

use verso::{Database, Isolation, Stats};

use crate::workload::{LabError, OlapWorker, OltpWorker, Workload};

/// One long-lived transaction that has read something and holds its snapshot until
/// [`HeldSnapshot::end`].
pub trait HeldSnapshot {
    /// Ends the transaction (it wrote nothing; it commits or rolls back).
    fn end(self: Box<Self>) -> Result<(), LabError>;
}

/// Something that can begin a long-lived transaction holding a snapshot.
pub trait SnapshotSource: Sync {
    /// Begins a transaction at `isolation` (declared read-only if `read_only`, where the
    /// system tells the two apart), reads something so that its snapshot is taken, and
    /// returns it, open. Called on the thread that will end it.
    fn hold_snapshot(
        &self,
        isolation: Isolation,
        read_only: bool,
    ) -> Result<Box<dyn HeldSnapshot + '_>, LabError>;
}

/// What the sampler reads from a system every interval.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    /// Verso's engine counters; all zero for a peer, which has no such counters.
    pub stats: Stats,
    /// The system's growth in bytes (see `Configuration::growth_measure`); `None` if it
    /// could not be read this time (the sample then repeats the last value read).
    pub growth_bytes: Option<u64>,
}

/// A loaded database the runner drives: hands out workers, holds a snapshot, and is
/// sampled.
pub trait DrivenSystem: SnapshotSource {
    /// A worker for OLTP thread `worker` of `workers`, with its own random stream derived
    /// from `seed`.
    fn oltp_worker(
        &self,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + '_>, LabError>;

    /// A worker for OLAP thread `worker`, or `None` if the workload has no queries.
    fn olap_worker(
        &self,
        worker: usize,
        seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + '_>>, LabError>;

    /// The gauges now.
    fn gauges(&self) -> Gauges;

    /// The rows its tables hold now, counted once before the run starts (the base of
    /// `Sample::live_rows`); `None` where the system has no version counts to divide by
    /// them (the peers).
    fn count_rows(&self) -> Result<Option<u64>, LabError> {
        Ok(None)
    }
}

impl HeldSnapshot for verso::Transaction<'_> {
    fn end(self: Box<Self>) -> Result<(), LabError> {
        (*self).commit()?;
        Ok(())
    }
}

impl SnapshotSource for Database {
    /// Verso takes the snapshot at `begin`; nothing needs reading.
    fn hold_snapshot(
        &self,
        isolation: Isolation,
        read_only: bool,
    ) -> Result<Box<dyn HeldSnapshot + '_>, LabError> {
        let txn = if read_only {
            self.try_begin_read_only(isolation)?
        } else {
            self.try_begin(isolation)?
        };
        Ok(Box::new(txn))
    }
}

/// Verso's own database, loaded with a workload.
pub struct VersoSystem<'a> {
    /// The workload.
    pub workload: &'a dyn Workload,
    /// Its database.
    pub db: &'a Database,
}

impl SnapshotSource for VersoSystem<'_> {
    fn hold_snapshot(
        &self,
        isolation: Isolation,
        read_only: bool,
    ) -> Result<Box<dyn HeldSnapshot + '_>, LabError> {
        self.db.hold_snapshot(isolation, read_only)
    }
}

impl DrivenSystem for VersoSystem<'_> {
    fn oltp_worker(
        &self,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + '_>, LabError> {
        self.workload.oltp_worker(self.db, worker, workers, seed)
    }

    fn olap_worker(
        &self,
        worker: usize,
        seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + '_>>, LabError> {
        self.workload.olap_worker(self.db, worker, seed)
    }

    /// Every row of every table, by one scan each at one snapshot: the engine's `Stats`
    /// count versions, not rows.
    fn count_rows(&self) -> Result<Option<u64>, LabError> {
        let txn = self.db.begin_read_only(Isolation::Snapshot);
        let mut rows = 0u64;
        for name in self.db.table_names() {
            let table = self.db.table(&name)?;
            txn.scan_view(table, verso::KeyRange::new(..), |_| {
                rows += 1;
                true
            })?;
        }
        txn.commit()?;
        Ok(Some(rows))
    }

    /// The engine's counters, and the process's resident memory as its growth: Verso keeps
    /// everything in memory, so memory is what a long reader could make grow (on the disk
    /// engine, its tables' files instead).
    fn gauges(&self) -> Gauges {
        let stats = self.db.sample_stats();
        // On the disk engine, its tables' files, as PostgreSQL's relation sizes, and in
        // InnoDB's design the undo pages in use too (where its old versions are).
        let growth_bytes = match &stats.disk {
            Some(disk) => {
                let undo = disk.undo.pages.saturating_sub(disk.undo.free_pages);
                Some((disk.table_pages + undo) * verso::disk::PAGE_SIZE as u64)
            }
            None => crate::memory::resident_bytes(),
        };
        Gauges {
            stats,
            growth_bytes,
        }
    }
}
