//! Watermark-only collection (HyPer): transaction-level, interspersed, and blind to the
//! versions between active snapshots. Everything committed after the oldest active snapshot
//! stays until that snapshot ends: the baseline that shows why Steam prunes eagerly.

use super::Collector;

/// HyPer's watermark-only collector: Steam without EPO.
pub(crate) struct WatermarkOnly;

impl Collector for WatermarkOnly {
    const NAME: &'static str = "watermark";
    const EAGER_PRUNING: bool = false;
}
