//! 'vac': tuple-level background vacuuming with a dirty-block bitmap (Wu et al. §5.1, the
//! scheme their Table 1 gives Oracle/MySQL, Postgres, HYRISE, MemSQL, SAP HANA and NuoDB).
//!
//! - **Granularity.** Tuple-level: nothing looks at transactions' write sets. A committed
//!   transaction leaves nothing queued; its versions are found by examining rows.
//! - **Blocks.** Each table's rows are kept in a fixed number of blocks (by primary-key
//!   hash, `engine/vacuum.rs`), with one dirty bit per block.
//! - **Writers** set the dirty bit of the block of every row they write (and of every row
//!   they insert). Nothing else.
//! - **The vacuum thread** (one, every period, default 10 ms) takes the watermark (the
//!   oldest running snapshot, from the slots), and for every dirty block clears its bit and
//!   examines each row: unlinks the versions no snapshot at or after the watermark applies
//!   (their end timestamp is below it), removes secondary entries only those had, and
//!   buries rows no snapshot can see. A block with a row that still holds versions (needed
//!   by a snapshot, or not committed yet) is marked dirty again, so it is examined again.
//!   Blocks nobody wrote since are skipped: the bitmap is Wu et al.'s "optimization".
//!
//! Reclaim bound: the watermark ([`Collector::reclaim_bound`]'s default), exact: every
//! running transaction published its start in its slot before reading, and one beginning
//! later starts at or after the clock read before the scan.
//!
//! Nothing is lost: a row written after its block's bit was cleared sets the bit again
//! (the write happens after the clear, so the next pass sees it); a row written before
//! the clear is examined by this pass, after the write (the clear comes first).

use std::time::Duration;

use super::{Collector, Finalizing, GcConfig};

/// The 'vac' collector: its state is in the tables' block directories.
pub(crate) struct Vacuum;

impl Collector for Vacuum {
    const NAME: &'static str = "vac";
    const FINALIZING: Finalizing = Finalizing::TupleLevel;
    const DIRTY_BLOCKS: bool = true;
    /// Wu et al. give no period; a pass over a large dirty table takes milliseconds, and on
    /// a 2-core machine the vacuum thread shares a core with the workers.
    const DEFAULT_BACKGROUND_PERIOD: Duration = Duration::from_millis(10);

    fn new(_config: &GcConfig) -> Self {
        Vacuum
    }
}
