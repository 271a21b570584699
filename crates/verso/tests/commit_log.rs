//! The disk engine's commit log (`verso::disk::CommitLog`): each transaction's fate, in
//! pages through the buffer pool, every change in the page log. Its answers, its refusals,
//! threads, and power cuts: a commit acknowledged by a sync survives as committed at its
//! timestamp, a transaction the crash interrupted reads as aborted, and no id is handed out
//! twice across restarts.

use std::sync::Arc;

use verso::disk::commit_log::{KIND_COMMIT_LOG_META, KIND_COMMIT_LOG_PAGE};
use verso::disk::{BufferPool, CommitLog, FileNo, PageChange, PageId, PageLog, TransactionStatus};
use verso::fs::SimulatedFileSystem;
use verso::{Durability, Error};

mod disk_common;

use disk_common::{disk, open_pool, Rng};

const FILE: &str = "/db/xact.3";
const XACT: FileNo = FileNo(3);

type Opened = (Arc<PageLog>, Arc<BufferPool>, CommitLog);

fn open(fs: &Arc<SimulatedFileSystem>, frames: usize) -> verso::Result<Opened> {
    let (log, pool, _) = open_pool(fs, frames, Durability::Sync, FILE, XACT)?;
    let commit_log = CommitLog::open(Arc::clone(&pool), XACT, Arc::clone(&log))?;
    Ok((log, pool, commit_log))
}

#[test]
fn transactions_end_once_and_say_how() {
    let fs = disk(1);
    let (log, _pool, xact) = open(&fs, 4).unwrap();
    let a = xact.begin().unwrap();
    let b = xact.begin().unwrap();
    let c = xact.begin().unwrap();
    assert_eq!((a, b, c), (1, 2, 3), "ids start at 1, dense");
    let end = xact.commit(a, 100).unwrap();
    assert!(end <= log.tail());
    xact.abort(b).unwrap();
    assert_eq!(xact.status(a).unwrap(), TransactionStatus::Committed(100));
    assert_eq!(xact.status(b).unwrap(), TransactionStatus::Aborted);
    assert_eq!(xact.status(c).unwrap(), TransactionStatus::InProgress);
    let refused = |result: verso::Result<u64>, why: &str| match result {
        Err(Error::TransactionNotInProgress { state, .. }) => {
            assert!(state.contains(why), "{state}")
        }
        other => panic!("{other:?}"),
    };
    refused(xact.commit(a, 101), "already committed");
    refused(xact.commit(b, 101), "already aborted");
    refused(xact.abort(a).map(|()| 0), "already committed");
    refused(xact.commit(c, 0), "no timestamp");
    refused(xact.commit(c, u64::MAX), "no timestamp");
    refused(xact.commit(99, 5), "not begun");
    refused(xact.status(0).map(|_| 0), "never begun");
    refused(xact.status(4).map(|_| 0), "never begun");
    assert_eq!(
        xact.status(c).unwrap(),
        TransactionStatus::InProgress,
        "refusals change nothing"
    );
}

/// Enough transactions to fill several entry pages through a pool of three frames: the
/// reserved bound grows a page at a time and entries are read back after evictions.
#[test]
fn many_transactions_over_many_pages_keep_their_fates() {
    let fs = disk(2);
    let (_log, _pool, xact) = open(&fs, 3).unwrap();
    let n = 3 * verso::disk::commit_log::ENTRIES_PER_PAGE + 17;
    for i in 1..=n {
        let xid = xact.begin().unwrap();
        assert_eq!(xid, i);
        if i % 3 == 0 {
            xact.abort(xid).unwrap();
        } else if i % 3 == 1 {
            xact.commit(xid, 1000 + i).unwrap();
        }
    }
    for i in 1..=n {
        let expected = match i % 3 {
            0 => TransactionStatus::Aborted,
            1 => TransactionStatus::Committed(1000 + i),
            _ => TransactionStatus::InProgress,
        };
        assert_eq!(xact.status(i).unwrap(), expected, "xid {i}");
    }
}

/// Threads begin, commit and abort at once: every id is handed out once, every fate is
/// the one its thread gave it.
#[test]
fn threads_get_distinct_ids_and_their_own_fates() {
    let fs = disk(3);
    let (_log, _pool, xact) = open(&fs, 8).unwrap();
    let ended: Vec<Vec<(u64, TransactionStatus)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let xact = xact.clone();
                scope.spawn(move || {
                    (0..1500u64)
                        .map(|i| {
                            let xid = xact.begin().unwrap();
                            if (i + t) % 4 == 0 {
                                xact.abort(xid).unwrap();
                                (xid, TransactionStatus::Aborted)
                            } else {
                                let ts = xid * 10 + t;
                                xact.commit(xid, ts).unwrap();
                                (xid, TransactionStatus::Committed(ts))
                            }
                        })
                        .collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut ids: Vec<u64> = ended.iter().flatten().map(|(xid, _)| *xid).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=6000).collect::<Vec<u64>>());
    for (xid, status) in ended.iter().flatten() {
        assert_eq!(xact.status(*xid).unwrap(), *status);
    }
}

/// Power cuts at random moments of a run of begins, commits (some acknowledged by a sync)
/// and aborts, with checkpoints: after recovery every acknowledged commit is committed at
/// its timestamp, every transaction is committed (only if it committed) or aborted, none
/// is in progress, and the next ids are all new.
#[test]
fn power_loss_keeps_acknowledged_commits_and_ends_the_rest() {
    let seeds: u64 = std::env::var("PAGE_LOG_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let (mut cut_mid_work, mut acknowledged_checked) = (0, 0);
    for seed in 0..seeds {
        let fs = disk(100 + seed);
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        // Every id ever handed out, with what its run asked for it.
        // (xid, its commit timestamp if it committed, whether a sync acknowledged it)
        let mut intended: Vec<(u64, Option<u64>, bool)> = Vec::new();
        for round in 0..4 {
            let (log, pool, xact) = open(&fs, 3).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            // X1: ids start past every id anything durable holds. An id handed out
            // whose reservation did not survive held nothing durable (its records follow
            // the reservation in the log): it may be handed out again, and reads as never
            // begun until then.
            let first = xact.next_xid();
            for (xid, _, acknowledged) in intended.iter().filter(|(x, _, _)| *x >= first) {
                assert!(
                    !acknowledged,
                    "seed {seed} round {round}: acknowledged xid {xid} reused"
                );
                assert!(matches!(
                    xact.status(*xid),
                    Err(Error::TransactionNotInProgress { .. })
                ));
            }
            intended.retain(|(x, _, _)| *x < first);
            for (xid, ts, acknowledged) in &intended {
                let status = xact.status(*xid).unwrap();
                match (ts, acknowledged) {
                    (Some(ts), true) => assert_eq!(status, TransactionStatus::Committed(*ts)),
                    (Some(ts), false) => assert!(
                        status == TransactionStatus::Committed(*ts)
                            || status == TransactionStatus::Aborted,
                        "seed {seed}: xid {xid} {status:?}"
                    ),
                    (None, _) => assert_eq!(status, TransactionStatus::Aborted, "xid {xid}"),
                }
            }
            acknowledged_checked += intended.iter().filter(|(_, _, a)| *a).count();
            if round == 3 {
                break; // the last round only checks what the third left
            }
            fs.crash_after(5 + rng.next() % 400);
            let mut unsynced = Vec::new();
            for _ in 0..1500 {
                let Ok(xid) = xact.begin() else { break };
                intended.push((xid, None, false));
                let roll = rng.next() % 10;
                let result = if roll < 6 {
                    let ts = 5 + xid * 3;
                    intended.last_mut().unwrap().1 = Some(ts);
                    unsynced.push(intended.len() - 1);
                    xact.commit(xid, ts).map(drop)
                } else if roll < 8 {
                    xact.abort(xid)
                } else {
                    Ok(()) // left in progress
                };
                if result.is_err() {
                    break;
                }
                let roll = rng.next() % 20;
                let extra = match roll {
                    0..=2 => log.sync(),
                    3 => log.checkpoint(&pool).map(drop),
                    _ => Ok(()),
                };
                match extra {
                    // A sync or a checkpoint makes every commit before it durable.
                    Ok(()) if roll <= 3 => {
                        for &i in &unsynced {
                            intended[i].2 = true;
                        }
                        unsynced.clear();
                    }
                    Ok(()) => {}
                    Err(_) => break,
                }
            }
            cut_mid_work += usize::from(fs.is_crashed());
            fs.crash();
            fs.clear_faults();
            drop(xact);
            drop(pool);
            drop(log);
            fs.restart();
        }
    }
    assert!(
        cut_mid_work as u64 >= seeds,
        "the power was cut mid-work {cut_mid_work} times"
    );
    assert!(
        acknowledged_checked > 0,
        "no acknowledged commit was ever checked"
    );
}

/// The log, the pool and the commit log's opening, whatever it answered.
type Reopened = (Arc<PageLog>, Arc<BufferPool>, verso::Result<CommitLog>);

fn open_xact(fs: &Arc<SimulatedFileSystem>) -> Reopened {
    let (log, pool, _) = open_pool(fs, 8, Durability::Sync, FILE, XACT).unwrap();
    let xact = CommitLog::open(Arc::clone(&pool), XACT, Arc::clone(&log));
    (log, pool, xact)
}

fn restart(fs: &Arc<SimulatedFileSystem>, opened: Reopened) {
    let (log, pool, xact) = opened;
    log.checkpoint(&pool).unwrap();
    drop(xact);
    drop(pool);
    drop(log);
    fs.crash();
    fs.restart();
}

/// Regression (a review of 2026-11-29): a meta page (kind right, checksum right) with a
/// bound past any file made `open` panic in `block_of`; it is now `Error::Corruption`.
#[test]
fn regression_open_with_a_huge_bound_is_corruption_not_a_panic() {
    let fs = disk(7);
    let opened = open_xact(&fs);
    {
        let (log, pool, _) = &opened;
        let mut meta = pool.write(PageId::new(XACT, 0)).unwrap();
        assert_eq!(meta.kind(), KIND_COMMIT_LOG_META);
        meta.body_mut()[..8].copy_from_slice(&(u64::MAX - 5).to_le_bytes());
        log.log(&mut [(&mut meta, &[PageChange::Image])]).unwrap();
    }
    restart(&fs, opened);
    let (_, _, xact) = open_xact(&fs);
    assert!(
        matches!(xact, Err(verso::Error::Corruption { .. })),
        "a bound past any file opened"
    );
}

/// Regression (the same review): a file longer than its bound implies (an entry page past
/// the reserved one) opened, and then every `begin` past the first page failed as
/// corruption, for ever: reserving demanded that the file end exactly at the next block.
/// A page past the bound holds no id handed out, so reserving now takes it over.
#[test]
fn regression_a_file_longer_than_its_bound_keeps_handing_out_ids() {
    let fs = disk(8);
    let opened = open_xact(&fs);
    {
        let (log, pool, xact) = &opened;
        let xact = xact.as_ref().unwrap();
        assert_eq!(xact.begin().unwrap(), 1); // reserves block 1
                                              // One more page at the file's end, which the bound does not cover.
        let mut extra = pool.allocate(XACT).unwrap();
        extra.set_kind(KIND_COMMIT_LOG_PAGE);
        log.log(&mut [(&mut extra, &[PageChange::Image])]).unwrap();
    }
    restart(&fs, opened);
    let (_, _, xact) = open_xact(&fs);
    let xact = xact.expect("opens: the check at open accepts a longer file");
    let per_page = verso::disk::commit_log::ENTRIES_PER_PAGE;
    let mut last = Ok(0);
    for _ in 0..per_page + 2 {
        last = xact.begin();
        if last.is_err() {
            break;
        }
    }
    assert!(last.is_ok(), "begin after a page's worth of ids: {last:?}");
}
