//! The emulated persistent memory's media, as the lab sets it: a line size and, optionally,
//! a write bandwidth as a share of DRAM's, turned into the engine's `PmOptions` (a delay per
//! line persisted, `verso::pmem::emulated_line_delay`) with this machine's DRAM write
//! bandwidth, measured once per process. `--pm-line` / `--pm-write-share` and the
//! TB-Collect experiments that vary the media (`tb-fig1`, `tb-fig15b`) share it, so one
//! rule gives every run the same emulated media. An emulation of write bandwidth only:
//! reads, and the media's latency, are the host's.

use std::sync::OnceLock;

use verso::pmem::{LineSize, PmOptions};

use crate::workload::LabError;

/// The bytes the DRAM bandwidth measurement copies: far beyond the caches.
const BANDWIDTH_PROBE_BYTES: usize = 256 << 20;

/// The environment variable through which a process the lab starts for one point of an
/// experiment inherits its parent's measurement, so that every point of one experiment
/// runs on the same emulated media (a measurement moves by a tenth or more between
/// processes on a shared VM).
pub const BANDWIDTH_ENV: &str = "VERSO_LAB_DRAM_WRITE_BANDWIDTH";

static DRAM_BYTES_PER_SECOND: OnceLock<f64> = OnceLock::new();

/// This machine's DRAM write bandwidth in bytes per second: inherited from the parent
/// process ([`BANDWIDTH_ENV`]), or measured at the first call.
pub fn dram_write_bandwidth() -> f64 {
    *DRAM_BYTES_PER_SECOND.get_or_init(|| {
        inherited_bandwidth()
            .unwrap_or_else(|| verso::pmem::measure_dram_write_bandwidth(BANDWIDTH_PROBE_BYTES))
    })
}

/// The bandwidth this process measured or inherited, if it needed one yet: what the
/// processes it starts inherit.
pub fn known_dram_write_bandwidth() -> Option<f64> {
    DRAM_BYTES_PER_SECOND.get().copied()
}

fn inherited_bandwidth() -> Option<f64> {
    let text = std::env::var(BANDWIDTH_ENV).ok()?;
    let bandwidth: f64 = text.parse().ok()?;
    (bandwidth.is_finite() && bandwidth > 0.0).then_some(bandwidth)
}

/// A region counting lines of `line` bytes, each line persisted delayed as if the media
/// wrote at `write_share` of DRAM's bandwidth (none: no delay).
pub fn emulated_media(line: LineSize, write_share: Option<f64>) -> Result<PmOptions, LabError> {
    let mut pm = PmOptions::default().line(line);
    if let Some(share) = write_share {
        let delay = verso::pmem::emulated_line_delay(line, share, dram_write_bandwidth())
            .map_err(|e| LabError::BadOption(format!("a media write share of {share}: {e}")))?;
        pm = pm.line_delay(delay);
    }
    Ok(pm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_write_share_and_a_longer_line_delay_each_line_more() {
        // Its bandwidth measurement allocates and frees 512 MiB.
        let _alone = crate::memory::tests::measuring();
        let optane = emulated_media(LineSize::B256, Some(0.3)).expect("Optane-like media");
        let table3_a = emulated_media(LineSize::B256, Some(0.5)).expect("configuration A");
        let table3_b = emulated_media(LineSize::B128, Some(0.5)).expect("configuration B");
        let dram = emulated_media(LineSize::B64, Some(1.0)).expect("DRAM-like media");
        assert!(optane.line_delay > table3_a.line_delay);
        assert!(table3_a.line_delay > table3_b.line_delay);
        assert_eq!(dram.line_delay, std::time::Duration::ZERO);
        assert_eq!(table3_b.line, LineSize::B128);
        let undelayed = emulated_media(LineSize::B256, None).expect("no delay");
        assert_eq!(undelayed.line_delay, std::time::Duration::ZERO);
        assert!(matches!(
            emulated_media(LineSize::B256, Some(0.0)),
            Err(LabError::BadOption(_))
        ));
    }
}
