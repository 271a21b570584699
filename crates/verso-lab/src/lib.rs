//! The Verso lab: the papers' workloads run against the engine, measured over time.
//!
//! - [`workload`]: the seam between the runner and the workloads;
//! - [`system`]: the seam between the runner and what it drives: Verso, or a peer;
//! - [`peers`]: PostgreSQL, DuckDB and SQLite running the same workloads in SQL;
//! - `workloads/`: one module per workload (YCSB, key-value updates, scans with updates,
//!   TPC-B, TPC-C, CH-benCHmark);
//! - [`runner`]: loads a database, runs OLTP and OLAP workers side by side, samples the
//!   engine's counters every second, checks consistency;
//! - [`metrics`]: the per-second samples and per-run summaries (what JSON holds);
//! - [`progress`]: progress bars, also those of a child process, drawn by its parent;
//! - [`paced_report`]: what a paced TPC-C run adds to the summary (NOTPM, response times);
//! - [`disk_report`]: what a disk-engine run adds: pages dirtied per commit by cause, pages
//!   written, their sequential share, pages written for aborted transactions;
//! - [`report`]: the terminal summary, the comparison line, JSON, and the HTML report with
//!   its plots ([`plot`]), written all at once or not at all ([`publish`]);
//! - [`reproduce`]: `verso reproduce`, the papers' figures and tables redone, with the
//!   paper's numbers beside ours;
//! - [`cli`]: the `verso` command line; [`compare`]: what `--compare` compares;
//! - [`rng`], [`zipf`]: seeded random numbers and key distributions.
//!
//! The keys of the JSON output and the report are documented in `docs/lab.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod check;
pub mod cli;
pub mod clients;
pub mod compare;
pub mod disk_report;
pub mod format;
pub mod load;
pub mod memory;
pub mod metrics;
pub mod paced_report;
pub mod peers;
pub mod plot;
pub mod pm_media;
pub mod progress;
pub mod publish;
pub mod report;
pub mod reproduce;
pub mod rng;
pub mod runner;
pub mod system;
pub mod workload;
pub mod workloads;
pub mod zipf;
