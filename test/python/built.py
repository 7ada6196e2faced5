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


def gathered(config):
    """A gathered paged kernel (``config.page_gather``, either target): its artifact (the protocol verifier ran
    beside ptxas), with zero spills, and its source, whose parameters are the gathered ABI's (``abi.params``:
    ``k`` and ``v`` pointers, their strides after the paged parameters)."""
    from fa4_mlir.kernels import attention
    from fa4_mlir.kernels.attention.abi import params

    assert config.page_gather
    result = artifact(config)
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["wgmma_serialized"] is False, m  # ptxas C7511: the wgmmas serialised
    source = attention.build(config)
    want = params(None, None, None, runtime_group=config.target == "sm_90a", varlen=config.varlen, paged=True,
                  split_kv=config.split_kv, gather=True, schedule=config.varlen)
    names = [p.name for p in source.params]
    assert names == [p.name for p in want]
    strides = [f"{t}_{dim}_stride" for t in "kv" for dim in ("page", "row", "head")]
    at = names.index("num_pages") + 1
    assert names[at:at + 6] == strides
    kinds = {p.name: p.kind for p in source.params}
    assert kinds["k"] == kinds["v"] == "ptr" and kinds["q"] == "tensormap"
    return result, source


def verify_without_gathered(text: str, drop: str) -> tuple[set[str], list[str]]:
    """The protocol verifier on a gathered kernel's IR ``text`` (accepted as it is) without the lines containing
    ``drop`` from its first cp.async copy on (the load warp's fences or arrivals: the Q load's TMA needs neither):
    the error classes it reports, and its messages."""
    import re

    from fa4_mlir._mlir import ir
    from fa4_mlir.passes.verify_protocol import VerifyProtocolPass

    assert not VerifyProtocolPass(witness=0).run(ir.Module.parse(text).operation)
    lines = text.split("\n")
    first = next(i for i, line in enumerate(lines) if "nvvm.cp.async.shared.global" in line)
    kept = [line for i, line in enumerate(lines) if i < first or drop not in line]
    assert len(kept) < len(lines)
    errors = VerifyProtocolPass(witness=0, max_errors=20).run(ir.Module.parse("\n".join(kept)).operation)
    classes = {m.group(1) for d in errors for m in [re.search(r"protocol error \[([a-z-]+)\]", d.message)] if m}
    return classes, [d.message for d in errors]
