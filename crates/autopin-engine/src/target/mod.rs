//! Launching or attaching to the target program and tracking its threads.
