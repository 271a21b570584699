//! The public surface: [`Database`], [`Transaction`], [`Options`].

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use std::collections::VecDeque;

pub use crate::disk::VersionPlacement;
use crate::durability::log::Log;
use crate::durability::{CheckpointReport, Durability, Persistence};
use crate::engine::txn::{End, EngineTxn, ScanCursor};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fs::FileSystemHandle;
use crate::gc::cooperative::Cooperative;
use crate::gc::deuteronomy::Deuteronomy;
use crate::gc::ermia::Ermia;
use crate::gc::hana::Hana;
use crate::gc::hekaton::Hekaton;
use crate::gc::none::NoCollection;
use crate::gc::oneshot::OneShot;
use crate::gc::steam::Steam;
use crate::gc::tb_collect::TbCollect;
use crate::gc::tvcp::Tvcp;
use crate::gc::txn_epochs::TxnEpochs;
use crate::gc::vacuum::Vacuum;
use crate::gc::watermark::WatermarkOnly;
use crate::gc::zen::Zen;
use crate::gc::{Collector, Finalizing, GcConfig};
use crate::row::NonInline;
use crate::row::RowView;
use crate::rows::Row;
use crate::schema::{Schema, TableSchema};
use crate::stats::Stats;
use crate::value::Value;
use crate::version::append::AppendStorage;
use crate::version::append_nvm::AppendNvmStorage;
use crate::version::append_o2n::AppendO2nStorage;
use crate::version::delta::DeltaStorage;
use crate::version::delta_nvm::DeltaNvmStorage;
use crate::version::tile_block::TileBlockStorage;
use crate::version::time_travel::TimeTravelStorage;
use crate::version::VersionStorage;

/// The isolation level a transaction asks for. Under the default protocol
/// ([`ConcurrencyControl::SnapshotIsolation`]) it is the level it gets; under every other
/// protocol every transaction is serializable whatever it asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Isolation {
    /// Snapshot isolation: reads see the snapshot taken at `begin`; of two concurrent
    /// transactions writing the same row, the second writer fails at its write.
    #[default]
    Snapshot,
    /// Serializable: snapshot isolation plus a validation at commit (precision locking):
    /// a transaction that wrote fails with [`Error::SerializationFailure`] if a transaction
    /// that committed after it began wrote a row it read or a row in a range it scanned.
    /// Serializable transactions are then serializable in commit order (read-only ones at
    /// their snapshot). The guarantee covers the serializable transactions of a history; a
    /// snapshot-isolation transaction beside them keeps its own, weaker guarantee.
    Serializable,
}

/// Which garbage collector runs (see `docs/design/transactions-and-gc.md` and
/// `docs/design/collectors.md`). Each is one file behind the collection seam (`src/gc/`),
/// following the designs the Steam paper compares (Böttcher et al., PVLDB 2019, §3 and
/// Table 4), everything else in the engine equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum GarbageCollector {
    /// Steam: thread-local transaction lists, interspersed finalizing, and eager pruning
    /// of obsolete versions on every write. The default. On the disk engine
    /// ([`Options::disk`]): PostgreSQL's pruning and vacuum with Steam's rule, removing
    /// every version no active snapshot sees.
    #[default]
    Steam,
    /// HyPer's watermark-only collector: Steam without eager pruning. Versions newer than
    /// the oldest active snapshot stay until it ends.
    WatermarkOnly,
    /// 'Hana': a global snapshot tracker under one mutex, and a background thread that
    /// every [`Options::background_gc_period`] (1 ms) finalizes what the oldest snapshot
    /// no longer needs and prunes, exactly, the chains of every version committed after
    /// it (interval-based GC). Workers do no collection.
    Hana,
    /// 'Hekaton': a latch-free transaction map; a background thread refreshes the global
    /// minimum from it every [`Options::background_gc_period`] (1 ms), finds the committed
    /// transactions below it and hands them to the worker threads, which finalize them
    /// between transactions.
    Hekaton,
    /// 'Deuteronomy': infinite epochs. The global epoch advances after every
    /// [`Options::epoch_advance_threshold`] (100) commits; the thread that advances it
    /// scans the threads' epochs and finalizes what the oldest occupied epoch allows.
    Deuteronomy,
    /// 'Ermia': a three-phase epoch manager (threads are only ever in the current or the
    /// previous epoch), advanced after every [`Options::epoch_advance_threshold`] (1)
    /// commit; what was committed before the previous epoch began is finalized.
    Ermia,
    /// No collection at all: versions, deleted rows and chains stay for ever. The
    /// baseline that shows what garbage costs; [`Database::collect_garbage`] does nothing.
    NoCollection,
    /// 'vac' (Wu et al. §5.1): tuple-level background vacuuming. Nothing tracks
    /// transactions; writers mark the block of each row they write dirty, and a vacuum
    /// thread every [`Options::background_gc_period`] (10 ms) examines the rows of the
    /// dirty blocks and unlinks the versions below the watermark. On the disk engine
    /// ([`Options::disk`]): PostgreSQL's own rule, pruning and vacuuming only versions
    /// below the oldest snapshot (the xmin horizon).
    Vacuum,
    /// 'coop' (Wu et al. §5.1, Hekaton's cooperative cleaning): readers and writers record
    /// rows whose chains they walked past an obsolete version in; a thread every
    /// [`Options::background_gc_period`] (1 ms) cleans them, and about every second (1,000
    /// rounds) vacuums every row (dusty corners). Only with
    /// [`VersionStorageKind::AppendOldestToNewest`]; refused at `open` for the others.
    Cooperative,
    /// 'txn' (Wu et al. §5.2): transaction-level collection with epochs. Transactions
    /// register in the active epoch's membership counter; a thread every
    /// [`Options::background_gc_period`] (40 ms, the epoch length) starts a new epoch and
    /// finalizes every transaction committed before the oldest epoch that still has
    /// members, unlinking its versions as a batch.
    TransactionEpochs,
    /// 'tb-collect' (TB-Collect, Wei et al. 2025, §4.2–§4.4): block-level collection over
    /// the [`VersionStorageKind::TileBlock`] storage (and only it). A block more than 90%
    /// of whose slots are obsolete is queued; once no active snapshot can read its obsolete
    /// versions, its still-latest versions are moved to a new block and it is freed whole
    /// (its tile too, or the tile kept while a long transaction may walk its headers).
    /// Worker threads do the work after their transactions end; no background thread.
    /// Not in [`GarbageCollector::ALL`], whose collectors run over the in-memory storages;
    /// see [`GarbageCollector::BLOCK_LEVEL`].
    TbCollect,
    /// 'tvcp' (TB-Collect §2.3.1: timely version chain pruning, as TB-Collect adapts Steam
    /// and N2DB to persistent memory; not Verso's own Steam): after every commit the
    /// committing thread prunes, exactly, the rows of its recycle queue (the rows its
    /// transactions wrote whose chains still hold old versions), the transaction's own
    /// rows first; what it removes is marked obsolete and goes to its table's reuse list.
    /// Over the [`VersionStorageKind::AppendNvm`] storage only; see
    /// [`GarbageCollector::NVM_BASELINES`].
    Tvcp,
    /// 'zen' (TB-Collect §2.3.2: background scanning, as TB-Collect runs Zen's): a
    /// background thread every [`Options::background_gc_period`] (1 ms) finalizes the
    /// transactions below the oldest snapshot and prunes, exactly, the rows written after
    /// it; what it removes goes to its table's reuse list. Over the
    /// [`VersionStorageKind::AppendNvm`] storage only.
    Zen,
    /// 'oneshot' (TB-Collect §2.3.3: partition clearing, after OneShotGC): over the
    /// [`VersionStorageKind::DeltaNvm`] storage only. Old versions are appended to
    /// partitions; after each transaction ends, the worker releases the oldest sealed
    /// partitions whole once no snapshot can read them, or, when only long snapshots
    /// (older than every update in it) may, after copying what they read into the
    /// partition's version index (a hash index in the region, built with small writes).
    OneShot,
}

impl GarbageCollector {
    /// The block-level collectors, each paired with the persistent-memory storage it
    /// collects.
    pub const BLOCK_LEVEL: [GarbageCollector; 1] = [GarbageCollector::TbCollect];

    /// The collectors of TB-Collect's baselines (§2.3, §5.1 Table 2): timely version chain
    /// pruning (its Steam and N2DB) and background scanning (its Zen), over the append-nvm
    /// storage; partition clearing (its OneShot), over the delta-nvm storage.
    pub const NVM_BASELINES: [GarbageCollector; 3] = [
        GarbageCollector::Tvcp,
        GarbageCollector::Zen,
        GarbageCollector::OneShot,
    ];

    /// Every collector, in the order reports list them: the Steam paper's, then Wu et
    /// al.'s granularities.
    pub const ALL: [GarbageCollector; 10] = [
        GarbageCollector::Steam,
        GarbageCollector::WatermarkOnly,
        GarbageCollector::Hana,
        GarbageCollector::Hekaton,
        GarbageCollector::Deuteronomy,
        GarbageCollector::Ermia,
        GarbageCollector::NoCollection,
        GarbageCollector::Vacuum,
        GarbageCollector::Cooperative,
        GarbageCollector::TransactionEpochs,
    ];

    /// The collectors the Steam paper compares (its Table 4, and 'none'), which its
    /// reproductions run.
    pub const STEAM_PAPER: [GarbageCollector; 7] = [
        GarbageCollector::Steam,
        GarbageCollector::WatermarkOnly,
        GarbageCollector::Hana,
        GarbageCollector::Hekaton,
        GarbageCollector::Deuteronomy,
        GarbageCollector::Ermia,
        GarbageCollector::NoCollection,
    ];

    /// The name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            GarbageCollector::Steam => Steam::NAME,
            GarbageCollector::WatermarkOnly => WatermarkOnly::NAME,
            GarbageCollector::Hana => Hana::NAME,
            GarbageCollector::Hekaton => Hekaton::NAME,
            GarbageCollector::Deuteronomy => Deuteronomy::NAME,
            GarbageCollector::Ermia => Ermia::NAME,
            GarbageCollector::NoCollection => NoCollection::NAME,
            GarbageCollector::Vacuum => Vacuum::NAME,
            GarbageCollector::Cooperative => Cooperative::NAME,
            GarbageCollector::TransactionEpochs => TxnEpochs::NAME,
            GarbageCollector::TbCollect => TbCollect::NAME,
            GarbageCollector::Tvcp => Tvcp::NAME,
            GarbageCollector::Zen => Zen::NAME,
            GarbageCollector::OneShot => OneShot::NAME,
        }
    }

    /// Parses a name as printed by [`GarbageCollector::name`].
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::BLOCK_LEVEL)
            .chain(Self::NVM_BASELINES)
            .find(|gc| gc.name() == name)
            .ok_or_else(|| Error::UnsupportedConfiguration {
                reason: format!(
                    "unknown garbage collector {name:?}; known: {}, {}, {}",
                    Self::ALL.map(Self::name).join(", "),
                    Self::BLOCK_LEVEL.map(Self::name).join(", "),
                    Self::NVM_BASELINES.map(Self::name).join(", ")
                ),
            })
    }

    /// Whether a background thread does (part of) the collection, so that
    /// [`Options::background_gc_period`] applies: 'Hana', 'Hekaton', 'vac', 'coop', 'txn'.
    pub fn runs_in_background(self) -> bool {
        matches!(
            self,
            GarbageCollector::Hana
                | GarbageCollector::Hekaton
                | GarbageCollector::Vacuum
                | GarbageCollector::Cooperative
                | GarbageCollector::TransactionEpochs
                | GarbageCollector::Zen
        )
    }

    /// Whether the collector finds garbage by examining rows rather than the write sets
    /// of committed transactions (Wu et al. §5.1, tuple-level): 'vac' and 'coop'. Those
    /// queue nothing at commit.
    pub fn is_tuple_level(self) -> bool {
        matches!(
            self,
            GarbageCollector::Vacuum | GarbageCollector::Cooperative
        )
    }

    /// Whether the collector works only with some version storage, and which: 'coop'
    /// needs chains walked from the oldest version; 'tb-collect' collects the tile-block
    /// storage's blocks.
    pub fn required_storage(self) -> Option<VersionStorageKind> {
        match self {
            GarbageCollector::Cooperative => Some(VersionStorageKind::AppendOldestToNewest),
            GarbageCollector::TbCollect => Some(VersionStorageKind::TileBlock),
            GarbageCollector::Tvcp | GarbageCollector::Zen => Some(VersionStorageKind::AppendNvm),
            GarbageCollector::OneShot => Some(VersionStorageKind::DeltaNvm),
            _ => None,
        }
    }

    /// Whether the collector advances epochs after a number of commits, so that
    /// [`Options::epoch_advance_threshold`] applies: 'Deuteronomy' and 'Ermia'.
    pub fn uses_epochs(self) -> bool {
        matches!(
            self,
            GarbageCollector::Deuteronomy | GarbageCollector::Ermia
        )
    }

    /// The default number of commits between epoch advances (Steam Table 4): 100 for
    /// 'Deuteronomy', 1 for 'Ermia'; `None` for collectors without epochs.
    pub fn default_epoch_advance_threshold(self) -> Option<u64> {
        match self {
            GarbageCollector::Deuteronomy => Some(Deuteronomy::DEFAULT_EPOCH_THRESHOLD),
            GarbageCollector::Ermia => Some(Ermia::DEFAULT_EPOCH_THRESHOLD),
            _ => None,
        }
    }
}

/// Which concurrency-control protocol runs every transaction (Wu et al., PVLDB 2017, §3;
/// `src/cc/`). Under every protocol but the default, every transaction is serializable,
/// whatever [`Isolation`] it asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ConcurrencyControl {
    /// Snapshot isolation with first-updater-wins; [`Isolation::Serializable`]
    /// transactions also validate their reads at commit (precision locking). The default.
    #[default]
    SnapshotIsolation,
    /// MVOCC as HyPer runs it: every writing transaction validates its read set (points
    /// and scanned ranges) at commit against what committed meanwhile.
    Mvocc,
    /// MVTO: unique start timestamps order the transactions; reads raise the row's read
    /// timestamp, and a write to a row a younger transaction read, or a read or write of a
    /// row another transaction has locked, aborts.
    Mvto,
    /// MV2PL with the no-wait policy: read and write locks in one word per row, taken
    /// before each read and write and held to the end; a refused lock aborts at once.
    /// Locked reads see the newest committed versions.
    Mv2pl,
    /// SI+SSN: snapshot isolation plus the serial safety net's exclusion test at commit,
    /// for read-only transactions too.
    Ssn,
}

impl ConcurrencyControl {
    /// Every protocol, the default first.
    pub const ALL: [ConcurrencyControl; 5] = [
        ConcurrencyControl::SnapshotIsolation,
        ConcurrencyControl::Mvocc,
        ConcurrencyControl::Mvto,
        ConcurrencyControl::Mv2pl,
        ConcurrencyControl::Ssn,
    ];

    /// The name used in configuration and reports.
    pub fn name(self) -> &'static str {
        crate::cc::Protocol::new(self).name()
    }

    /// A short name for command lines and reports: `si`, `mvocc`, `mvto`, `mv2pl`, `ssn`.
    pub fn short_name(self) -> &'static str {
        match self {
            ConcurrencyControl::SnapshotIsolation => "si",
            ConcurrencyControl::Mvocc => "mvocc",
            ConcurrencyControl::Mvto => "mvto",
            ConcurrencyControl::Mv2pl => "mv2pl",
            ConcurrencyControl::Ssn => "ssn",
        }
    }

    /// Parses a name as printed by [`ConcurrencyControl::name`] or
    /// [`ConcurrencyControl::short_name`].
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|cc| cc.name() == name || cc.short_name() == name)
            .ok_or_else(|| Error::UnsupportedConfiguration {
                reason: format!(
                    "unknown concurrency control {name:?}; known: {}",
                    Self::ALL.map(Self::short_name).join(", ")
                ),
            })
    }

    /// Whether every transaction runs serializably, whatever isolation it asks for (every
    /// protocol but the default).
    pub fn always_serializable(self) -> bool {
        self != ConcurrencyControl::SnapshotIsolation
    }
}

/// How 'tb-collect' keeps the version chains of long transactions whole when it frees a
/// block whose headers a chain still reaches (TB §4.4, "chain consolidation"; Fig. 11
/// compares the two).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ChainConsolidation {
    /// TB-Collect's design: the block's tile (its version headers, in DRAM) stays after the
    /// block is freed, until no chain reaches it and the long transactions ended.
    #[default]
    KeptTiles,
    /// TB-Collect-hash (TB §5.4): OneShot's hash index instead of kept tiles. The headers
    /// of the block's superseded versions are written to a version index in the
    /// persistent-memory region (an entry and a bucket head each: small writes), every link
    /// into the block is switched to the index under its row's latch, and the tile is
    /// freed with the block; the index goes when no chain reaches it any more.
    HashIndex,
}

impl ChainConsolidation {
    /// Its name in the lab (`--chain-consolidation`).
    pub fn name(self) -> &'static str {
        match self {
            ChainConsolidation::KeptTiles => "kept-tiles",
            ChainConsolidation::HashIndex => "hash-index",
        }
    }

    /// Both.
    pub const ALL: [ChainConsolidation; 2] =
        [ChainConsolidation::KeptTiles, ChainConsolidation::HashIndex];

    /// The consolidation named `name` (as [`ChainConsolidation::name`] gives it).
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| Error::UnsupportedConfiguration {
                reason: format!(
                    "unknown chain consolidation '{name}' (known: kept-tiles, hash-index)"
                ),
            })
    }
}

/// How finalizing removes the versions no snapshot needs any more from a row's chain (a
/// mechanism every collector shares).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum VersionRemoval {
    /// Cut the chain below the reclaim bound in one walk per row: Verso's default.
    #[default]
    CutBelowBound,
    /// HyPer's, as the Steam paper describes it (§5.1: "During GC we always have to
    /// traverse the entire chain to remove the oldest (obsolete) versions"): each obsolete
    /// version is unlinked on its own, found by walking the chain from the newest record,
    /// so removing `n` versions from a chain walks about `n²/2` records. For reproducing
    /// the paper's cost of long chains.
    OneVersionAtATime,
}

impl VersionRemoval {
    /// The name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            VersionRemoval::CutBelowBound => "cut",
            VersionRemoval::OneVersionAtATime => "one-at-a-time",
        }
    }

    /// Parses a name as printed by [`VersionRemoval::name`].
    pub fn from_name(name: &str) -> Result<Self> {
        [
            VersionRemoval::CutBelowBound,
            VersionRemoval::OneVersionAtATime,
        ]
        .into_iter()
        .find(|r| r.name() == name)
        .ok_or_else(|| Error::UnsupportedConfiguration {
            reason: format!("unknown version removal {name:?}; known: cut, one-at-a-time"),
        })
    }
}

/// What secondary-index entries point at (Wu et al. §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum IndexPointers {
    /// Logical pointers (§6.1): an entry points at the row object, which holds the chain's
    /// head (the row-id indirection). An entry is added only when a write changes the
    /// indexed columns; a reader walks to its version and re-checks the key. The default.
    #[default]
    Logical,
    /// Physical pointers (§6.2): an entry points at one exact version, and every new
    /// version is inserted into every secondary index, whatever columns it changed. A
    /// reader follows the entry straight to its version and checks only that it reads
    /// exactly that version. Append-only storage only (either order).
    Physical,
}

impl IndexPointers {
    /// Every scheme.
    pub const ALL: [IndexPointers; 2] = [IndexPointers::Logical, IndexPointers::Physical];

    /// The name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            IndexPointers::Logical => "logical",
            IndexPointers::Physical => "physical",
        }
    }

    /// Parses a name as printed by [`IndexPointers::name`].
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|pointers| pointers.name() == name)
            .ok_or_else(|| Error::UnsupportedConfiguration {
                reason: format!("unknown index pointers {name:?}; known: logical, physical"),
            })
    }
}

/// Where versions live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum VersionStorageKind {
    /// Newest version in place, before-images of changed columns in undo records, newest
    /// to oldest (HyPer, Steam). The default.
    #[default]
    Delta,
    /// Append-only: every write appends a whole copy of the row, chained newest to oldest;
    /// the row object (the index's logical pointer) holds the newest (Wu et al. §4.1, N2O).
    AppendNewestToOldest,
    /// Append-only, chained oldest to newest: the row object holds the oldest, and readers
    /// and writers walk to the newest (Wu et al. §4.1, O2N).
    AppendOldestToNewest,
    /// Time-travel: the master version in place in the row, older versions as whole
    /// copies in a separate store, newest to oldest (Wu et al. §4.2).
    TimeTravel,
    /// TB-Collect's tile-block storage (Wei et al. 2025, §4.1): version headers in DRAM
    /// tiles, contents appended to blocks of a persistent-memory region (emulated:
    /// [`crate::pmem`]), one persist point per commit. MVTO only, without a collector yet
    /// ('none'), in memory (no path) for now; `open` refuses the rest.
    TileBlock,
    /// The append-only storage with version headers in persistent memory that TB-Collect's
    /// baselines run over (§2.3, §5.1): every version a slot of the region (its header of
    /// begin and end timestamps and link, then its contents), the old version's end
    /// timestamp rewritten in place on update, collected versions' slots on per-table
    /// reuse lists. MVTO only; collected by 'tvcp', 'zen' or not at all ('none'); in
    /// memory only (it recovers nothing: no path). It exists to measure the baselines.
    AppendNvm,
    /// The delta storage OneShot runs over in TB-Collect's experiments (§2.3.3, §5.1): each
    /// row's newest version in place in a main heap in the region, and before an update
    /// overwrites it, its before-image appended to the open partition of a version store;
    /// partitions released whole. MVTO only; collected by 'oneshot' or not at all
    /// ('none'); in memory only (no path). It exists to measure the baseline.
    DeltaNvm,
}

impl VersionStorageKind {
    /// The name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            VersionStorageKind::Delta => DeltaStorage::NAME,
            VersionStorageKind::AppendNewestToOldest => AppendStorage::NAME,
            VersionStorageKind::AppendOldestToNewest => AppendO2nStorage::NAME,
            VersionStorageKind::TimeTravel => TimeTravelStorage::NAME,
            VersionStorageKind::TileBlock => TileBlockStorage::NAME,
            VersionStorageKind::AppendNvm => AppendNvmStorage::NAME,
            VersionStorageKind::DeltaNvm => DeltaNvmStorage::NAME,
        }
    }

    /// Whether the storage keeps its versions in a persistent-memory region
    /// ([`VersionStorageKind::PERSISTENT_MEMORY`]).
    pub fn uses_persistent_memory(self) -> bool {
        Self::PERSISTENT_MEMORY.contains(&self)
    }

    /// The storages that keep their versions in a persistent-memory region: they run
    /// under fewer protocols and collectors than the others (see each one).
    pub const PERSISTENT_MEMORY: [VersionStorageKind; 3] = [
        VersionStorageKind::TileBlock,
        VersionStorageKind::AppendNvm,
        VersionStorageKind::DeltaNvm,
    ];

    /// The collectors a persistent-memory storage runs under ('none' first); empty for the
    /// others, which run under [`GarbageCollector::ALL`] (but for 'coop', see it).
    pub fn persistent_memory_collectors(self) -> &'static [GarbageCollector] {
        match self {
            VersionStorageKind::TileBlock => {
                &[GarbageCollector::NoCollection, GarbageCollector::TbCollect]
            }
            VersionStorageKind::AppendNvm => &[
                GarbageCollector::NoCollection,
                GarbageCollector::Tvcp,
                GarbageCollector::Zen,
            ],
            VersionStorageKind::DeltaNvm => {
                &[GarbageCollector::NoCollection, GarbageCollector::OneShot]
            }
            _ => &[],
        }
    }

    /// Every storage that keeps its versions in DRAM (and combines with every protocol and,
    /// but for 'coop', every collector), the default first.
    pub const ALL: [VersionStorageKind; 4] = [
        VersionStorageKind::Delta,
        VersionStorageKind::AppendNewestToOldest,
        VersionStorageKind::AppendOldestToNewest,
        VersionStorageKind::TimeTravel,
    ];

    /// Parses a name as printed by [`VersionStorageKind::name`].
    pub fn from_name(name: &str) -> Result<Self> {
        let every = || Self::ALL.into_iter().chain(Self::PERSISTENT_MEMORY);
        every()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| Error::UnsupportedConfiguration {
                reason: format!(
                    "unknown version storage {name:?}; known: {}",
                    every()
                        .map(VersionStorageKind::name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

/// How to open a database. `Options::default()` is in memory, Steam's collector, delta
/// storage, with an idle-garbage janitor waking every 10 ms.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// The garbage collector.
    pub garbage_collector: GarbageCollector,
    /// The version storage.
    pub version_storage: VersionStorageKind,
    /// The concurrency-control protocol.
    pub concurrency_control: ConcurrencyControl,
    /// How often a background thread finalizes garbage that idle threads left behind
    /// (Steam §4.2: "the scheduler periodically checks if threads have become inactive").
    /// Busy threads collect for themselves and for each other; this only matters when every
    /// thread stops. `None`: no background thread (call [`Database::collect_garbage`]).
    /// 'Hana' and 'Hekaton' have a background thread of their own instead and 'none'
    /// collects nothing, so for them the janitor does not run.
    pub idle_collection_interval: Option<std::time::Duration>,
    /// For the background collectors ('Hana', 'Hekaton', 'vac', 'coop', 'txn'): how often
    /// their thread runs. `None`: 1 ms for 'Hana', 'Hekaton' (the Steam paper's hand-tuned
    /// setting, Table 4) and 'coop'; 10 ms for 'vac' (Wu et al. give none); 40 ms for
    /// 'txn' (its epoch length, Peloton's).
    /// Setting it for another collector is refused at [`Database::open`].
    pub background_gc_period: Option<std::time::Duration>,
    /// For 'tb-collect': the length of its global epoch (TB §4.2: 40 ms, the default). A
    /// thread rebuilds its list of active snapshots when it meets a newer epoch, so this is
    /// how stale the collector's knowledge may grow. Setting it for another collector is
    /// refused at [`Database::open`].
    pub block_gc_epoch: Option<std::time::Duration>,
    /// For 'tb-collect': how it keeps long transactions' chains whole when it frees their
    /// blocks ([`ChainConsolidation`]; kept tiles by default, as TB-Collect). Anything but
    /// the default with another collector is refused at [`Database::open`].
    pub chain_consolidation: ChainConsolidation,
    /// For the epoch collectors ('Deuteronomy', 'Ermia'): how many commits pass between
    /// attempts to advance the global epoch. `None`: 100 for 'Deuteronomy', 1 for
    /// 'Ermia' (Table 4). Setting it for another collector is refused at [`Database::open`].
    pub epoch_advance_threshold: Option<u64>,
    /// How finalizing removes obsolete versions from a chain.
    pub version_removal: VersionRemoval,
    /// What secondary-index entries point at. Physical pointers need append-only storage
    /// (either order); `open` refuses them with any other.
    pub index_pointers: IndexPointers,
    /// How rows store Text and Bytes values of [`crate::research::NON_INLINE_MIN_BYTES`] or
    /// more (Wu et al. §4.1); every version storage supports each policy.
    pub non_inline: NonInline,
    /// How many separate memory spaces the version storage allocates from (Wu et al.
    /// §4.4): each thread takes its space by its number modulo this. `None` (the default):
    /// the process's allocator. Needs [`crate::research::MemorySpaces`] as the global
    /// allocator and at most [`crate::research::MAX_MEMORY_SPACES`]; `open` refuses
    /// otherwise.
    pub memory_spaces: Option<usize>,
    /// The directory of a persistent database (`None`: in memory, the default). See
    /// [`Options::path`].
    pub path: Option<std::path::PathBuf>,
    /// How durable a commit is when it returns; `None` means [`Durability::Sync`] (only
    /// with a path).
    pub durability: Option<Durability>,
    /// The file system a persistent database lives in (`None`: the operating system's).
    /// Tests give a [`crate::fs::SimulatedFileSystem`].
    pub file_system: Option<FileSystemHandle>,
    /// Take a checkpoint automatically each time the log grows by this many bytes since
    /// the last one, or by a quarter of the last checkpoint's size if that is more (so a
    /// large database is not rewritten back to back); `None`: only
    /// [`Database::checkpoint`]. Default 1 GiB ([`DEFAULT_CHECKPOINT_AFTER_LOG_BYTES`]).
    pub checkpoint_after_log_bytes: Option<u64>,
    /// The size of a log segment (default 64 MiB): a checkpoint frees the segments below
    /// its position.
    pub log_segment_bytes: u64,
    /// Whether a background thread zero-fills the next log segment ahead of time (default
    /// on): overwriting allocated blocks syncs faster than growing a file.
    pub preallocate_log_segments: bool,
    /// Whether a background thread makes deferred commits durable without a waiter
    /// (default on; see [`Transaction::commit_deferred`]). Off, a deferred commit becomes
    /// durable when a thread waits for it or for a later commit, or a leader's flush takes
    /// it; tests that replay the disk's operations exactly turn it off.
    pub log_flush_thread: bool,
    /// How many syncs of the log may be in flight at once (default 1, at least 1). With
    /// more, the next leader writes what was appended meanwhile and starts its own sync
    /// while earlier ones run; acknowledgements still follow the order the syncs were
    /// issued in. That helps on a disk that completes concurrent flushes in parallel; on
    /// the lab's VM each overlapping sync took about as much longer as the overlap saved,
    /// and TPC-B at 64 clients lost about 15% (`docs/lab-notebook.md`, "Overlapping log
    /// syncs"), so one at a time is the default.
    pub log_syncs_in_flight: usize,
    /// Threads that load a checkpoint and build its secondary indexes at open (default:
    /// the machine's parallelism).
    pub recovery_threads: Option<usize>,
    /// Threads that replay the log at open, each applying the operations of its share of
    /// the rows (split by primary key; default: `recovery_threads`).
    pub log_replay_threads: Option<usize>,
    /// For Verso's own crash tests only: a bug to plant in the durability protocols, to
    /// show that the tests catch it. Never set it otherwise.
    #[doc(hidden)]
    pub planted_bug: Option<PlantedBug>,
    /// The persistent-memory region of a storage that keeps its versions in one
    /// ([`VersionStorageKind::PERSISTENT_MEMORY`]); `None`: [`crate::pmem::PmOptions`]'s
    /// default (a file on `/dev/shm`). Refused with the other storages.
    pub persistent_memory: Option<crate::pmem::PmOptions>,
    /// The directory of a disk database (`None`: the in-memory engine). See
    /// [`Options::disk`].
    pub disk: Option<std::path::PathBuf>,
    /// The disk engine's buffer pool, in bytes ([`DEFAULT_BUFFER_POOL_BYTES`] by default).
    pub buffer_pool_bytes: usize,
    /// Which page the disk engine's buffer pool evicts ([`Options::buffer_pool_eviction`]).
    pub buffer_pool_eviction: crate::disk::ReplacementPolicy,
    /// Whether the disk engine's page files bypass the OS page cache
    /// ([`Options::direct_io`]).
    pub direct_io: bool,
    /// How often the disk engine's autovacuum wakes to vacuum the tables past their
    /// dead-tuple threshold (`None`: never; vacuum runs only from
    /// [`Database::collect_garbage`]). Default 60 s, PostgreSQL's `autovacuum_naptime`.
    pub autovacuum_naptime: Option<std::time::Duration>,
    /// Where the disk engine's heap puts new versions: PostgreSQL's placement (the
    /// default) or SI-CV's co-located pages. See [`Options::version_placement`].
    pub version_placement: VersionPlacement,
    /// The disk engine's version organization: PostgreSQL's heap (the default) or InnoDB's
    /// clustered tree with undo. See [`Options::disk_storage`].
    pub disk_storage: crate::disk::DiskStorage,
    /// How long InnoDB's purge leaves a committed undo log before it may purge it. See
    /// [`Options::purge_delay`].
    pub purge_delay: std::time::Duration,
}

/// The default of [`Options::buffer_pool_bytes`]: 128 MiB, PostgreSQL's default
/// `shared_buffers`.
pub const DEFAULT_BUFFER_POOL_BYTES: usize = 128 << 20;

/// A bug the crash tests plant to show they catch it ([`Options::planted_bug`]).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PlantedBug {
    /// `Sync` acknowledges a commit once its record is written, before the sync.
    AcknowledgeBeforeSync,
    /// New log segments and the manifest are renamed or created without syncing their
    /// directory.
    RenameWithoutDirectorySync,
}

/// The default of [`Options::log_syncs_in_flight`](Options#structfield.log_syncs_in_flight).
pub const DEFAULT_LOG_SYNCS_IN_FLIGHT: usize = 1;

/// The default threshold of [`Options::checkpoint_after_log_bytes`]: 1 GiB, as
/// PostgreSQL's `max_wal_size`. Every checkpoint rewrites the whole database while the
/// writers run, and its scan competes with them for the caches: at 256 MiB a one-worker
/// TPC-C under `Sync` lost 6% to checkpoints every 6 s (`docs/lab-notebook.md`). Recovery
/// replays at most this much log (or a quarter of the checkpoint's size, if more).
pub const DEFAULT_CHECKPOINT_AFTER_LOG_BYTES: u64 = 1 << 30;
/// The default [`Options::log_segment_bytes`].
pub const DEFAULT_LOG_SEGMENT_BYTES: u64 = 64 << 20;

impl Default for Options {
    fn default() -> Self {
        Options {
            garbage_collector: GarbageCollector::default(),
            version_storage: VersionStorageKind::default(),
            concurrency_control: ConcurrencyControl::default(),
            idle_collection_interval: Some(std::time::Duration::from_millis(10)),
            background_gc_period: None,
            block_gc_epoch: None,
            epoch_advance_threshold: None,
            version_removal: VersionRemoval::default(),
            chain_consolidation: ChainConsolidation::default(),
            index_pointers: IndexPointers::default(),
            non_inline: NonInline::default(),
            memory_spaces: None,
            path: None,
            durability: None,
            file_system: None,
            checkpoint_after_log_bytes: Some(DEFAULT_CHECKPOINT_AFTER_LOG_BYTES),
            log_segment_bytes: DEFAULT_LOG_SEGMENT_BYTES,
            preallocate_log_segments: true,
            log_flush_thread: true,
            log_syncs_in_flight: DEFAULT_LOG_SYNCS_IN_FLIGHT,
            recovery_threads: None,
            log_replay_threads: None,
            planted_bug: None,
            persistent_memory: None,
            disk: None,
            buffer_pool_bytes: DEFAULT_BUFFER_POOL_BYTES,
            buffer_pool_eviction: crate::disk::ReplacementPolicy::default(),
            direct_io: false,
            autovacuum_naptime: Some(std::time::Duration::from_secs(60)),
            version_placement: VersionPlacement::default(),
            disk_storage: crate::disk::DiskStorage::default(),
            purge_delay: std::time::Duration::ZERO,
        }
    }
}

impl Options {
    /// Options with this garbage collector.
    pub fn garbage_collector(mut self, gc: GarbageCollector) -> Self {
        self.garbage_collector = gc;
        self
    }

    /// Options with this idle-collection interval (`None`: no background thread).
    pub fn idle_collection_interval(mut self, interval: Option<std::time::Duration>) -> Self {
        self.idle_collection_interval = interval;
        self
    }

    /// Options with this version storage.
    pub fn version_storage(mut self, storage: VersionStorageKind) -> Self {
        self.version_storage = storage;
        self
    }

    /// Options with this concurrency-control protocol.
    pub fn concurrency_control(mut self, protocol: ConcurrencyControl) -> Self {
        self.concurrency_control = protocol;
        self
    }

    /// Options with this period for the background collector's thread ('Hana', 'Hekaton',
    /// 'vac', 'coop', 'txn').
    pub fn background_gc_period(mut self, period: std::time::Duration) -> Self {
        self.background_gc_period = Some(period);
        self
    }

    /// Options with this global epoch for 'tb-collect'.
    pub fn block_gc_epoch(mut self, epoch: std::time::Duration) -> Self {
        self.block_gc_epoch = Some(epoch);
        self
    }

    /// Options with this chain consolidation for 'tb-collect' (TB-Collect-hash:
    /// [`ChainConsolidation::HashIndex`]).
    pub fn chain_consolidation(mut self, consolidation: ChainConsolidation) -> Self {
        self.chain_consolidation = consolidation;
        self
    }

    /// Options with this many commits between epoch advances ('Deuteronomy', 'Ermia').
    pub fn epoch_advance_threshold(mut self, commits: u64) -> Self {
        self.epoch_advance_threshold = Some(commits);
        self
    }

    /// Options with this way of removing obsolete versions.
    pub fn version_removal(mut self, removal: VersionRemoval) -> Self {
        self.version_removal = removal;
        self
    }

    /// Options with these index pointers.
    pub fn index_pointers(mut self, pointers: IndexPointers) -> Self {
        self.index_pointers = pointers;
        self
    }

    /// Options with this way of storing long values (Wu et al. §4.1's non-inline
    /// attributes).
    pub fn non_inline(mut self, non_inline: NonInline) -> Self {
        self.non_inline = non_inline;
        self
    }

    /// Options with the version storage allocating from `spaces` separate memory spaces
    /// (Wu et al. §4.4; needs [`crate::research::MemorySpaces`] as the global allocator).
    pub fn memory_spaces(mut self, spaces: usize) -> Self {
        self.memory_spaces = Some(spaces);
        self
    }

    /// Options for a persistent database in directory `dir`, created if it does not exist:
    /// tables, schemas, indexes and every acknowledged commit survive a crash and a
    /// restart (how durable a commit is when it returns: [`Options::durability`], `Sync`
    /// by default). One process at a time: a second `open` of the same directory fails
    /// with [`Error::DatabaseLocked`].
    pub fn path(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.path = Some(dir.into());
        self
    }

    /// Options for a database of the disk engine in directory `dir`, created if it does
    /// not exist: data larger than memory, in 8 KiB pages cached in a buffer pool
    /// ([`Options::buffer_pool`]), with PostgreSQL's version storage (whole-tuple versions
    /// in heap files, HOT updates, B+-tree indexes, a commit log) and its autovacuum,
    /// every change in a page log (durable as [`Options::durability`] says, `Sync` by
    /// default). Pages are pruned by Steam's eager rule by default (every version no
    /// active snapshot sees, on page access and in vacuum: [`GarbageCollector::Steam`]);
    /// [`GarbageCollector::Vacuum`] keeps PostgreSQL's (versions below the oldest
    /// snapshot only). Both isolation levels. The in-memory engine's other design choices
    /// (storage, other collectors, protocol) are refused at [`Database::open`]. One
    /// process at a time, as [`Options::path`].
    pub fn disk(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.disk = Some(dir.into());
        self
    }

    /// Options with a buffer pool of this many bytes (the disk engine only).
    pub fn buffer_pool(mut self, bytes: usize) -> Self {
        self.buffer_pool_bytes = bytes;
        self
    }

    /// Options with this eviction policy in the buffer pool (the disk engine only; CLOCK by
    /// default, as PostgreSQL's clock sweep; docs/design/buffer-pool.md says how the
    /// policies compare on TPC-C).
    pub fn buffer_pool_eviction(mut self, policy: crate::disk::ReplacementPolicy) -> Self {
        self.buffer_pool_eviction = policy;
        self
    }

    /// Options with the disk engine's page files (heaps, free-space maps, indexes, the
    /// commit log) read and written with direct I/O (`O_DIRECT`, Linux), around the
    /// operating system's page cache, so that a page the buffer pool evicts or misses is
    /// a device write or read, not a copy into or out of the kernel's memory (what SI-CV's
    /// experiments measure). Durability is unchanged: syncs still make writes durable.
    /// Off by default. The disk engine only; a file system that cannot do it fails
    /// [`Database::open`] with [`Error::Io`].
    pub fn direct_io(mut self, direct: bool) -> Self {
        self.direct_io = direct;
        self
    }

    /// Options with this placement of new versions in the disk engine's heap (the disk
    /// engine only; refused on the in-memory engine).
    ///
    /// [`VersionPlacement::PostgreSql`], the default, is PostgreSQL's: an update's new
    /// version on its predecessor's page when it fits (HOT), else the last insert's page,
    /// a page the free-space map offers or a new one, whoever else writes there.
    /// [`VersionPlacement::CoLocated`] is SI-CV's (Gottstein et al., "SI-CV: Snapshot
    /// Isolation With Co-Located Versions"): each writing transaction places its new
    /// versions on page(s) of its own (taken at its first new version in a table, from
    /// the free-space map among pages no live transaction owns, or new), given back to
    /// the map at its end; read-only transactions take none. Visibility, first-updater-wins,
    /// pruning and vacuum are unchanged; an update is HOT only onto the updater's own page.
    /// [`VersionPlacement::CoLocatedHot`] is SI-CV's with HOT kept: an update that fits its
    /// predecessor's page and changes no indexed column claims that page when no live
    /// transaction owns it, and stays there. `docs/design/buffer-pool.md`, "SI-CV's
    /// co-located placement", has the choices the paper leaves open (HOT, flushing, the
    /// Barray).
    pub fn version_placement(mut self, placement: VersionPlacement) -> Self {
        self.version_placement = placement;
        self
    }

    /// Options with this version organization in the disk engine (the disk engine only;
    /// refused on the in-memory engine). A database keeps the storage it was created with:
    /// opening it with the other is refused with [`Error::UnsupportedConfiguration`].
    ///
    /// [`crate::disk::DiskStorage::Heap`], the default, is PostgreSQL's (see
    /// [`Options::disk`]). [`crate::disk::DiskStorage::Undo`] is InnoDB's, the other
    /// "vanilla" of DIVA: each row's newest version in place in a clustered B+-tree (the
    /// primary index), with its creator and a roll pointer; an update or delete first
    /// writes the before-image of the changed span as an undo record on its transaction's
    /// own undo pages, so older versions chain newest to oldest through undo, which a
    /// reader applies backwards (a page read per hop when not cached); secondary indexes
    /// hold the primary key and a delete mark; a background purge (the autovacuum worker,
    /// every second at most) frees the undo of transactions every snapshot has passed,
    /// and removes delete-marked rows and entries; an abort, and recovery after a crash,
    /// roll the in-place changes back. Rows are limited to what a B+-tree leaf entry
    /// holds ([`crate::disk::MAX_BTREE_ENTRY_BYTES`] with the key). Under
    /// [`GarbageCollector::Vacuum`] purge alone reclaims undo (InnoDB's, by the oldest
    /// snapshot); under [`GarbageCollector::Steam`] (the default) a transaction's first
    /// change of a row also prunes the row's undo chain by Steam's rule: only versions some
    /// snapshot, running or future, sees are kept (written again, merged), the rest
    /// unlinked, and an undo page whose records were all unlinked is freed before purge
    /// reaches it, so a long reader does not pin every undo record written after it.
    pub fn disk_storage(mut self, storage: crate::disk::DiskStorage) -> Self {
        self.disk_storage = storage;
        self
    }

    /// Options with InnoDB's purge delayed: a committed transaction's undo waits this long
    /// in the history list before purge may take it, as DIVA's experiments delay purge
    /// (`innodb_max_purge_lag`). Zero (the default): purge takes it as soon as every
    /// snapshot has passed it. [`crate::disk::DiskStorage::Undo`] only;
    /// [`Database::collect_garbage`] purges without the delay.
    pub fn purge_delay(mut self, delay: std::time::Duration) -> Self {
        self.purge_delay = delay;
        self
    }

    /// Options with this autovacuum naptime (the disk engine only; `None`: no autovacuum).
    pub fn autovacuum_naptime(mut self, naptime: Option<std::time::Duration>) -> Self {
        self.autovacuum_naptime = naptime;
        self
    }

    /// Options with this durability level (a persistent database only).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Options with this persistent-memory region (a storage that keeps its versions in
    /// one only).
    pub fn persistent_memory(mut self, options: crate::pmem::PmOptions) -> Self {
        self.persistent_memory = Some(options);
        self
    }

    /// Options with this file system (a persistent database only).
    pub fn file_system(mut self, fs: std::sync::Arc<dyn crate::fs::FileSystem>) -> Self {
        self.file_system = Some(FileSystemHandle::new(fs));
        self
    }

    /// Options with automatic checkpoints every `bytes` of log (`None`: never).
    pub fn checkpoint_after_log_bytes(mut self, bytes: Option<u64>) -> Self {
        self.checkpoint_after_log_bytes = bytes;
        self
    }

    /// Options with log segments of this size.
    pub fn log_segment_bytes(mut self, bytes: u64) -> Self {
        self.log_segment_bytes = bytes;
        self
    }

    /// Options with (or without) segments zero-filled ahead of time.
    pub fn preallocate_log_segments(mut self, preallocate: bool) -> Self {
        self.preallocate_log_segments = preallocate;
        self
    }

    /// Options with (or without) the flusher thread of deferred commits.
    pub fn log_flush_thread(mut self, on: bool) -> Self {
        self.log_flush_thread = on;
        self
    }

    /// Options allowing `syncs` (at least 1) log syncs in flight at once; see
    /// [`Options::log_syncs_in_flight`](Options#structfield.log_syncs_in_flight).
    pub fn log_syncs_in_flight(mut self, syncs: usize) -> Self {
        self.log_syncs_in_flight = syncs.max(1);
        self
    }

    /// The durability level in force: the one set, `Sync` with a path, `None` for an
    /// in-memory database (which keeps nothing).
    pub fn effective_durability(&self) -> Option<Durability> {
        self.path
            .as_ref()
            .or(self.disk.as_ref())
            .map(|_| self.durability.unwrap_or_default())
    }

    /// The disk engine's checks: it has one design so far (PostgreSQL's heap, vacuum,
    /// snapshot isolation), so the in-memory engine's choices are refused, not ignored.
    fn validate_disk(&self) -> Result<()> {
        let refuse = |reason: String| Err(Error::UnsupportedConfiguration { reason });
        let defaults = Options::default();
        let in_memory_only = [
            (
                self.path.is_some(),
                "Options::path (the disk engine takes its directory from Options::disk)",
            ),
            (
                self.version_storage != defaults.version_storage,
                "a version storage (the disk engine keeps PostgreSQL's heap)",
            ),
            (
                !matches!(
                    self.garbage_collector,
                    GarbageCollector::Steam | GarbageCollector::Vacuum
                ),
                "a garbage collector other than Steam (eager pruning on pages, and vacuum) \
                 or Vacuum (PostgreSQL's vacuum and pruning by the horizon alone)",
            ),
            (
                self.concurrency_control != defaults.concurrency_control,
                "a concurrency-control protocol (the disk engine runs snapshot isolation)",
            ),
            (
                self.index_pointers != defaults.index_pointers,
                "index pointers (the disk engine's index entries point at chain roots)",
            ),
            (self.non_inline != defaults.non_inline, "out-of-line values"),
            (self.memory_spaces.is_some(), "memory spaces"),
            (
                self.persistent_memory.is_some(),
                "a persistent-memory region",
            ),
            (
                self.background_gc_period.is_some(),
                "a background collection period",
            ),
            (self.planted_bug.is_some(), "a planted bug"),
        ];
        if self.disk_storage == crate::disk::DiskStorage::Undo
            && self.version_placement != VersionPlacement::default()
        {
            return refuse(format!(
                "a version placement ('{}') applies only to the heap; InnoDB's design \
                 (DiskStorage::Undo) updates rows in place",
                self.version_placement.name()
            ));
        }
        if let Some((_, what)) = in_memory_only.iter().find(|(set, _)| *set) {
            return refuse(format!("the disk engine does not take {what}"));
        }
        let min = 16 * crate::disk::PAGE_SIZE;
        if self.buffer_pool_bytes < min {
            return refuse(format!(
                "a buffer pool of {} bytes is too small: at least {min} (16 pages)",
                self.buffer_pool_bytes
            ));
        }
        if self.autovacuum_naptime.is_some_and(|n| n.is_zero()) {
            return refuse("the autovacuum naptime must be longer than zero".into());
        }
        Ok(())
    }

    /// What a persistent-memory storage refuses (see [`VersionStorageKind::TileBlock`]).
    fn validate_persistent_memory(&self) -> Result<()> {
        let storage = self.version_storage.name();
        let refuse = |reason: String| Err(Error::UnsupportedConfiguration { reason });
        if self.concurrency_control != ConcurrencyControl::Mvto {
            return refuse(format!(
                "{storage} runs under MVTO only, not {} (TB-Collect §4.2: a writer's id must be \
                 its commit timestamp when it marks a block's metadata line, which only MVTO \
                 gives; its commit is made durable in MVTO's commit)",
                self.concurrency_control.name()
            ));
        }
        let collectors = self.version_storage.persistent_memory_collectors();
        if !collectors.contains(&self.garbage_collector) {
            let why = match self.version_storage {
                VersionStorageKind::TileBlock => {
                    "it is collected block by block; a collector that unlinks single versions \
                     frees nothing of a block"
                }
                VersionStorageKind::DeltaNvm => {
                    "it stands for OneShot's storage (§5.1 Table 2: partition clearing over \
                     delta NVM storage), whose old versions go with their partitions"
                }
                _ => {
                    "those are the collectors of TB-Collect's baselines it stands for (§5.1 \
                     Table 2: Steam, N2DB and Zen over append-only NVM storage)"
                }
            };
            return refuse(format!(
                "{storage} runs under the collectors {} only, not {}: {why}",
                collectors
                    .iter()
                    .map(|gc| gc.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.garbage_collector.name()
            ));
        }
        if matches!(
            self.version_storage,
            VersionStorageKind::AppendNvm | VersionStorageKind::DeltaNvm
        ) && self.path.is_some()
        {
            return refuse(format!(
                "{storage} recovers nothing from its region (it writes no commit records; it \
                 exists to measure TB-Collect's baselines), so a database of it stays in \
                 memory: no path"
            ));
        }
        if self.non_inline != NonInline::Packed {
            return refuse(format!(
                "{storage} stores every value inline (packed): its versions live in the \
                 persistent-memory region, which cannot hold pointers into DRAM, not {}",
                self.non_inline.name()
            ));
        }
        if self.memory_spaces.is_some() {
            return refuse(format!(
                "{storage} allocates its versions in its persistent-memory region, not in \
                 memory spaces"
            ));
        }
        if let Some(durability) = self.durability {
            if durability != Durability::Sync {
                return refuse(format!(
                    "{storage} persists every commit in its persistent-memory region before \
                     the commit is visible (TB-Collect §4.3), which is Durability::Sync; it has \
                     no log to sync later, so {durability:?} does not apply"
                ));
            }
        }
        let pm = self.persistent_memory.clone().unwrap_or_default();
        if pm.slots_per_block == 0 || pm.slots_per_block > crate::pmem::layout::SLOTS_PER_BLOCK {
            return refuse(format!(
                "{} slots per block: 1 to {}",
                pm.slots_per_block,
                crate::pmem::layout::SLOTS_PER_BLOCK
            ));
        }
        Ok(())
    }

    /// Refuses settings that cannot work or do not apply to the chosen collector, with
    /// [`Error::UnsupportedConfiguration`] saying why: what [`Database::open`] checks first,
    /// without opening anything (a tool that runs several configurations can refuse a bad
    /// one before it runs the first).
    pub fn validate(&self) -> Result<()> {
        let gc = self.garbage_collector;
        let refuse = |reason: String| Err(Error::UnsupportedConfiguration { reason });
        if let Some(storage) = gc.required_storage() {
            if self.version_storage != storage {
                let why = match gc {
                    GarbageCollector::TbCollect => {
                        "it frees whole blocks of versions, and only that storage keeps its \
                         versions in blocks (TB-Collect §4.1)"
                    }
                    GarbageCollector::Tvcp | GarbageCollector::Zen => {
                        "it is one of TB-Collect's baselines, which run over append-only \
                         storage with version headers in persistent memory (§5.1 Table 2)"
                    }
                    GarbageCollector::OneShot => {
                        "it releases whole partitions of old versions, and only that storage \
                         keeps its old versions apart from the newest, in partitions (TB \
                         §2.3.3: OneShotGC \"requires the latest versions and old versions to \
                         be stored in different table heaps\")"
                    }
                    _ => {
                        "cooperative cleaning spots obsolete versions as walks pass them, and \
                         only a chain walked from its oldest version passes them (Wu et al. \
                         §5.1)"
                    }
                };
                return refuse(format!(
                    "the {} collector needs the {} version storage, not {}: {why}",
                    gc.name(),
                    storage.name(),
                    self.version_storage.name()
                ));
            }
        }
        if self.version_storage.uses_persistent_memory() {
            self.validate_persistent_memory()?;
        } else if self.persistent_memory.is_some() {
            return refuse(format!(
                "a persistent-memory region is for the storages that keep their versions in \
                 one ({}), not {}",
                VersionStorageKind::PERSISTENT_MEMORY
                    .map(VersionStorageKind::name)
                    .join(", "),
                self.version_storage.name()
            ));
        }
        if self.index_pointers == IndexPointers::Physical
            && !matches!(
                self.version_storage,
                VersionStorageKind::AppendNewestToOldest | VersionStorageKind::AppendOldestToNewest
            )
        {
            return refuse(format!(
                "physical index pointers need append-only storage (append-n2o or append-o2n), \
                 not {}: an entry holds one exact version, which must stay where it is while \
                 the row changes (Wu et al. §6.2: only append-only storage keeps every version \
                 in a place of its own). Delta and time-travel rewrite the newest version in \
                 place",
                self.version_storage.name()
            ));
        }
        if let Some(spaces) = self.memory_spaces {
            if !(1..=crate::research::MAX_MEMORY_SPACES).contains(&spaces) {
                return refuse(format!(
                    "memory spaces must number 1 to {}, not {spaces}",
                    crate::research::MAX_MEMORY_SPACES
                ));
            }
            if !cfg!(target_os = "linux") {
                return refuse(
                    "memory spaces run on Linux only (their region is reserved with mmap, and \
                     their locks must never allocate)"
                        .into(),
                );
            }
            if !crate::research::memory_spaces_installed() {
                return refuse(
                    "memory spaces need verso::MemorySpaces as the process's global allocator \
                     (#[global_allocator]); the version storage's allocations go through it"
                        .into(),
                );
            }
        }
        if self.idle_collection_interval == Some(std::time::Duration::ZERO) {
            return refuse("the idle-collection interval must be longer than zero".into());
        }
        if let Some(epoch) = self.block_gc_epoch {
            if gc != GarbageCollector::TbCollect {
                return refuse(format!(
                    "a block-level GC epoch applies only to tb-collect, not to {}",
                    gc.name()
                ));
            }
            if epoch.is_zero() {
                return refuse("the block-level GC epoch must be longer than zero".into());
            }
        }
        if self.chain_consolidation != ChainConsolidation::default()
            && gc != GarbageCollector::TbCollect
        {
            return refuse(format!(
                "chain consolidation '{}' applies only to tb-collect, not to {}",
                self.chain_consolidation.name(),
                gc.name()
            ));
        }
        if let Some(period) = self.background_gc_period {
            if !gc.runs_in_background() {
                return refuse(format!(
                    "a background GC period applies only to the background collectors \
                     (hana, hekaton, vac, coop, txn, zen), not to {}",
                    gc.name()
                ));
            }
            if period.is_zero() {
                return refuse("the background GC period must be longer than zero".into());
            }
        }
        if self.disk.is_some() {
            self.validate_disk()?;
        } else if self.buffer_pool_bytes != DEFAULT_BUFFER_POOL_BYTES {
            return refuse(
                "a buffer pool size applies only to the disk engine: set Options::disk".into(),
            );
        } else if self.buffer_pool_eviction != crate::disk::ReplacementPolicy::default() {
            return refuse(
                "a buffer pool eviction policy applies only to the disk engine: set \
                 Options::disk"
                    .into(),
            );
        } else if self.direct_io {
            return refuse(
                "direct I/O applies only to the disk engine's page files: set Options::disk".into(),
            );
        } else if self.version_placement != VersionPlacement::default() {
            return refuse(format!(
                "a version placement ('{}') applies only to the disk engine's heap: set \
                 Options::disk",
                self.version_placement.name()
            ));
        } else if self.disk_storage != crate::disk::DiskStorage::default() {
            return refuse(format!(
                "a disk storage ('{}') applies only to the disk engine: set Options::disk",
                self.disk_storage.name()
            ));
        }
        if !self.purge_delay.is_zero() && self.disk_storage != crate::disk::DiskStorage::Undo {
            return refuse(
                "a purge delay applies only to InnoDB's design: set \
                 Options::disk_storage(DiskStorage::Undo)"
                    .into(),
            );
        }
        if self.path.is_none() && self.disk.is_none() {
            let persistent_only = [
                (self.durability.is_some(), "a durability level"),
                (self.file_system.is_some(), "a file system"),
            ];
            if let Some((_, what)) = persistent_only.iter().find(|(set, _)| *set) {
                return refuse(format!(
                    "{what} applies only to a persistent database: set Options::path"
                ));
            }
        }
        if let Some(Durability::Async { interval }) = self.durability {
            if interval.is_zero() {
                return refuse("the Async durability interval must be longer than zero".into());
            }
        }
        if self.log_segment_bytes < 4096 {
            return refuse(format!(
                "log segments of {} bytes are too small; at least 4096",
                self.log_segment_bytes
            ));
        }
        if self.checkpoint_after_log_bytes == Some(0) {
            return refuse("the automatic checkpoint threshold must be above zero bytes".into());
        }
        if self.recovery_threads == Some(0) {
            return refuse("recovery needs at least one thread".into());
        }
        if self.log_replay_threads == Some(0) {
            return refuse("log replay needs at least one thread".into());
        }
        if let Some(threshold) = self.epoch_advance_threshold {
            if !gc.uses_epochs() {
                return refuse(format!(
                    "an epoch-advance threshold applies only to the epoch collectors \
                     (deuteronomy, ermia), not to {}",
                    gc.name()
                ));
            }
            if threshold == 0 {
                return refuse("the epoch-advance threshold must be at least one commit".into());
            }
        }
        Ok(())
    }
}

/// A table's handle, returned by [`Database::create_table`] and [`Database::table`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TableId {
    pub(crate) index: u32,
    pub(crate) database: u32,
}

/// A range of primary-key (or secondary-index key) *prefixes*. A bound with fewer values
/// than the key has columns stands for every key that starts with it: `..=[a]` includes all
/// keys starting with `a`, `..[a]` excludes them, `[a]..` starts at the first of them.
///
/// Scans visit a range in ascending key order, or in descending order once
/// [`KeyRange::descending`] is called: "the latest order of a customer" is the first row of
/// a descending scan, found without reading the customer's older orders.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRange {
    pub(crate) start: Bound<Vec<Value>>,
    pub(crate) end: Bound<Vec<Value>>,
    pub(crate) descending: bool,
}

impl KeyRange {
    /// From any range of key vectors: `..`, `a..b`, `a..=b`, `a..`, `..b`.
    pub fn new(range: impl RangeBounds<Vec<Value>>) -> Self {
        KeyRange {
            start: range.start_bound().cloned(),
            end: range.end_bound().cloned(),
            descending: false,
        }
    }

    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: Vec<Value>) -> Self {
        KeyRange {
            start: Bound::Included(prefix.clone()),
            end: Bound::Included(prefix),
            descending: false,
        }
    }

    /// The same keys, scanned from the largest down. A scan that stops early records for
    /// serializable validation only the keys from where it stopped to the range's end (the
    /// protocols that publish a scan's predicate before it runs, MVTO and MV2PL's, publish
    /// the whole range, whichever the direction).
    pub fn descending(mut self) -> Self {
        self.descending = true;
        self
    }

    /// Whether scans of this range visit keys from the largest down.
    pub fn is_descending(&self) -> bool {
        self.descending
    }
}

/// Every scan takes any range of key prefixes (`..`, `a..b`, `a..=b`, `a..`, `..b`) as well
/// as a [`KeyRange`].
impl<R: RangeBounds<Vec<Value>>> From<R> for KeyRange {
    fn from(range: R) -> Self {
        KeyRange::new(range)
    }
}

/// One engine per supported storage × collector pair (the protocol is a run-time value of
/// the engine), so the hot path is monomorphized; `on_engine!` / `on_txn!` dispatch once per call.
// Named collector, then storage.
#[allow(clippy::enum_variant_names)]
enum AnyEngine {
    SteamDelta(Engine<DeltaStorage, Steam>),
    WatermarkDelta(Engine<DeltaStorage, WatermarkOnly>),
    HanaDelta(Engine<DeltaStorage, Hana>),
    HekatonDelta(Engine<DeltaStorage, Hekaton>),
    DeuteronomyDelta(Engine<DeltaStorage, Deuteronomy>),
    ErmiaDelta(Engine<DeltaStorage, Ermia>),
    NoneDelta(Engine<DeltaStorage, NoCollection>),
    SteamAppend(Engine<AppendStorage, Steam>),
    WatermarkAppend(Engine<AppendStorage, WatermarkOnly>),
    HanaAppend(Engine<AppendStorage, Hana>),
    HekatonAppend(Engine<AppendStorage, Hekaton>),
    DeuteronomyAppend(Engine<AppendStorage, Deuteronomy>),
    ErmiaAppend(Engine<AppendStorage, Ermia>),
    NoneAppend(Engine<AppendStorage, NoCollection>),
    SteamAppendO2n(Engine<AppendO2nStorage, Steam>),
    WatermarkAppendO2n(Engine<AppendO2nStorage, WatermarkOnly>),
    HanaAppendO2n(Engine<AppendO2nStorage, Hana>),
    HekatonAppendO2n(Engine<AppendO2nStorage, Hekaton>),
    DeuteronomyAppendO2n(Engine<AppendO2nStorage, Deuteronomy>),
    ErmiaAppendO2n(Engine<AppendO2nStorage, Ermia>),
    NoneAppendO2n(Engine<AppendO2nStorage, NoCollection>),
    SteamTimeTravel(Engine<TimeTravelStorage, Steam>),
    WatermarkTimeTravel(Engine<TimeTravelStorage, WatermarkOnly>),
    HanaTimeTravel(Engine<TimeTravelStorage, Hana>),
    HekatonTimeTravel(Engine<TimeTravelStorage, Hekaton>),
    DeuteronomyTimeTravel(Engine<TimeTravelStorage, Deuteronomy>),
    ErmiaTimeTravel(Engine<TimeTravelStorage, Ermia>),
    NoneTimeTravel(Engine<TimeTravelStorage, NoCollection>),
    NoneTileBlock(Engine<TileBlockStorage, NoCollection>),
    TbCollectTileBlock(Engine<TileBlockStorage, TbCollect>),
    NoneAppendNvm(Engine<AppendNvmStorage, NoCollection>),
    TvcpAppendNvm(Engine<AppendNvmStorage, Tvcp>),
    ZenAppendNvm(Engine<AppendNvmStorage, Zen>),
    NoneDeltaNvm(Engine<DeltaNvmStorage, NoCollection>),
    OneShotDeltaNvm(Engine<DeltaNvmStorage, OneShot>),
    VacDelta(Engine<DeltaStorage, Vacuum>),
    VacAppend(Engine<AppendStorage, Vacuum>),
    VacAppendO2n(Engine<AppendO2nStorage, Vacuum>),
    VacTimeTravel(Engine<TimeTravelStorage, Vacuum>),
    CoopAppendO2n(Engine<AppendO2nStorage, Cooperative>),
    TxnDelta(Engine<DeltaStorage, TxnEpochs>),
    TxnAppend(Engine<AppendStorage, TxnEpochs>),
    TxnAppendO2n(Engine<AppendO2nStorage, TxnEpochs>),
    TxnTimeTravel(Engine<TimeTravelStorage, TxnEpochs>),
    /// The disk engine (`Options::disk`): its own engine type, with the same operations.
    Disk(Arc<crate::disk::engine::DiskEngine>),
}

/// Runs `$body` with `$engine` bound to whichever engine `$any` holds: each in-memory
/// engine, and the disk engine, which has methods of the same names.
macro_rules! on_engine {
    ($any:expr, $engine:ident => $body:expr) => {
        on_memory_engine!($any, $engine => $body, disk $engine => $body)
    };
}

/// [`on_engine!`] with the disk engine's arm apart, for a body that only the in-memory
/// engines can run (a function generic over their storage and collector).
macro_rules! on_memory_engine {
    ($any:expr, $engine:ident => $body:expr, disk $disk:ident => $disk_body:expr) => {
        match $any {
            AnyEngine::Disk($disk) => $disk_body,
            AnyEngine::SteamDelta($engine) => $body,
            AnyEngine::WatermarkDelta($engine) => $body,
            AnyEngine::HanaDelta($engine) => $body,
            AnyEngine::HekatonDelta($engine) => $body,
            AnyEngine::DeuteronomyDelta($engine) => $body,
            AnyEngine::ErmiaDelta($engine) => $body,
            AnyEngine::NoneDelta($engine) => $body,
            AnyEngine::SteamAppend($engine) => $body,
            AnyEngine::WatermarkAppend($engine) => $body,
            AnyEngine::HanaAppend($engine) => $body,
            AnyEngine::HekatonAppend($engine) => $body,
            AnyEngine::DeuteronomyAppend($engine) => $body,
            AnyEngine::ErmiaAppend($engine) => $body,
            AnyEngine::NoneAppend($engine) => $body,
            AnyEngine::SteamAppendO2n($engine) => $body,
            AnyEngine::WatermarkAppendO2n($engine) => $body,
            AnyEngine::HanaAppendO2n($engine) => $body,
            AnyEngine::HekatonAppendO2n($engine) => $body,
            AnyEngine::DeuteronomyAppendO2n($engine) => $body,
            AnyEngine::ErmiaAppendO2n($engine) => $body,
            AnyEngine::NoneAppendO2n($engine) => $body,
            AnyEngine::SteamTimeTravel($engine) => $body,
            AnyEngine::WatermarkTimeTravel($engine) => $body,
            AnyEngine::HanaTimeTravel($engine) => $body,
            AnyEngine::HekatonTimeTravel($engine) => $body,
            AnyEngine::DeuteronomyTimeTravel($engine) => $body,
            AnyEngine::ErmiaTimeTravel($engine) => $body,
            AnyEngine::NoneTimeTravel($engine) => $body,
            AnyEngine::NoneTileBlock($engine) => $body,
            AnyEngine::TbCollectTileBlock($engine) => $body,
            AnyEngine::NoneAppendNvm($engine) => $body,
            AnyEngine::TvcpAppendNvm($engine) => $body,
            AnyEngine::ZenAppendNvm($engine) => $body,
            AnyEngine::NoneDeltaNvm($engine) => $body,
            AnyEngine::OneShotDeltaNvm($engine) => $body,
            AnyEngine::VacDelta($engine) => $body,
            AnyEngine::VacAppend($engine) => $body,
            AnyEngine::VacAppendO2n($engine) => $body,
            AnyEngine::VacTimeTravel($engine) => $body,
            AnyEngine::CoopAppendO2n($engine) => $body,
            AnyEngine::TxnDelta($engine) => $body,
            AnyEngine::TxnAppend($engine) => $body,
            AnyEngine::TxnAppendO2n($engine) => $body,
            AnyEngine::TxnTimeTravel($engine) => $body,
        }
    };
}

/// An open database. Cheap to clone (all clones share the same data); `Send + Sync`.
#[derive(Clone)]
pub struct Database {
    engine: Arc<AnyEngine>,
    options: Arc<Options>,
    /// The directory, log and checkpoints of a persistent database.
    persistence: Option<Arc<Persistence>>,
    /// The directory of a persistent database whose storage keeps its data itself (the
    /// tile-block storage's region file; its lock is the storage's, released when the
    /// storage is dropped: nothing of this process writes into the region after that).
    region_directory: Option<Arc<std::path::PathBuf>>,
    /// Stops the database's collector threads (`close`).
    collector_threads: Arc<CollectorThreads>,
}

/// What stops the collector threads: a flag, and the lock each round holds, so that the
/// one who sets the flag can wait for a round running now.
#[derive(Default)]
struct CollectorThreads {
    stopped: std::sync::atomic::AtomicBool,
    round: parking_lot::Mutex<()>,
    /// Threads started (each holds an `Arc` of this, beside every `Database` handle).
    started: std::sync::atomic::AtomicUsize,
}

impl CollectorThreads {
    /// Whether `threads` is held by one `Database` handle only (besides the threads).
    fn last_handle(threads: &Arc<CollectorThreads>) -> bool {
        Arc::strong_count(threads).saturating_sub(threads.started.load(Ordering::SeqCst)) <= 1
    }

    /// No round starts after this returns, and none runs.
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        drop(self.round.lock());
    }
}

/// A persistent-memory database's directory.
struct RegionDirectory;

impl RegionDirectory {
    /// Creates and locks `dir` (a second open gets [`Error::DatabaseLocked`]).
    fn lock(options: &Options, dir: &std::path::Path) -> Result<Box<dyn crate::fs::DirectoryLock>> {
        let fs = options
            .file_system
            .clone()
            .unwrap_or_else(FileSystemHandle::real)
            .0;
        let lock = crate::durability::lock_directory(&*fs, dir)?;
        let manifest = dir.join(crate::durability::manifest::MANIFEST);
        if fs.exists(&manifest).map_err(|e| {
            crate::durability::io_error(&manifest, "looking for a log-based database", &e)
        })? {
            // Opening would make a region beside a log nothing here would replay.
            return Err(Error::UnsupportedConfiguration {
                reason: format!(
                    "{} holds a database with a redo log (its MANIFEST): open it with the \
                     storage it was made with, not {}",
                    dir.display(),
                    options.version_storage.name()
                ),
            });
        }
        Ok(lock)
    }
}

static NEXT_DATABASE_TAG: AtomicU32 = AtomicU32::new(1);

impl Database {
    /// Opens a database. Combinations of designs that cannot work together are refused
    /// here with [`Error::UnsupportedConfiguration`].
    pub fn open(options: Options) -> Result<Database> {
        let tag = NEXT_DATABASE_TAG.fetch_add(1, Ordering::Relaxed);
        options.validate()?;
        if let Some(dir) = &options.disk {
            let settings = crate::disk::engine::DiskSettings {
                fs: options
                    .file_system
                    .clone()
                    .unwrap_or_else(FileSystemHandle::real)
                    .0,
                dir: dir.clone(),
                durability: options.durability.unwrap_or_default(),
                buffer_pool_bytes: options.buffer_pool_bytes,
                eviction: options.buffer_pool_eviction,
                direct_io: options.direct_io,
                segment_bytes: options.log_segment_bytes,
                autovacuum_naptime: options.autovacuum_naptime,
                checkpoint_after_log_bytes: options.checkpoint_after_log_bytes,
                pruning: match options.garbage_collector {
                    GarbageCollector::Vacuum => crate::disk::heap_file::Pruning::Horizon,
                    _ => crate::disk::heap_file::Pruning::Eager,
                },
                placement: options.version_placement,
                storage: options.disk_storage,
                purge_delay: options.purge_delay,
            };
            let engine = crate::disk::engine::DiskEngine::open(tag, settings)?;
            return Ok(Database {
                engine: Arc::new(AnyEngine::Disk(engine)),
                options: Arc::new(options),
                persistence: None,
                region_directory: None,
                collector_threads: Arc::new(CollectorThreads::default()),
            });
        }
        // A storage that keeps its data itself: its directory is locked before its region
        // file is mapped, and it has no log.
        let keeps_its_data = options.version_storage.uses_persistent_memory();
        let region_lock = match (&options.path, keeps_its_data) {
            (Some(dir), true) => Some(RegionDirectory::lock(&options, dir)?),
            _ => None,
        };
        let config = GcConfig {
            epoch_threshold: options.epoch_advance_threshold,
        };
        fn new_engine<V: VersionStorage, G: Collector>(
            tag: u32,
            config: &GcConfig,
            options: &Options,
        ) -> Result<Engine<V, G>> {
            Ok(Engine::new(
                tag,
                options,
                G::new(config),
                V::open_shared(options)?,
            ))
        }
        let engine = match (options.version_storage, options.garbage_collector) {
            (VersionStorageKind::Delta, GarbageCollector::Steam) => {
                AnyEngine::SteamDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::Delta, GarbageCollector::WatermarkOnly) => {
                AnyEngine::WatermarkDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::Delta, GarbageCollector::Hana) => {
                AnyEngine::HanaDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::Delta, GarbageCollector::Hekaton) => {
                AnyEngine::HekatonDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::Delta, GarbageCollector::Deuteronomy) => {
                AnyEngine::DeuteronomyDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::Delta, GarbageCollector::Ermia) => {
                AnyEngine::ErmiaDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::Delta, GarbageCollector::NoCollection) => {
                AnyEngine::NoneDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::Steam) => {
                AnyEngine::SteamAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::WatermarkOnly) => {
                AnyEngine::WatermarkAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::Hana) => {
                AnyEngine::HanaAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::Hekaton) => {
                AnyEngine::HekatonAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::Deuteronomy) => {
                AnyEngine::DeuteronomyAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::Ermia) => {
                AnyEngine::ErmiaAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::NoCollection) => {
                AnyEngine::NoneAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::Steam) => {
                AnyEngine::SteamAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::WatermarkOnly) => {
                AnyEngine::WatermarkAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::Hana) => {
                AnyEngine::HanaAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::Hekaton) => {
                AnyEngine::HekatonAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::Deuteronomy) => {
                AnyEngine::DeuteronomyAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::Ermia) => {
                AnyEngine::ErmiaAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::NoCollection) => {
                AnyEngine::NoneAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::Steam) => {
                AnyEngine::SteamTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::WatermarkOnly) => {
                AnyEngine::WatermarkTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::Hana) => {
                AnyEngine::HanaTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::Hekaton) => {
                AnyEngine::HekatonTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::Deuteronomy) => {
                AnyEngine::DeuteronomyTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::Ermia) => {
                AnyEngine::ErmiaTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::NoCollection) => {
                AnyEngine::NoneTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TileBlock, GarbageCollector::NoCollection) => {
                AnyEngine::NoneTileBlock(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TileBlock, GarbageCollector::TbCollect) => {
                AnyEngine::TbCollectTileBlock(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TileBlock, _) => {
                unreachable!("validate refuses tile-block with another collector")
            }
            (VersionStorageKind::AppendNvm, GarbageCollector::NoCollection) => {
                AnyEngine::NoneAppendNvm(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNvm, GarbageCollector::Tvcp) => {
                AnyEngine::TvcpAppendNvm(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNvm, GarbageCollector::Zen) => {
                AnyEngine::ZenAppendNvm(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNvm, _) => {
                unreachable!("validate refuses append-nvm with another collector")
            }
            (VersionStorageKind::DeltaNvm, GarbageCollector::NoCollection) => {
                AnyEngine::NoneDeltaNvm(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::DeltaNvm, GarbageCollector::OneShot) => {
                AnyEngine::OneShotDeltaNvm(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::DeltaNvm, _) => {
                unreachable!("validate refuses delta-nvm with another collector")
            }
            (_, GarbageCollector::OneShot) => {
                unreachable!("validate refuses oneshot over another storage")
            }
            (_, GarbageCollector::Tvcp | GarbageCollector::Zen) => {
                unreachable!("validate refuses the NVM baselines' collectors over another storage")
            }
            (_, GarbageCollector::TbCollect) => {
                unreachable!("validate refuses tb-collect over another storage")
            }
            (VersionStorageKind::Delta, GarbageCollector::Vacuum) => {
                AnyEngine::VacDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::Vacuum) => {
                AnyEngine::VacAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::Vacuum) => {
                AnyEngine::VacAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::Vacuum) => {
                AnyEngine::VacTimeTravel(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::Cooperative) => {
                AnyEngine::CoopAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::Delta, GarbageCollector::TransactionEpochs) => {
                AnyEngine::TxnDelta(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendNewestToOldest, GarbageCollector::TransactionEpochs) => {
                AnyEngine::TxnAppend(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::AppendOldestToNewest, GarbageCollector::TransactionEpochs) => {
                AnyEngine::TxnAppendO2n(new_engine(tag, &config, &options)?)
            }
            (VersionStorageKind::TimeTravel, GarbageCollector::TransactionEpochs) => {
                AnyEngine::TxnTimeTravel(new_engine(tag, &config, &options)?)
            }
            (_, GarbageCollector::Cooperative) => {
                unreachable!("validate refuses 'coop' without oldest-to-newest chains")
            }
        };
        let region_directory = match region_lock {
            Some(lock) => {
                // The storage holds the lock from now on, and lets go of it when it goes.
                match &engine {
                    AnyEngine::NoneTileBlock(e) => e.storage.hold_directory_lock(lock),
                    AnyEngine::TbCollectTileBlock(e) => e.storage.hold_directory_lock(lock),
                    _ => unreachable!("a region directory belongs to a persistent-memory storage"),
                }
                options.path.clone().map(Arc::new)
            }
            None => None,
        };
        let engine = Arc::new(engine);
        let collector_threads = Arc::new(CollectorThreads::default());
        let recovery_threads = options
            .recovery_threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
        on_memory_engine!(&*engine, e => crate::engine::load::adopt_recovered(e, recovery_threads), disk _d => unreachable!("the disk engine returned earlier"))?;
        let persistence = match &options.path {
            None => None,
            Some(_) if keeps_its_data => None,
            Some(dir) => {
                let settings = crate::durability::Settings {
                    fs: options
                        .file_system
                        .clone()
                        .unwrap_or_else(FileSystemHandle::real)
                        .0,
                    dir: dir.clone(),
                    durability: options.durability.unwrap_or_default(),
                    segment_bytes: options.log_segment_bytes,
                    preallocate: options.preallocate_log_segments,
                    flush_thread: options.log_flush_thread,
                    syncs_in_flight: options.log_syncs_in_flight.max(1),
                    checkpoint_after_log_bytes: options.checkpoint_after_log_bytes,
                    recovery_threads,
                    log_replay_threads: options.log_replay_threads.unwrap_or(recovery_threads),
                    planted_bug: options.planted_bug,
                };
                let persistence = on_memory_engine!(&*engine, e => {
                    let persistence = crate::durability::recovery::open(e, &settings)?;
                    let persistence = Arc::new(persistence);
                    if e.log.set(Arc::clone(&persistence.log)).is_err() {
                        unreachable!("a new engine has no log yet");
                    }
                    persistence
                }, disk _d => unreachable!("the disk engine returned earlier"));
                let weak_engine = Arc::downgrade(&engine);
                let weak_persistence = Arc::downgrade(&persistence);
                crate::durability::spawn_threads(&persistence, move || {
                    let engine = weak_engine.upgrade()?;
                    let persistence = weak_persistence.upgrade()?;
                    if persistence.is_closed() {
                        return None;
                    }
                    if !persistence.wants_checkpoint() {
                        return Some(Ok(()));
                    }
                    Some(on_memory_engine!(&*engine, e => {
                        crate::durability::checkpoint::take(e, &persistence).map(drop)
                    }, disk _d => unreachable!("the disk engine has no logical log")))
                })?;
                Some(persistence)
            }
        };
        let (finalizing, default_period) = on_memory_engine!(&*engine, e => collector_schedule(e), disk _d => unreachable!("the disk engine returned earlier"));
        match finalizing {
            // Under 'none' the janitor only trims idle threads' commit records.
            Finalizing::Interspersed | Finalizing::Never => {
                if let Some(interval) = options.idle_collection_interval {
                    spawn_collector_thread(
                        "verso-janitor",
                        Arc::downgrade(&engine),
                        interval,
                        false,
                        Arc::clone(&collector_threads),
                    )?;
                }
            }
            Finalizing::Background
            | Finalizing::BackgroundHandsToWorkers
            | Finalizing::TupleLevel => {
                let period = options.background_gc_period.unwrap_or(default_period);
                spawn_collector_thread(
                    "verso-gc",
                    Arc::downgrade(&engine),
                    period,
                    true,
                    Arc::clone(&collector_threads),
                )?;
            }
        }
        Ok(Database {
            engine,
            options: Arc::new(options),
            persistence,
            region_directory,
            collector_threads,
        })
    }

    /// Writes every table as of one snapshot into a new checkpoint, while writers keep
    /// running, and frees the log it covers; recovery then starts from it. Under Steam a
    /// checkpoint keeps at most one extra version per row written while it runs. Fails
    /// with [`Error::UnsupportedConfiguration`] in memory.
    pub fn checkpoint(&self) -> Result<CheckpointReport> {
        if self.region_directory.is_some() {
            return Err(Error::UnsupportedConfiguration {
                reason: format!(
                    "{} keeps every commit in place in its persistent-memory region: it has no \
                     log for a checkpoint to cut short",
                    self.options.version_storage.name()
                ),
            });
        }
        if let AnyEngine::Disk(disk) = &*self.engine {
            return disk.checkpoint();
        }
        let persistence = self.persistent("a checkpoint")?;
        if persistence.is_closed() {
            return Err(Error::DatabaseClosed);
        }
        on_memory_engine!(&*self.engine, e => crate::durability::checkpoint::take(e, persistence), disk d => d.checkpoint())
    }

    /// Closes the database: makes every commit durable (whatever the durability level),
    /// stops its threads and releases the directory, which another `open` may then take.
    /// Every later call through any clone fails with [`Error::DatabaseClosed`]. Dropping
    /// the last clone without `close` does the same, but cannot report an error. In
    /// memory, `close` only drops this handle.
    ///
    /// A persistent-memory storage (tile-block) writes into its region directly, not
    /// through a log, and a clone may still append uncommitted records: its directory is
    /// released when the last handle goes (at once when this was the last), and until
    /// then another `open` gets [`Error::DatabaseLocked`]. Commits through a clone fail
    /// with [`Error::DatabaseClosed`] from now on.
    pub fn close(self) -> Result<()> {
        if self.region_directory.is_some() {
            // Every acknowledged commit is in the region already. Commits and collections
            // through any clone are refused from now on; the collector threads stop (a
            // round running now is waited for); the directory's lock goes with the
            // storage, when this handle was the last (at once) or when the last clone goes.
            match &*self.engine {
                AnyEngine::NoneTileBlock(e) => e.storage.close(),
                AnyEngine::TbCollectTileBlock(e) => e.storage.close(),
                _ => unreachable!("a region directory belongs to a persistent-memory storage"),
            }
            self.collector_threads.stop();
            return Ok(());
        }
        if let AnyEngine::Disk(disk) = &*self.engine {
            return disk.close();
        }
        match &self.persistence {
            Some(persistence) => persistence.close(),
            None => Ok(()),
        }
    }

    /// The directory of a persistent database (`None` in memory).
    pub fn path(&self) -> Option<&std::path::Path> {
        self.persistence
            .as_ref()
            .map(|p| p.dir.as_path())
            .or_else(|| self.region_directory.as_ref().map(|dir| dir.as_path()))
            .or_else(|| match &*self.engine {
                AnyEngine::Disk(disk) => Some(disk.dir()),
                _ => None,
            })
    }

    fn persistent(&self, what: &str) -> Result<&Arc<Persistence>> {
        self.persistence
            .as_ref()
            .ok_or_else(|| Error::UnsupportedConfiguration {
                reason: format!("{what} needs a persistent database (Options::path)"),
            })
    }

    /// The configuration in words: `storage/collector/protocol`, e.g.
    /// `delta/steam/si-first-updater-wins`.
    pub fn design(&self) -> String {
        let design = on_engine!(&*self.engine, e => e.design());
        if self.options.chain_consolidation == ChainConsolidation::default() {
            return design;
        }
        format!("{design}/{}", self.options.chain_consolidation.name())
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Creates a table. Fails with [`Error::DuplicateTable`] or [`Error::InvalidSchema`]
    /// (or [`Error::UnknownColumn`] for a key or index naming a missing column).
    ///
    /// In a persistent database the table is durable when this returns (under
    /// [`Durability::Sync`]; under the other levels as durable as a commit is).
    pub fn create_table(&self, name: &str, schema: Schema) -> Result<TableId> {
        let Some(persistence) = &self.persistence else {
            return on_engine!(&*self.engine, e => e.create_table(name, schema));
        };
        let log = &persistence.log;
        // Created and logged in one step with appends stopped, so that a checkpoint's
        // catalog either has the table or precedes its record in the log.
        let (id, end) = log.append_with(|| {
            let id = on_engine!(&*self.engine, e => e.create_table(name, schema))?;
            let body = on_engine!(&*self.engine, e => {
                let table = e.table(id)?;
                crate::durability::record::create_table_body(id.index, &table.schema)
            });
            Ok((
                id,
                Some(crate::durability::record::FramedRecord::with_body(&body)),
            ))
        })?;
        log.acknowledge(end)?;
        Ok(id)
    }

    /// The id of the table with this name.
    pub fn table(&self, name: &str) -> Result<TableId> {
        on_engine!(&*self.engine, e => e.table_id(name))
    }

    /// The position of a column in a table's rows (what [`Transaction::update`] takes).
    pub fn column_index(&self, table: TableId, column: &str) -> Result<usize> {
        on_engine!(&*self.engine, e => e.table(table)?.schema.column_position(column))
    }

    /// The names of all tables, in creation order.
    pub fn table_names(&self) -> Vec<String> {
        on_engine!(&*self.engine, e => e.table_names())
    }

    /// The names of a table's secondary indexes, in the order its schema declared them.
    pub fn index_names(&self, table: TableId) -> Result<Vec<String>> {
        on_engine!(&*self.engine, e => Ok(e
            .table(table)?
            .schema
            .indexes
            .iter()
            .map(|index| index.name.clone())
            .collect()))
    }

    /// Begins a transaction on the calling thread. Any number may be open per thread.
    ///
    /// # Panics
    /// If more than 65,536 threads hold transactions of this database at once; use
    /// [`Database::try_begin`] to get an error instead.
    pub fn begin(&self, isolation: Isolation) -> Transaction<'_> {
        match self.try_begin(isolation) {
            Ok(txn) => txn,
            Err(error) => panic!("cannot begin a transaction: {error}"),
        }
    }

    /// Begins a transaction, or fails with [`Error::CapacityExceeded`] when too many
    /// threads use the database at once.
    pub fn try_begin(&self, isolation: Isolation) -> Result<Transaction<'_>> {
        self.begin_inner(isolation, false)
    }

    /// Begins a transaction declared read-only: its writes fail with
    /// [`Error::ReadOnlyTransaction`]. At [`Isolation::Serializable`] (and under MVOCC and
    /// MV2PL) it records nothing, takes no locks and commits without validation — it is
    /// serialized at its snapshot, which is sound because every serializable writer
    /// validates — so it never fails, and it never blocks, aborts or holds back a writer
    /// (it keeps no validation records alive). Under MVTO and SSN, whose serial order is
    /// not the commit order, it follows the protocol like any transaction (MVTO: read
    /// timestamps, refused reads of locked rows; SSN: the exclusion test at commit), but it
    /// holds back no other transaction's predicate reads (MVTO) and only the few log
    /// records a reader can fail on (SSN).
    ///
    /// Begin long readers this way under the serializable protocols: a long transaction
    /// begun with [`Database::begin`] at [`Isolation::Serializable`] (or under any protocol
    /// but the default) may still write, so it keeps every commit record (MVTO: every
    /// younger transaction's predicate read) published while it runs, for its own
    /// validation; memory then grows with the commits until it ends, though no other
    /// transaction's work does (`docs/known-issues.md`).
    ///
    /// # Panics
    /// Like [`Database::begin`]; [`Database::try_begin_read_only`] returns the error.
    pub fn begin_read_only(&self, isolation: Isolation) -> Transaction<'_> {
        match self.try_begin_read_only(isolation) {
            Ok(txn) => txn,
            Err(error) => panic!("cannot begin a transaction: {error}"),
        }
    }

    /// [`Database::begin_read_only`] that returns [`Error::CapacityExceeded`] instead of
    /// panicking.
    pub fn try_begin_read_only(&self, isolation: Isolation) -> Result<Transaction<'_>> {
        self.begin_inner(isolation, true)
    }

    fn begin_inner(&self, isolation: Isolation, read_only: bool) -> Result<Transaction<'_>> {
        let inner = match &*self.engine {
            AnyEngine::Disk(e) => AnyTxn::Disk(crate::disk::engine::DiskTxn::begin(
                e, isolation, read_only,
            )?),
            AnyEngine::SteamDelta(e) => {
                AnyTxn::SteamDelta(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::WatermarkDelta(e) => {
                AnyTxn::WatermarkDelta(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HanaDelta(e) => {
                AnyTxn::HanaDelta(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HekatonDelta(e) => {
                AnyTxn::HekatonDelta(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::DeuteronomyDelta(e) => {
                AnyTxn::DeuteronomyDelta(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::ErmiaDelta(e) => {
                AnyTxn::ErmiaDelta(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::NoneDelta(e) => {
                AnyTxn::NoneDelta(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::SteamAppend(e) => {
                AnyTxn::SteamAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::WatermarkAppend(e) => {
                AnyTxn::WatermarkAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HanaAppend(e) => {
                AnyTxn::HanaAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HekatonAppend(e) => {
                AnyTxn::HekatonAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::DeuteronomyAppend(e) => {
                AnyTxn::DeuteronomyAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::ErmiaAppend(e) => {
                AnyTxn::ErmiaAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::NoneAppend(e) => {
                AnyTxn::NoneAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::SteamAppendO2n(e) => {
                AnyTxn::SteamAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::WatermarkAppendO2n(e) => {
                AnyTxn::WatermarkAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HanaAppendO2n(e) => {
                AnyTxn::HanaAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HekatonAppendO2n(e) => {
                AnyTxn::HekatonAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::DeuteronomyAppendO2n(e) => {
                AnyTxn::DeuteronomyAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::ErmiaAppendO2n(e) => {
                AnyTxn::ErmiaAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::NoneAppendO2n(e) => {
                AnyTxn::NoneAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::SteamTimeTravel(e) => {
                AnyTxn::SteamTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::WatermarkTimeTravel(e) => {
                AnyTxn::WatermarkTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HanaTimeTravel(e) => {
                AnyTxn::HanaTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::HekatonTimeTravel(e) => {
                AnyTxn::HekatonTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::DeuteronomyTimeTravel(e) => {
                AnyTxn::DeuteronomyTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::ErmiaTimeTravel(e) => {
                AnyTxn::ErmiaTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::NoneTimeTravel(e) => {
                AnyTxn::NoneTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::NoneTileBlock(e) => {
                AnyTxn::NoneTileBlock(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::TbCollectTileBlock(e) => {
                AnyTxn::TbCollectTileBlock(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::NoneAppendNvm(e) => {
                AnyTxn::NoneAppendNvm(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::TvcpAppendNvm(e) => {
                AnyTxn::TvcpAppendNvm(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::ZenAppendNvm(e) => {
                AnyTxn::ZenAppendNvm(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::NoneDeltaNvm(e) => {
                AnyTxn::NoneDeltaNvm(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::OneShotDeltaNvm(e) => {
                AnyTxn::OneShotDeltaNvm(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::VacDelta(e) => AnyTxn::VacDelta(EngineTxn::begin(e, isolation, read_only)?),
            AnyEngine::VacAppend(e) => {
                AnyTxn::VacAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::VacAppendO2n(e) => {
                AnyTxn::VacAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::VacTimeTravel(e) => {
                AnyTxn::VacTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::CoopAppendO2n(e) => {
                AnyTxn::CoopAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::TxnDelta(e) => AnyTxn::TxnDelta(EngineTxn::begin(e, isolation, read_only)?),
            AnyEngine::TxnAppend(e) => {
                AnyTxn::TxnAppend(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::TxnAppendO2n(e) => {
                AnyTxn::TxnAppendO2n(EngineTxn::begin(e, isolation, read_only)?)
            }
            AnyEngine::TxnTimeTravel(e) => {
                AnyTxn::TxnTimeTravel(EngineTxn::begin(e, isolation, read_only)?)
            }
        };
        Ok(Transaction {
            _thread: ThreadBound::default(),
            inner,
        })
    }

    /// The engine's counters, summed over all threads.
    pub fn stats(&self) -> Stats {
        let mut stats = on_engine!(&*self.engine, e => e.stats(false));
        if let Some(persistence) = &self.persistence {
            stats.durability = Some(persistence.stats());
        }
        stats
    }

    /// Like [`Database::stats`], and starts a new measurement window: the histograms'
    /// `window_max` is the longest chain seen since the previous call. For one sampler (the
    /// lab's per-second time series); two samplers would split each other's windows.
    pub fn sample_stats(&self) -> Stats {
        let mut stats = on_engine!(&*self.engine, e => e.stats(true));
        if let Some(persistence) = &self.persistence {
            stats.durability = Some(persistence.stats());
        }
        stats
    }

    /// Finalizes, on the calling thread, every committed transaction of every thread that
    /// no snapshot needs any more. Collection normally happens by itself after commits;
    /// this is for a program that stops writing and wants the memory back now.
    pub fn collect_garbage(&self) {
        on_memory_engine!(&*self.engine, e => {
            if let Some(local) = e.txns.local() {
                crate::engine::collect::collect_all(e, &local);
            }
        }, disk d => {
            // Vacuum of every table; an error (a failed log) reaches the next call.
            let _ = d.vacuum_all();
        })
    }

    /// Number of version records behind the newest state of the row with this primary key
    /// (`None` if no row with this key is in the index). For observing the collector.
    pub fn version_chain_length(&self, table: TableId, key: &[Value]) -> Result<Option<usize>> {
        on_engine!(&*self.engine, e => e.chain_length(table, key))
    }

    /// Number of entries in a table's primary index: live rows plus deleted rows some
    /// snapshot may still see.
    pub fn primary_index_entries(&self, table: TableId) -> Result<usize> {
        on_engine!(&*self.engine, e => e.index_entries(table))
    }

    /// Number of entries in a secondary index. Under logical pointers: one per distinct key
    /// among each row's versions; under physical pointers: one per version in which a row
    /// exists (`IndexPointers`).
    pub fn secondary_index_entries(&self, table: TableId, index: &str) -> Result<usize> {
        on_engine!(&*self.engine, e => e.secondary_index_entries(table, index))
    }
}

/// A commit that is visible, and becomes durable later ([`Transaction::commit_deferred`]).
/// `Send`: a server may hand it to the thread that answers the client.
#[derive(Debug)]
#[must_use = "a deferred commit is acknowledged only once its ticket is durable"]
pub struct CommitTicket {
    /// `None` in memory (a ticket there is durable at once, as durable as memory is).
    log: Option<Arc<Log>>,
    end: u64,
}

impl CommitTicket {
    /// Waits until the commit is as durable as the database's [`Durability`] promises,
    /// leading the log's next write and sync if no other thread is. Fails with
    /// [`Error::DurabilityLost`] if the log failed first (the commit is then not
    /// acknowledged) or [`Error::DatabaseClosed`].
    pub fn wait(self) -> Result<()> {
        match &self.log {
            Some(log) => log.acknowledge(self.end),
            None => Ok(()),
        }
    }

    /// Whether [`CommitTicket::wait`] would return at once (without error).
    pub fn is_durable(&self) -> bool {
        self.log
            .as_ref()
            .is_none_or(|log| log.check().is_ok() && log.is_acknowledged(self.end))
    }

    /// The log position the commit's durability waits for (0 in memory).
    pub fn log_position(&self) -> u64 {
        self.end
    }
}

/// What runs the collection besides the workers, and the background period's default.
fn collector_schedule<V: VersionStorage, G: Collector>(
    _engine: &Engine<V, G>,
) -> (Finalizing, std::time::Duration) {
    (G::FINALIZING, G::DEFAULT_BACKGROUND_PERIOD)
}

/// A collector thread: wakes every `period`, does its round, and exits once the database
/// is gone (it holds only a weak reference between rounds). The janitor (interspersed
/// collectors) finalizes what idle threads left; a background collector ('Hana',
/// 'Hekaton') does its collector's round.
fn spawn_collector_thread(
    name: &str,
    engine: std::sync::Weak<AnyEngine>,
    period: std::time::Duration,
    background_collector: bool,
    threads: Arc<CollectorThreads>,
) -> Result<()> {
    threads.started.fetch_add(1, Ordering::SeqCst);
    let counted = Arc::clone(&threads);
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            loop {
                std::thread::sleep(period);
                // A round holds the engine only while it runs, under the round lock (the
                // engine is dropped before the lock), and none starts once the threads
                // were stopped.
                let _round = threads.round.lock();
                if threads.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Some(engine) = engine.upgrade() else {
                    break;
                };
                on_memory_engine!(&*engine, e => {
                    if let Some(local) = e.txns.local() {
                        if background_collector {
                            crate::engine::collect::background_round(e, &local);
                        } else {
                            crate::engine::collect::collect_idle(e, &local);
                        }
                    }
                }, disk _d => unreachable!("the disk engine has no collector threads"));
            }
            threads.started.fetch_sub(1, Ordering::SeqCst);
        });
    match spawned {
        Ok(_) => Ok(()),
        Err(error) => {
            counted.started.fetch_sub(1, Ordering::SeqCst);
            Err(Error::UnsupportedConfiguration {
                reason: format!("cannot start the {name} thread: {error}"),
            })
        }
    }
}

impl Drop for Database {
    /// The last handle stops the collector threads (waiting for a round running now), so
    /// that the engine, and a persistent-memory storage's region and directory lock with
    /// it, go as this handle does, not at the end of a round on another thread.
    fn drop(&mut self) {
        if CollectorThreads::last_handle(&self.collector_threads) {
            self.collector_threads.stop();
            if let AnyEngine::Disk(disk) = &*self.engine {
                // Its background worker holds the engine during a round: stopped (and
                // waited for) here, the engine and its directory go with this handle.
                disk.stop_background();
            }
        }
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

#[allow(clippy::enum_variant_names)]
enum AnyTxn<'db> {
    SteamDelta(EngineTxn<'db, DeltaStorage, Steam>),
    WatermarkDelta(EngineTxn<'db, DeltaStorage, WatermarkOnly>),
    HanaDelta(EngineTxn<'db, DeltaStorage, Hana>),
    HekatonDelta(EngineTxn<'db, DeltaStorage, Hekaton>),
    DeuteronomyDelta(EngineTxn<'db, DeltaStorage, Deuteronomy>),
    ErmiaDelta(EngineTxn<'db, DeltaStorage, Ermia>),
    NoneDelta(EngineTxn<'db, DeltaStorage, NoCollection>),
    SteamAppend(EngineTxn<'db, AppendStorage, Steam>),
    WatermarkAppend(EngineTxn<'db, AppendStorage, WatermarkOnly>),
    HanaAppend(EngineTxn<'db, AppendStorage, Hana>),
    HekatonAppend(EngineTxn<'db, AppendStorage, Hekaton>),
    DeuteronomyAppend(EngineTxn<'db, AppendStorage, Deuteronomy>),
    ErmiaAppend(EngineTxn<'db, AppendStorage, Ermia>),
    NoneAppend(EngineTxn<'db, AppendStorage, NoCollection>),
    SteamAppendO2n(EngineTxn<'db, AppendO2nStorage, Steam>),
    WatermarkAppendO2n(EngineTxn<'db, AppendO2nStorage, WatermarkOnly>),
    HanaAppendO2n(EngineTxn<'db, AppendO2nStorage, Hana>),
    HekatonAppendO2n(EngineTxn<'db, AppendO2nStorage, Hekaton>),
    DeuteronomyAppendO2n(EngineTxn<'db, AppendO2nStorage, Deuteronomy>),
    ErmiaAppendO2n(EngineTxn<'db, AppendO2nStorage, Ermia>),
    NoneAppendO2n(EngineTxn<'db, AppendO2nStorage, NoCollection>),
    SteamTimeTravel(EngineTxn<'db, TimeTravelStorage, Steam>),
    WatermarkTimeTravel(EngineTxn<'db, TimeTravelStorage, WatermarkOnly>),
    HanaTimeTravel(EngineTxn<'db, TimeTravelStorage, Hana>),
    HekatonTimeTravel(EngineTxn<'db, TimeTravelStorage, Hekaton>),
    DeuteronomyTimeTravel(EngineTxn<'db, TimeTravelStorage, Deuteronomy>),
    ErmiaTimeTravel(EngineTxn<'db, TimeTravelStorage, Ermia>),
    NoneTimeTravel(EngineTxn<'db, TimeTravelStorage, NoCollection>),
    NoneTileBlock(EngineTxn<'db, TileBlockStorage, NoCollection>),
    TbCollectTileBlock(EngineTxn<'db, TileBlockStorage, TbCollect>),
    NoneAppendNvm(EngineTxn<'db, AppendNvmStorage, NoCollection>),
    TvcpAppendNvm(EngineTxn<'db, AppendNvmStorage, Tvcp>),
    ZenAppendNvm(EngineTxn<'db, AppendNvmStorage, Zen>),
    NoneDeltaNvm(EngineTxn<'db, DeltaNvmStorage, NoCollection>),
    OneShotDeltaNvm(EngineTxn<'db, DeltaNvmStorage, OneShot>),
    VacDelta(EngineTxn<'db, DeltaStorage, Vacuum>),
    VacAppend(EngineTxn<'db, AppendStorage, Vacuum>),
    VacAppendO2n(EngineTxn<'db, AppendO2nStorage, Vacuum>),
    VacTimeTravel(EngineTxn<'db, TimeTravelStorage, Vacuum>),
    CoopAppendO2n(EngineTxn<'db, AppendO2nStorage, Cooperative>),
    TxnDelta(EngineTxn<'db, DeltaStorage, TxnEpochs>),
    TxnAppend(EngineTxn<'db, AppendStorage, TxnEpochs>),
    TxnAppendO2n(EngineTxn<'db, AppendO2nStorage, TxnEpochs>),
    TxnTimeTravel(EngineTxn<'db, TimeTravelStorage, TxnEpochs>),
    Disk(crate::disk::engine::DiskTxn<'db>),
}

macro_rules! on_txn {
    ($any:expr, $txn:ident => $body:expr) => {
        match $any {
            AnyTxn::Disk($txn) => $body,
            AnyTxn::SteamDelta($txn) => $body,
            AnyTxn::WatermarkDelta($txn) => $body,
            AnyTxn::HanaDelta($txn) => $body,
            AnyTxn::HekatonDelta($txn) => $body,
            AnyTxn::DeuteronomyDelta($txn) => $body,
            AnyTxn::ErmiaDelta($txn) => $body,
            AnyTxn::NoneDelta($txn) => $body,
            AnyTxn::SteamAppend($txn) => $body,
            AnyTxn::WatermarkAppend($txn) => $body,
            AnyTxn::HanaAppend($txn) => $body,
            AnyTxn::HekatonAppend($txn) => $body,
            AnyTxn::DeuteronomyAppend($txn) => $body,
            AnyTxn::ErmiaAppend($txn) => $body,
            AnyTxn::NoneAppend($txn) => $body,
            AnyTxn::SteamAppendO2n($txn) => $body,
            AnyTxn::WatermarkAppendO2n($txn) => $body,
            AnyTxn::HanaAppendO2n($txn) => $body,
            AnyTxn::HekatonAppendO2n($txn) => $body,
            AnyTxn::DeuteronomyAppendO2n($txn) => $body,
            AnyTxn::ErmiaAppendO2n($txn) => $body,
            AnyTxn::NoneAppendO2n($txn) => $body,
            AnyTxn::SteamTimeTravel($txn) => $body,
            AnyTxn::WatermarkTimeTravel($txn) => $body,
            AnyTxn::HanaTimeTravel($txn) => $body,
            AnyTxn::HekatonTimeTravel($txn) => $body,
            AnyTxn::DeuteronomyTimeTravel($txn) => $body,
            AnyTxn::ErmiaTimeTravel($txn) => $body,
            AnyTxn::NoneTimeTravel($txn) => $body,
            AnyTxn::NoneTileBlock($txn) => $body,
            AnyTxn::TbCollectTileBlock($txn) => $body,
            AnyTxn::NoneAppendNvm($txn) => $body,
            AnyTxn::TvcpAppendNvm($txn) => $body,
            AnyTxn::ZenAppendNvm($txn) => $body,
            AnyTxn::NoneDeltaNvm($txn) => $body,
            AnyTxn::OneShotDeltaNvm($txn) => $body,
            AnyTxn::VacDelta($txn) => $body,
            AnyTxn::VacAppend($txn) => $body,
            AnyTxn::VacAppendO2n($txn) => $body,
            AnyTxn::VacTimeTravel($txn) => $body,
            AnyTxn::CoopAppendO2n($txn) => $body,
            AnyTxn::TxnDelta($txn) => $body,
            AnyTxn::TxnAppend($txn) => $body,
            AnyTxn::TxnAppendO2n($txn) => $body,
            AnyTxn::TxnTimeTravel($txn) => $body,
        }
    };
}

/// A transaction. It sees the snapshot taken when it began plus its own writes.
///
/// # Reading
///
/// | to read | owned rows, columns by name | zero-copy, for hot loops |
/// |---|---|---|
/// | one row by primary key | [`get_row`](Transaction::get_row) → [`Row`]; [`get`](Transaction::get) → `Vec<Value>` | [`get_view`](Transaction::get_view) |
/// | a primary-key range | [`scan`](Transaction::scan) → iterator of [`Row`] | [`scan_view`](Transaction::scan_view) |
/// | a secondary-index range | [`scan_index`](Transaction::scan_index) → iterator of [`Row`] | [`scan_index_view`](Transaction::scan_index_view) |
///
/// The owned forms copy each row out and hold nothing between calls; the iterators are
/// double-ended and fetch rows in batches. The view forms lend each row, packed as stored,
/// to a closure that runs under the row's read latch (it must not write, commit or collect
/// garbage in this database), and allocate nothing per row: what the lab and the
/// benchmarks use.
///
/// # Errors
///
/// A conflict ([`Error::WriteConflict`], [`Error::SerializationFailure`],
/// [`Error::LockConflict`]) rolls the transaction back at once and every later call returns
/// [`Error::TransactionAborted`]; all of them are [retryable](Error::is_retryable), and
/// [`Database::run`] retries them for you. Any other error (bad input, a duplicate key)
/// leaves the transaction usable and changes nothing. Dropping a transaction without
/// committing aborts it.
///
/// # Threads
///
/// A transaction belongs to the thread that began it: it is neither `Send` nor `Sync`
/// (the [`ThreadBound`] field says so), so the compiler refuses to move one into another
/// thread or task ("`*const ()` cannot be sent between threads safely … required because
/// it appears within the type `ThreadBound`").
///
/// Why: Verso's begin and commit take no lock. Each thread has a slot in the database where
/// it publishes the start timestamps of its running transactions (the collector reads the
/// slots to know which versions a snapshot may still need), and where it queues its
/// committed transactions for collection; only the owning thread writes its slot, with
/// plain stores. A transaction ending on another thread would write a slot its owner may be
/// writing at the same moment, and a snapshot could vanish from the slot while it runs, so
/// that the versions it reads could be freed under it. Making the slot safe for two
/// writers would put a lock or an atomic read-modify-write into every begin and commit.
///
/// What to do instead: one transaction per task, begun on the thread that runs it. Share
/// the [`Database`] (it is `Clone + Send + Sync`, and cheap to clone), and begin the
/// transaction inside the thread, or inside the closure you give [`Database::run`]:
///
/// ```
/// use verso::{ColumnType, Database, Isolation, Options, Schema, Value};
///
/// let db = Database::open(Options::default())?;
/// let hits = db.create_table(
///     "hits",
///     Schema::new()
///         .column("page", ColumnType::U64)
///         .column("n", ColumnType::I64)
///         .primary_key(&["page"]),
/// )?;
/// std::thread::scope(|scope| {
///     for page in 0..4u64 {
///         let db = &db;
///         // The transaction is begun by the thread that uses it.
///         scope.spawn(move || {
///             db.run(Isolation::Snapshot, |txn| txn.insert(hits, &[page.into(), Value::I64(1)]))
///         });
///     }
/// });
/// # Ok::<(), verso::Error>(())
/// ```
///
/// In async code, the same rule: begin, use and commit the transaction within one
/// synchronous stretch (no `.await` while it is open), or run it on a blocking thread
/// (`spawn_blocking`). Any number of transactions may be open on one thread at once.
///
/// ```compile_fail,E0277
/// # use verso::{Database, Isolation, Options};
/// let db = Database::open(Options::default()).unwrap();
/// let txn = db.begin(Isolation::Snapshot);
/// // error[E0277]: `*const ()` cannot be sent between threads safely
/// std::thread::scope(|scope| {
///     scope.spawn(move || txn.commit());
/// });
/// ```
pub struct Transaction<'db> {
    /// First, so that the compiler's "cannot be sent between threads safely" names it.
    _thread: ThreadBound,
    inner: AnyTxn<'db>,
}

impl<'db> Transaction<'db> {
    /// The snapshot timestamp: the transaction sees commits with smaller timestamps.
    pub fn start_ts(&self) -> u64 {
        on_txn!(&self.inner, t => t.start_ts())
    }

    /// The isolation level it was begun with.
    pub fn isolation(&self) -> Isolation {
        on_txn!(&self.inner, t => t.isolation())
    }

    /// Whether it was begun read-only ([`Database::begin_read_only`]).
    pub fn is_read_only(&self) -> bool {
        on_txn!(&self.inner, t => t.is_read_only())
    }

    /// The row with this primary key (values in key order), if this transaction sees one:
    /// its values in column order. [`Transaction::get_row`] reads the same row with its
    /// column names.
    pub fn get(&self, table: TableId, key: &[Value]) -> Result<Option<Vec<Value>>> {
        on_txn!(&self.inner, t => t.get(table, key))
    }

    /// The row with this primary key, if this transaction sees one, as a [`Row`]: columns
    /// by name or position (`row.get::<i64>("balance")?`), or the whole row as a type of
    /// your own ([`Row::decode`]).
    pub fn get_row(&self, table: TableId, key: &[Value]) -> Result<Option<Row<'db>>> {
        on_txn!(&self.inner, t => {
            let schema = t.schema(table)?;
            let values = t.get(table, key)?;
            Ok(values.map(|values| Row::new(schema, values)))
        })
    }

    /// Lends the visible row under `key` to `reader` without copying or allocating: the
    /// fast path for hot loops. Columns are read with [`RowView::get`].
    ///
    /// `reader` runs while the row is latched for reading: it must not write, commit or
    /// collect garbage in this database (that can wait for the latch for ever); copy what
    /// it needs instead. [`Transaction::get_row`] has no such rule.
    pub fn get_view<R>(
        &self,
        table: TableId,
        key: &[Value],
        reader: impl FnOnce(RowView<'_>) -> R,
    ) -> Result<Option<R>> {
        // The reader's type is erased before the dispatch, in a function that is not
        // generic: the engine's read path (one copy per storage x collector) would
        // otherwise be compiled again for every reader of every program that calls this
        // (dozens in the lab: most of its build time). One indirect call per read.
        let mut reader = Some(reader);
        let mut answer = None;
        let found = self.get_view_erased(table, key, &mut |row| {
            if let Some(reader) = reader.take() {
                answer = Some(reader(row));
            }
        })?;
        debug_assert_eq!(
            found,
            answer.is_some(),
            "the reader ran iff a row was found"
        );
        Ok(answer)
    }

    /// [`Transaction::get_view`] past its generic surface: whether a row was found (and
    /// lent to `reader`).
    ///
    /// Not generic, so compiled once, here. A closure written inside a generic function
    /// has a type of its own for each instantiation of that function, so a dispatch placed
    /// there would still compile the engine's path once per caller.
    fn get_view_erased(
        &self,
        table: TableId,
        key: &[Value],
        reader: &mut dyn FnMut(RowView<'_>),
    ) -> Result<bool> {
        on_txn!(&self.inner, t => t.get_view(table, key, reader)).map(|found| found.is_some())
    }

    /// A hint that this transaction is about to read or write the rows under these primary
    /// keys: the engine looks each one up and asks the processor to bring its index slot
    /// and then its row into cache, all keys at once, so that their memory latencies
    /// overlap instead of following one another (as RocksDB's `MultiGet` overlaps its
    /// lookups). Nothing is read at the snapshot, recorded or locked: the operations that
    /// follow behave exactly as without the hint, only sooner when the rows were not in
    /// cache. Keys that no row has are skipped.
    ///
    /// Fails (changing nothing) like [`Transaction::get`] on an unknown table, or a key of
    /// the wrong arity or type, or when the transaction is no longer active.
    pub fn prefetch<K: AsRef<[Value]>>(&self, table: TableId, keys: &[K]) -> Result<()> {
        // Generic down to the engine (unlike `get_view`): erasing the key type would cost
        // an allocation per batch, and programs call it with one or two key types.
        on_txn!(&self.inner, t => t.prefetch(table, keys))
    }

    /// Inserts a row (all columns, in schema order). Fails with [`Error::DuplicateKey`] if
    /// this transaction sees a row with the same primary key.
    pub fn insert(&mut self, table: TableId, row: &[Value]) -> Result<()> {
        on_txn!(&mut self.inner, t => t.insert(table, row))
    }

    /// Sets the given columns (by position) of the row with this key. Returns whether the
    /// row exists in this transaction's view.
    pub fn update(
        &mut self,
        table: TableId,
        key: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool> {
        on_txn!(&mut self.inner, t => t.update(table, key, changes))
    }

    /// Sets the given columns (by position) of every row in `range` (see [`KeyRange`] for
    /// prefix bounds) that this transaction sees and `choose` picks; returns how many rows
    /// it updated. SQL's `UPDATE … SET … WHERE <key range> AND <condition>`.
    ///
    /// The same as scanning the range and updating each picked row by its key, with the
    /// same rules, conflicts and errors, but each row is written through the index entry
    /// the scan found instead of being looked up again. `choose` sees each row as
    /// [`Transaction::scan_view`]'s visitor does (latched: it must not use the database),
    /// all of the range before any write; it may also gather what it reads (TPC-C's
    /// Delivery sums the lines it marks delivered). A bad assignment is refused before
    /// anything is read or written. If a write fails (a conflict), the rows written before
    /// it stay written until the transaction ends, as with separate updates.
    pub fn update_range(
        &mut self,
        table: TableId,
        range: impl Into<KeyRange>,
        changes: &[(usize, Value)],
        mut choose: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<usize> {
        self.update_range_erased(table, &range.into(), changes, &mut choose)
    }

    /// [`Transaction::update_range`] past its generic surface (see `get_view_erased`).
    fn update_range_erased(
        &mut self,
        table: TableId,
        range: &KeyRange,
        changes: &[(usize, Value)],
        choose: &mut dyn FnMut(RowView<'_>) -> bool,
    ) -> Result<usize> {
        on_txn!(&mut self.inner, t => t.update_range(table, range, changes, &mut *choose))
    }

    /// Deletes the row with this key. Returns whether it existed in this transaction's view.
    pub fn delete(&mut self, table: TableId, key: &[Value]) -> Result<bool> {
        on_txn!(&mut self.inner, t => t.delete(table, key))
    }

    /// Streams the rows in `range` in primary-key order (descending if the range is
    /// [`KeyRange::descending`]) to `visit`, lent without copying; `visit` returns `false`
    /// to stop. The fast path for analytical scans: no allocation per row.
    ///
    /// `visit` runs while the row is latched for reading: it must not write, commit or
    /// collect garbage in this database (that can wait for the latch for ever). Use the
    /// iterator [`Transaction::scan`] to do more per row, or to stop and resume.
    pub fn scan_view(
        &self,
        table: TableId,
        range: impl Into<KeyRange>,
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<()> {
        // Erased before the dispatch (see `get_view_erased`): one indirect call per row.
        self.scan_view_erased(table, &range.into(), &mut visit)
    }

    /// [`Transaction::scan_view`] past its generic surface (see `get_view_erased`).
    fn scan_view_erased(
        &self,
        table: TableId,
        range: &KeyRange,
        visit: &mut dyn FnMut(RowView<'_>) -> bool,
    ) -> Result<()> {
        on_txn!(&self.inner, t => t.scan(table, range, &mut *visit, |keep_going| keep_going))
    }

    /// Streams the rows of a secondary-index range in index order (descending if the range
    /// is [`KeyRange::descending`]) to `visit`, lent without copying, until it returns
    /// `false`. Same rule as [`Transaction::scan_view`]: `visit` runs under the row's read
    /// latch and must not write, commit or collect in this database.
    pub fn scan_index_view(
        &self,
        table: TableId,
        index: &str,
        range: impl Into<KeyRange>,
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<()> {
        // Erased before the dispatch (see `get_view_erased`).
        self.scan_index_view_erased(table, index, &range.into(), &mut visit)
    }

    /// [`Transaction::scan_index_view`] past its generic surface (see `scan_view_erased`).
    fn scan_index_view_erased(
        &self,
        table: TableId,
        index: &str,
        range: &KeyRange,
        visit: &mut dyn FnMut(RowView<'_>) -> bool,
    ) -> Result<()> {
        on_txn!(&self.inner, t => t.scan_index(table, index, range, &mut *visit, |keep_going| keep_going))
    }

    /// Begins a batched scan (the [`Scan`](crate::Scan) iterator): its cursor, the rows'
    /// schema, and whether the rows it hands out are recorded as read.
    pub(crate) fn open_scan(
        &self,
        table: TableId,
        index: Option<&str>,
        range: &KeyRange,
    ) -> Result<(ScanCursor, &'db TableSchema, bool)> {
        on_txn!(&self.inner, t => {
            let (cursor, schema) = t.open_scan(table, index, range)?;
            Ok((cursor, schema, t.records_scans()))
        })
    }

    /// Fetches the next batch of a [`Scan`](crate::Scan) from one end: each row's values,
    /// with its index key if `with_keys`.
    pub(crate) fn scan_batch(
        &self,
        cursor: &mut ScanCursor,
        from: End,
        max_rows: usize,
        with_keys: bool,
        out: &mut VecDeque<(Option<Vec<u8>>, Vec<Value>)>,
    ) -> Result<()> {
        let decode =
            |key: &[u8], row: RowView<'_>| (with_keys.then(|| key.to_vec()), row.to_values());
        on_txn!(&self.inner, t => t.scan_batch(cursor, from, max_rows, decode, out))
    }

    /// Records that a [`Scan`](crate::Scan) handed out its rows up to index key `upto`
    /// from one end (`None`: all of them).
    pub(crate) fn record_scanned(&self, cursor: &mut ScanCursor, from: End, upto: Option<Vec<u8>>) {
        on_txn!(&self.inner, t => t.record_scanned(cursor, from, upto))
    }

    /// Commits, and returns once the commit is as durable as the database's
    /// [`Durability`] promises (in memory: at once). Fails with
    /// [`Error::TransactionAborted`] if a conflict rolled it back, with a conflict if
    /// validation fails, and with [`Error::DurabilityLost`] if the log could not be made
    /// durable (the commit may then be visible, but it is not acknowledged).
    pub fn commit(self) -> Result<()> {
        on_txn!(self.inner, t => t.commit())
    }

    /// Commits and returns as soon as the commit is visible, with a ticket to wait on for
    /// its durability: [`CommitTicket::wait`] returns when `commit()` would have. One
    /// thread can so serve many clients, each answered once its ticket is durable, while
    /// the thread runs the next client's transaction (as SiloR's workers do). The log's
    /// flusher thread, woken by the deferred commit, writes and syncs it meanwhile (with
    /// every commit appended by then), so a ticket often is durable before anyone waits. Until the
    /// ticket is durable the commit may be lost by a crash (and every transaction that
    /// read it is acknowledged only after it). Errors as [`Transaction::commit`]'s, but for
    /// the wait's.
    pub fn commit_deferred(self) -> Result<CommitTicket> {
        let (log, end) = on_txn!(self.inner, t => t.commit_for_ticket()?);
        if let Some(log) = log.as_ref().filter(|log| !log.is_acknowledged(end)) {
            // Durable soon without this thread waiting: the flusher takes it.
            log.request_flush();
        }
        Ok(CommitTicket { log, end })
    }

    /// Rolls back every write and ends the transaction.
    pub fn abort(self) {
        on_txn!(self.inner, t => t.abort())
    }
}

/// The reason a [`Transaction`] is neither `Send` nor `Sync`: it belongs to the thread
/// that began it. If the compiler says that "`*const ()` cannot be sent between threads
/// safely" and that this type is "required because it appears within the type
/// `Transaction`", see [Threads](Transaction#threads).
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadBound(std::marker::PhantomData<*const ()>);
