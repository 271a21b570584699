//! 'coop': tuple-level cooperative cleaning (Wu et al. §5.1; Hekaton's design, their
//! Table 1), only with the oldest-to-newest append-only storage.
//!
//! - **Spotting.** Every reader and writer walks an O2N chain from its oldest version.
//!   With the watermark its thread last took (refreshed at most every millisecond, checked
//!   every 32 begins; a stale one is only lower, so it spots less, never wrongly), it checks whether the oldest version is
//!   obsolete (the next one committed below the watermark). If so it claims the row (a flag
//!   in the row, so a row is listed once) and records it in its table's list of rows to
//!   clean, "a global data structure".
//! - **Cleaning.** The GC thread (every period, default 1 ms) takes every list and, with
//!   a fresh watermark, unlinks what is obsolete in each recorded row, removes secondary
//!   entries only those versions had, and buries rows no snapshot can see. The thread no
//!   longer has to find garbage; the workers found it on their way.
//! - **Dusty corners.** Rows nobody walks are never recorded, so every
//!   [`Collector::FULL_PASS_EVERY_ROUNDS`] rounds (1000: about a second) the thread
//!   examines every row of every table, as 'vac' does without its bitmap.
//! - **Only O2N**: in the other storages a walk begins at the newest version and stops at
//!   the first visible one, never reaching the obsolete ones. `Database::open` refuses
//!   'coop' for them.
//!
//! Reclaim bound: the watermark, as for 'vac'.

use super::{Collector, Finalizing, GcConfig};

/// The 'coop' collector: its state is in the tables' lists of recorded rows.
pub(crate) struct Cooperative;

impl Collector for Cooperative {
    const NAME: &'static str = "coop";
    const FINALIZING: Finalizing = Finalizing::TupleLevel;
    const COOPERATIVE: bool = true;
    const FULL_PASS_EVERY_ROUNDS: u64 = 1000;

    fn new(_config: &GcConfig) -> Self {
        Cooperative
    }
}
