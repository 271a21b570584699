//! Which heap tuple versions a snapshot sees, which a writer may replace, and which no
//! snapshot can see any more: PostgreSQL's `HeapTupleSatisfiesMVCC`, `HeapTupleSatisfiesUpdate`
//! and `HeapTupleSatisfiesVacuum`, over Verso's timestamps instead of PostgreSQL's
//! snapshots of running ids (design note: `docs/design/buffer-pool.md`, "Disk
//! transactions").
//!
//! A tuple is visible to a snapshot when its creator (`xmin`) is the snapshot's own
//! transaction or committed below the snapshot's start, and its deleter (`xmax`) is none,
//! aborted, running, or committed at or after the start (and is not the snapshot's own).
//! Hint bits record a fate found in the commit log on the tuple (PostgreSQL's
//! `HEAP_XMIN_COMMITTED` and friends): an aborted creator or deleter then needs no lookup.
//! A committed one still does, for its commit timestamp, unless the tuple is *frozen*
//! (both `xmin` hints: committed before every snapshot that can exist, set by vacuum).

use super::heap_page::{infomask, TupleHeader};
use super::transactions::{Fate, Resolve};
use crate::Result;

/// A snapshot as the heap sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Commits below this timestamp are visible.
    pub start: u64,
    /// The snapshot's own transaction id (0: it has written nothing).
    pub xid: u64,
}

/// Hint bits a check found worth setting on a tuple, and the LSN its page must carry
/// before they may reach the files (T4 of `disk::transactions`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    /// [`infomask`] bits to add.
    pub bits: u16,
    /// The page's LSN must be at least this when they are set.
    pub lsn: u64,
}

impl Hints {
    fn add(&mut self, bit: u16, lsn: u64) {
        self.bits |= bit;
        self.lsn = self.lsn.max(lsn);
    }
}

/// Both creator hints: committed before any snapshot that exists or can (PostgreSQL's
/// `HEAP_XMIN_FROZEN`).
pub const FROZEN: u16 = infomask::XMIN_COMMITTED | infomask::XMIN_INVALID;

/// Whether the tuple is frozen.
pub fn is_frozen(header: &TupleHeader) -> bool {
    header.infomask & FROZEN == FROZEN
}

/// What a snapshot knows of a tuple's creator.
enum Creator {
    Own,
    Visible,
    Invisible,
}

fn creator(
    header: &TupleHeader,
    snapshot: &Snapshot,
    resolve: &dyn Resolve,
    hints: &mut Hints,
) -> Result<Creator> {
    if is_frozen(header) {
        return Ok(Creator::Visible);
    }
    if header.has(infomask::XMIN_INVALID) {
        return Ok(Creator::Invisible);
    }
    if snapshot.xid != 0 && header.xmin == snapshot.xid {
        return Ok(Creator::Own);
    }
    Ok(match resolve.resolve(header.xmin, snapshot.start)? {
        Fate::Running => Creator::Invisible,
        Fate::Aborted => {
            hints.add(infomask::XMIN_INVALID, 0);
            Creator::Invisible
        }
        Fate::Committed { ts, lsn } => {
            if !header.has(infomask::XMIN_COMMITTED) {
                hints.add(infomask::XMIN_COMMITTED, lsn);
            }
            if ts < snapshot.start {
                Creator::Visible
            } else {
                Creator::Invisible
            }
        }
    })
}

/// What a snapshot knows of a tuple's deleter (or updater).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deleter {
    None,
    Own,
    /// Running, or committed at or after the snapshot's start.
    NotYet,
    /// Committed below the snapshot's start.
    Before,
}

fn deleter(
    header: &TupleHeader,
    snapshot: &Snapshot,
    resolve: &dyn Resolve,
    hints: &mut Hints,
) -> Result<Deleter> {
    if header.xmax == 0 || header.has(infomask::XMAX_INVALID) {
        return Ok(Deleter::None);
    }
    if snapshot.xid != 0 && header.xmax == snapshot.xid {
        return Ok(Deleter::Own);
    }
    Ok(match resolve.resolve(header.xmax, snapshot.start)? {
        Fate::Running => Deleter::NotYet,
        Fate::Aborted => {
            hints.add(infomask::XMAX_INVALID, 0);
            Deleter::None
        }
        Fate::Committed { ts, lsn } => {
            if !header.has(infomask::XMAX_COMMITTED) {
                hints.add(infomask::XMAX_COMMITTED, lsn);
            }
            if ts < snapshot.start {
                Deleter::Before
            } else {
                Deleter::NotYet
            }
        }
    })
}

/// Whether `snapshot` sees the tuple; adds to `hints` what the check learned.
pub fn is_visible(
    header: &TupleHeader,
    snapshot: &Snapshot,
    resolve: &dyn Resolve,
    hints: &mut Hints,
) -> Result<bool> {
    Ok(match creator(header, snapshot, resolve, hints)? {
        Creator::Invisible => false,
        Creator::Own => header.xmax != snapshot.xid || header.has(infomask::XMAX_INVALID),
        Creator::Visible => matches!(
            deleter(header, snapshot, resolve, hints)?,
            Deleter::None | Deleter::NotYet
        ),
    })
}

/// Whether a writer may replace (update or delete) a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCheck {
    /// It is the writer's visible version and no one else replaced it: replace it.
    Free,
    /// Another transaction replaced it and is running or committed after the writer's
    /// snapshot began: first-updater-wins refuses the write.
    Conflict,
    /// The writer does not see it (its own later version, or one deleted before it
    /// began): there is nothing to replace here.
    Invisible,
}

/// PostgreSQL's `HeapTupleSatisfiesUpdate` under snapshot isolation's first-updater-wins
/// rule, without waiting: a tuple replaced by a running transaction is a conflict at once
/// (as the in-memory engine's rule is), not a wait for that transaction's end.
pub fn write_check(
    header: &TupleHeader,
    snapshot: &Snapshot,
    resolve: &dyn Resolve,
    hints: &mut Hints,
) -> Result<WriteCheck> {
    let own_creation = match creator(header, snapshot, resolve, hints)? {
        Creator::Invisible => return Ok(WriteCheck::Invisible),
        Creator::Own => true,
        Creator::Visible => false,
    };
    Ok(match deleter(header, snapshot, resolve, hints)? {
        Deleter::None => WriteCheck::Free,
        Deleter::Own | Deleter::Before => WriteCheck::Invisible,
        Deleter::NotYet => {
            debug_assert!(
                !own_creation,
                "only the creator sees its uncommitted tuple, so only it can replace it"
            );
            WriteCheck::Conflict
        }
    })
}

/// PostgreSQL's `HeapTupleSatisfiesVacuum` against a horizon (the oldest snapshot any
/// transaction holds or can take): whether no snapshot can see the tuple now or later.
/// A tuple whose creator aborted is dead at once; one whose deleter committed below the
/// horizon too.
pub fn is_dead(header: &TupleHeader, horizon: u64, resolve: &dyn Resolve) -> Result<bool> {
    let mut hints = Hints::default();
    let nobody = Snapshot {
        start: horizon,
        xid: 0,
    };
    if !is_frozen(header) && header.has(infomask::XMIN_INVALID) {
        return Ok(true);
    }
    if !is_frozen(header) {
        match resolve.resolve(header.xmin, u64::MAX)? {
            Fate::Aborted => return Ok(true),
            Fate::Running => return Ok(false),
            Fate::Committed { .. } => {}
        }
    }
    Ok(deleter(header, &nobody, resolve, &mut hints)? == Deleter::Before)
}

/// Whether a tuple may be frozen by vacuum: its creator committed below the horizon, so
/// every snapshot that exists or can sees it was created.
pub fn may_freeze(header: &TupleHeader, horizon: u64, resolve: &dyn Resolve) -> Result<bool> {
    if is_frozen(header) || header.has(infomask::XMIN_INVALID) {
        return Ok(false);
    }
    Ok(matches!(
        resolve.resolve(header.xmin, horizon)?,
        Fate::Committed { ts, .. } if ts < horizon
    ))
}

/// Whether a transaction other than the snapshot's own created or replaced the tuple and
/// is running or committed at or after the snapshot's start: a write the snapshot does not
/// see, which a write of the same key by the snapshot's transaction must not ignore
/// (first-updater-wins for an insert over a key another transaction wrote).
pub fn written_since(
    header: &TupleHeader,
    snapshot: &Snapshot,
    resolve: &dyn Resolve,
) -> Result<bool> {
    let unseen = |xid: u64| -> Result<bool> {
        if xid == 0 || (snapshot.xid != 0 && xid == snapshot.xid) {
            return Ok(false);
        }
        Ok(match resolve.resolve(xid, snapshot.start)? {
            Fate::Running => true,
            Fate::Aborted => false,
            Fate::Committed { ts, .. } => ts >= snapshot.start,
        })
    };
    let creator_unseen =
        !is_frozen(header) && !header.has(infomask::XMIN_INVALID) && unseen(header.xmin)?;
    Ok(creator_unseen || (!header.has(infomask::XMAX_INVALID) && unseen(header.xmax)?))
}

/// The snapshots that may read old versions, for eager pruning (Steam's EPO): every
/// transaction running now started at one of `starts`, or at or after `horizon` (the
/// clock read before the slots were, as `crate::version::ActiveSnapshots` promises), and
/// every snapshot taken later starts at or after `horizon` too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Readers {
    /// Every snapshot not in `starts` starts at or after this.
    pub horizon: u64,
    /// Start timestamps below `horizon`, ascending and distinct.
    pub starts: Vec<u64>,
}

impl Readers {
    /// The readers from a horizon and start timestamps in any order.
    pub fn new(horizon: u64, mut starts: Vec<u64>) -> Self {
        starts.retain(|&s| s < horizon);
        starts.sort_unstable();
        starts.dedup();
        Readers { horizon, starts }
    }

    /// Whether some snapshot, running or future, starts in `(after, up_to]`: sees a
    /// version created by a commit at `after` and replaced by one at `up_to`.
    pub fn any_in(&self, after: u64, up_to: u64) -> bool {
        if up_to >= self.horizon {
            return after < up_to;
        }
        let first_later = self.starts.partition_point(|&s| s <= after);
        self.starts.get(first_later).is_some_and(|&s| s <= up_to)
    }
}

/// Steam's rule for a version between the horizon and the newest: whether the tuple's
/// creator and its replacer both committed and no snapshot, running or future, starts
/// between the two commits, so no one sees it now or later. A frozen creator committed
/// before every snapshot. Being a row's newest version (a deleted row's last) is the
/// caller's to rule out: a writer of the key must still meet its deleter.
pub fn is_obsolete(header: &TupleHeader, readers: &Readers, resolve: &dyn Resolve) -> Result<bool> {
    if header.xmax == 0 || header.has(infomask::XMAX_INVALID) {
        return Ok(false);
    }
    let created = if is_frozen(header) {
        0
    } else if header.has(infomask::XMIN_INVALID) {
        return Ok(false);
    } else {
        match resolve.resolve(header.xmin, u64::MAX)? {
            Fate::Committed { ts, .. } => ts,
            Fate::Running | Fate::Aborted => return Ok(false),
        }
    };
    let replaced = match resolve.resolve(header.xmax, u64::MAX)? {
        Fate::Committed { ts, .. } => ts,
        Fate::Running | Fate::Aborted => return Ok(false),
    };
    debug_assert!(
        created <= replaced,
        "a version is replaced after it is created"
    );
    Ok(!readers.any_in(created, replaced))
}

/// Whether the tuple's creator aborted (a dead tuple rolled back, not superseded).
pub fn creator_aborted(header: &TupleHeader, resolve: &dyn Resolve) -> Result<bool> {
    if is_frozen(header) {
        return Ok(false);
    }
    if header.has(infomask::XMIN_INVALID) {
        return Ok(true);
    }
    Ok(resolve.resolve(header.xmin, u64::MAX)? == Fate::Aborted)
}
