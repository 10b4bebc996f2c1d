//! Installing autopin the way sites do (#60): the release tarball of scripts/release.sh (the
//! committed tree plus every crate under vendor/), the Debian package of scripts/deb.sh, the
//! EasyBuild easyconfig in contrib/easybuild and the Spack recipe in contrib/spack.
//!
//! The tests that run in the suite make the tarball (once per run: a few seconds, as it
//! vendors from cargo's cache), pack the binary cargo built for the tests into a .deb and
//! install, run and remove it in a scratch root (`dpkg --root`), run `eb --dry-run` and
//! `eb --extended-dry-run` on the easyconfig, and run the Spack recipe's install steps and
//! tests against a stand-in for Spack's package API (tests/tools/spack_recipe_check.py).
//!
//! The three `#[ignore]`d tests build autopin from the tarball (minutes on 2 CPUs each):
//!
//! ```sh
//! cargo test -p autopin --test packaging -- --ignored --test-threads 1
//! ```
//!
//! - `vendored_tarball_builds_offline_in_an_empty_directory`: `cargo build --offline
//!   --release` in the unpacked tarball with an empty `CARGO_HOME` and, where it can, no
//!   network at all (`unshare -n`);
//! - `release_deb_installs_on_this_machine`: `scripts/release.sh`, then `dpkg -i` of its .deb
//!   into this machine, `autopin --version`, `man -w autopin`, and `dpkg -r` leaving nothing
//!   (root only, and only where no autopin package is installed already);
//! - `easyconfig_installs_and_module_runs_autopin`: `eb` on the easyconfig into a scratch
//!   prefix, then `module load autopin` and the binary from the module.

use autopin_testkit::{have, repo_root, require, skip};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The workspace's declared minimum Rust (`rust-version` in Cargo.toml).
fn rust_version() -> String {
    let toml = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    toml.lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in Cargo.toml")
        .to_string()
}

fn run(cmd: &mut Command) -> Output {
    match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {cmd:?}: {e}"),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `cmd` and returns its stdout; panics with both streams when it fails.
fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A scratch directory under cargo's per-target temporary directory, emptied first.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("packaging-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sha256(path: &Path) -> String {
    let out = ok(Command::new("sha256sum").arg(path));
    out.split_whitespace().next().unwrap().to_string()
}

/// `scripts/release.sh --no-deb` into `out`; Err with the reason when crates.io cannot be
/// reached for crates missing from cargo's cache (the one thing here that needs a network).
fn make_release(out: &Path, extra: &[&str]) -> Result<(), String> {
    let o = run(Command::new("bash")
        .arg(repo_root().join("scripts/release.sh"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .current_dir(repo_root()));
    if o.status.success() {
        return Ok(());
    }
    let err = text(&o.stderr);
    if err.contains("failed to download")
        || err.contains("failed to get")
        || err.contains("Unable to update registry")
    {
        return Err(format!(
            "cargo vendor cannot fetch crates missing from cargo's cache (no crates.io here): {}",
            err.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
        ));
    }
    panic!("scripts/release.sh {extra:?} failed ({}):\n{err}", o.status);
}

/// The release of HEAD (tarball, SHA256SUMS, filled-in easyconfig and recipe), made once per
/// test process.
fn release() -> Result<&'static Path, String> {
    static RELEASE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    RELEASE
        .get_or_init(|| {
            let out = scratch("release");
            make_release(&out, &["--no-deb"]).map(|()| out)
        })
        .as_deref()
        .map_err(Clone::clone)
}

fn tarball_name() -> String {
    format!("autopin-{}.tar.gz", version())
}

fn sha256sums(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("SHA256SUMS"))
        .unwrap()
        .lines()
        .map(|l| {
            let (sum, name) = l.split_once("  ").expect("sha256sum's format");
            (name.to_string(), sum.to_string())
        })
        .collect()
}

/// The registry crates of Cargo.lock as `name-version`.
fn locked_registry_crates() -> BTreeSet<String> {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let mut crates = BTreeSet::new();
    for pkg in lock.split("[[package]]").skip(1) {
        let field = |k: &str| {
            pkg.lines()
                .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
                .map(|v| v.trim_end_matches('"').to_string())
        };
        if field("source").is_some_and(|s| s.starts_with("registry+")) {
            crates.insert(format!(
                "{}-{}",
                field("name").unwrap(),
                field("version").unwrap()
            ));
        }
    }
    crates
}

#[test]
fn release_tarball_is_the_committed_tree_with_every_crate_vendored_and_reproducible() {
    require!(
        have("git"),
        "git is not installed: release.sh makes the tarball with git archive"
    );
    let dir = match release() {
        Ok(d) => d,
        Err(e) => skip!("{e}"),
    };
    let tarball = dir.join(tarball_name());
    let sums = sha256sums(dir);
    assert_eq!(
        sums,
        vec![(tarball_name(), sha256(&tarball))],
        "SHA256SUMS names the tarball with its sha256"
    );

    let listing = ok(Command::new("tar").arg("-tzf").arg(&tarball));
    let top = format!("autopin-{}/", version());
    let names: BTreeSet<&str> = listing.lines().collect();
    assert!(
        names.iter().all(|n| n.starts_with(&top)),
        "one top directory {top}"
    );
    // Every file git tracks at HEAD is there, and nothing of the build.
    let tracked = ok(Command::new("git")
        .args(["ls-tree", "-r", "--name-only", "HEAD"])
        .current_dir(repo_root()));
    for f in tracked.lines() {
        assert!(
            names.contains(format!("{top}{f}").as_str()),
            "{f} missing from the tarball"
        );
    }
    assert!(!names
        .iter()
        .any(|n| n.starts_with(&format!("{top}target/"))));
    // Every registry crate of the lock file, vendored with cargo's checksum file.
    let vendored: BTreeSet<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix(&format!("{top}vendor/")))
        .filter_map(|n| n.strip_suffix("/.cargo-checksum.json"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        vendored,
        locked_registry_crates(),
        "vendor/ is exactly Cargo.lock's crates"
    );

    // The tree's cargo configuration builds from vendor/, offline; the lock file is HEAD's.
    let unpacked = scratch("release-unpacked");
    ok(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&unpacked)
        .arg(format!("{top}.cargo/config.toml"))
        .arg(format!("{top}Cargo.lock")));
    let config = std::fs::read_to_string(unpacked.join(&top).join(".cargo/config.toml")).unwrap();
    for line in [
        "replace-with = \"vendored-sources\"",
        "directory = \"vendor\"",
        "offline = true",
    ] {
        assert!(
            config.contains(line),
            "{line} in .cargo/config.toml:\n{config}"
        );
    }
    assert!(
        config.contains("AUTOPIN_MEMORY"),
        "the tree's own settings are kept"
    );
    let head_lock = ok(Command::new("git")
        .args(["show", "HEAD:Cargo.lock"])
        .current_dir(repo_root()));
    assert_eq!(
        std::fs::read_to_string(unpacked.join(&top).join("Cargo.lock")).unwrap(),
        head_lock
    );

    // The same commit gives the same bytes.
    let again = scratch("release-again");
    if let Err(e) = make_release(&again, &["--no-deb"]) {
        skip!("{e}");
    }
    assert_eq!(
        sha256(&again.join(tarball_name())),
        sha256(&tarball),
        "two releases of one commit differ"
    );
    let _ = std::fs::remove_dir_all(&again);
    let _ = std::fs::remove_dir_all(&unpacked);
}

/// The lines of `dpkg-deb -c`: the package's paths without the leading `.`.
fn deb_paths(deb: &Path) -> BTreeSet<String> {
    ok(Command::new("dpkg-deb").arg("-c").arg(deb))
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| p.trim_start_matches('.').trim_end_matches('/').to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

const DEB_FILES: &[&str] = &[
    "/usr/bin/autopin",
    "/usr/share/man/man1/autopin.1.gz",
    "/usr/share/bash-completion/completions/autopin",
    "/usr/share/zsh/vendor-completions/_autopin",
    "/usr/share/fish/vendor_completions.d/autopin.fish",
    "/usr/include/autopin.h",
    "/usr/share/doc/autopin/README.md",
    "/usr/share/doc/autopin/copyright",
    "/usr/share/doc/autopin/docs/search.md",
];

/// The package names of a Depends field (first of each alternative, without versions).
fn depends_names(depends: &str) -> Vec<String> {
    depends
        .split(',')
        .map(|d| {
            d.split('|')
                .next()
                .unwrap()
                .trim()
                .split([' ', ':', '('])
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// The packages that own the libraries `bin` links (objdump's NEEDED, found through ldd).
fn linked_packages(bin: &Path) -> BTreeSet<String> {
    let needed: Vec<String> = ok(Command::new("objdump").arg("-p").arg(bin))
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(|l| l.trim().to_string())
        .collect();
    assert!(!needed.is_empty(), "{} links no library?", bin.display());
    let ldd = ok(Command::new("ldd").arg(bin));
    let mut pkgs = BTreeSet::new();
    for lib in &needed {
        let path = ldd
            .lines()
            .find_map(|l| {
                let l = l.trim();
                if let Some((name, rest)) = l.split_once(" => ") {
                    (name == lib).then(|| rest.split_whitespace().next().unwrap().to_string())
                } else {
                    let p = l.split_whitespace().next()?;
                    p.ends_with(lib.as_str()).then(|| p.to_string())
                }
            })
            .unwrap_or_else(|| panic!("ldd does not resolve {lib}:\n{ldd}"));
        let real = std::fs::canonicalize(&path).unwrap();
        // dpkg knows a library by the path it shipped it under: try the resolved one too.
        let owner = [PathBuf::from(&path), real]
            .iter()
            .find_map(|p| {
                let o = run(Command::new("dpkg").arg("-S").arg(p));
                o.status.success().then(|| text(&o.stdout))
            })
            .unwrap_or_else(|| panic!("no package owns {path} ({lib})"));
        pkgs.insert(owner.split(':').next().unwrap().to_string());
    }
    pkgs
}

/// A dpkg database for a scratch root that knows the packages `names` as installed, with
/// their versions on this machine: `dpkg --root` then checks the package's Depends against
/// what this machine really has.
fn scratch_dpkg_root(root: &Path, names: &[String]) {
    let admin = root.join("var/lib/dpkg");
    for d in ["info", "updates", "triggers"] {
        std::fs::create_dir_all(admin.join(d)).unwrap();
    }
    let mut status = String::new();
    for name in names {
        let stanza = ok(Command::new("dpkg-query").args(["-s", name]));
        status.push_str(stanza.trim_end());
        status.push_str("\n\n");
        let full = ok(Command::new("dpkg-query").args(["-W", "-f=${binary:Package}", name]));
        std::fs::write(admin.join("info").join(format!("{full}.list")), "").unwrap();
    }
    std::fs::write(admin.join("status"), status).unwrap();
    std::fs::write(admin.join("available"), "").unwrap();
}

fn dpkg_in(root: &Path) -> Command {
    let mut c = Command::new("dpkg");
    c.arg(format!("--root={}", root.display()))
        .arg(format!("--log={}", root.join("dpkg.log").display()))
        .arg("--force-not-root");
    c
}

/// The first CPU this process may run on (for `autopin pin -c`).
fn first_cpu() -> String {
    autopin_testkit::first_and_last_cpu(&autopin_testkit::own_cpu_list()).0
}

#[test]
fn deb_of_the_built_binary_installs_runs_and_removes_cleanly() {
    for tool in [
        "dpkg-deb",
        "dpkg",
        "dpkg-query",
        "dpkg-shlibdeps",
        "strip",
        "objdump",
        "ldd",
    ] {
        require!(
            have(tool),
            "{tool} is not installed: the .deb is built and installed with Debian's tools \
             (apt-get install dpkg-dev binutils)"
        );
    }
    require!(
        have("man"),
        "man is not installed (apt-get install man-db): the page is checked with man -l"
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_autopin"));
    let work = scratch("deb");
    let out = ok(Command::new("bash")
        .arg(repo_root().join("scripts/deb.sh"))
        .arg(bin)
        .arg(work.join("out"))
        .env("AUTOPIN_DEB_COMPRESSION", "gzip"));
    let arch = ok(Command::new("dpkg").arg("--print-architecture"));
    let deb = work
        .join("out")
        .join(format!("autopin_{}_{}.deb", version(), arch.trim()));
    assert_eq!(
        Path::new(out.trim()),
        deb,
        "deb.sh prints the package it wrote"
    );

    // Its fields, and its files where a Debian system looks for them.
    let field = |f: &str| {
        ok(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(f))
            .trim()
            .to_string()
    };
    assert_eq!(field("Package"), "autopin");
    assert_eq!(field("Version"), version());
    assert_eq!(field("Architecture"), arch.trim());
    let paths = deb_paths(&deb);
    for f in DEB_FILES {
        assert!(paths.contains(*f), "{f} not in the package: {paths:?}");
    }
    // Depends: every library the binary links belongs to a package it names, libc6 with the
    // version its symbols need; the preload library (inside the binary) needs libc6 only.
    let depends = field("Depends");
    let named = depends_names(&depends);
    assert!(depends.contains("libc6 (>= 2."), "Depends: {depends}");
    for pkg in linked_packages(bin) {
        assert!(
            named.contains(&pkg),
            "{} links a library of {pkg}, Depends: {depends}",
            bin.display()
        );
    }

    // Installed into a scratch root whose dpkg database has this machine's versions of the
    // Depends packages: the dependencies are checked, nothing of this machine is touched.
    let root = work.join("root");
    scratch_dpkg_root(&root, &named);
    ok(dpkg_in(&root).arg("-i").arg(&deb));
    let listed = ok(Command::new("dpkg-query")
        .arg(format!(
            "--admindir={}",
            root.join("var/lib/dpkg").display()
        ))
        .args(["-W", "-f=${Status}", "autopin"]));
    assert_eq!(listed, "install ok installed");
    let installed = root.join("usr/bin/autopin");
    assert_eq!(
        ok(Command::new(&installed).arg("--version")).trim(),
        format!("autopin {}", version())
    );
    let topo = ok(Command::new(&installed).arg("topology"));
    assert!(topo.starts_with("Machine"), "autopin topology:\n{topo}");
    // The embedded preload library works from the installed binary.
    let rt = work.join("runtime");
    std::fs::create_dir_all(&rt).unwrap();
    std::fs::set_permissions(&rt, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    ok(Command::new(&installed)
        .args(["pin", "-c", &first_cpu(), "--", "true"])
        .env("XDG_RUNTIME_DIR", &rt));
    // The page: rendered from the file, and found by name under the root's man directory.
    let page = root.join("usr/share/man/man1/autopin.1.gz");
    let rendered = ok(Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100"));
    assert!(
        rendered.contains("autopin - Find and apply the best thread-to-core pinning"),
        "{rendered}"
    );
    assert!(
        rendered.contains("AUTOPIN TOPOLOGY"),
        "the subcommands are on the page"
    );
    let found = ok(Command::new("man")
        .args(["-w", "autopin"])
        .env("MANPATH", root.join("usr/share/man")));
    assert_eq!(Path::new(found.trim()), page);
    // The completions load in their shells (those installed here).
    let bash_completion = root.join("usr/share/bash-completion/completions/autopin");
    let complete = ok(Command::new("bash").arg("-c").arg(format!(
        "source '{}' && complete -p autopin",
        bash_completion.display()
    )));
    assert!(
        complete.contains("_autopin") && complete.trim().ends_with("autopin"),
        "{complete}"
    );
    for (shell, file) in [
        ("zsh", "usr/share/zsh/vendor-completions/_autopin"),
        ("fish", "usr/share/fish/vendor_completions.d/autopin.fish"),
    ] {
        if have(shell) {
            ok(Command::new(shell).arg("-n").arg(root.join(file)));
        } else {
            eprintln!("{shell} is not installed: {file} is checked by content only");
        }
    }
    let zsh =
        std::fs::read_to_string(root.join("usr/share/zsh/vendor-completions/_autopin")).unwrap();
    assert!(zsh.starts_with("#compdef autopin"));

    // Removed (and purged): nothing of it stays in the root.
    ok(dpkg_in(&root).args(["--purge", "autopin"]));
    let left: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.ends_with("var") && !p.ends_with("dpkg.log"))
        .collect();
    assert!(left.is_empty(), "left after dpkg --purge: {left:?}");
    let status = std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap();
    assert!(
        !status.contains("Package: autopin\n"),
        "still in the database:\n{status}"
    );
    assert!(
        !root.join("var/lib/dpkg/info/autopin.list").exists(),
        "dpkg's file list of the package is gone"
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// The easyconfig in contrib/easybuild (the one there is).
fn easyconfig() -> PathBuf {
    let dir = repo_root().join("contrib/easybuild");
    let ecs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "eb"))
        .collect();
    assert_eq!(ecs.len(), 1, "one easyconfig in {}: {ecs:?}", dir.display());
    ecs.into_iter().next().unwrap()
}

#[test]
fn easyconfig_matches_the_workspace_and_eb_dry_runs_it() {
    // What holds without EasyBuild: name, version, the Rust it builds with, the marker that
    // release.sh fills, and the filled copy beside the tarball.
    let ec = easyconfig();
    let ec_text = std::fs::read_to_string(&ec).unwrap();
    let file = ec.file_name().unwrap().to_str().unwrap().to_string();
    assert!(ec_text.contains("easyblock = 'Cargo'"));
    assert!(
        ec_text.contains(&format!("version = '{}'", version())),
        "{file}: version"
    );
    assert!(
        file.starts_with(&format!("autopin-{}-GCCcore-", version())),
        "{file}"
    );
    let rust = ec_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("('Rust', '"))
        .and_then(|l| l.split('\'').next())
        .expect("a Rust build dependency");
    assert!(
        rust == rust_version() || rust.starts_with(&format!("{}.", rust_version())),
        "the easyconfig builds with Rust {rust}, the workspace needs {}",
        rust_version()
    );
    assert_eq!(
        ec_text.matches("@AUTOPIN_SHA256@").count(),
        1,
        "one checksum marker"
    );
    let dir = match release() {
        Ok(d) => d,
        Err(e) => skip!("{e}"),
    };
    let filled = dir.join("easybuild").join(&file);
    let filled_text = std::fs::read_to_string(&filled).unwrap();
    let sha = sha256(&dir.join(tarball_name()));
    assert_eq!(
        filled_text,
        ec_text.replace("@AUTOPIN_SHA256@", &sha),
        "the released easyconfig carries the tarball's sha256"
    );

    // EasyBuild itself: it parses the easyconfig, resolves the toolchain and dependencies,
    // finds the tarball, checks its checksum, and traces every step of the Cargo easyblock.
    let work = scratch("easybuild-dry-run");
    let o = run(Command::new("bash")
        .arg(autopin_testkit::tool("easybuild_check.sh"))
        .arg("dry-run")
        .arg(&filled)
        .arg(dir)
        .arg(&work));
    let out = text(&o.stdout);
    if o.status.code() == Some(3) {
        skip!("{}", out.trim().trim_start_matches("MISSING: "));
    }
    assert!(
        o.status.success(),
        "eb dry runs failed:\n{out}\n{}",
        text(&o.stderr)
    );
    let module = format!(
        "autopin/{}",
        file.strip_prefix("autopin-")
            .unwrap()
            .strip_suffix(".eb")
            .unwrap()
    );
    assert!(out.contains(&format!("(module: {module})")), "{out}");
    for expected in [
        format!(
            "{} found at {}",
            tarball_name(),
            dir.join(tarball_name()).display()
        ),
        format!("expected checksum for {}: {sha}", tarball_name()),
        format!("module load Rust/{rust}-GCCcore-"),
        "cargo build --profile=release".to_string(),
        "cargo install --profile=release --root=".to_string(),
        "bin/autopin completions bash >".to_string(),
        format!("autopin --version | grep -x \"autopin {}\"", version()),
        "prepend_path(\"MANPATH\"".to_string(),
        "prepend_path(\"XDG_DATA_DIRS\"".to_string(),
    ] {
        assert!(
            out.contains(&expected),
            "`{expected}` not in eb's dry runs:\n{out}"
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

fn spack_check(recipe: &Path, sums: Option<&Path>) {
    let mut cmd = Command::new("python3");
    cmd.arg(autopin_testkit::tool("spack_recipe_check.py"))
        .arg("--recipe")
        .arg(recipe)
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_autopin"))
        .arg("--source")
        .arg(repo_root());
    if let Some(s) = sums {
        cmd.arg("--sha256sums").arg(s);
    }
    let out = ok(&mut cmd);
    assert!(out.ends_with("spack recipe: all checks passed\n"), "{out}");
}

#[test]
fn spack_recipe_imports_installs_completions_and_passes_its_tests() {
    require!(
        have("python3"),
        "python3 is not installed: the recipe is checked by importing it"
    );
    let recipe = repo_root().join("contrib/spack/packages/autopin/package.py");
    spack_check(&recipe, None);
    let dir = match release() {
        Ok(d) => d,
        Err(e) => skip!("{e}"),
    };
    spack_check(
        &dir.join("spack/packages/autopin/package.py"),
        Some(&dir.join("SHA256SUMS")),
    );
}

/// Runs with `cargo test -p autopin --test packaging -- --ignored vendored_tarball`: the
/// release tarball, unpacked in an empty directory, builds with `cargo build --offline
/// --release` from its vendor/ alone: `CARGO_HOME` is an empty directory (no cached crates,
/// no registry index) and, where `unshare -n` works (root), the build has no network at all.
/// Minutes on 2 CPUs.
#[test]
#[ignore = "a full release build from the tarball (minutes): see the doc comment"]
fn vendored_tarball_builds_offline_in_an_empty_directory() {
    require!(
        have("git"),
        "git is not installed: release.sh makes the tarball with git archive"
    );
    let dir = match release() {
        Ok(d) => d,
        Err(e) => skip!("{e}"),
    };
    // Outside the repository: cargo reads the .cargo/config.toml of every directory above.
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path();
    ok(Command::new("tar")
        .arg("-xzf")
        .arg(dir.join(tarball_name()))
        .arg("-C")
        .arg(empty));
    let src = empty.join(format!("autopin-{}", version()));
    let cargo_home = empty.join("cargo-home");
    std::fs::create_dir_all(&cargo_home).unwrap();
    let no_network = run(Command::new("unshare").args(["-n", "true"]))
        .status
        .success();
    let mut cmd = if no_network {
        let mut c = Command::new("unshare");
        c.args(["-n", "cargo"]);
        c
    } else {
        eprintln!("unshare -n is not allowed here: the build runs offline by cargo's word only");
        Command::new("cargo")
    };
    cmd.args(["build", "--offline", "--release"])
        .current_dir(&src)
        .env("CARGO_HOME", &cargo_home)
        .env(
            "RUSTUP_HOME",
            std::env::var_os("RUSTUP_HOME").unwrap_or_else(|| {
                Path::new(&std::env::var_os("HOME").unwrap())
                    .join(".rustup")
                    .into()
            }),
        )
        .env_remove("CARGO_TARGET_DIR");
    ok(&mut cmd);
    let built = src.join("target/release/autopin");
    assert_eq!(
        ok(Command::new(&built).arg("--version")).trim(),
        format!("autopin {}", version())
    );
    let entries: Vec<_> = std::fs::read_dir(&cargo_home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        !entries.iter().any(|e| e == "registry" || e == "git"),
        "the build fetched into CARGO_HOME: {entries:?}"
    );
}

/// Runs with `cargo test -p autopin --test packaging -- --ignored release_deb`: the README's
/// promise on this machine, as root: `scripts/release.sh` (which builds the binary from the
/// tarball, offline), `dpkg -i` of its .deb, `autopin --version` and `man -w autopin` from
/// the system's paths, then `dpkg -r` and `dpkg --purge` leave none of its files. Skips where
/// it is not root or an autopin package is installed already (it would replace it).
#[test]
#[ignore = "builds the release and installs it into this machine: see the doc comment"]
fn release_deb_installs_on_this_machine() {
    for tool in ["git", "dpkg", "dpkg-deb", "dpkg-shlibdeps", "man"] {
        require!(
            have(tool),
            "{tool} is not installed: this test installs a .deb with dpkg"
        );
    }
    let uid = run(Command::new("id").arg("-u"));
    require!(
        text(&uid.stdout).trim() == "0",
        "not root: dpkg -i into this machine needs root"
    );
    let before = run(Command::new("dpkg-query").args(["-W", "-f=${Status}", "autopin"]));
    require!(
        !text(&before.stdout).contains("installed"),
        "an autopin package is installed on this machine already; this test would replace it"
    );
    let out = scratch("release-deb");
    if let Err(e) = make_release(&out, &[]) {
        skip!("{e}");
    }
    let arch = ok(Command::new("dpkg").arg("--print-architecture"));
    let deb = out.join(format!("autopin_{}_{}.deb", version(), arch.trim()));
    let sums = sha256sums(&out);
    assert!(sums.contains(&(
        deb.file_name().unwrap().to_str().unwrap().to_string(),
        sha256(&deb)
    )));
    let files: Vec<String> = deb_paths(&deb).into_iter().collect();

    let installed = run(Command::new("dpkg").arg("-i").arg(&deb));
    let result = std::panic::catch_unwind(|| {
        assert!(
            installed.status.success(),
            "dpkg -i: {}",
            text(&installed.stderr)
        );
        let sys_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        assert_eq!(
            ok(Command::new("autopin")
                .arg("--version")
                .env("PATH", sys_path))
            .trim(),
            format!("autopin {}", version())
        );
        let page = ok(Command::new("man")
            .args(["-w", "autopin"])
            .env("PATH", sys_path)
            .env_remove("MANPATH"));
        assert_eq!(page.trim(), "/usr/share/man/man1/autopin.1.gz");
        ok(Command::new("autopin")
            .arg("topology")
            .env("PATH", sys_path));
    });
    let removed = run(Command::new("dpkg").args(["--purge", "autopin"]));
    assert!(
        removed.status.success(),
        "dpkg --purge: {}",
        text(&removed.stderr)
    );
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    let after = run(Command::new("dpkg-query").args(["-W", "-f=${Status}", "autopin"]));
    assert!(
        !text(&after.stdout).contains("installed"),
        "{}",
        text(&after.stdout)
    );
    for f in files {
        let p = Path::new(&f);
        // Directories Debian's own packages own (/usr/bin, ...) stay; everything of ours goes.
        let ours = f.contains("autopin");
        assert!(!(ours && p.exists()), "{f} left after dpkg --purge");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs with `cargo test -p autopin --test packaging -- --ignored easyconfig_installs`:
/// EasyBuild builds the release tarball with the easyconfig (the Cargo easyblock, offline),
/// installs it into a scratch prefix with its module, and a fresh shell runs `module load
/// autopin`, `autopin --version` and `man -w autopin` (tests/tools/easybuild_check.sh, whose
/// comment says which toolchain modules stand in for a site's). Minutes on 2 CPUs.
#[test]
#[ignore = "EasyBuild builds autopin from the tarball (minutes): see the doc comment"]
fn easyconfig_installs_and_module_runs_autopin() {
    let dir = match release() {
        Ok(d) => d,
        Err(e) => skip!("{e}"),
    };
    let file = easyconfig().file_name().unwrap().to_owned();
    // Outside the repository, as a site's build directory is (removed when done).
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    let o = run(Command::new("bash")
        .arg(autopin_testkit::tool("easybuild_check.sh"))
        .arg("install")
        .arg(dir.join("easybuild").join(&file))
        .arg(dir)
        .arg(work));
    let out = text(&o.stdout);
    if o.status.code() == Some(3) {
        skip!("{}", out.trim().trim_start_matches("MISSING: "));
    }
    assert!(
        o.status.success(),
        "eb install failed:\n{out}\n{}",
        text(&o.stderr)
    );
    assert!(out.contains(&format!("autopin {}\n", version())), "{out}");
    assert!(
        out.contains("/share/man/man1/autopin.1"),
        "man -w from the module: {out}"
    );
    assert!(
        out.contains("bash completion: "),
        "completions on XDG_DATA_DIRS: {out}"
    );
}
