//! YCSB's Zipfian and scrambled Zipfian key generators, written after YCSB's
//! `ZipfianGenerator` and `ScrambledZipfianGenerator` (Gray et al., "Quickly generating
//! billion-record synthetic databases", SIGMOD 1994).
//!
//! [`Zipfian`] draws a *rank* in `0..n`: rank 0 is the most popular, with probability
//! `1 / zeta(n, theta)`, rank 1 has `1 / (2^theta * zeta(n, theta))`, and so on (the two
//! first ranks are exact; the others follow Gray's closed-form approximation, as in YCSB).
//! [`ScrambledZipfian`] hashes the rank with FNV-1a 64 and takes it modulo the item count,
//! so the popular items are spread over the key space instead of clustered at its start.
//!
//! Two ways to pick the rank space:
//! - [`ScrambledZipfian::new`]: ranks over the item count itself, with `zeta` computed for
//!   that count and theta. The benchmarks use this one.
//! - [`ScrambledZipfian::ycsb`]: YCSB's own choice, ranks over 10^10 items (so that every
//!   key is reachable after the modulo), with YCSB's precomputed `zeta(10^10, 0.99) =
//!   26.46902820178302` when theta is 0.99, and `zeta(10^10, theta)` otherwise (computed
//!   here by Euler–Maclaurin summation instead of YCSB's ten-billion-term loop).
//!
//! YCSB's formula needs `0 < theta < 1`. The key-value experiment of the Steam paper (§5.5)
//! sweeps theta from 0.0 to 1.0 inclusive, so [`AnyZipf`] covers every `theta >= 0` with
//! Hörmann and Derflinger's rejection-inversion sampler ([`RejectionInversionZipf`], exact
//! for any exponent), scrambled the same way.

use crate::rng::SplitMix64;

/// FNV-1a 64 offset basis.
pub const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// FNV-1a 64 prime (1099511628211).
pub const FNV_PRIME_64: u64 = 0x0000_0100_0000_01B3;

/// YCSB's rank space for the scrambled generator.
pub const YCSB_ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB's `zeta(10^10, 0.99)`.
pub const YCSB_ZETAN: f64 = 26.469_028_201_783_02;
/// The theta YCSB's precomputed zeta belongs to.
pub const YCSB_ZIPFIAN_CONSTANT: f64 = 0.99;

/// FNV-1a 64 of a byte string.
pub fn fnv1a64_bytes(bytes: &[u8]) -> u64 {
    let mut hash = FNV_OFFSET_BASIS_64;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    hash
}

/// FNV-1a 64 of the eight little-endian bytes of `value` (YCSB's `Utils.fnvhash64` before
/// its final `Math.abs`).
#[inline]
pub fn fnv1a64(value: u64) -> u64 {
    let mut hash = FNV_OFFSET_BASIS_64;
    let mut v = value;
    for _ in 0..8 {
        hash ^= v & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    hash
}

/// YCSB's `Utils.fnvhash64`: FNV-1a 64 read as a Java `long`, then `Math.abs` (which leaves
/// `Long.MIN_VALUE` as it is; here it becomes 2^63).
#[inline]
pub fn ycsb_fnvhash64(value: u64) -> u64 {
    (fnv1a64(value) as i64).unsigned_abs()
}

/// Above this many items [`zeta`] switches from the plain sum to Euler–Maclaurin.
const EXACT_ZETA_LIMIT: u64 = 50_000_000;
/// Terms summed one by one before the Euler–Maclaurin tail.
const EM_HEAD: u64 = 10_000;

/// `zeta(n, theta) = sum_{i=1..n} 1 / i^theta`, the normalizing constant of a Zipfian
/// distribution over `n` items.
///
/// Up to 50 million items the terms are summed in YCSB's order (`i = 1, 2, ...`); above
/// that the first 10,000 are summed and the rest taken from the Euler–Maclaurin formula,
/// whose error there is far below `f64` rounding.
pub fn zeta(n: u64, theta: f64) -> f64 {
    if n <= EXACT_ZETA_LIMIT {
        zeta_sum(0, n, theta, 0.0)
    } else {
        zeta_sum(0, EM_HEAD - 1, theta, 0.0) + euler_maclaurin_tail(EM_HEAD, n, theta)
    }
}

/// YCSB's `zetastatic(st, n, theta, initialsum)`: `initialsum + sum_{i=st+1..n} 1/i^theta`.
pub fn zeta_sum(st: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
    let mut sum = initial_sum;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// `sum_{i=m..n} i^-theta` by Euler–Maclaurin with three Bernoulli correction terms.
fn euler_maclaurin_tail(m: u64, n: u64, theta: f64) -> f64 {
    let (mf, nf) = (m as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        (nf / mf).ln()
    } else {
        (nf.powf(1.0 - theta) - mf.powf(1.0 - theta)) / (1.0 - theta)
    };
    // Odd derivatives of x^-theta: f' = -t x^(-t-1), f''' = -t(t+1)(t+2) x^(-t-3), ...
    let t = theta;
    let d1 = |x: f64| -t * x.powf(-t - 1.0);
    let d3 = |x: f64| -t * (t + 1.0) * (t + 2.0) * x.powf(-t - 3.0);
    let d5 = |x: f64| -t * (t + 1.0) * (t + 2.0) * (t + 3.0) * (t + 4.0) * x.powf(-t - 5.0);
    integral + (f(mf) + f(nf)) / 2.0 + (d1(nf) - d1(mf)) / 12.0 - (d3(nf) - d3(mf)) / 720.0
        + (d5(nf) - d5(mf)) / 30_240.0
}

/// YCSB's `ZipfianGenerator`: ranks in `0..items`, rank 0 the most popular.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
    /// `1 + 0.5^theta`: `u * zetan` below it means rank 1.
    second_cut: f64,
}

impl Zipfian {
    /// A generator over `items` ranks with skew `theta`, computing `zeta(items, theta)`.
    ///
    /// # Panics
    /// If `items` is 0 or `theta` is not in `(0, 1)` (YCSB's formula divides by
    /// `1 - theta`).
    pub fn new(items: u64, theta: f64) -> Self {
        Self::with_zeta(items, theta, zeta(items, theta))
    }

    /// Like [`Zipfian::new`] with a precomputed `zeta(items, theta)`.
    pub fn with_zeta(items: u64, theta: f64, zetan: f64) -> Self {
        assert!(items > 0, "a Zipfian distribution needs at least one item");
        assert!(
            theta > 0.0 && theta < 1.0,
            "YCSB's Zipfian generator needs 0 < theta < 1, got {theta}"
        );
        let zeta2theta = zeta(2, theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian {
            items,
            theta,
            zetan,
            alpha: 1.0 / (1.0 - theta),
            eta,
            second_cut: 1.0 + 0.5f64.powf(theta),
        }
    }

    /// Number of ranks.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The skew.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// `zeta(items, theta)`.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// The probability of rank 0.
    pub fn top_probability(&self) -> f64 {
        1.0 / self.zetan
    }

    /// The rank for a uniform `u` in `[0, 1)` (YCSB's `nextLong`).
    #[inline]
    pub fn rank_for(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.second_cut {
            return 1.min(self.items - 1);
        }
        let rank = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // YCSB never clamps; rounding can only reach `items` for u within 2^-53 of 1.
        rank.min(self.items - 1)
    }

    /// The next rank.
    #[inline]
    pub fn next_rank(&self, rng: &mut SplitMix64) -> u64 {
        self.rank_for(rng.next_f64())
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a Zipfian rank, hashed with FNV-1a 64, modulo the
/// item count. Items are `0..items`.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    ranks: Zipfian,
    items: u64,
}

impl ScrambledZipfian {
    /// Ranks over `items` themselves, `zeta(items, theta)` computed for them.
    ///
    /// # Panics
    /// As [`Zipfian::new`].
    pub fn new(items: u64, theta: f64) -> Self {
        ScrambledZipfian {
            ranks: Zipfian::new(items, theta),
            items,
        }
    }

    /// YCSB's exact configuration: ranks over [`YCSB_ITEM_COUNT`] (10^10), with
    /// [`YCSB_ZETAN`] when `theta` is 0.99.
    ///
    /// # Panics
    /// As [`Zipfian::new`].
    pub fn ycsb(items: u64, theta: f64) -> Self {
        assert!(items > 0, "a Zipfian distribution needs at least one item");
        let zetan = if theta == YCSB_ZIPFIAN_CONSTANT {
            YCSB_ZETAN
        } else {
            zeta(YCSB_ITEM_COUNT, theta)
        };
        ScrambledZipfian {
            ranks: Zipfian::with_zeta(YCSB_ITEM_COUNT, theta, zetan),
            items,
        }
    }

    /// Number of items (outputs are `0..items`).
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The rank generator underneath.
    pub fn ranks(&self) -> &Zipfian {
        &self.ranks
    }

    /// The item a rank maps to.
    #[inline]
    pub fn item_of_rank(&self, rank: u64) -> u64 {
        ycsb_fnvhash64(rank) % self.items
    }

    /// The next item, in `0..items`.
    #[inline]
    pub fn next(&self, rng: &mut SplitMix64) -> u64 {
        self.item_of_rank(self.ranks.next_rank(rng))
    }
}

/// An exact Zipf sampler for any exponent `theta >= 0` (0 is uniform, 1 is the harmonic
/// law): rejection-inversion after Hörmann and Derflinger, "Rejection-inversion to generate
/// variates from monotone discrete distributions" (1996), as in Apache Commons RNG. Ranks
/// are `0..items`, rank 0 the most popular, with probability proportional to
/// `1 / (rank + 1)^theta`. About one draw and two logarithms per sample; no table.
#[derive(Clone, Debug)]
pub struct RejectionInversionZipf {
    items: u64,
    theta: f64,
    h_integral_x1: f64,
    h_integral_items: f64,
    /// Samples within this distance of an integer are accepted without the exact test.
    squeeze: f64,
}

impl RejectionInversionZipf {
    /// A sampler over `items` ranks.
    ///
    /// # Panics
    /// If `items` is 0 or `theta` is negative or not finite.
    pub fn new(items: u64, theta: f64) -> Self {
        assert!(items > 0, "a Zipf distribution needs at least one item");
        assert!(
            theta.is_finite() && theta >= 0.0,
            "the Zipf exponent must be finite and at least 0, got {theta}"
        );
        let mut sampler = RejectionInversionZipf {
            items,
            theta,
            h_integral_x1: 0.0,
            h_integral_items: 0.0,
            squeeze: 0.0,
        };
        sampler.h_integral_x1 = sampler.h_integral(1.5) - 1.0;
        sampler.h_integral_items = sampler.h_integral(items as f64 + 0.5);
        sampler.squeeze =
            2.0 - sampler.h_integral_inverse(sampler.h_integral(2.5) - sampler.h(2.0));
        sampler
    }

    /// Number of ranks.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The exponent.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The next rank, in `0..items`.
    pub fn next_rank(&self, rng: &mut SplitMix64) -> u64 {
        loop {
            let u = self.h_integral_items
                + rng.next_f64() * (self.h_integral_x1 - self.h_integral_items);
            let x = self.h_integral_inverse(u);
            // Ranks are 1-based in the method; clamp the rounding at both ends.
            let k = ((x + 0.5) as u64).clamp(1, self.items);
            if k as f64 - x <= self.squeeze
                || u >= self.h_integral(k as f64 + 0.5) - self.h(k as f64)
            {
                return k - 1;
            }
        }
    }

    /// `h(x) = x^-theta`.
    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    /// `H(x) = (x^(1-theta) - 1) / (1 - theta)`, or `ln x` at theta 1: an antiderivative
    /// of `h`, written so that it stays accurate near theta 1.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        expm1_over_x((1.0 - self.theta) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        // Rounding can push the argument of ln1p below -1; clamp it.
        let t = (x * (1.0 - self.theta)).max(-1.0);
        (ln1p_over_x(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, continuous at 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// A scrambled Zipf key generator for any `theta >= 0`: YCSB's generator where its formula
/// holds (`0 < theta < 1`), a uniform draw at 0, and the exact rejection-inversion sampler
/// from 1 up; ranks are scrambled with FNV-1a 64 modulo the item count, as YCSB does.
#[derive(Clone, Debug)]
pub enum AnyZipf {
    /// `theta == 0`: every item equally likely (not scrambled; there is nothing to spread).
    Uniform {
        /// Number of items.
        items: u64,
    },
    /// `0 < theta < 1`: YCSB's scrambled Zipfian.
    Ycsb(ScrambledZipfian),
    /// `theta >= 1`: rejection-inversion, scrambled.
    Exact(RejectionInversionZipf),
}

impl AnyZipf {
    /// The generator for `items` items and skew `theta`.
    ///
    /// # Panics
    /// If `items` is 0 or `theta` is negative or not finite.
    pub fn new(items: u64, theta: f64) -> Self {
        assert!(items > 0, "a Zipf distribution needs at least one item");
        if theta == 0.0 {
            AnyZipf::Uniform { items }
        } else if theta > 0.0 && theta < 1.0 {
            AnyZipf::Ycsb(ScrambledZipfian::new(items, theta))
        } else {
            AnyZipf::Exact(RejectionInversionZipf::new(items, theta))
        }
    }

    /// Number of items (outputs are `0..items`).
    pub fn items(&self) -> u64 {
        match self {
            AnyZipf::Uniform { items } => *items,
            AnyZipf::Ycsb(zipf) => zipf.items(),
            AnyZipf::Exact(zipf) => zipf.items(),
        }
    }

    /// The next item, in `0..items`.
    #[inline]
    pub fn next(&self, rng: &mut SplitMix64) -> u64 {
        match self {
            AnyZipf::Uniform { items } => rng.below(*items),
            AnyZipf::Ycsb(zipf) => zipf.next(rng),
            AnyZipf::Exact(zipf) => ycsb_fnvhash64(zipf.next_rank(rng)) % zipf.items(),
        }
    }
}

/// How often [`draw_distinct`] draws again for one key before it takes the next unused item
/// instead.
pub const REDRAWS_PER_KEY: u32 = 64;

/// Draws `count` distinct items of `0..items` into `keys` with `next`. A draw that repeats
/// an item already chosen is drawn again, as DBx1000 does, up to [`REDRAWS_PER_KEY`] times;
/// then the next item after the last draw (wrapping) that is not yet chosen is taken.
///
/// Why the bound: the scrambled generators never produce some items (`fnv(rank) % items`
/// is not one-to-one) and a steep skew makes rare items unreachable in practice, so drawing
/// until something new comes up could go on forever once `count` nears the number of items
/// the generator really produces. At the lab's sizes the bound is never reached (a
/// transaction's keys are few against the rows), and the draws are DBx1000's.
///
/// # Panics
/// If `count > items`.
pub fn draw_distinct(items: u64, count: usize, keys: &mut Vec<u64>, mut next: impl FnMut() -> u64) {
    assert!(
        count as u64 <= items,
        "{count} distinct keys of {items} items"
    );
    keys.clear();
    while keys.len() < count {
        let mut key = next();
        let mut redraws = 0;
        while keys.contains(&key) {
            if redraws < REDRAWS_PER_KEY {
                key = next();
                redraws += 1;
            } else {
                key = (key + 1) % items;
            }
        }
        debug_assert!(key < items);
        keys.push(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_published_vectors() {
        // From the FNV reference test suite (Landon Curt Noll).
        assert_eq!(fnv1a64_bytes(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64_bytes(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64_bytes(b"foobar"), 0x8594_4171_f739_67e8);
        for v in [0u64, 1, 255, 256, 0xdead_beef, u64::MAX] {
            assert_eq!(fnv1a64(v), fnv1a64_bytes(&v.to_le_bytes()));
        }
        // Math.abs of a Java long.
        for v in 0..10_000u64 {
            let h = fnv1a64(v) as i64;
            assert_eq!(ycsb_fnvhash64(v), h.unsigned_abs());
            assert!(ycsb_fnvhash64(v) <= 1 << 63);
        }
    }

    #[test]
    fn zeta_small_cases() {
        assert_eq!(zeta(1, 0.6), 1.0);
        assert!((zeta(2, 0.99) - (1.0 + 2f64.powf(-0.99))).abs() < 1e-15);
        assert!((zeta(3, 0.5) - (1.0 + 1.0 / 2f64.sqrt() + 1.0 / 3f64.sqrt())).abs() < 1e-15);
        // Incremental form equals the one-shot sum.
        let a = zeta_sum(0, 1000, 0.7, 0.0);
        let b = zeta_sum(500, 1000, 0.7, zeta_sum(0, 500, 0.7, 0.0));
        assert!((a - b).abs() < 1e-12);
    }

    #[test]
    fn euler_maclaurin_agrees_with_the_plain_sum() {
        for theta in [0.2, 0.6, 0.8, 0.99] {
            let n = 3_000_000;
            let exact = zeta_sum(0, n, theta, 0.0);
            let em = zeta_sum(0, EM_HEAD - 1, theta, 0.0) + euler_maclaurin_tail(EM_HEAD, n, theta);
            assert!(
                ((exact - em) / exact).abs() < 1e-11,
                "theta {theta}: {exact} vs {em}"
            );
        }
    }

    #[test]
    fn zeta_of_ten_billion_matches_ycsbs_constant() {
        let z = zeta(YCSB_ITEM_COUNT, YCSB_ZIPFIAN_CONSTANT);
        assert!(
            ((z - YCSB_ZETAN) / YCSB_ZETAN).abs() < 1e-9,
            "zeta(1e10, 0.99) = {z}, YCSB has {YCSB_ZETAN}"
        );
    }

    #[test]
    fn all_outputs_in_range() {
        let mut rng = SplitMix64::new(42);
        for items in [1u64, 2, 3, 7, 1000, 2_000_000] {
            for theta in [0.2, 0.6, 0.99] {
                let z = Zipfian::new(items, theta);
                let s = ScrambledZipfian::new(items, theta);
                let y = ScrambledZipfian::ycsb(items, theta);
                for _ in 0..20_000 {
                    assert!(z.next_rank(&mut rng) < items);
                    assert!(s.next(&mut rng) < items);
                    assert!(y.next(&mut rng) < items);
                }
                // The extremes of u.
                assert_eq!(z.rank_for(0.0), 0);
                assert!(z.rank_for(1.0 - f64::EPSILON) < items);
            }
        }
    }

    #[test]
    fn deterministic_for_a_seed() {
        let gen = ScrambledZipfian::new(2_000_000, 0.6);
        let draw = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..1000).map(|_| gen.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    /// Counts of each output over `samples` draws.
    fn histogram(items: u64, samples: usize, mut next: impl FnMut() -> u64) -> Vec<u64> {
        let mut counts = vec![0u64; items as usize];
        for _ in 0..samples {
            counts[next() as usize] += 1;
        }
        counts
    }

    #[test]
    fn theta_099_gives_the_top_rank_its_share() {
        let items = 10_000;
        let samples = 2_000_000;
        let z = Zipfian::new(items, 0.99);
        // zeta(10^4, 0.99) is about 10.22 (ln 10^4 + 0.58 = 9.79 at theta 1): rank 0 gets
        // about 9.8%.
        assert!((10.1..10.35).contains(&z.zetan()), "zeta {}", z.zetan());
        let mut rng = SplitMix64::new(1);
        let counts = histogram(items, samples, || z.next_rank(&mut rng));
        let p0 = counts[0] as f64 / samples as f64;
        let p1 = counts[1] as f64 / samples as f64;
        let expected0 = 1.0 / z.zetan();
        let expected1 = expected0 / 2f64.powf(0.99);
        assert!(
            (p0 / expected0 - 1.0).abs() < 0.02,
            "rank 0: {p0} vs {expected0}"
        );
        assert!(
            (p1 / expected1 - 1.0).abs() < 0.03,
            "rank 1: {p1} vs {expected1}"
        );
        // Popularity falls with rank: the first 10 ranks hold far more than the last 10.
        let head: u64 = counts[..10].iter().sum();
        let tail: u64 = counts[counts.len() - 10..].iter().sum();
        assert!(head > 50 * tail.max(1), "head {head}, tail {tail}");

        // Scrambled over the item count: the most popular item is rank 0's, with at least
        // rank 0's share (plus whatever other ranks hash to the same item).
        let s = ScrambledZipfian::new(items, 0.99);
        let mut rng = SplitMix64::new(2);
        let counts = histogram(items, samples, || s.next(&mut rng));
        let (top, &top_count) = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
        assert_eq!(top as u64, s.item_of_rank(0));
        let share = top_count as f64 / samples as f64;
        assert!(
            share > expected0 * 0.98 && share < expected0 * 1.10,
            "top item share {share}, expected about {expected0}"
        );

        // YCSB's own configuration: rank 0 has 1 / 26.469 = 3.78%.
        let y = ScrambledZipfian::ycsb(items, 0.99);
        let mut rng = SplitMix64::new(3);
        let counts = histogram(items, samples, || y.next(&mut rng));
        let (top, &top_count) = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
        assert_eq!(top as u64, y.item_of_rank(0));
        let share = top_count as f64 / samples as f64;
        let expected = 1.0 / YCSB_ZETAN;
        assert!(
            share > expected * 0.97 && share < expected * 1.10,
            "YCSB top item share {share}, expected about {expected}"
        );
    }

    #[test]
    fn theta_06_is_mildly_skewed() {
        let items = 2_000_000;
        let z = Zipfian::new(items, 0.6);
        // zeta(2e6, 0.6) is about 2e6^0.4 / 0.4 - 1.4 = 828: rank 0 gets about 0.12%.
        assert!((800.0..850.0).contains(&z.zetan()), "zeta {}", z.zetan());
        let samples = 1_000_000;
        let mut rng = SplitMix64::new(9);
        let mut rank0 = 0u64;
        let mut below_1000 = 0u64;
        for _ in 0..samples {
            let r = z.next_rank(&mut rng);
            rank0 += u64::from(r == 0);
            below_1000 += u64::from(r < 1000);
        }
        let p0 = rank0 as f64 / samples as f64;
        assert!((p0 * z.zetan() - 1.0).abs() < 0.1, "rank 0 share {p0}");
        // The first 1000 ranks hold zeta(1000, 0.6) / zeta(n, 0.6) of the mass.
        let expected = zeta(1000, 0.6) / z.zetan();
        let got = below_1000 as f64 / samples as f64;
        assert!((got / expected - 1.0).abs() < 0.05, "{got} vs {expected}");
    }

    #[test]
    fn rejection_inversion_matches_exact_probabilities() {
        for theta in [0.0, 0.5, 0.99, 1.0, 1.5] {
            let items = 50u64;
            let weights: Vec<f64> = (1..=items).map(|k| (k as f64).powf(-theta)).collect();
            let norm: f64 = weights.iter().sum();
            let z = RejectionInversionZipf::new(items, theta);
            let samples = 400_000;
            let mut rng = SplitMix64::new(11);
            let counts = histogram(items, samples, || z.next_rank(&mut rng));
            for rank in [0usize, 1, 2, 9, 49] {
                let expected = weights[rank] / norm;
                let got = counts[rank] as f64 / samples as f64;
                // Within 5 standard deviations of a binomial count.
                let sd = (expected * (1.0 - expected) / samples as f64).sqrt();
                assert!(
                    (got - expected).abs() < 5.0 * sd + 1e-4,
                    "theta {theta}, rank {rank}: {got} vs {expected}"
                );
            }
        }
    }

    #[test]
    fn distinct_draws_take_every_item_even_from_a_generator_that_repeats_one() {
        let mut keys = Vec::new();
        // A generator stuck on one item still yields all of them.
        draw_distinct(5, 5, &mut keys, || 3);
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2, 3, 4]);
        assert_eq!(keys[0], 3, "the first draw is kept as drawn");
        // Draws that do not repeat are kept as drawn.
        let mut next = [7u64, 2, 7, 9].into_iter();
        draw_distinct(10, 3, &mut keys, || next.next().unwrap());
        assert_eq!(keys, [7, 2, 9]);
    }

    #[test]
    fn any_zipf_covers_zero_to_one_and_beyond() {
        let mut rng = SplitMix64::new(4);
        for theta in [0.0, 0.2, 0.6, 0.99, 1.0, 1.2] {
            let z = AnyZipf::new(1000, theta);
            assert_eq!(z.items(), 1000);
            let counts = histogram(1000, 100_000, || z.next(&mut rng));
            let top = *counts.iter().max().unwrap() as f64 / 100_000.0;
            if theta == 0.0 {
                assert!(top < 0.003, "uniform: top share {top}");
            } else if theta >= 0.99 {
                assert!(top > 0.1, "theta {theta}: top share {top}");
            }
        }
        assert!(matches!(AnyZipf::new(10, 0.0), AnyZipf::Uniform { .. }));
        assert!(matches!(AnyZipf::new(10, 0.5), AnyZipf::Ycsb(_)));
        assert!(matches!(AnyZipf::new(10, 1.0), AnyZipf::Exact(_)));
    }
}
