//! autopin-compare
