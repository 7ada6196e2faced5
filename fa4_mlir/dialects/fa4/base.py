"""The fa4 dialect's registry (``DIALECT``, ``Op``), the hardware limits its verifiers enforce, its types and
the discardable attributes kernels carry. The ops are in the sibling modules; ``fa4_mlir.dialects.fa4``
gathers them."""

from __future__ import annotations

from fa4_mlir.core.declare import (
    I1,
    I32,
    AnyOf,
    BoolAttr,
    Builtin,
    Dialect,
    EnumAttr,
    I32ArrayAttr,
    IntAttr,
    Operand,
    Region,
    Result,
    StrAttr,
)
from fa4_mlir.core.ir_utils import constant_int, defining_op
from fa4_mlir.target import SMEM_CARVEOUT, TMEM_COLUMNS

DIALECT = Dialect("fa4", search_prefix="fa4_mlir.dialects", doc="""
    Shared-memory regions and their layout, tensor memory (TMEM), mbarriers with arrive counts and
    transaction bytes, producer/consumer pipelines with stage and phase, warp roles with register
    budgets, TMA and MMA commits: the parts of a warp-specialised attention kernel, as IR that passes
    can allocate, verify and lower to PTX for sm_100a (Blackwell) and sm_90a (Hopper).
""")
Op = DIALECT.Operation

# Hardware limits the verifier enforces (PTX ISA 8.6+, sm_90a/sm_100a).
MAX_MBARRIER_COUNT = (1 << 20) - 1  # mbarrier pending-count field is 20 bits
MAX_TX_BYTES = (1 << 20) - 1  # mbarrier tx-count range
REGISTER_FILE = 65536  # 32-bit registers per SM (and the most one CTA can hold)
SMEM_BASE_ALIGN = 1024  # alignment of the extern dynamic shared-memory symbol
SWIZZLE_ALIGN = {"none": 1, "32B": 256, "64B": 512, "128B": 1024}  # one swizzle atom: 8 rows x width
TMA_SMEM_ALIGN = 128  # cp.async.bulk.tensor shared-memory operand alignment
# Shared memory a CTA can have (sm_90a and sm_100a): no region, view, offset or stage is larger. The
# lowering adds such byte counts into 32-bit address offsets, so they must be bounded here.
SMEM_BYTES = SMEM_CARVEOUT
MAX_MBARRIERS = SMEM_BYTES // 8  # 8 bytes each: the most mbarriers shared memory holds
# MMA descriptors hold the leading byte offset (an MN-major B's block stride) in 14 bits of 16-byte units.
MAX_BLOCK_STRIDE = ((1 << 14) - 1) * 16
TMEM_ALLOC_MIN = 32  # tcgen05.alloc: a power of two in [32, 512] columns


# ===================================================================================================
# Types
# ===================================================================================================

SmemType = DIALECT.type("smem", """
    A shared-memory region: a byte range of the kernel's dynamic shared memory, placed by
    ``fa4-allocate-smem``. Values come from ``fa4.smem_region`` or ``fa4.smem_alias``.
""")
TmemType = DIALECT.type("tmem", """
    A tensor-memory region: a range of TMEM columns (all 128 lanes, 32 bit each), sm_100a only.
""")
MbarriersType = DIALECT.type("mbarriers", """
    An array of 64-bit mbarriers in shared memory, all with the same arrive count and arrival kind.
""")
PipelineType = DIALECT.type("pipeline", """
    A producer/consumer ring of ``num_stages`` buffers guarded by a "full" and an "empty" mbarrier array.

    | step               | who      | barrier           | action                                      |
    |--------------------|----------|-------------------|---------------------------------------------|
    | producer_acquire   | producer | empty[stage]      | wait parity ``phase`` (buffer is free)       |
    | producer_commit    | producer | full[stage]       | arrive by the full array's kind (threads,    |
    |                    |          |                   | expect_tx + TMA bytes, or MMA commit)        |
    | consumer_wait      | consumer | full[stage]       | wait parity ``phase`` (buffer is filled)     |
    | consumer_release   | consumer | empty[stage]      | arrive by the empty array's kind             |

    Producer state starts at (stage 0, phase 1), consumer state at (stage 0, phase 0); ``advance``
    moves to the next stage and flips the phase when the stage wraps to 0.
""")
TensorMapType = DIALECT.type("tensormap", """
    A TMA tensor map (CUtensorMap, 128 bytes), passed to the kernel by value as a
    ``__grid_constant__`` parameter.
""")


# ===================================================================================================
# Attributes on kernels (functions and modules)
# ===================================================================================================

# The allocation passes write these and the lowering reads them back, so a hand-written or edited
# kernel that carries them gets them checked like op fields (fa4-verify, on any op).
DIALECT.discardable_attr("target", StrAttr(), doc="""
    the chip of kernels outside a gpu.module with a #nvvm.target: `sm_90a` or `sm_100a`""")
DIALECT.discardable_attr("smem_bytes", IntAttr(min=0), doc="""
    dynamic shared memory the kernel's regions take (fa4-allocate-smem)""")
DIALECT.discardable_attr("num_mbarriers", IntAttr(min=0, max=MAX_MBARRIERS), doc="""
    mbarriers in the kernel's barrier region (fa4-allocate-mbarriers)""")
DIALECT.discardable_attr("mbarrier_region", StrAttr(), doc="""
    the `sym_name` of the fa4.smem_region holding the kernel's mbarriers (fa4-allocate-mbarriers)""")
DIALECT.discardable_attr("tmem_columns", IntAttr(min=TMEM_ALLOC_MIN, max=TMEM_COLUMNS, power_of_two=True),
                         doc="""
    TMEM columns the kernel allocates, a power of two in [32, 512] (fa4-allocate-tmem)""")
DIALECT.discardable_attr("grid_constant_args", I32ArrayAttr(min_value=0), doc="""
    positions of the kernel's tensor-map arguments (fa4-lower-kernel, read by fa4-attach-kernel-abi)""")
DIALECT.discardable_attr("verify_protocol", BoolAttr(), doc="""
    `false` skips fa4-verify-protocol on this kernel (a deliberately broken test kernel)""")


def _def(value, op_class):
    """The defining op of ``value`` if it is a well-formed ``op_class``, else None (a block argument,
    another op, or one whose own field errors are reported on it)."""
    op = defining_op(value)
    return op if isinstance(op, op_class) and op.is_well_formed() else None
