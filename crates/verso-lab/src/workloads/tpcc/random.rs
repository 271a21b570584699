//! TPC-C's random functions (clause 2.1.6 and 4.3.2): uniform ranges, NURand, a-strings,
//! n-strings, last names from syllables, zip codes and `ORIGINAL` data.

use crate::rng::SplitMix64;

/// The run-time constant C of NURand for C_LAST must differ from the load-time one by a
/// delta in 65..=119 other than 96 and 112 (clause 2.1.6.1).
fn valid_last_name_delta(delta: i64) -> bool {
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

/// The constants C of NURand (clause 2.1.6): one for customer ids, one for item ids, and
/// one for last names at load and at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NurandConstants {
    /// C for C_ID, NURand(1023, 1, 3000).
    pub customer_id: i64,
    /// C for OL_I_ID, NURand(8191, 1, 100000).
    pub item_id: i64,
    /// C for C_LAST when loading, NURand(255, 0, 999).
    pub last_name_load: i64,
    /// C for C_LAST when running.
    pub last_name_run: i64,
}

impl NurandConstants {
    /// Constants drawn from `seed`, the run-time last-name constant satisfying clause
    /// 2.1.6.1's delta rule.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed ^ 0x6e75_7261_6e64); // "nurand"
        let last_name_load = rng.below(256) as i64;
        let last_name_run = loop {
            let candidate = rng.below(256) as i64;
            if valid_last_name_delta((candidate - last_name_load).abs()) {
                break candidate;
            }
        };
        NurandConstants {
            customer_id: rng.below(1024) as i64,
            item_id: rng.below(8192) as i64,
            last_name_load,
            last_name_run,
        }
    }
}

/// TPC-C's random helpers over one generator.
#[derive(Clone, Debug)]
pub struct TpccRandom {
    rng: SplitMix64,
}

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The ten syllables of last names (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

impl TpccRandom {
    /// A generator whose sequence depends only on `seed`.
    pub fn new(seed: u64) -> Self {
        TpccRandom {
            rng: SplitMix64::new(seed),
        }
    }

    /// A uniform integer in `low..=high`.
    #[inline]
    pub fn uniform(&mut self, low: i64, high: i64) -> i64 {
        debug_assert!(low <= high, "{low}..={high}");
        low + self.rng.below((high - low + 1) as u64) as i64
    }

    /// Whether an event of probability `percent`% happens.
    #[inline]
    pub fn percent(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x
    /// (clause 2.1.6).
    #[inline]
    pub fn nurand(&mut self, a: i64, x: i64, y: i64, c: i64) -> i64 {
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// Appends a random a-string (letters and digits) of a length in `min..=max`.
    pub fn push_a_string(&mut self, out: &mut String, min: usize, max: usize) {
        let len = self.uniform(min as i64, max as i64) as usize;
        out.reserve(len);
        // One 64-bit draw yields ten base-62 digits (62^10 < 2^64); the bias is below 2^-4
        // per character and of no consequence for filler text.
        let mut bits = 0u64;
        let mut left = 0;
        for _ in 0..len {
            if left == 0 {
                bits = self.rng.next_u64();
                left = 10;
            }
            out.push(ALPHANUMERIC[(bits % 62) as usize] as char);
            bits /= 62;
            left -= 1;
        }
    }

    /// A random a-string of a length in `min..=max`.
    pub fn a_string(&mut self, min: usize, max: usize) -> String {
        let mut out = String::new();
        self.push_a_string(&mut out, min, max);
        out
    }

    /// A random n-string (digits) of exactly `len` characters.
    pub fn n_string(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b'0' + self.rng.below(10) as u8))
            .collect()
    }

    /// A zip code: a random n-string of 4 digits then `11111` (clause 4.3.2.7).
    pub fn zip(&mut self) -> String {
        let mut zip = self.n_string(4);
        zip.push_str("11111");
        zip
    }

    /// A state: two random letters.
    pub fn state(&mut self) -> String {
        (0..2)
            .map(|_| char::from(b'A' + self.rng.below(26) as u8))
            .collect()
    }

    /// A random a-string of a length in `min..=max` that, with probability 10%, has
    /// `ORIGINAL` at a random position (I_DATA and S_DATA, clause 4.3.3.1).
    pub fn data_maybe_original(&mut self, min: usize, max: usize) -> String {
        let mut data = self.a_string(min, max);
        if self.percent(10) {
            let at = self.uniform(0, (data.len() - ORIGINAL.len()) as i64) as usize;
            data.replace_range(at..at + ORIGINAL.len(), ORIGINAL);
        }
        data
    }

    /// A money amount in cents, uniform in `low_cents..=high_cents`.
    pub fn cents(&mut self, low_cents: i64, high_cents: i64) -> i64 {
        self.uniform(low_cents, high_cents)
    }

    /// A rate with four decimals, uniform in `0..=high_ten_thousandths / 10000`.
    pub fn rate(&mut self, high_ten_thousandths: i64) -> f64 {
        self.uniform(0, high_ten_thousandths) as f64 / 10_000.0
    }

    /// A random permutation of `1..=n` (the O_C_ID of the initial orders, clause 4.3.3.1).
    pub fn permutation(&mut self, n: i64) -> Vec<i64> {
        let mut ids: Vec<i64> = (1..=n).collect();
        for i in (1..ids.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            ids.swap(i, j);
        }
        ids
    }
}

/// The marker of "original" brand data.
pub const ORIGINAL: &str = "ORIGINAL";

/// Writes the last name for `number` in `0..=999` into `out` (cleared first): the
/// syllables of its three digits (clause 4.3.2.3).
pub fn last_name_into(number: i64, out: &mut String) {
    debug_assert!((0..=999).contains(&number), "last name number {number}");
    out.clear();
    for digit in [number / 100, (number / 10) % 10, number % 10] {
        out.push_str(SYLLABLES[digit as usize]);
    }
}

/// The last name for `number` in `0..=999`.
pub fn last_name(number: i64) -> String {
    let mut out = String::with_capacity(15);
    last_name_into(number, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut random = TpccRandom::new(1);
        let mut hits = vec![0u32; 3000];
        for _ in 0..100_000 {
            let id = random.nurand(1023, 1, 3000, 259);
            assert!((1..=3000).contains(&id));
            hits[(id - 1) as usize] += 1;
        }
        let max = *hits.iter().max().unwrap_or(&0);
        let min = *hits.iter().min().unwrap_or(&0);
        assert!(
            max > 4 * min.max(1),
            "NURand should be skewed: {min}..{max}"
        );
    }

    #[test]
    fn constants_satisfy_the_delta_rule() {
        for seed in 0..200 {
            let c = NurandConstants::from_seed(seed);
            assert!(valid_last_name_delta(
                (c.last_name_run - c.last_name_load).abs()
            ));
            assert!((0..=255).contains(&c.last_name_run));
        }
    }

    #[test]
    fn strings_have_the_asked_shape() {
        let mut random = TpccRandom::new(3);
        for _ in 0..1000 {
            let s = random.a_string(8, 16);
            assert!((8..=16).contains(&s.len()));
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
        }
        assert_eq!(random.zip().len(), 9);
        assert!(random.zip().ends_with("11111"));
        let originals = (0..10_000)
            .filter(|_| random.data_maybe_original(26, 50).contains(ORIGINAL))
            .count();
        assert!((800..1200).contains(&originals), "{originals}");
        let mut permutation = random.permutation(100);
        permutation.sort_unstable();
        assert_eq!(permutation, (1..=100).collect::<Vec<_>>());
    }
}
