//! The Verso lab: the papers' workloads run against the engine, measured over time.
//!
//! - [`workload`]: the seam between the runner and the workloads;
//! - `workloads/`: one module per workload.

pub mod workload;
pub mod workloads;
