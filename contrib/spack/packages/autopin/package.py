# autopin for Spack. The release tarball of scripts/release.sh carries every crate of the
# build under vendor/ (its .cargo/config.toml builds from there, offline), so the build reads
# nothing from the network. scripts/release.sh writes a copy of this file beside the tarball
# with its sha256 in place of the marker below; a site's package repository takes that copy.

try:  # Spack v1 (package API v2): the build systems live in the builtin repository
    from spack_repo.builtin.build_systems.cargo import CargoPackage
except ImportError:  # Spack v0.x: spack.package exports CargoPackage
    pass

from spack.package import *


class Autopin(CargoPackage):
    """autopin finds and applies the best thread-to-core pinning for a running multi-threaded
    program: it pins the threads to one candidate set of cores after another, measures a rate
    per candidate (hardware counters, a software counter or the program's own heartbeat) and
    keeps the best. It also shows the machine's topology, speaks likwid-pin's pin
    expressions, measures core-to-core latencies and memory, and compares strategies."""

    # No public download site yet: a site serves the tarball from a Spack mirror
    # (autopin/autopin-<version>.tar.gz) and sets these to where it publishes it.
    homepage = "https://autopin.invalid/"
    url = "https://autopin.invalid/autopin-0.1.0.tar.gz"

    license("MIT OR Apache-2.0")

    version("0.1.0", sha256="@AUTOPIN_SHA256@")

    depends_on("rust@1.88:", type="build")
    # build.rs compiles the preload library (C) that the binary embeds.
    depends_on("c", type="build")

    @property
    def build_directory(self):
        """The workspace's binary crate: the root Cargo.toml is a virtual manifest."""
        return join_path(self.stage.source_path, "crates", "autopin")

    @property
    def build_args(self):
        return ["--locked", "--offline"]

    @run_after("install")
    def install_completions_and_man_page(self):
        autopin = Executable(self.prefix.bin.autopin)

        mkdirp(bash_completion_path(self.prefix))
        with open(bash_completion_path(self.prefix) / "autopin", "w") as f:
            autopin("completions", "bash", output=f)

        mkdirp(zsh_completion_path(self.prefix))
        with open(zsh_completion_path(self.prefix) / "_autopin", "w") as f:
            autopin("completions", "zsh", output=f)

        mkdirp(fish_completion_path(self.prefix))
        with open(fish_completion_path(self.prefix) / "autopin.fish", "w") as f:
            autopin("completions", "fish", output=f)

        mkdirp(self.prefix.share.man.man1)
        with open(join_path(self.prefix.share.man.man1, "autopin.1"), "w") as f:
            autopin("man", output=f)

        # The header-only heartbeat back channel for programs that report their progress.
        mkdirp(self.prefix.include)
        install(join_path(self.stage.source_path, "include", "autopin.h"), self.prefix.include)

    def test_version(self):
        """autopin --version names the installed version"""
        autopin = which(self.prefix.bin.autopin)
        out = autopin("--version", output=str, error=str)
        assert f"autopin {self.spec.version}" in out

    def test_topology(self):
        """autopin reads this machine and a synthetic one"""
        autopin = which(self.prefix.bin.autopin)
        out = autopin("topology", output=str, error=str)
        assert "Machine" in out
        cpus = autopin(
            "cpus", "--synthetic", "package:2 core:2 pu:1", "S1:0-1", output=str, error=str
        )
        assert cpus.strip() == "2-3"
