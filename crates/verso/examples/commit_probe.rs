use std::collections::VecDeque;
use std::time::{Duration, Instant};
use verso::{ColumnType, Database, Durability, Isolation, Options, Schema, Value};
fn main() {
    let mode = std::env::args().nth(1).unwrap_or("memory".into());
    let window: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1);
    let secs: f64 = std::env::args()
        .nth(3)
        .map(|s| s.parse().unwrap())
        .unwrap_or(3.0);
    let dir = std::path::PathBuf::from("/work/commit-probe-db");
    let _ = std::fs::remove_dir_all(&dir);
    let mut options = Options::default();
    if mode != "memory" {
        options = options.path(&dir).durability(match mode.as_str() {
            "sync" => Durability::Sync,
            "async" => Durability::Async {
                interval: Duration::from_millis(10),
            },
            _ => Durability::None,
        });
    }
    let db = Database::open(options).unwrap();
    let t = db
        .create_table(
            "a",
            Schema::new()
                .column("id", ColumnType::U64)
                .column("v", ColumnType::I64)
                .primary_key(&["id"]),
        )
        .unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    for i in 0..100_000u64 {
        txn.insert(t, &[Value::U64(i), Value::I64(0)]).unwrap();
    }
    txn.commit().unwrap();
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u64)
            .map(|w| {
                let db = &db;
                s.spawn(move || {
                    let mut pending = VecDeque::new();
                    let mut n = 0u64;
                    let mut k = w * 7919;
                    while Instant::now() < deadline {
                        if pending.len() >= window {
                            let tk: verso::CommitTicket = pending.pop_front().unwrap();
                            tk.wait().unwrap();
                            n += 1;
                            continue;
                        }
                        k = (k * 6364136223846793005 + 1442695040888963407) % 100_000;
                        let id = (k % 50_000) * 2 + w; // disjoint keys per thread
                        let mut txn = db.begin(Isolation::Snapshot);
                        txn.update(t, &[Value::U64(id)], &[(1, Value::I64(k as i64))])
                            .unwrap();
                        pending.push_back(txn.commit_deferred().unwrap());
                    }
                    for tk in pending {
                        tk.wait().unwrap();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let st = db.stats();
    let d = st.durability.unwrap_or_default();
    println!("{mode:6} window {window:3}: {:>9.0} commits/s; syncs {} ({:.1} commits/sync, {:.0} us/sync), log {} MB",
        total as f64 / secs, d.log_syncs, total as f64 / d.log_syncs.max(1) as f64,
        d.log_sync_nanos as f64 / d.log_syncs.max(1) as f64 / 1e3, d.log_bytes >> 20);
}
