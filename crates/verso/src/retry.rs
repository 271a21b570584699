//! Running a transaction until it commits: [`Database::run`] and [`RetryPolicy`].
//!
//! A conflict rolls a transaction back at once and says so with a retryable error
//! ([`Error::is_retryable`](crate::Error::is_retryable)); the program's answer is to run
//! the whole transaction again, from `begin`, on a fresh snapshot. These helpers do that, as the clients of FoundationDB
//! (`db.run`) and CockroachDB (`ExecuteTx`) do: begin, call the program's closure, commit,
//! and on a retryable error from either wait a little (exponential backoff with jitter, so
//! that the transactions that collided do not collide again in step) and start over, at
//! most a bounded number of times.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use crate::db::{Database, Isolation, Transaction};
use crate::error::Result;

/// How [`Database::run_with`] retries: how many attempts at most, and how long to wait
/// between them. The default: 10 attempts, waits starting at 100 µs and doubling up to
/// 10 ms, each drawn at random from its upper half.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    first_backoff: Duration,
    max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            first_backoff: Duration::from_micros(100),
            max_backoff: Duration::from_millis(10),
        }
    }
}

impl RetryPolicy {
    /// The default policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs the transaction at most `attempts` times in all (the first run included); at
    /// least once, whatever `attempts` says.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Waits about `first` after the first failed attempt, twice as long after each
    /// further one, never more than `max` (each wait drawn at random between half and all
    /// of it). `Duration::ZERO` for both retries at once.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.first_backoff = first;
        self.max_backoff = max.max(first);
        self
    }

    /// The most attempts it makes.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Runs `work` in a transaction of `db` and commits, again on a retryable error, as
    /// [`Database::run`] describes.
    fn run<T>(
        &self,
        db: &Database,
        isolation: Isolation,
        mut work: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut backoff = self.first_backoff;
        let mut attempt = 1;
        loop {
            let mut txn = db.try_begin(isolation)?;
            let outcome = match work(&mut txn) {
                Ok(value) => txn.commit().map(|()| value),
                Err(error) => {
                    txn.abort();
                    Err(error)
                }
            };
            match outcome {
                Err(error) if error.is_retryable() && attempt < self.max_attempts => {
                    std::thread::sleep(jittered(backoff));
                    backoff = (backoff * 2).min(self.max_backoff);
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }
}

/// A wait drawn at random from `[backoff / 2, backoff]`.
fn jittered(backoff: Duration) -> Duration {
    if backoff.is_zero() {
        return backoff;
    }
    // Each `RandomState` is keyed afresh: a random number without a generator to keep.
    let random = RandomState::new().build_hasher().finish();
    let half = backoff / 2;
    let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(random % nanos.saturating_add(1))
}

impl Database {
    /// Runs `work` in a new transaction and commits it, and does it all again, on a fresh
    /// snapshot, when the transaction lost a race: returns what `work` returned once a run
    /// commits. The transaction is begun on the calling thread. Uses the default
    /// [`RetryPolicy`] (10 attempts, backoff from 100 µs to 10 ms); [`Database::run_with`]
    /// takes another.
    ///
    /// - `work` returns `Ok(value)`: the transaction commits; if the commit fails with a
    ///   retryable error (a serialization failure at validation), it runs again.
    /// - `work` returns a retryable error ([`Error::is_retryable`]: a write conflict, a
    ///   serialization failure, a lock conflict, or [`Error::TransactionAborted`] after one
    ///   of those was ignored): the transaction is rolled back and runs again.
    /// - `work` returns any other error: the transaction is rolled back and the error
    ///   returned at once (retrying misuse gives the same error).
    /// - After the last attempt, its error is returned (still retryable: the caller may
    ///   decide to try later).
    ///
    /// `work` may run several times, so it should have no effects outside the transaction
    /// (or only ones it is fine to repeat). To give up without committing, return an error;
    /// to report an outcome of your own (an insufficient balance), return it in `T` after
    /// writing nothing.
    ///
    /// [`Error::is_retryable`]: crate::Error::is_retryable
    /// [`Error::TransactionAborted`]: crate::Error::TransactionAborted
    ///
    /// ```
    /// use verso::{ColumnType, Database, Isolation, Options, Schema, Value};
    ///
    /// let db = Database::open(Options::default())?;
    /// let counters = db.create_table(
    ///     "counters",
    ///     Schema::new()
    ///         .column("name", ColumnType::Text)
    ///         .column("count", ColumnType::I64)
    ///         .primary_key(&["name"]),
    /// )?;
    /// db.run(Isolation::Snapshot, |txn| txn.insert(counters, &["hits".into(), Value::I64(0)]))?;
    /// // A read-modify-write that is retried if another thread increments at the same time.
    /// let now = db.run(Isolation::Snapshot, |txn| {
    ///     let key = ["hits".into()];
    ///     let row = txn.get_row(counters, &key)?.expect("inserted above");
    ///     let count = row.get::<i64>("count")? + 1;
    ///     txn.update(counters, &key, &[(1, Value::I64(count))])?;
    ///     Ok(count)
    /// })?;
    /// assert_eq!(now, 1);
    /// # Ok::<(), verso::Error>(())
    /// ```
    pub fn run<T>(
        &self,
        isolation: Isolation,
        work: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        RetryPolicy::default().run(self, isolation, work)
    }

    /// [`Database::run`] with a [`RetryPolicy`] of your own.
    pub fn run_with<T>(
        &self,
        policy: &RetryPolicy,
        isolation: Isolation,
        work: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        policy.run(self, isolation, work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_stay_within_half_to_all_of_the_backoff() {
        for micros in [1, 7, 100, 10_000] {
            let backoff = Duration::from_micros(micros);
            for _ in 0..100 {
                let wait = jittered(backoff);
                assert!(
                    wait >= backoff / 2 && wait <= backoff,
                    "{wait:?} of {backoff:?}"
                );
            }
        }
        assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn a_policy_makes_at_least_one_attempt_and_never_waits_less_than_it_starts() {
        assert_eq!(RetryPolicy::new().max_attempts(0).attempts(), 1);
        let policy = RetryPolicy::new().backoff(Duration::from_millis(5), Duration::from_millis(1));
        assert_eq!(policy.max_backoff, Duration::from_millis(5));
    }
}
