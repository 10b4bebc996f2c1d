//! autopin-placement
