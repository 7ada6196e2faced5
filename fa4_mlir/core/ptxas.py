"""ptxas: find it, run it, read its ``-v`` report. No MLIR import.

Lookup order: ``FA4_PTXAS`` (a path), the pinned ``nvidia-cuda-nvcc`` 13.0 wheel
(``site-packages/nvidia/cu13/bin/ptxas``), then ``ptxas`` on PATH.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from fa4_mlir.errors import Fa4Error

INSTALL_HINT = "pip install 'nvidia-cuda-nvcc==13.0.*' or put CUDA 13's ptxas on PATH"


class PtxasError(Fa4Error):
    """ptxas is missing or rejected the PTX; ``command`` reproduces it."""

    def __init__(self, message: str, command: list[str] | None = None, log: str = ""):
        super().__init__(message)
        self.command = command
        self.log = log


@dataclasses.dataclass(frozen=True)
class PtxasReport:
    """What ``ptxas -v`` says about one kernel."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    static_smem_bytes: int
    barriers: int
    # ptxas's advisory C7511: it serialised the wgmmas (each waits for the last), too few registers for their
    # pipeline; the kernel is right and several times slower
    wgmma_serialized: bool = False

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def find_ptxas() -> str:
    """The ptxas to use, or PtxasError saying how to get one."""
    override = os.environ.get("FA4_PTXAS")
    if override:
        if not os.access(override, os.X_OK):
            raise PtxasError(f"FA4_PTXAS must name an executable ptxas, got '{override}'")
        return override
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root) / "cu13" / "bin" / "ptxas"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("ptxas")
    if found:
        return found
    raise PtxasError(f"ptxas not found: {INSTALL_HINT}")


def assemble(ptx_path: str, arch: str, cubin_path: str, meanwhile=None) -> tuple[PtxasReport, str]:
    """Run ``ptxas -arch=<arch> -v`` on ``ptx_path``; return the report and the raw log.

    ``meanwhile()``, if given, runs in this process while ptxas runs in its own; if it raises,
    ptxas is stopped and the exception propagates."""
    command = [find_ptxas(), f"-arch={arch}", "-v", ptx_path, "-o", cubin_path]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            if meanwhile is not None:
                meanwhile()
        except BaseException:
            proc.kill()
            raise
        stdout, stderr = proc.communicate()
    log = stdout + stderr
    if proc.returncode != 0:
        errors = [ln for ln in log.splitlines() if "error" in ln.lower()] or log.strip().splitlines()[-1:]
        raise PtxasError(f"ptxas rejected the PTX: {' | '.join(errors[:3])}", command, log)
    return parse_report(log), log


_NUMBER = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack_frame": re.compile(r"(\d+) bytes stack frame"),
    "static_smem_bytes": re.compile(r"(\d+) bytes smem"),
    "barriers": re.compile(r"used (\d+) barriers"),
}


_WGMMA_SERIALIZED = re.compile(r"\(C7511\)|wgmma\.mma_async instructions are serialized")


def parse_report(log: str) -> PtxasReport:
    """Numbers from a ``ptxas -v`` log of one entry function (absent ones are 0)."""
    values = {}
    for key, pattern in _NUMBER.items():
        m = pattern.search(log)
        values[key] = int(m.group(1)) if m else 0
    if not _NUMBER["registers"].search(log):
        raise PtxasError(f"ptxas -v printed no register count; its output was: {log.strip()[:200]}")
    return PtxasReport(**values, wgmma_serialized=bool(_WGMMA_SERIALIZED.search(log)))
