//! Peers: the systems people would pick instead of Verso, driven by the same runner on the
//! same workloads (`--peer postgres|duckdb|sqlite`).
//!
//! - [`sql`]: what the peers share: a [`Session`] per worker (prepared statements, explicit
//!   transactions), values, errors, table definitions;
//! - [`postgres`]: PostgreSQL, a real server: a private one the lab starts for the run, or
//!   an existing one (`--postgres-url`);
//! - [`sqlite`]: SQLite, embedded, in WAL mode;
//! - `duckdb`: DuckDB, embedded, in memory (cargo feature `duckdb`);
//! - [`cleanup`]: what a peer leaves on the machine is removed however the run ends;
//! - [`workloads`]: each workload in SQL: TPC-B, YCSB, TPC-C (and its consistency
//!   conditions), CH-benCHmark's 22 queries.
//!
//! How a peer's run goes ([`run_peer`]): open the peer (start the server, make the
//! directory) before anything else, so that a peer that cannot start fails at once; load
//! the workload into a staging Verso database with the workload's own loader (so the data
//! is the same, row for row, as Verso's run with the same seed), copy it into the peer
//! through the peer's fast path (COPY, the Appender, a prepared insert in one
//! transaction), check the workload's consistency conditions in SQL, run the workers
//! through the same runner as Verso's (same threads, sampling, held snapshot), check the
//! conditions again, and close the peer (stop the server, remove the files).
//! `docs/design/peers.md` says more.

pub mod cleanup;
#[cfg(feature = "duckdb")]
pub mod duckdb;
pub mod postgres;
pub mod sql;
pub mod sqlite;
pub mod workloads;

use std::path::PathBuf;
use std::time::Instant;

use verso::{Database, Isolation, KeyRange, Options};

use crate::metrics::{Configuration, RunResult};
use crate::runner::{
    after, configuration_of, measure, progress_bar, result_of, BarProgress, RunConfig,
};
use crate::system::{DrivenSystem, Gauges, HeldSnapshot, SnapshotSource};
use crate::workload::{LabError, LoadProgress, OlapWorker, OltpWorker, Workload};
pub use sql::{Session, SqlError, SqlRow, SqlValue, TableDef, TxnMode};
pub use workloads::SqlWorkload;

/// The peers the lab knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerKind {
    /// PostgreSQL, a server.
    Postgres,
    /// DuckDB, embedded (cargo feature `duckdb`).
    DuckDb,
    /// SQLite, embedded.
    Sqlite,
}

/// The cargo feature that builds DuckDB in, and the command that enables it.
pub const DUCKDB_FEATURE_HINT: &str = "DuckDB is not built into this binary: it is behind \
     the cargo feature `duckdb` (its C++ engine takes minutes to build); rebuild with \
     `cargo run --release -p verso-lab --features duckdb --bin verso -- ...`";

impl PeerKind {
    /// Every peer, in the order reports list them.
    pub const ALL: [PeerKind; 3] = [PeerKind::Postgres, PeerKind::DuckDb, PeerKind::Sqlite];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Postgres => "postgres",
            PeerKind::DuckDb => "duckdb",
            PeerKind::Sqlite => "sqlite",
        }
    }

    /// The peer named `name`.
    pub fn from_name(name: &str) -> Result<PeerKind, String> {
        PeerKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| format!("unknown peer {name:?}: postgres, duckdb or sqlite"))
    }

    /// Whether this binary can run the peer (DuckDB needs the `duckdb` feature).
    pub fn built_in(self) -> bool {
        match self {
            PeerKind::DuckDb => cfg!(feature = "duckdb"),
            PeerKind::Postgres | PeerKind::Sqlite => true,
        }
    }

    /// What removes old row versions in this system.
    pub fn reclaimer(self) -> &'static str {
        match self {
            PeerKind::Postgres => "vacuum (autovacuum, HOT pruning)",
            PeerKind::DuckDb => "undo buffers freed below the oldest transaction",
            PeerKind::Sqlite => "WAL checkpoints",
        }
    }
}

/// A peer as the command line asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerSpec {
    /// Which peer.
    pub kind: PeerKind,
    /// PostgreSQL only: an existing server to use instead of a private one.
    pub postgres_url: Option<String>,
    /// Where peers make their directories (a private server's cluster, SQLite's file).
    pub dir: PathBuf,
    /// PostgreSQL's private server only: `synchronous_commit = on` (a commit waits for
    /// its WAL flush, as Verso's `--durability sync` does) instead of the lab's `off`.
    pub synchronous_commit: bool,
    /// PostgreSQL's private server only: its `shared_buffers` in MiB instead of the lab's
    /// 1 GB (beside the disk engine, its buffer pool's size).
    pub shared_buffers_mib: Option<u64>,
}

impl PeerSpec {
    /// `kind` with a private server (PostgreSQL) and files under the system's temporary
    /// directory.
    pub fn new(kind: PeerKind) -> PeerSpec {
        PeerSpec {
            kind,
            postgres_url: None,
            dir: std::env::temp_dir(),
            synchronous_commit: false,
            shared_buffers_mib: None,
        }
    }

    /// The configuration's label in reports.
    pub fn label(&self) -> String {
        self.kind.name().to_owned()
    }

    /// Checks, before anything runs, that the peer can run `workload` here: the workload
    /// has an SQL form for it, the peer is built in, its programs are installed or its
    /// server answers, and its directory exists. Starts nothing.
    pub fn validate(&self, workload: &dyn Workload) -> Result<(), LabError> {
        let name = self.kind.name();
        let sql = workload.sql().ok_or_else(|| {
            LabError::BadOption(format!(
                "--peer {name}: the {} workload has no SQL form; peers run tpcb, ycsb, tpcc \
                 and ch",
                workload.name()
            ))
        })?;
        sql.supports(self.kind)
            .map_err(|why| LabError::BadOption(format!("--peer {name}: {why}")))?;
        if !self.kind.built_in() {
            return Err(LabError::BadOption(format!(
                "--peer {name}: {DUCKDB_FEATURE_HINT}"
            )));
        }
        if self.postgres_url.is_some() && self.kind != PeerKind::Postgres {
            return Err(LabError::BadOption(format!(
                "--postgres-url is for --peer postgres, not {name}"
            )));
        }
        if !self.dir.is_dir() {
            return Err(LabError::BadOption(format!(
                "--peer-dir {}: not an existing directory",
                self.dir.display()
            )));
        }
        match (self.kind, &self.postgres_url) {
            (PeerKind::Postgres, None) => postgres::Binaries::find().map(drop),
            (PeerKind::Postgres, Some(url)) => {
                // Reached now, so that a bad URL fails before any run; the connection and
                // the schema it makes are gone again at once.
                postgres::PostgresPeer::connect_existing(url).map(drop)
            }
            _ => Ok(()),
        }
    }

    /// Opens the peer: starts a private server, connects to an existing one, or makes a
    /// fresh database. Whatever it made is undone when the returned value is dropped.
    pub fn open(&self) -> Result<Box<dyn Peer>, LabError> {
        match self.kind {
            PeerKind::Postgres => Ok(Box::new(match &self.postgres_url {
                Some(url) => postgres::PostgresPeer::connect_existing(url)?,
                None => postgres::PostgresPeer::start_private(
                    &self.dir,
                    self.synchronous_commit,
                    self.shared_buffers_mib,
                )?,
            })),
            PeerKind::Sqlite => Ok(Box::new(sqlite::SqlitePeer::create(&self.dir)?)),
            #[cfg(feature = "duckdb")]
            PeerKind::DuckDb => Ok(Box::new(duckdb::DuckDbPeer::open()?)),
            #[cfg(not(feature = "duckdb"))]
            PeerKind::DuckDb => Err(LabError::BadOption(DUCKDB_FEATURE_HINT.into())),
        }
    }
}

/// What the report states about a peer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerDescription {
    /// Name and version, e.g. `PostgreSQL 15.14`.
    pub version: String,
    /// The settings that matter for the numbers, in words.
    pub settings: String,
    /// What survives a crash, in words.
    pub durability: String,
    /// What its growth gauge measures.
    pub growth_measure: String,
}

/// A peer, opened for one run.
pub trait Peer: Sync {
    /// Which peer.
    fn kind(&self) -> PeerKind;
    /// Its version and settings.
    fn description(&self) -> &PeerDescription;
    /// The isolation level it runs Verso's `isolation` at, in its own words.
    fn isolation_name(&self, isolation: Isolation) -> String;
    /// A new connection, for one thread.
    fn connect(&self) -> Result<Box<dyn Session>, LabError>;
    /// Creates `tables` and copies their rows from `source` through the fast path.
    fn load(
        &self,
        tables: &[TableDef],
        source: &Database,
        progress: &dyn LoadProgress,
    ) -> Result<(), LabError>;
    /// Its growth gauge in bytes now, if it can be read.
    fn growth_bytes(&self, tables: &[TableDef]) -> Option<u64>;

    /// Its storage counters in the disk engine's terms (pages read, written and hit,
    /// heap and index pages, dead tuples, vacuums), if it has them: what the lab's disk
    /// series plot beside Verso's disk engine. `None` by default.
    fn storage_stats(&self, _tables: &[TableDef]) -> Option<verso::DiskStats> {
        None
    }
}

/// Rows handed to a peer's loader at a time, between progress updates.
const COPY_PROGRESS_ROWS: u64 = 10_000;

/// Calls `row` with each row of `table` in the Verso database `source`, converted to the
/// peer's values, in key order, until it returns false.
pub fn for_each_row(
    source: &Database,
    table: &TableDef,
    progress: &dyn LoadProgress,
    mut row: impl FnMut(&[SqlValue]) -> bool,
) -> Result<(), LabError> {
    let id = source.table(&table.name)?;
    let txn = source.begin(Isolation::Snapshot);
    let mut values = Vec::with_capacity(table.columns.len());
    let mut since_progress = 0;
    txn.scan_view(id, KeyRange::new(..), |view| {
        values.clear();
        values.extend((0..table.columns.len()).map(|i| SqlValue::of_verso(view.get(i))));
        since_progress += 1;
        if since_progress == COPY_PROGRESS_ROWS {
            progress.advance(since_progress);
            since_progress = 0;
        }
        row(&values)
    })?;
    progress.advance(since_progress);
    txn.commit()?;
    Ok(())
}

/// A peer's held snapshot: a session in a read-only transaction that has read something.
struct HeldSession(Box<dyn Session>, PeerKind);

impl HeldSnapshot for HeldSession {
    fn end(mut self: Box<Self>) -> Result<(), LabError> {
        let kind = self.1;
        self.0
            .commit()
            .map_err(|e| e.in_peer(kind.name(), "ending the held snapshot"))
    }
}

/// A loaded peer as the runner drives it.
struct PeerSystem<'a> {
    peer: &'a dyn Peer,
    sql: &'a dyn SqlWorkload,
    tables: Vec<TableDef>,
}

impl SnapshotSource for PeerSystem<'_> {
    /// A peer's held transaction is always declared read-only (`read_only` changes nothing):
    /// it only reads, and no peer makes a read-only transaction hold back more.
    fn hold_snapshot(
        &self,
        isolation: Isolation,
        _read_only: bool,
    ) -> Result<Box<dyn HeldSnapshot + '_>, LabError> {
        let kind = self.peer.kind();
        let mut session = self.peer.connect()?;
        session
            .begin(TxnMode::ReadOnly(isolation))
            .and_then(|()| session.query(self.sql.snapshot_read(), &[]))
            .map_err(|e| e.in_peer(kind.name(), "beginning the held snapshot"))?;
        Ok(Box::new(HeldSession(session, kind)))
    }
}

impl DrivenSystem for PeerSystem<'_> {
    fn oltp_worker(
        &self,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + '_>, LabError> {
        let session = self.peer.connect()?;
        self.sql
            .oltp_worker(session, self.peer.kind(), worker, workers, seed)
    }

    fn olap_worker(
        &self,
        worker: usize,
        seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + '_>>, LabError> {
        let session = self.peer.connect()?;
        self.sql
            .olap_worker(session, self.peer.kind(), worker, seed)
    }

    fn gauges(&self) -> Gauges {
        let mut stats = verso::Stats::default();
        stats.disk = self.peer.storage_stats(&self.tables);
        Gauges {
            stats,
            growth_bytes: self.peer.growth_bytes(&self.tables),
        }
    }
}

/// Set (to anything), makes a peer's run fail right after its load, with the peer still
/// open: how the tests check that a failed run stops and removes what the peer made. Not for
/// use outside tests.
pub const FAIL_AFTER_LOAD_FOR_TESTS: &str = "VERSO_LAB_TEST_FAIL_PEER_AFTER_LOAD";

/// Runs `workload` on the peer `spec` as `config` says (see the module notes).
pub fn run_peer(
    workload: &dyn Workload,
    spec: &PeerSpec,
    config: &RunConfig,
) -> Result<RunResult, LabError> {
    let sql = workload.sql().ok_or_else(|| {
        LabError::BadOption(format!("the {} workload has no SQL form", workload.name()))
    })?;
    let kind = spec.kind;
    let tables = sql.tables();
    let peer = spec.open()?;

    let load_start = Instant::now();
    {
        let staging = Database::open(Options::default())?;
        let bar = progress_bar(config.show_progress, 0);
        bar.set_prefix(format!("{} load", config.label));
        workload.load(&staging, &BarProgress(&bar))?;
        bar.set_position(0);
        bar.set_prefix(format!("{} copy", config.label));
        peer.load(&tables, &staging, &BarProgress(&bar))?;
        bar.finish_and_clear();
    }
    let load_seconds = load_start.elapsed().as_secs_f64();
    if std::env::var_os(FAIL_AFTER_LOAD_FOR_TESTS).is_some() {
        return Err(LabError::Peer(format!(
            "{}: a failure planted by {FAIL_AFTER_LOAD_FOR_TESTS}",
            kind.name()
        )));
    }
    let mut checker = peer.connect()?;
    sql.check_consistency(&mut *checker, kind)
        .map_err(|e| after("the load", e))?;

    let system = PeerSystem {
        peer: &*peer,
        sql,
        tables,
    };
    let measured = measure(&system, workload, config)?;
    sql.check_consistency(&mut *checker, kind)
        .map_err(|e| after("the run", e))?;
    drop(checker);

    let description = peer.description();
    let configuration = Configuration {
        garbage_collector: kind.reclaimer().to_owned(),
        design: description.version.clone(),
        system_version: description.version.clone(),
        system_isolation: peer.isolation_name(config.isolation),
        settings: description.settings.clone(),
        durability: description.durability.clone(),
        growth_measure: description.growth_measure.clone(),
        ..configuration_of(workload, config)
    };
    Ok(result_of(configuration, load_seconds, measured, config))
}
