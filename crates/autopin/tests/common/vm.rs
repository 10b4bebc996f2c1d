//! Runs commands inside a QEMU guest with a chosen CPU/NUMA topology (`tests/vm/vm.sh`):
//! one boot per call, several commands per boot, each command's stdout, stderr and exit
//! status handed back separately.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A guest machine: QEMU's `-smp` and `-numa` terms.
#[derive(Clone, Debug)]
pub struct Shape {
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    /// (Linux CPU list, MiB) per node in node order; an empty list makes a memory-only node.
    pub nodes: Vec<(&'static str, u32)>,
    /// (from, to, distance); QEMU makes them symmetric.
    pub distances: Vec<(u32, u32, u32)>,
}

/// What one guest command did.
#[derive(Clone, Debug)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub status: i32,
}

impl Output {
    /// stdout, panicking with everything known when the command failed.
    pub fn ok(&self, what: &str) -> &str {
        assert_eq!(
            self.status, 0,
            "guest command {what} failed:\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        &self.stdout
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

use autopin_testkit::have;

/// Why a guest cannot be booted here at all (a reason to skip, not a failure).
pub fn unavailable() -> Option<String> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Some("the VM tests boot an x86-64 Linux guest".into());
    }
    for (tool, pkg) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
    ] {
        if !have(tool) {
            return Some(format!(
                "{tool} is not installed (apt-get install {pkg}; scripts/deps.sh does)"
            ));
        }
    }
    let kernel_cached = std::env::var_os("AUTOPIN_VM_KERNEL").is_some()
        || std::fs::read_dir(cache().join("kernel/boot")).is_ok();
    let can_fetch = have("apt-get") && have("dpkg");
    if !kernel_cached && !can_fetch {
        return Some(
            "no guest kernel cached and no apt-get/dpkg to fetch linux-image-amd64".into(),
        );
    }
    None
}

fn cache() -> PathBuf {
    if let Some(c) = std::env::var_os("AUTOPIN_VM_CACHE") {
        return c.into();
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
        .join("vm")
}

const MARK: &str = "@@autopin-vm@@";

/// Guests boot one at a time (see `run`).
static GUESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Boots `shape` once with `files` under /bin and runs each command (a busybox `sh`
/// script) in order. Panics when the guest boots but does not report back: that is a
/// failure, not a reason to skip.
pub fn run(shape: &Shape, files: &[&Path], commands: &[&str]) -> Vec<Output> {
    let mut script = String::new();
    for (i, c) in commands.iter().enumerate() {
        script.push_str(&format!(
            "(\n{c}\n) >/tmp/o{i} 2>/tmp/e{i} </dev/null; echo $? >/tmp/s{i}\n"
        ));
    }
    for i in 0..commands.len() {
        for (part, file) in [("out", "o"), ("err", "e"), ("status", "s")] {
            script.push_str(&format!(
                "echo \"{MARK} {i} {part} $(wc -c </tmp/{file}{i})\"; cat /tmp/{file}{i}\n"
            ));
        }
    }
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("tests/vm/vm.sh"))
        .args(["--sockets", &shape.sockets.to_string()])
        .args(["--cores", &shape.cores.to_string()])
        .args(["--threads", &shape.threads.to_string()])
        // The guest's budget is CPU time (what QEMU got, so a machine shared with other
        // work stretches the wall time instead of failing the test), capped by wall time.
        .args(["--cpu-timeout", "400", "--timeout", "1500"]);
    for (cpus, mib) in &shape.nodes {
        cmd.args(["--node", &format!("{cpus}:{mib}M")]);
    }
    for (a, b, d) in &shape.distances {
        cmd.args(["--dist", &format!("{a},{b},{d}")]);
    }
    for f in files {
        cmd.arg("--add").arg(f);
    }
    cmd.args(["--", "sh", "-c", &script]);
    // One guest at a time: TCG guests side by side on a 2-CPU machine slow each other down
    // until one misses its timeout.
    let _turn = GUESTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = cmd.output().expect("running tests/vm/vm.sh");
    // A guest whose boot hung (no exit status at all, the timeout hit) is booted once more:
    // TCG occasionally stalls a boot; a second stall is a failure.
    if String::from_utf8_lossy(&out.stderr).contains("reported no exit status") {
        out = cmd.output().expect("running tests/vm/vm.sh");
    }
    let stdout = out.stdout;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the guest did not run its commands ({shape:?}):\n{stderr}"
    );
    parse(&stdout, commands.len()).unwrap_or_else(|e| {
        panic!(
            "guest output unreadable: {e}\n{}\n{stderr}",
            String::from_utf8_lossy(&stdout)
        )
    })
}

/// Reads the framed sections ("MARK i part bytes\n" + bytes) the guest script prints.
fn parse(mut s: &[u8], n: usize) -> Result<Vec<Output>, String> {
    let mut outs = vec![
        Output {
            stdout: String::new(),
            stderr: String::new(),
            status: -1
        };
        n
    ];
    while !s.is_empty() {
        let nl = s
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("header without newline")?;
        let head = String::from_utf8_lossy(&s[..nl]).to_string();
        let f: Vec<&str> = head.split_whitespace().collect();
        if f.len() != 4 || f[0] != MARK {
            return Err(format!("unexpected line {head:?}"));
        }
        let i: usize = f[1].parse().map_err(|_| format!("bad index in {head:?}"))?;
        let len: usize = f[3]
            .parse()
            .map_err(|_| format!("bad length in {head:?}"))?;
        let body = s
            .get(nl + 1..nl + 1 + len)
            .ok_or("section shorter than its length")?;
        let text = String::from_utf8_lossy(body).to_string();
        let o = outs.get_mut(i).ok_or("index out of range")?;
        match f[2] {
            "out" => o.stdout = text,
            "err" => o.stderr = text,
            _ => {
                o.status = text
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad status {text:?}"))?
            }
        }
        s = &s[nl + 1 + len..];
    }
    Ok(outs)
}
