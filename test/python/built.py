"""A configuration compiled once for a whole test run, through the runtime's artifact cache.

``artifact(config)`` is what ``runtime.load(..., device="emulator")`` loads: ``fa4-compile`` built it (the
protocol verifier beside ptxas, as for every artifact) into FA4_CACHE_DIR, so a file's compile checks (spills,
PTX) and its emulator runs of the same configuration share one compile instead of building the kernel twice
(in process, then again for the emulator).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Built:
    manifest: dict  # the artifact's manifest: spill counts, threads, shared memory, parameters
    ptx: str


def artifact(config, kernel: str = "attention") -> Built:
    """``config``'s ``kernel`` from the artifact cache, compiled now if it is not there."""
    from fa4_mlir.runtime.artifacts import ArtifactKey, fetch

    found = fetch(ArtifactKey.for_config(kernel, config))
    return Built(found.manifest, (found.path / f"{found.name}.ptx").read_text())
