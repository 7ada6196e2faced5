"""Compiled kernels on disk: what ``fa4-compile`` writes and the runtime loads. No MLIR import.

An artifact is a directory holding ``<entry>.cubin`` and ``<entry>.json`` (the manifest). The
artifact cache (``FA4_CACHE_DIR``) keeps one directory per ``ArtifactKey``: the kernel, its config
(target included), the debug setting, the fa4-mlir version, the pinned toolchain and a fingerprint
of the compiler's sources, so an artifact is never used by a compiler that would build it
differently. When the compiler is installed, a missing artifact is built on first use (in a child
process, so an MLIR abort cannot take the caller down); when it is not, ``ArtifactError`` names the
missing artifact and the command that builds it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from fa4_mlir import __version__, knobs
from fa4_mlir.errors import ArtifactError

# The toolchain pyproject.toml pins; part of every key (the runtime machine may not have it installed).
TOOLCHAIN = {"xtc-mlir-python-bindings": "22.1.8.4", "nvidia-cuda-nvcc": "13.0"}
# The packages whose sources decide what the compiler emits.
_COMPILER_PACKAGES = ("fa4_mlir.core", "fa4_mlir.kernels", "fa4_mlir.configs", "fa4_mlir.dialects", "fa4_mlir.passes",
                      "fa4_mlir.dsl")
MANIFEST_KEYS = ("kernel", "target", "entry", "threads", "cluster", "smem_bytes", "params")


@dataclasses.dataclass(frozen=True)
class Artifact:
    """A loaded artifact: the manifest and the cubin bytes, with the directory they came from."""

    path: Path
    manifest: dict
    cubin: bytes

    @property
    def name(self) -> str:
        return self.manifest["entry"]

    @property
    def debug_timeout_ms(self) -> int:
        return (self.manifest.get("debug") or {}).get("barrier_timeout_ms", 0)


def read_artifact(path: str | os.PathLike) -> Artifact:
    """Read an artifact from a directory (its one ``*.json``), or from a ``<name>.json`` manifest path."""
    path = Path(path)
    if path.is_dir():
        manifests = sorted(p for p in path.glob("*.json") if p.name != "key.json")
        if len(manifests) != 1:
            raise ArtifactError(f"artifact directory '{path}' must hold exactly one <kernel>.json manifest, "
                                f"got {len(manifests)}; build it with fa4-compile KERNEL -o {path}")
        path = manifests[0]
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ArtifactError(f"manifest '{path}' does not exist; build it with fa4-compile") from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"manifest '{path}' must be readable JSON, got: {exc}") from None
    missing = [k for k in MANIFEST_KEYS if k not in manifest] if isinstance(manifest, dict) else list(MANIFEST_KEYS)
    if missing:
        raise ArtifactError(f"manifest '{path}' must have the keys {', '.join(MANIFEST_KEYS)}; it lacks "
                            f"{', '.join(missing)} (was it written by fa4-compile?)")
    cubin_path = path.with_name(f"{manifest['entry']}.cubin")
    try:
        cubin = cubin_path.read_bytes()
    except OSError:
        raise ArtifactError(f"cubin '{cubin_path}' named by manifest '{path}' does not exist; rebuild the "
                            f"artifact with fa4-compile") from None
    return Artifact(path.parent, manifest, cubin)


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A hash of the compiler's Python sources (empty packages hash as absent)."""
    digest = hashlib.sha256()
    for package in _COMPILER_PACKAGES:
        folders = _package_folders(package)
        digest.update(f"{package}:{len(folders)}\n".encode())
        for folder in folders:
            for path in sorted(Path(folder).rglob("*.py")):
                digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    top = Path(importlib.util.find_spec("fa4_mlir").origin).parent
    for name in ("target.py", "layouts.py", "placement.py", "errors.py"):
        digest.update(name.encode() + b"\0" + (top / name).read_bytes())
    return digest.hexdigest()[:16]


def _package_folders(package: str) -> list[str]:
    """Where ``package``'s sources are: installed, or (run from a checkout with PYTHONPATH=.) the
    checkout folder that pyproject.toml maps it from, so both give the same fingerprint."""
    spec = importlib.util.find_spec(package)
    if spec is not None:
        return list(spec.submodule_search_locations or [])
    checkout = Path(importlib.util.find_spec("fa4_mlir").origin).parent.parent / package.rsplit(".", 1)[1]
    return [str(checkout)] if (checkout / "__init__.py").is_file() else []


@dataclasses.dataclass(frozen=True)
class ArtifactKey:
    """What decides a compiled kernel: ``kernel`` (a built-in name) with ``config`` (its config's
    fields, target included), or an ``.mlir`` file by content (``source``), plus the debug limit."""

    kernel: str
    target: str
    config: tuple[tuple[str, object], ...] = ()
    debug_timeout_ms: int = 0
    source: str | None = None  # path of an fa4 .mlir file

    @classmethod
    def for_config(cls, kernel: str, config, debug_timeout_ms: int = 0) -> ArtifactKey:
        """The key of ``config``'s kernel: of its ``canonical()`` form where it has one, so configs
        whose kernels are one (sm_90a attention of any GQA group) share one artifact."""
        canonical = getattr(config, "canonical", None)
        if canonical is not None:
            config = canonical()
        fields = tuple(sorted(dataclasses.asdict(config).items()))
        return cls(kernel, config.target, fields, debug_timeout_ms)

    @classmethod
    def for_file(cls, path: str | os.PathLike, target: str, debug_timeout_ms: int = 0) -> ArtifactKey:
        path = Path(path)
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise ArtifactError(f"kernel file '{path}' must be readable, got: {exc.strerror or exc}") from None
        return cls(path.stem, target, (("sha256", hashlib.sha256(text).hexdigest()),), debug_timeout_ms,
                   str(path.resolve()))

    @property
    def digest(self) -> str:
        text = json.dumps({"kernel": self.kernel, "target": self.target, "config": self.config,
                           "debug": self.debug_timeout_ms, "fa4_mlir": __version__, "toolchain": TOOLCHAIN,
                           "compiler": compiler_fingerprint()}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    @property
    def path(self) -> Path:
        debug = f"-debug{self.debug_timeout_ms}" if self.debug_timeout_ms else ""
        return Path(knobs.cache_dir()) / f"{self.kernel}-{self.target}{debug}-{self.digest}"

    def build_command(self) -> list[str]:
        """The fa4-compile command line that puts this artifact into the cache."""
        command = ["fa4-compile", self.source or self.kernel, "--target", self.target]
        if self.source is None:
            from fa4_mlir.kernels import KERNELS

            defaults = KERNELS[self.kernel][0](target=self.target)
            command += [_option(name, value) for name, value in self.config
                        if name != "target" and getattr(defaults, name) != value]
        if self.debug_timeout_ms:
            command.append(f"--debug-timeout-ms={self.debug_timeout_ms}")
        return [*command, "--cache"]


def _option(name: str, value) -> str:
    """fa4-compile's option for a config field: ``--flag`` / ``--no-flag`` for booleans."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag}={value}"


def lookup(key: ArtifactKey) -> Artifact | None:
    """The cached artifact of ``key``, or None."""
    return read_artifact(key.path) if key.path.is_dir() else None


def store(key: ArtifactKey, write) -> Path:
    """Run ``write(directory)`` into a fresh directory and move it to ``key.path`` atomically, so a
    concurrent reader sees a whole artifact or none."""
    final = key.path
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    write(staging)
    (staging / "key.json").write_text(json.dumps(dataclasses.asdict(key), indent=2, default=str) + "\n")
    try:
        os.rename(staging, final)
    except OSError:  # another process stored it first: keep theirs
        for path in staging.iterdir():
            path.unlink()
        staging.rmdir()
    return final


def compiler_installed() -> bool:
    return importlib.util.find_spec("mlir") is not None and importlib.util.find_spec("fa4_mlir.passes") is not None


def fetch(key: ArtifactKey) -> Artifact:
    """The artifact of ``key``: from the cache, else compiled now when the compiler is installed."""
    found = lookup(key)
    if found is not None:
        return found
    command = key.build_command()
    if not compiler_installed():
        raise ArtifactError(
            f"no compiled kernel '{key.kernel}' for {key.target} in {key.path.parent} (artifact "
            f"{key.path.name}) and the compiler is not installed here; build it on a machine with "
            f"fa4-mlir's compiler with `{shlex.join(command)}` (same FA4_CACHE_DIR layout) and copy "
            f"{key.path.name} into {key.path.parent}")
    done = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", *command[1:]],
                          capture_output=True, text=True)
    found = lookup(key) if done.returncode == 0 else None
    if found is None and done.returncode == 0:  # the compiler that ran is not the one this key was made with
        raise ArtifactError(f"compiling kernel '{key.kernel}' for {key.target} succeeded but left no artifact "
                            f"{key.path.name} in {key.path.parent}: fa4_mlir's compiler sources changed since "
                            f"this process computed the key (its compiler fingerprint); rerun the process")
    if found is None:
        raise ArtifactError(f"compiling kernel '{key.kernel}' for {key.target} failed; rerun "
                            f"`{shlex.join(command)}` to see why:\n{done.stderr.strip()}")
    return found
