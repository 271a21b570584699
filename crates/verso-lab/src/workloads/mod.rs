//! One module per workload; each implements [`crate::workload::Workload`].
pub mod tpcc;
