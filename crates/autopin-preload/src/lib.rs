//! LD_PRELOAD library
