//! A cheap clock for the work the engine times once per write (Steam's eager prune and the
//! active-list refresh inside it): the processor's time-stamp counter, converted to
//! nanoseconds only when the counters are read.
//!
//! Why not `Instant`: on a virtual machine a `clock_gettime` through the vDSO costs about
//! 50 ns here, and timing a prune reads the clock twice, once per write of a row that has
//! an older version. Behind a long snapshot that is nearly every write, and the two reads
//! were about 3% of TPC-B's time (`docs/lab-notebook.md`). Reading the counter costs about
//! 12 ns.
//!
//! Definitions: a *tick* is one step of the counter. On x86_64 it is the TSC, which runs at
//! a constant rate on every processor Linux uses it as a clock source on (`constant_tsc`);
//! elsewhere there is no stable counter instruction, so a tick is a nanosecond of `Instant`
//! since the anchor.
//!
//! Invariant: a [`Rate`] converts linearly, so sums and comparisons of tick counts carry
//! over to the nanoseconds one rate converts them to.
//!
//! Conversion: the anchor pairs an `Instant` with a tick reading, taken when the first
//! database opens. A rate is the nanoseconds elapsed since then over the ticks elapsed, so
//! its error is the skew between its two reads (tens of nanoseconds) over the time since
//! the anchor: below 0.01% a millisecond in.

use std::sync::OnceLock;
use std::time::Instant;

struct Anchor {
    instant: Instant,
    ticks: u64,
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

fn anchor() -> &'static Anchor {
    ANCHOR.get_or_init(|| Anchor {
        instant: Instant::now(),
        ticks: raw_ticks(),
    })
}

/// Takes the anchor the conversion measures its rate from, if nobody has yet: called when
/// a database opens, long before its counters are read.
pub(crate) fn start() {
    anchor();
}

/// The clock now, in ticks. Subtract two readings (`saturating_sub`: a thread may move to
/// another processor between them) for a duration to add to a tick counter.
#[inline(always)]
pub(crate) fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        raw_ticks()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        anchor().instant.elapsed().as_nanos() as u64
    }
}

#[inline(always)]
#[allow(unsafe_code)]
fn raw_ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC reads the time-stamp counter into registers; it touches no memory and
    // is in every x86_64 processor's baseline (the intrinsic is `unsafe` only because it is
    // a `core::arch` intrinsic).
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0 // unused: `now` counts nanoseconds since the anchor instead
    }
}

/// How many nanoseconds a tick lasts, measured once: [`Rate::to_nanos`] is linear, so sums
/// and comparisons of tick counts converted at one rate carry over to their nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rate {
    nanos: u128,
    ticks: u128,
}

impl Rate {
    /// The rate over the time since the anchor; its error is the skew between this call's
    /// two clock reads over that time.
    pub(crate) fn measure() -> Rate {
        if cfg!(not(target_arch = "x86_64")) {
            return Rate { nanos: 1, ticks: 1 };
        }
        let anchor = anchor();
        let ticks = raw_ticks().saturating_sub(anchor.ticks);
        let nanos = anchor.instant.elapsed().as_nanos();
        if ticks == 0 || nanos == 0 {
            // A counter or clock that stood still since the anchor: nothing to measure a
            // rate from yet (and nothing timed can have accumulated much either).
            return Rate { nanos: 1, ticks: 1 };
        }
        Rate {
            nanos,
            ticks: u128::from(ticks),
        }
    }

    /// Converts a tick count (a sum of durations) to nanoseconds.
    pub(crate) fn to_nanos(self, ticks: u64) -> u64 {
        debug_assert!(self.ticks > 0);
        (u128::from(ticks) * self.nanos / self.ticks) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_the_nanoseconds_they_span() {
        start();
        let wall = Instant::now();
        let first = now();
        // Busy for about 20 ms of wall time (sleeping would do too; spinning keeps the
        // thread on a processor, which is what timing a prune looks like).
        while wall.elapsed().as_millis() < 20 {
            std::hint::spin_loop();
        }
        let spent_ticks = now().saturating_sub(first);
        let spent_wall = wall.elapsed().as_nanos() as f64;
        let converted = Rate::measure().to_nanos(spent_ticks) as f64;
        assert!(spent_ticks > 0, "the clock moved");
        // Generous bounds: the two clocks are read at slightly different moments and a
        // virtual machine may stall the thread between them.
        assert!(
            converted > spent_wall * 0.8 && converted < spent_wall * 1.25,
            "{converted} ns converted against {spent_wall} ns of wall time"
        );
        assert_eq!(Rate::measure().to_nanos(0), 0);
    }

    #[test]
    fn one_rate_converts_sums_and_order_exactly() {
        start();
        let rate = Rate::measure();
        let (a, b) = (1_000_000u64, 3_000_000u64);
        let (na, nb, nab) = (rate.to_nanos(a), rate.to_nanos(b), rate.to_nanos(a + b));
        assert!(na <= nb);
        // Each conversion rounds down once, so the sum of two is at most one below.
        assert!(nab >= na + nb && nab <= na + nb + 1, "{na} + {nb} vs {nab}");
    }
}
