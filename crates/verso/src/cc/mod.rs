//! The concurrency-control seam: the read, write and commit rules.
//!
//! One database runs one protocol ([`crate::ConcurrencyControl`]), chosen at `open`. The
//! protocols are policy over the same mechanism (the storages' first-updater-wins write
//! rule, the commit records of [`precision`], the row words of [`mvto`] and [`mv2pl`]); the engine
//! (`engine/txn.rs`) asks [`Protocol`] what to do at each step and dispatches on its kind
//! at run time (a predictable branch, instead of multiplying the monomorphized engines):
//!
//! | protocol | reads see | a read | a write | at commit |
//! |---|---|---|---|---|
//! | SI (default) | the snapshot | — | first updater wins | `Serializable`: validate the read set ([`precision`]) |
//! | MVOCC ([`mvocc`]) | the snapshot | recorded | first updater wins | every writer validates its read set |
//! | MVTO ([`mvto`]) | the snapshot at its unique id | stamps the row's read-ts; aborts on a write lock | locks; aborts if a younger one read it | stamps with its id; checks the predicate reads of younger ones |
//! | MV2PL ([`mv2pl`]) | the newest committed version | read lock (no-wait) | write lock (no-wait) | validates scans (phantoms), then releases |
//! | SSN ([`ssn`]) | the snapshot | recorded | first updater wins | the serial safety net's exclusion test |
//!
//! Under every protocol but SI, every transaction runs serializably whatever isolation it
//! asked for (a stronger level is always allowed). The write rule is checked where the
//! version is installed (the storage reports the newest version's owner and commit
//! timestamp under the row's exclusive latch); the commit rule runs after the commit
//! timestamp is drawn and before the transaction is marked committed (its versions wait,
//! invisible, in the COMMITTING state meanwhile).

pub(crate) mod mv2pl;
pub(crate) mod mvocc;
pub(crate) mod mvto;
pub(crate) mod precision;
#[cfg(all(test, loom))]
mod row_word_loom_tests;
pub(crate) mod snapshot;
pub(crate) mod ssn;

use crate::{ConcurrencyControl, Isolation};

/// What a transaction records of its reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recording {
    /// Nothing.
    Off,
    /// Every point read and scan, in a [`precision::ReadSet`] validated at commit.
    Everything,
    /// Only what no row lock or read timestamp covers: scans, and point reads that found
    /// no row object (phantoms).
    Predicates,
}

/// The protocol of one database and its shared state.
pub(crate) struct Protocol {
    pub(crate) kind: ConcurrencyControl,
    /// MVTO: the predicate reads younger transactions published.
    pub(crate) mvto: mvto::PredicateLog,
    /// SSN: the committed transactions' stamps, reads and writes.
    pub(crate) ssn: ssn::SsnLog,
}

impl Protocol {
    pub(crate) fn new(kind: ConcurrencyControl) -> Self {
        Protocol {
            kind,
            mvto: mvto::PredicateLog::default(),
            ssn: ssn::SsnLog::default(),
        }
    }

    /// Name in configuration and reports.
    pub(crate) fn name(&self) -> &'static str {
        match self.kind {
            ConcurrencyControl::SnapshotIsolation => snapshot::NAME,
            ConcurrencyControl::Mvocc => mvocc::NAME,
            ConcurrencyControl::Mvto => mvto::NAME,
            ConcurrencyControl::Mv2pl => mv2pl::NAME,
            ConcurrencyControl::Ssn => ssn::NAME,
        }
    }

    /// What a transaction at `isolation` (declared read-only or not) records of its reads.
    pub(crate) fn recording(&self, isolation: Isolation, read_only: bool) -> Recording {
        match self.kind {
            ConcurrencyControl::SnapshotIsolation => {
                if !read_only && isolation == Isolation::Serializable {
                    Recording::Everything
                } else {
                    Recording::Off
                }
            }
            // A declared read-only transaction is placed at its snapshot: every writer
            // validates, so the writers are serializable in commit order, and a snapshot
            // sees a prefix of that order.
            ConcurrencyControl::Mvocc => {
                if read_only {
                    Recording::Off
                } else {
                    Recording::Everything
                }
            }
            // Read-only or not, MV2PL's locked reads see the newest versions; a declared
            // read-only transaction reads its snapshot instead, without locks (strict 2PL
            // plus validated scans orders the writers by commit, so a snapshot is a
            // prefix of a serial order).
            ConcurrencyControl::Mv2pl => {
                if read_only {
                    Recording::Off
                } else {
                    Recording::Predicates
                }
            }
            // MVTO orders by start id, not commit: every reader must leave its read
            // timestamps and predicates behind, read-only or not.
            ConcurrencyControl::Mvto => Recording::Predicates,
            // SSN's order is not the commit order either: a read-only transaction's reads
            // take part in the exclusion test of the writers after it (the read-only
            // anomaly).
            ConcurrencyControl::Ssn => Recording::Everything,
        }
    }

    /// Whether the transaction registers its start in the slots' serializable horizon
    /// (`TxnManager::begin_serializable`), so that what it validates against at commit is
    /// kept from its start on: the commit records of [`precision`] for the protocols that
    /// validate against them, under SSN the log's records whole, which only a transaction
    /// that may write needs (one declared read-only needs far less; see [`ssn`]), and
    /// under MVTO the younger transactions' predicate reads, which only writers check
    /// ([`mvto::PredicateLog`]).
    pub(crate) fn registers_for_validation(&self, isolation: Isolation, read_only: bool) -> bool {
        match self.kind {
            ConcurrencyControl::SnapshotIsolation
            | ConcurrencyControl::Mvocc
            | ConcurrencyControl::Mv2pl => self.recording(isolation, read_only) != Recording::Off,
            // MVTO: a predicate read is checked by the writers older than its reader,
            // so it is kept while one of those that may write runs (`mvto.rs`).
            ConcurrencyControl::Ssn | ConcurrencyControl::Mvto => !read_only,
        }
    }

    /// MV2PL: whether the transaction's reads and writes take the row words' locks and
    /// see the newest committed versions instead of its snapshot.
    pub(crate) fn locks_rows(&self, read_only: bool) -> bool {
        self.kind == ConcurrencyControl::Mv2pl && !read_only
    }

    /// MVTO: whether transactions take unique start timestamps that are also their
    /// commit timestamps, and stamp the rows they read.
    pub(crate) fn orders_by_start(&self) -> bool {
        self.kind == ConcurrencyControl::Mvto
    }
}
