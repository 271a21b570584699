//! One module per workload; each implements [`crate::workload::Workload`].
pub mod ch;
pub mod kv_updates;
pub mod scan_updates;
pub mod sysbench;
pub mod tpcb;
pub mod tpcc;
pub mod ycsb;
