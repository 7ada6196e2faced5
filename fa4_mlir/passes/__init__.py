"""The fa4 pass registry (installed as ``fa4_mlir.passes``).

Python passes cannot be registered with MLIR 22's pass registry, so ``fa4-opt`` owns this one:
``PASSES`` maps each pass name to a factory that imports its class on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from fa4_mlir.passes.base import Fa4Pass


def _lazy(module: str, cls: str) -> Callable[[], type[Fa4Pass]]:
    def load() -> type[Fa4Pass]:
        return getattr(importlib.import_module(f"fa4_mlir.passes.{module}"), cls)

    return load


PASSES: dict[str, Callable[[], type[Fa4Pass]]] = {
    "fa4-allocate-mbarriers": _lazy("allocate_mbarriers", "AllocateMbarriersPass"),
    "fa4-allocate-smem": _lazy("allocate_smem", "AllocateSmemPass"),
    "fa4-allocate-tmem": _lazy("allocate_tmem", "AllocateTmemPass"),
    "fa4-lower-pipelines": _lazy("lower_pipelines", "LowerPipelinesPass"),
    "fa4-lower-warp-roles": _lazy("lower_warp_roles", "LowerWarpRolesPass"),
    "fa4-lower-tma": _lazy("lower_tma", "LowerTmaPass"),
    "fa4-lower-tmem": _lazy("lower_tmem", "LowerTmemPass"),
    "fa4-lower-wgmma": _lazy("lower_wgmma", "LowerWgmmaPass"),
    "fa4-lower-barriers": _lazy("lower_barriers", "LowerBarriersPass"),
    "fa4-lower-kernel": _lazy("lower_kernel", "LowerKernelPass"),
    "fa4-attach-kernel-abi": _lazy("attach_kernel_abi", "AttachKernelAbiPass"),
    "fa4-verify": _lazy("verify", "VerifyPass"),
    "fa4-verify-protocol": _lazy("verify_protocol", "VerifyProtocolPass"),
}


def get_pass(name: str) -> type[Fa4Pass]:
    return PASSES[name]()


__all__ = ["PASSES", "Fa4Pass", "get_pass"]
