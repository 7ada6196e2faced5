"""The ``fa4`` dialect: what FlashAttention-4-class warp-specialised kernels are made of.

Sections: Types | Shared memory and tensor memory | Mbarriers | Pipelines | Warp roles | TMA | Misc | Debug.
The registry (``DIALECT``, the snake_case builders, ``__all__``) is at the bottom.

All fa4 ops print in MLIR's generic form (``"fa4.pipeline_create"(%full, %empty) {...}``): IRDL ops have
no custom assembly in MLIR 22. Lowering-relevant parameters live in op attributes, never only in type
parameters, because Python cannot read the parameters of an IRDL type.

Conventions shared by every op below:
  * A barrier is named by an mbarrier array value and an ``i32`` index into it.
  * Pipeline state is explicit SSA: a stage index ``i32`` in ``[0, num_stages)`` and a phase ``i32`` in
    ``{0, 1}``; loops carry them as ``scf.for`` iter_args. Producers start at phase 1, consumers at
    phase 0 (``fa4.pipeline_initial_state``), so the first ``num_stages`` producer acquires pass on
    fresh barriers and the first consumer wait blocks until the first commit.
"""

from __future__ import annotations

# The ops register with DIALECT as their classes are created, in this order (the dialect's docs follow it).
from fa4_mlir.dialects.fa4.base import *  # noqa: F401,F403
from fa4_mlir.dialects.fa4.base import DIALECT, MbarriersType, PipelineType, SmemType, TensorMapType, TmemType
from fa4_mlir.dialects.fa4.memory import *  # noqa: F401,F403
from fa4_mlir.dialects.fa4.barriers import *  # noqa: F401,F403
from fa4_mlir.dialects.fa4.roles import *  # noqa: F401,F403
from fa4_mlir.dialects.fa4.transfers import *  # noqa: F401,F403
from fa4_mlir.dialects.fa4.debug import *  # noqa: F401,F403

# ===================================================================================================
# Registry
# ===================================================================================================

globals().update(DIALECT.builders())

__all__ = [
    "DIALECT", "SmemType", "TmemType", "MbarriersType", "PipelineType", "TensorMapType",
    *(cls.__name__ for cls in DIALECT.ops),
    *DIALECT.builders(),
]
