//! Watermark-only collection (HyPer): transaction-level, interspersed, and blind to the
//! versions between active snapshots. Everything committed after the oldest active snapshot
//! stays until that snapshot ends: the baseline that shows why Steam prunes eagerly.
//!
//! Reclaim bound: the slot watermark, as Steam's.

use super::{Collector, Finalizing, GcConfig};

/// HyPer's watermark-only collector: Steam without EPO.
pub(crate) struct WatermarkOnly;

impl Collector for WatermarkOnly {
    const NAME: &'static str = "watermark";
    const FINALIZING: Finalizing = Finalizing::Interspersed;

    fn new(_config: &GcConfig) -> Self {
        WatermarkOnly
    }
}
