//! Compiles c/preload.c into the shared object that `autopin` embeds (see src/lib.rs).
//! We call the C compiler directly: the library is one file with no configuration, and
//! this keeps the build free of extra crates. `CC` picks the compiler (default `cc`).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = PathBuf::from("c/preload.c");
    println!("cargo:rerun-if-changed=c/preload.c");
    println!("cargo:rerun-if-env-changed=CC");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let so = out.join("libautopin_preload.so");
    let status = Command::new(&cc)
        .args([
            "-O2",
            "-g0",
            "-fPIC",
            "-shared",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .args(["-fvisibility=default", "-pthread", "-o"])
        .arg(&so)
        .arg(&src)
        .args(["-ldl"])
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{cc} failed to compile c/preload.c ({s}); autopin needs a C compiler"),
        Err(e) => panic!("cannot run the C compiler `{cc}` ({e}); install gcc or set CC"),
    }
}
