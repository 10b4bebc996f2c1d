//! autopin-perf
