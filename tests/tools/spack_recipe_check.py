#!/usr/bin/env python3
"""Checks contrib/spack/packages/autopin/package.py without Spack.

Spack cannot be fetched on this project's machines, so this imports the recipe against a
small stand-in for the part of Spack's package API it uses (``spack.package`` and
``spack_repo.builtin.build_systems.cargo``: the directives, Executable, which, mkdirp,
install, join_path, Prefix and the completion paths, each behaving as Spack's does for
these calls), then

- checks what the directives declared: the version matches the workspace's, its sha256 is
  the release tarball's (given SHA256SUMS) or the marker scripts/release.sh replaces, the
  Rust dependency is the workspace's rust-version, and the build directory is the binary
  crate of the source tree;
- runs the recipe's run_after("install") steps on a prefix whose bin/autopin is a real
  autopin binary, and checks the completions, the man page and the header they install;
- runs the recipe's stand-alone tests (its test_* methods) against that prefix.

The recipe is imported twice: as Spack v1 reads it (CargoPackage from
spack_repo.builtin.build_systems.cargo) and as Spack v0.x does (from spack.package).
What stays untested: Spack itself (its concretizer, fetcher, mirror and CargoBuilder); the
`cargo install --locked --offline` its builder runs is the one the easyconfig's runs.

usage: spack_recipe_check.py --recipe PACKAGE_PY --binary AUTOPIN --source SRC_ROOT
                             [--sha256sums SHA256SUMS]
"""

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

MARKER = "@AUTOPIN_SHA256@"


# ---- the stand-in for Spack's package API -------------------------------------------------

_pending = []  # directives called in a class body, claimed by the class that follows


def _directive(kind):
    def record(*args, **kwargs):
        _pending.append((kind, args, kwargs))

    record.__name__ = kind
    return record


version = _directive("version")
depends_on = _directive("depends_on")
license = _directive("license")  # noqa: A001 (Spack's name)
maintainers = _directive("maintainers")
build_system = _directive("build_system")


class when:  # noqa: N801 (Spack's name)
    """Spack's when(): a context manager in class bodies, a decorator on methods."""

    def __init__(self, spec):
        self.spec = spec

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        fn._when = self.spec
        return fn


def run_after(phase, when=None):
    def mark(fn):
        fn._run_after = phase
        return fn

    return mark


class ProcessError(Exception):
    pass


class Executable:
    """Spack's Executable for the calls recipes make: output/error = str, a file, or None."""

    def __init__(self, name):
        self.path = str(name)

    def __call__(self, *args, output=None, error=None, fail_on_error=True):
        def sink(spec):
            if spec is str or spec is str.split:
                return subprocess.PIPE
            return spec  # a file object or None (inherit)

        proc = subprocess.run(
            [self.path, *map(str, args)], stdout=sink(output), stderr=sink(error), text=True
        )
        if fail_on_error and proc.returncode != 0:
            raise ProcessError(f"{self.path} {' '.join(map(str, args))}: exit {proc.returncode}: {proc.stderr}")
        text = ""
        if output in (str, str.split):
            text += proc.stdout
        if error in (str, str.split):
            text += proc.stderr
        return text if (output in (str, str.split) or error in (str, str.split)) else None


def which(*names, path=None, required=False):
    for name in names:
        name = str(name)
        if os.sep in name:
            if os.access(name, os.X_OK):
                return Executable(name)
            continue
        found = shutil.which(name, path=path)
        if found:
            return Executable(found)
    if required:
        raise ProcessError(f"none of {names} found")
    return None


def mkdirp(*paths, mode=None):
    for p in paths:
        os.makedirs(p, exist_ok=True)


def join_path(prefix, *args):
    return os.path.join(str(prefix), *map(str, args))


def install(src, dest):
    shutil.copy(str(src), str(dest))


def install_tree(src, dest):
    shutil.copytree(str(src), str(dest), dirs_exist_ok=True)


class working_dir:  # noqa: N801 (Spack's name)
    def __init__(self, d):
        self.d = str(d)

    def __enter__(self):
        self.old = os.getcwd()
        os.chdir(self.d)

    def __exit__(self, *exc):
        os.chdir(self.old)


class Prefix(str):
    """Spack's Prefix: prefix.bin.autopin is the path <prefix>/bin/autopin."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Prefix(os.path.join(self, name))


def bash_completion_path(root):
    return Path(root) / "share" / "bash-completion" / "completions"


def zsh_completion_path(root):
    return Path(root) / "share" / "zsh" / "site-functions"


def fish_completion_path(root):
    return Path(root) / "share" / "fish" / "vendor_completions.d"


class PackageBase:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.declared = list(_pending)
        _pending.clear()


class CargoPackage(PackageBase):
    build_system_class = "CargoPackage"
    build_directory = "."

    @property
    def build_args(self):
        return []


def _install_stubs(api):
    """api 2: Spack v1, CargoPackage in spack_repo.builtin.build_systems.cargo; api 1:
    Spack v0.x, CargoPackage exported by spack.package."""
    names = {
        "version": version, "depends_on": depends_on, "license": license,
        "maintainers": maintainers, "build_system": build_system, "when": when,
        "run_after": run_after, "Executable": Executable, "ProcessError": ProcessError,
        "which": which, "mkdirp": mkdirp, "join_path": join_path, "install": install,
        "install_tree": install_tree, "working_dir": working_dir, "Prefix": Prefix,
        "PackageBase": PackageBase, "bash_completion_path": bash_completion_path,
        "zsh_completion_path": zsh_completion_path, "fish_completion_path": fish_completion_path,
    }
    for mod in [m for m in sys.modules if m.split(".")[0] in ("spack", "spack_repo")]:
        del sys.modules[mod]
    if api == 1:
        names["CargoPackage"] = CargoPackage
    spack = types.ModuleType("spack")
    package = types.ModuleType("spack.package")
    package.__dict__.update(names)
    package.__all__ = list(names)
    spack.package = package
    sys.modules.update({"spack": spack, "spack.package": package})
    if api == 2:
        cargo = types.ModuleType("spack_repo.builtin.build_systems.cargo")
        cargo.CargoPackage = CargoPackage
        for mod in ("spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"):
            sys.modules[mod] = types.ModuleType(mod)
        sys.modules["spack_repo.builtin.build_systems.cargo"] = cargo


def _import_recipe(path, api):
    _install_stubs(api)
    _pending.clear()
    spec = importlib.util.spec_from_file_location(f"autopin_recipe_api{api}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cls = getattr(mod, "Autopin", None)
    if cls is None or not issubclass(cls, CargoPackage):
        fail(f"the recipe has no class Autopin(CargoPackage) (package API v{api})")
    return cls


# ---- the checks -------------------------------------------------------------------------

def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def workspace_field(cargo_toml, field):
    text = Path(cargo_toml).read_text()
    m = re.search(r"^\[workspace\.package\](.*?)^\[", text, re.S | re.M)
    m = m and re.search(rf'^{field} = "([^"]+)"', m.group(1), re.M)
    if not m:
        fail(f"no {field} in [workspace.package] of {cargo_toml}")
    return m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--sha256sums")
    args = ap.parse_args()

    # Spack v0.x first, then v1 (whose class the rest checks).
    old = _import_recipe(args.recipe, 1)
    cls = _import_recipe(args.recipe, 2)
    if [d[:2] for d in old.declared] != [d[:2] for d in cls.declared]:
        fail("the recipe declares different things under Spack v0.x and v1")
    print("ok: imports as Spack v0.x and v1 read it; class Autopin(CargoPackage)")

    src = Path(args.source)
    want_version = workspace_field(src / "Cargo.toml", "version")
    rust_version = workspace_field(src / "Cargo.toml", "rust-version")
    versions = [(a[0], k) for kind, a, k in cls.declared if kind == "version"]
    if [v for v, _ in versions] != [want_version]:
        fail(f"versions {[v for v, _ in versions]}, the workspace is {want_version}")
    sha = versions[0][1].get("sha256", "")
    if args.sha256sums:
        sums = dict(reversed(line.split()) for line in Path(args.sha256sums).read_text().splitlines())
        tarball = f"autopin-{want_version}.tar.gz"
        if sums.get(tarball) != sha:
            fail(f"sha256 {sha!r}, SHA256SUMS has {sums.get(tarball)!r} for {tarball}")
        print(f"ok: version {want_version} with the tarball's sha256 {sha}")
    elif sha != MARKER:
        fail(f"the recipe in the repository carries {sha!r}, not the marker {MARKER} that scripts/release.sh fills")
    else:
        print(f"ok: version {want_version}, sha256 marker for scripts/release.sh")

    deps = {a[0]: k for kind, a, k in cls.declared if kind == "depends_on"}
    if deps.get(f"rust@{rust_version}:", {}).get("type") != "build":
        fail(f"no depends_on('rust@{rust_version}:', type='build') (rust-version is {rust_version}): {deps}")
    if "c" not in deps:
        fail("no depends_on('c'): build.rs compiles the preload library")
    print(f"ok: depends_on rust@{rust_version}: (build), c")
    licenses = [a[0] for kind, a, _ in cls.declared if kind == "license"]
    if licenses != ["MIT OR Apache-2.0"]:
        fail(f"license {licenses}")

    pkg = cls.__new__(cls)
    pkg.stage = types.SimpleNamespace(source_path=str(src))
    crate = Path(pkg.build_directory) / "Cargo.toml"
    if not crate.is_file() or not re.search(r'^name = "autopin"$', crate.read_text(), re.M):
        fail(f"build_directory {pkg.build_directory!r} is not the autopin crate ({crate})")
    if not {"--locked", "--offline"} <= set(pkg.build_args):
        fail(f"build_args {pkg.build_args} lack --locked --offline")
    print(f"ok: cargo install --path {os.path.relpath(pkg.build_directory, src)} {' '.join(pkg.build_args)}")

    with tempfile.TemporaryDirectory() as tmp:
        prefix = Prefix(tmp)
        os.makedirs(prefix.bin)
        shutil.copy(args.binary, prefix.bin.autopin)
        pkg.prefix = prefix
        pkg.spec = types.SimpleNamespace(version=want_version)
        hooks = [f for f in vars(cls).values() if getattr(f, "_run_after", None) == "install"]
        if not hooks:
            fail("no run_after('install') step")
        for hook in hooks:
            hook(pkg)
        expect = {
            "share/bash-completion/completions/autopin": "_autopin()",
            "share/zsh/site-functions/_autopin": "#compdef autopin",
            "share/fish/vendor_completions.d/autopin.fish": "complete -c autopin",
            "share/man/man1/autopin.1": ".TH autopin",
            "include/autopin.h": "autopin_heartbeat",
        }
        for rel, text in expect.items():
            p = Path(tmp, rel)
            if not p.is_file() or text not in p.read_text():
                fail(f"after install: {rel} missing or without {text!r}")
        print(f"ok: run_after('install') wrote {', '.join(expect)}")
        tests = sorted(n for n in vars(cls) if n.startswith("test_"))
        if not tests:
            fail("no stand-alone test (test_* method)")
        for name in tests:
            getattr(pkg, name)()
            print(f"ok: {name} passes against the installed prefix")
    print("spack recipe: all checks passed")


if __name__ == "__main__":
    main()
