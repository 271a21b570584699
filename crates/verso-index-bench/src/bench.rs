//! Workloads, the correctness checks and the insert-if-absent race check.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::ops::Bound;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use crate::keys::{scramble, KeyRepr, Shape};
use crate::maps::OrderedIndex;

/// Operation counts of one run.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Keys loaded (ids `0..keys`, i.e. random key order) before the measurements.
    pub keys: u64,
    /// Point gets per thread.
    pub get_ops: u64,
    /// Fresh-key inserts per thread.
    pub insert_ops: u64,
    /// Range scans per thread.
    pub scan_ops: u64,
    /// Entries read per scan.
    pub scan_len: usize,
    /// Mixed operations per thread.
    pub mixed_ops: u64,
    /// Keys both threads race to insert in the race check.
    pub race_keys: u64,
    /// Duration of the one-reader-one-writer run, in milliseconds.
    pub rw_millis: u64,
    /// Before each run, wait up to this long for other processes to leave the CPUs (0: don't).
    pub quiet_wait_secs: u64,
}

impl Sizes {
    /// Tiny mode: finishes in well under a second for all candidates.
    pub const fn tiny() -> Sizes {
        Sizes {
            keys: 10_000,
            get_ops: 5_000,
            insert_ops: 2_000,
            scan_ops: 500,
            scan_len: 100,
            mixed_ops: 5_000,
            race_keys: 2_000,
            rw_millis: 4,
            quiet_wait_secs: 0,
        }
    }

    /// The full measurement.
    pub const fn full() -> Sizes {
        Sizes {
            keys: 2_000_000,
            get_ops: 500_000,
            insert_ops: 200_000,
            scan_ops: 20_000,
            scan_len: 100,
            mixed_ops: 500_000,
            race_keys: 200_000,
            rw_millis: 1_000,
            quiet_wait_secs: 30,
        }
    }
}

/// One measured workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// Single-threaded load of `keys` keys into an empty map, random key order.
    Load1,
    /// Point gets of uniformly random existing keys, 1 thread.
    Get1,
    /// Same, 2 threads.
    Get2,
    /// Inserts of fresh keys into the loaded map, 1 thread.
    Insert1,
    /// Same, 2 threads.
    Insert2,
    /// 100-entry scans from random existing start keys, 1 thread.
    Scan1,
    /// Same, 2 threads.
    Scan2,
    /// 90% gets, 5% inserts of fresh keys, 5% removes of them; 2 threads.
    Mixed2,
    /// One thread only reads (gets) while another only writes: its get rate.
    RwGet,
    /// Same run: the writer's rate (inserts of fresh keys and their removes, each one op).
    RwWrite,
}

impl Workload {
    /// Report order.
    pub const ALL: [Workload; 10] = [
        Workload::Load1,
        Workload::Get1,
        Workload::Get2,
        Workload::Insert1,
        Workload::Insert2,
        Workload::Scan1,
        Workload::Scan2,
        Workload::Mixed2,
        Workload::RwGet,
        Workload::RwWrite,
    ];

    /// Column header.
    pub const fn label(self) -> &'static str {
        match self {
            Workload::Load1 => "load 1T",
            Workload::Get1 => "get 1T",
            Workload::Get2 => "get 2T",
            Workload::Insert1 => "insert 1T",
            Workload::Insert2 => "insert 2T",
            Workload::Scan1 => "scan 1T",
            Workload::Scan2 => "scan 2T",
            Workload::Mixed2 => "mixed 2T",
            Workload::RwGet => "1R+1W: R",
            Workload::RwWrite => "1R+1W: W",
        }
    }

    /// Scans are reported in thousands of scans/s, the rest in millions of ops/s.
    pub const fn is_scan(self) -> bool {
        matches!(self, Workload::Scan1 | Workload::Scan2)
    }

    /// Converts ops and seconds into the reported unit.
    pub fn rate(self, ops: u64, secs: f64) -> f64 {
        let per_sec = ops as f64 / secs.max(1e-9);
        if self.is_scan() {
            per_sec / 1e3
        } else {
            per_sec / 1e6
        }
    }
}

/// Results of all runs of one (map, key representation, shape) configuration.
#[derive(Clone, Debug)]
pub struct ConfigResult {
    /// Map name.
    pub map: &'static str,
    /// Key representation name.
    pub key: &'static str,
    /// Key shape.
    pub shape: Shape,
    /// Wall-clock rates per workload, one per run.
    pub samples: BTreeMap<Workload, Vec<f64>>,
    /// CPU-time rates per workload, one per run: the sum over threads of the thread's ops
    /// divided by the thread's CPU seconds (what the threads achieve per core they get; robust
    /// to time-slicing by other processes, blind to time spent blocked).
    pub cpu_samples: BTreeMap<Workload, Vec<f64>>,
    /// Wrong answers seen during the measured runs (must be 0).
    pub errors: u64,
    /// Entries visited by scans divided by scans (should be close to `scan_len`).
    pub mean_scan_len: f64,
    /// CPU used by other processes while the runs were measured, in cores (0 = quiet machine;
    /// the machine has 2): (mean, worst run). `None` where `/proc` is not readable.
    pub foreign_cores: Option<(f64, f64)>,
}

impl ConfigResult {
    /// Median, minimum and maximum of a workload's wall-clock (`cpu == false`) or CPU-time
    /// samples.
    pub fn summary(&self, w: Workload, cpu: bool) -> Option<(f64, f64, f64)> {
        let samples = if cpu {
            &self.cpu_samples
        } else {
            &self.samples
        };
        let mut v = samples.get(&w)?.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some((v[v.len() / 2], v[0], v[v.len() - 1]))
    }
}

/// Small, fast PRNG (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub const fn new(seed: u64) -> Rng {
        Rng(scramble(seed ^ 0x5851_f42d_4c95_7f2d))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Wall and CPU time of one multi-threaded measurement.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    /// From the earliest thread start to the latest thread end, in seconds (measured by the
    /// workers themselves, so a descheduled coordinating thread does not distort short runs).
    pub wall: f64,
    /// CPU seconds each worker thread consumed.
    pub cpu: Vec<f64>,
}

/// CPU time consumed by the calling thread, in seconds.
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` and CLOCK_THREAD_CPUTIME_ID is supported by
    // Linux; the call writes only `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Runs `f(thread_index)` on `threads` threads started together; returns timings and results.
pub fn run_threads<R: Send, F: Fn(usize) -> R + Sync>(threads: usize, f: F) -> (Timing, Vec<R>) {
    let barrier = Barrier::new(threads);
    let timed: Vec<(Instant, Instant, f64, R)> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let cpu0 = thread_cpu_secs();
                    let start = Instant::now();
                    let r = f(t);
                    let end = Instant::now();
                    (start, end, thread_cpu_secs() - cpu0, r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("benchmark thread panicked"))
            .collect()
    });
    let start = timed.iter().map(|t| t.0).min();
    let end = timed.iter().map(|t| t.1).max();
    let wall = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64(),
        _ => 0.0,
    };
    let cpu = timed.iter().map(|t| t.2).collect();
    (
        Timing { wall, cpu },
        timed.into_iter().map(|t| t.3).collect(),
    )
}

fn id_value(id: u64) -> usize {
    usize::try_from(id).expect("ids fit in usize on 64-bit targets")
}

/// Inserts ids `ids` with value = id; returns the number of failed inserts.
fn insert_ids<K: KeyRepr, M: OrderedIndex<K>>(
    map: &M,
    shape: Shape,
    ids: std::ops::Range<u64>,
) -> u64 {
    let mut errors = 0;
    for id in ids {
        let buf = K::encode(shape, id);
        if !map.insert_if_absent(K::owned(&buf), id_value(id)) {
            errors += 1;
        }
    }
    errors
}

fn gets<K: KeyRepr, M: OrderedIndex<K>>(map: &M, shape: Shape, n: u64, ops: u64, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut errors = 0;
    for _ in 0..ops {
        let id = rng.below(n);
        let buf = K::encode(shape, id);
        if map.get(K::query(&buf)) != Some(id_value(id)) {
            errors += 1;
        }
    }
    errors
}

/// Scans from random existing keys; returns (entries visited, errors).
fn scans<K: KeyRepr, M: OrderedIndex<K>, const VERIFY: bool>(
    map: &M,
    shape: Shape,
    sizes: &Sizes,
    seed: u64,
) -> (u64, u64) {
    let mut rng = Rng::new(seed);
    let (mut entries, mut errors) = (0u64, 0u64);
    let max = K::max_key(shape);
    for _ in 0..sizes.scan_ops {
        let r = rng.next_u64();
        let id = rng.below(sizes.keys);
        let buf = K::encode(shape, id);
        let start = K::query(&buf);
        let inclusive = r & 1 == 0;
        let lower = if inclusive {
            Bound::Included(start)
        } else {
            Bound::Excluded(start)
        };
        let mut sum = 0usize;
        let mut prev: Option<u64> = None;
        let mut bad = false;
        let n = map.scan(
            lower,
            Bound::Excluded(K::query(&max)),
            sizes.scan_len,
            |k, v| {
                sum = sum.wrapping_add(v);
                if VERIFY {
                    let s = scramble(v as u64);
                    let first_ok = match prev {
                        None => {
                            let s0 = scramble(id);
                            if inclusive {
                                s >= s0
                            } else {
                                s > s0
                            }
                        }
                        Some(p) => s > p,
                    };
                    if !first_ok || K::query(&K::encode(shape, v as u64)) != k {
                        bad = true;
                    }
                    prev = Some(s);
                }
            },
        );
        black_box(sum);
        if bad || n > sizes.scan_len || (inclusive && n == 0) {
            errors += 1;
        }
        entries += n as u64;
    }
    (entries, errors)
}

fn mixed<K: KeyRepr, M: OrderedIndex<K>>(
    map: &M,
    shape: Shape,
    sizes: &Sizes,
    fresh_base: u64,
    seed: u64,
) -> u64 {
    let mut rng = Rng::new(seed);
    let mut errors = 0;
    let mut next_fresh = fresh_base;
    let mut pending: Option<u64> = None;
    for _ in 0..sizes.mixed_ops {
        if rng.below(10) == 0 {
            match pending.take() {
                Some(id) => {
                    if !map.remove(K::query(&K::encode(shape, id))) {
                        errors += 1;
                    }
                }
                None => {
                    let id = next_fresh;
                    next_fresh += 1;
                    let buf = K::encode(shape, id);
                    if !map.insert_if_absent(K::owned(&buf), id_value(id)) {
                        errors += 1;
                    }
                    pending = Some(id);
                }
            }
        } else {
            let id = rng.below(sizes.keys);
            if map.get(K::query(&K::encode(shape, id))) != Some(id_value(id)) {
                errors += 1;
            }
        }
    }
    errors
}

/// Thread 0 gets random existing keys, thread 1 inserts fresh keys and removes them again, both
/// for `millis`. Returns (ops, elapsed seconds, errors) of the calling thread.
fn reader_writer<K: KeyRepr, M: OrderedIndex<K>>(
    map: &M,
    shape: Shape,
    sizes: &Sizes,
    writer: bool,
    fresh_base: u64,
    seed: u64,
) -> (u64, f64, u64) {
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let deadline = start + Duration::from_millis(sizes.rw_millis);
    let (mut ops, mut errors) = (0u64, 0u64);
    let mut next_fresh = fresh_base;
    loop {
        for _ in 0..64 {
            if writer {
                let id = next_fresh;
                next_fresh += 1;
                let buf = K::encode(shape, id);
                if !map.insert_if_absent(K::owned(&buf), id_value(id)) {
                    errors += 1;
                }
                if !map.remove(K::query(&buf)) {
                    errors += 1;
                }
                ops += 2;
            } else {
                let id = rng.below(sizes.keys);
                if map.get(K::query(&K::encode(shape, id))) != Some(id_value(id)) {
                    errors += 1;
                }
                ops += 1;
            }
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    (ops, start.elapsed().as_secs_f64(), errors)
}

/// Measures every workload `runs` times on fresh maps. With `verify`, scans also check key order
/// and key/value agreement (slower; used by tiny mode and the tests).
pub fn run_config<K: KeyRepr, M: OrderedIndex<K>>(
    shape: Shape,
    sizes: &Sizes,
    runs: usize,
    verify: bool,
) -> ConfigResult {
    let mut res = ConfigResult {
        map: M::NAME,
        key: K::NAME,
        shape,
        samples: BTreeMap::new(),
        cpu_samples: BTreeMap::new(),
        errors: 0,
        mean_scan_len: 0.0,
        foreign_cores: None,
    };
    let (mut foreign_sum, mut foreign_secs, mut foreign_max) = (0.0f64, 0.0f64, 0.0f64);
    let mut foreign_known = true;
    let (mut scan_entries, mut scan_count) = (0u64, 0u64);
    let n = sizes.keys;
    for run in 0..runs as u64 {
        if sizes.quiet_wait_secs > 0 {
            wait_for_quiet(Duration::from_secs(sizes.quiet_wait_secs), QUIET_CORES);
        }
        let cpu_start = CpuSnapshot::take();
        let seed = run * 1000;
        let mut record = |w: Workload, ops: u64, timing: &Timing, errors: u64| {
            res.samples
                .entry(w)
                .or_default()
                .push(w.rate(ops, timing.wall));
            let per_thread = ops / timing.cpu.len().max(1) as u64;
            let cpu_rate = timing.cpu.iter().map(|&c| w.rate(per_thread, c)).sum();
            res.cpu_samples.entry(w).or_default().push(cpu_rate);
            res.errors += errors;
        };
        let map = M::new();

        let (timing, e) = run_threads(1, |_| insert_ids::<K, M>(&map, shape, 0..n));
        record(Workload::Load1, n, &timing, e.iter().sum());

        for (w, threads) in [(Workload::Get1, 1), (Workload::Get2, 2)] {
            let (timing, e) = run_threads(threads, |t| {
                gets::<K, M>(
                    &map,
                    shape,
                    n,
                    sizes.get_ops,
                    seed + 10 * threads as u64 + t as u64,
                )
            });
            record(w, sizes.get_ops * threads as u64, &timing, e.iter().sum());
        }

        for (w, threads) in [(Workload::Scan1, 1), (Workload::Scan2, 2)] {
            let (timing, out) = run_threads(threads, |t| {
                let seed = seed + 100 + 10 * threads as u64 + t as u64;
                if verify {
                    scans::<K, M, true>(&map, shape, sizes, seed)
                } else {
                    scans::<K, M, false>(&map, shape, sizes, seed)
                }
            });
            scan_entries += out.iter().map(|o| o.0).sum::<u64>();
            scan_count += sizes.scan_ops * threads as u64;
            record(
                w,
                sizes.scan_ops * threads as u64,
                &timing,
                out.iter().map(|o| o.1).sum(),
            );
        }

        let (timing, e) = run_threads(2, |t| {
            let fresh_base = (1 << 40) + (t as u64) * (1 << 36);
            mixed::<K, M>(&map, shape, sizes, fresh_base, seed + 200 + t as u64)
        });
        record(
            Workload::Mixed2,
            sizes.mixed_ops * 2,
            &timing,
            e.iter().sum(),
        );

        let (timing, out) = run_threads(2, |t| {
            let fresh_base = (1 << 41) + (t as u64) * (1 << 36);
            reader_writer::<K, M>(&map, shape, sizes, t == 1, fresh_base, seed + 300)
        });
        for (t, w) in [(0, Workload::RwGet), (1, Workload::RwWrite)] {
            let (ops, secs, errors) = out[t];
            let one = Timing {
                wall: secs,
                cpu: vec![timing.cpu[t]],
            };
            record(w, ops, &one, errors);
        }

        // Inserts last: they grow the map.
        let ins = sizes.insert_ops;
        let (timing, e) = run_threads(1, |_| insert_ids::<K, M>(&map, shape, n..n + ins));
        record(Workload::Insert1, ins, &timing, e.iter().sum());
        let base = n + ins;
        let (timing, e) = run_threads(2, |t| {
            let from = base + t as u64 * ins;
            insert_ids::<K, M>(&map, shape, from..from + ins)
        });
        record(Workload::Insert2, ins * 2, &timing, e.iter().sum());
        drop(map);
        match (cpu_start, CpuSnapshot::take()) {
            (Some(a), Some(b)) => {
                let secs = b.at.duration_since(a.at).as_secs_f64();
                let cores = b.foreign_cores(&a);
                foreign_sum += cores * secs;
                foreign_secs += secs;
                foreign_max = foreign_max.max(cores);
            }
            _ => foreign_known = false,
        }
    }
    res.mean_scan_len = scan_entries as f64 / scan_count.max(1) as f64;
    if foreign_known && foreign_secs > 0.0 {
        res.foreign_cores = Some((foreign_sum / foreign_secs, foreign_max));
    }
    res
}

/// Other processes may use at most this many cores before a run starts (with `quiet_wait_secs`).
pub const QUIET_CORES: f64 = 0.15;

/// Waits until other processes used less than `threshold` cores over one second, or until `max`
/// has passed. Returns the last sample.
pub fn wait_for_quiet(max: Duration, threshold: f64) -> f64 {
    let deadline = Instant::now() + max;
    loop {
        let Some(a) = CpuSnapshot::take() else {
            return 0.0;
        };
        thread::sleep(Duration::from_secs(1));
        let Some(b) = CpuSnapshot::take() else {
            return 0.0;
        };
        let cores = b.foreign_cores(&a);
        if cores < threshold || Instant::now() >= deadline {
            return cores;
        }
    }
}

/// Busy CPU time of the whole machine and of this process, to detect interference.
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    at: Instant,
    machine_busy_ticks: u64,
    own_ticks: u64,
}

/// `USER_HZ`: the unit of `/proc/stat` and `/proc/self/stat` times on Linux.
const USER_HZ: f64 = 100.0;

impl CpuSnapshot {
    /// Reads `/proc/stat` and `/proc/self/stat`; `None` if unavailable.
    pub fn take() -> Option<CpuSnapshot> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
        let machine_busy_ticks = cpu.iter().take(8).sum::<u64>() - cpu.get(3)? - cpu.get(4)?;
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        let after_comm = own.rsplit_once(')')?.1;
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        // Fields 14 and 15 (utime, stime) of the full line are 12th and 13th after `comm`.
        let own_ticks =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(CpuSnapshot {
            at: Instant::now(),
            machine_busy_ticks,
            own_ticks,
        })
    }

    /// Average cores used by other processes between `earlier` and `self`.
    pub fn foreign_cores(&self, earlier: &CpuSnapshot) -> f64 {
        let secs = self.at.duration_since(earlier.at).as_secs_f64().max(1e-3);
        let machine = self
            .machine_busy_ticks
            .saturating_sub(earlier.machine_busy_ticks);
        let own = self.own_ticks.saturating_sub(earlier.own_ticks);
        machine.saturating_sub(own) as f64 / USER_HZ / secs
    }
}

/// Outcome of two threads racing `insert_if_absent` on the same keys in the same order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaceResult {
    /// Keys raced.
    pub keys: u64,
    /// Keys for which both threads were told "inserted".
    pub double_wins: u64,
    /// Keys for which neither thread was told "inserted".
    pub no_wins: u64,
    /// Keys with exactly one winner whose final value is not the winner's value.
    pub wrong_final: u64,
}

impl RaceResult {
    /// `true` if insert-if-absent behaved atomically for every key.
    pub fn is_clean(&self) -> bool {
        self.double_wins == 0 && self.no_wins == 0 && self.wrong_final == 0
    }
}

/// Both threads insert ids `0..keys` into an empty map, thread `t` with value `2 * id + t`.
pub fn race_check<K: KeyRepr, M: OrderedIndex<K>>(shape: Shape, keys: u64) -> RaceResult {
    let map = M::new();
    let (_, wins) = run_threads(2, |t| {
        (0..keys)
            .map(|id| {
                let buf = K::encode(shape, id);
                map.insert_if_absent(K::owned(&buf), id_value(2 * id + t as u64))
            })
            .collect::<Vec<bool>>()
    });
    let mut r = RaceResult {
        keys,
        ..RaceResult::default()
    };
    for id in 0..keys {
        let i = usize::try_from(id).expect("race keys fit in usize");
        match (wins[0][i], wins[1][i]) {
            (true, true) => r.double_wins += 1,
            (false, false) => r.no_wins += 1,
            (w0, _) => {
                let winner = if w0 { 0 } else { 1 };
                let got = map.get(K::query(&K::encode(shape, id)));
                if got != Some(id_value(2 * id + winner)) {
                    r.wrong_final += 1;
                }
            }
        }
    }
    r
}

/// Deterministic single-threaded semantic checks: gets, insert-if-absent on existing keys,
/// bounded and unbounded scans against a sorted model, removes and re-inserts.
pub fn verify<K: KeyRepr, M: OrderedIndex<K>>(shape: Shape, n: u64) -> Result<(), String> {
    let map = M::new();
    let name = format!("{} / {} / {}-byte", M::NAME, K::NAME, shape.bytes());
    let fail = |what: String| Err(format!("{name}: {what}"));
    if insert_ids::<K, M>(&map, shape, 0..n) != 0 {
        return fail("insert_if_absent of a fresh key failed".into());
    }
    for id in (0..n).step_by(7) {
        let buf = K::encode(shape, id);
        if map.insert_if_absent(K::owned(&buf), usize::MAX - 1) {
            return fail(format!("insert_if_absent succeeded on existing id {id}"));
        }
    }
    for id in 0..n {
        let got = map.get(K::query(&K::encode(shape, id)));
        if got != Some(id_value(id)) {
            return fail(format!("get({id}) = {got:?}"));
        }
    }
    for id in n..n + 100 {
        if let Some(v) = map.get(K::query(&K::encode(shape, id))) {
            return fail(format!("get of absent id {id} returned {v}"));
        }
    }

    // The model: live ids sorted by key order (= order of scramble(id)).
    let mut live: Vec<u64> = (0..n).collect();
    live.sort_by_key(|&id| scramble(id));
    let check_scans = |live: &[u64], tag: &str| -> Result<(), String> {
        let mut rng = Rng::new(n ^ 77);
        let max = K::max_key(shape);
        for round in 0..60 {
            // Start keys: existing (most rounds) and absent ids; a few close to the end.
            let start_id = match round % 4 {
                0 => n + 1000 + rng.below(1000),
                1 => live[live.len() - 1 - usize::try_from(rng.below(30)).unwrap_or(0)],
                _ => live[usize::try_from(rng.below(live.len() as u64)).unwrap_or(0)],
            };
            let s0 = scramble(start_id);
            let first = live.partition_point(|&id| scramble(id) < s0);
            let exact = live.get(first).is_some_and(|&id| id == start_id);
            let start_buf = K::encode(shape, start_id);
            let start = K::query(&start_buf);
            for inclusive in [true, false] {
                let lower = if inclusive {
                    Bound::Included(start)
                } else {
                    Bound::Excluded(start)
                };
                let from = if !inclusive && exact {
                    first + 1
                } else {
                    first
                };
                // Upper bound: the sentinel, or a key 40 positions on (inclusive/exclusive).
                let cut = from + 40;
                let cut_buf = live.get(cut).map(|&id| K::encode(shape, id));
                let mut cases = vec![(Bound::Excluded(K::query(&max)), live.len())];
                if let Some(b) = &cut_buf {
                    cases.push((Bound::Excluded(K::query(b)), cut));
                    cases.push((Bound::Included(K::query(b)), cut + 1));
                }
                for (upper, end) in cases {
                    let want: Vec<u64> = live[from..end.min(from + 100)].to_vec();
                    let mut got = Vec::new();
                    let mut keys_ok = true;
                    let count = map.scan(lower, upper, 100, |k, v| {
                        keys_ok &= K::query(&K::encode(shape, v as u64)) == k;
                        got.push(v as u64);
                    });
                    if !keys_ok || count != got.len() || got != want {
                        return Err(format!(
                            "{name} {tag}: scan from id {start_id} (inclusive {inclusive}, \
                             upper {upper:?}) returned {} entries, expected {} (keys ok {keys_ok})",
                            got.len(),
                            want.len()
                        ));
                    }
                }
            }
        }
        Ok(())
    };
    check_scans(&live, "after load")?;

    // Remove every third id, check gets, double removes and scans, then re-insert.
    for id in (0..n).step_by(3) {
        if !map.remove(K::query(&K::encode(shape, id))) {
            return fail(format!("remove({id}) of a present key returned false"));
        }
    }
    for id in (0..n).step_by(3) {
        if map.remove(K::query(&K::encode(shape, id))) {
            return fail(format!("second remove({id}) returned true"));
        }
        if let Some(v) = map.get(K::query(&K::encode(shape, id))) {
            return fail(format!("get({id}) after remove returned {v}"));
        }
    }
    live.retain(|&id| id % 3 != 0);
    check_scans(&live, "after removes")?;
    for id in (0..n).step_by(3) {
        let buf = K::encode(shape, id);
        if !map.insert_if_absent(K::owned(&buf), id_value(id)) {
            return fail(format!("re-insert of removed id {id} failed"));
        }
    }
    for id in 0..n {
        if map.get(K::query(&K::encode(shape, id))) != Some(id_value(id)) {
            return fail(format!("get({id}) after re-insert"));
        }
    }
    Ok(())
}
