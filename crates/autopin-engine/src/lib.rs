//! autopin-engine
