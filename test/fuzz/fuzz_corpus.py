"""The seed corpus of the input fuzzer: the fa4 MLIR of every shipped kernel and every lit input.

Shipped kernels come from ``shipped_kernels()`` of the protocol mutation corpus (copy-pipeline, gemm,
attention and mla-attention in their tested configurations, the examples, the conversion kernels). Lit
inputs are every ``.mlir`` file under ``test/`` and ``examples/``, split on ``// -----`` where the file is run
with ``--split-input-file`` (each chunk is what fa4-opt sees). Files are read with
``surrogateescape`` so that an input that is not UTF-8 (``not-utf8.mlir``) survives the round trip
byte for byte.

The corpus is sorted by name, so a seed picks the same entries on every machine.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPLIT = "// -----"


@dataclasses.dataclass(frozen=True)
class Seed:
    """One corpus entry: ``name`` (kernel name or ``path[#chunk]``), its text, and whether it is a
    shipped kernel (a full kernel that compiles) or a lit input (often a fragment or a negative case)."""

    name: str
    text: str
    shipped: bool


def _split_chunks(text: str) -> list[str]:
    chunks, current = [], []
    for line in text.split("\n"):
        if line.strip() == SPLIT:
            chunks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    chunks.append("\n".join(current))
    return [c for c in chunks if c.strip()]


def lit_inputs() -> list[Seed]:
    """Every .mlir file under test/ and examples/, split as its RUN lines split it."""
    seeds = []
    paths = sorted([*(ROOT / "test").rglob("*.mlir"), *(ROOT / "examples").rglob("*.mlir")])
    for path in paths:
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
        if "split-input-file" in text:
            chunks = _split_chunks(text)
            seeds += [Seed(f"{rel}#{i}", chunk, False) for i, chunk in enumerate(chunks)]
        else:
            seeds.append(Seed(rel, text, False))
    return seeds


def shipped() -> list[Seed]:
    """The fa4 MLIR of every shipped kernel (imported from the protocol mutation corpus)."""
    sys.path.insert(0, str(ROOT / "test" / "python"))
    try:
        from protocol_mutants import shipped_kernels
    finally:
        sys.path.pop(0)
    return [Seed(name, text, True) for name, text in sorted(shipped_kernels().items())]


@lru_cache(maxsize=1)
def corpus() -> tuple[list[Seed], list[Seed]]:
    """(shipped kernels, lit inputs), each sorted by name."""
    return shipped(), lit_inputs()
