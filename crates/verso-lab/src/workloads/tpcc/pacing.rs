//! A TPC-C terminal's keying and think times (clause 5.2.5), divided by a pacing factor.
//!
//! A terminal keys in a transaction for a fixed minimum time, submits it, waits for the
//! response, and then thinks for an exponentially distributed time before keying the
//! next one. Those times fix the load each terminal offers (at most about 1.29 New-Orders
//! a minute: ten terminals per warehouse give TPC-C's ceiling of 12.86 tpmC per
//! warehouse), so that more warehouses mean proportionally more load. The specification's times are seconds; a
//! 2-core machine serving hundreds of thousands of transactions a minute would need
//! thousands of warehouses to reach its limit at that pace. [`Pacing`] divides every
//! keying and think time by one factor: the mix, and the shape of each distribution, stay
//! TPC-C's, and only the time scale shrinks.

use std::time::Duration;

use super::transactions::{DELIVERY, NEW_ORDER, ORDER_STATUS, PAYMENT, STOCK_LEVEL};
use crate::rng::SplitMix64;
use crate::workload::LabError;

/// The transaction types of the mix, indexed as [`super::TRANSACTION_KINDS`].
const KINDS: usize = 5;

/// Minimum keying times in seconds, by transaction type (clause 5.2.5.7): New-Order 18,
/// Payment 3, Order-Status 2, Delivery 2, Stock-Level 2. A terminal keys for exactly the
/// minimum, as DBT2's do.
pub const KEYING_SECONDS: [f64; KINDS] = kinds(18.0, 3.0, 2.0, 2.0, 2.0);

/// Mean think times in seconds (clause 5.2.5.7): 12, 12, 10, 5, 5.
pub const MEAN_THINK_SECONDS: [f64; KINDS] = kinds(12.0, 12.0, 10.0, 5.0, 5.0);

/// Each type's share of the mix, as [`super::terminal::Terminal::next_kind`] draws it
/// (clause 5.2.3: 45% New-Order, 43% Payment, 4% each of the other three).
pub const MIX_SHARES: [f64; KINDS] = kinds(0.45, 0.43, 0.04, 0.04, 0.04);

/// Think times are truncated at this multiple of their mean (clause 5.2.5.4 asks that
/// the distribution reach at least ten times its mean; cut there, one draw from the far
/// tail cannot idle a terminal for the whole run. DBT2's draw, -ln(r + 10^-6), stops near
/// 13.8 times.)
pub const THINK_TRUNCATION: f64 = 10.0;

/// New-Order's share that rolls back by design, with an unused item (clause 2.4.1.4;
/// [`super::terminal::Terminal::new_order`] draws it).
pub const NEW_ORDER_ROLLBACK_SHARE: f64 = 0.01;

/// The smallest `--pacing`: a thousand times TPC-C's times (a New-Order keyed for five
/// hours) is far beyond any run, and smaller factors overflow a duration.
pub const MIN_PACING: f64 = 0.001;

/// Five per-type values in the order of [`super::TRANSACTION_KINDS`].
const fn kinds(
    new_order: f64,
    payment: f64,
    order_status: f64,
    delivery: f64,
    stock_level: f64,
) -> [f64; KINDS] {
    let mut values = [0.0; KINDS];
    values[NEW_ORDER] = new_order;
    values[PAYMENT] = payment;
    values[ORDER_STATUS] = order_status;
    values[DELIVERY] = delivery;
    values[STOCK_LEVEL] = stock_level;
    values
}

/// TPC-C's keying and think times divided by a factor (`--pacing`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pacing {
    factor: f64,
}

impl Pacing {
    /// The times divided by `factor`, which must be a positive, finite number (1: the
    /// specification's own times).
    pub fn new(factor: f64) -> Result<Pacing, LabError> {
        if !(factor.is_finite() && factor >= MIN_PACING) {
            return Err(LabError::BadOption(format!(
                "--pacing {factor}: keying and think times are divided by it, so it must be \
                 a number of at least {MIN_PACING} (1: TPC-C's own times)"
            )));
        }
        Ok(Pacing { factor })
    }

    /// What the times are divided by.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    fn scaled(&self, seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds / self.factor)
    }

    /// How long a terminal keys in a transaction of type `kind` before submitting it.
    pub fn keying_time(&self, kind: usize) -> Duration {
        self.scaled(KEYING_SECONDS[kind])
    }

    /// The think time after a transaction of type `kind` for a uniform draw `uniform` in
    /// [0, 1): the inverse of the negative exponential distribution with the type's mean,
    /// -ln(1 - uniform) x mean (clause 5.2.5.4), cut at [`THINK_TRUNCATION`] x mean.
    pub fn think_time_for(&self, kind: usize, uniform: f64) -> Duration {
        let mean = MEAN_THINK_SECONDS[kind];
        let drawn = -(1.0 - uniform.clamp(0.0, 1.0)).ln() * mean;
        self.scaled(drawn.min(THINK_TRUNCATION * mean))
    }

    /// A think time after a transaction of type `kind`, drawn from `rng`.
    pub fn think_time(&self, kind: usize, rng: &mut SplitMix64) -> Duration {
        self.think_time_for(kind, rng.next_f64())
    }

    /// The mean think time after type `kind`: the truncated distribution's, mean x (1 -
    /// e^-10), a hair under the nominal mean.
    pub fn mean_think_time(&self, kind: usize) -> Duration {
        let mean = MEAN_THINK_SECONDS[kind];
        self.scaled(mean * (1.0 - (-THINK_TRUNCATION).exp()))
    }

    /// A terminal's mean keying plus think time over the mix: with instant responses, the
    /// mean time between its submissions (about 21 s at pacing 1).
    pub fn mean_cycle(&self) -> Duration {
        (0..KINDS)
            .map(|kind| {
                (self.keying_time(kind) + self.mean_think_time(kind)).mul_f64(MIX_SHARES[kind])
            })
            .sum()
    }

    /// Transactions per minute `terminals` terminals submit with instant responses: the
    /// load they offer.
    pub fn offered_per_minute(&self, terminals: u64) -> f64 {
        terminals as f64 * 60.0 / self.mean_cycle().as_secs_f64()
    }
}
