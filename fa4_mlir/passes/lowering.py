"""What the fa4 lowering passes share: one ``KernelLowering`` per kernel function.

It knows the kernel's target, emits constants and thread indices, and turns fa4 memory values into
addresses: a shared-memory region, alias or stage becomes ``fa4_smem + offset`` (an ``!llvm.ptr<3>``
into the one extern ``.shared`` buffer, aligned to 1024 B), a barrier becomes the address of its
8 bytes in the barrier region, a TMEM region the base read back from the allocation slot plus its
column. Addresses are rebuilt from the allocators' attributes at each use, so the passes can lower
consumers before producers in any order; canonicalize and CSE merge the repeats.

Every pass reports a failure on the op it could not lower (``LoweringFailure``), never by raising out
of MLIR.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fa4_mlir._mlir import arith, ir, llvm, nvvm
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.core.ir_utils import constant_int, defining_op
from fa4_mlir.passes.scope import kernel_scopes, kernel_target, ops_named
from fa4_mlir.target import Target

SMEM_SYMBOL = "fa4_smem"
SMEM_ALIGN = 1024
BARRIER_REGION_ATTR = "fa4.mbarrier_region"  # set by fa4-allocate-mbarriers
MBAR_BYTES = 8
WARP = 32
_DYNAMIC_INDEX = -(1 << 31)  # llvm.getelementptr's marker for a dynamic index


class LoweringFailure(Exception):
    """An op that cannot be lowered; reported as an error located at ``op``."""

    def __init__(self, op, message: str):
        super().__init__(message)
        self.op = op

    def diagnostic(self) -> Diagnostic:
        return Diagnostic.at(self.op.location, "error", str(self))


def lower_kernels(module: ir.Operation, default_target: str,
                  lower: Callable[[KernelLowering], Iterable[Diagnostic]]) -> list[Diagnostic]:
    """Run ``lower`` on every kernel function of ``module``; collect its diagnostics and failures."""
    errors: list[Diagnostic] = []
    for scope in kernel_scopes(module):
        target = kernel_target(scope, default_target)
        if isinstance(target, Diagnostic):
            return [target]
        kernel = KernelLowering(scope, target)
        try:
            errors += list(lower(kernel))
        except LoweringFailure as failure:
            errors.append(failure.diagnostic())
    return errors


SWIZZLE_BYTES = {"32B": 32, "64B": 64, "128B": 128}


def canonical_offsets(swizzle: str, block_stride: int | None = None) -> int:
    """Leading and stride byte offsets (16-byte units at bits 16 and 32) of a swizzled canonical
    layout, the same fields in wgmma and tcgen05 descriptors. K-major: SBO steps 8 rows of one
    swizzle width, LBO is unused (1 by convention). MN-major (``block_stride`` given): LBO steps from
    one swizzle-width block along M/N to the next, SBO steps 8 K rows."""
    sbo = 8 * SWIZZLE_BYTES[swizzle]
    lbo = 16 if block_stride is None else block_stride
    return ((lbo >> 4) << 16) | ((sbo >> 4) << 32)


class KernelLowering:
    """Emission helpers for one kernel function. Build inside ``with kernel.at(op):``."""

    def __init__(self, scope: ir.Operation, target: Target):
        self.scope = scope
        self.target = target
        self._barrier_region_op = None

    # -- where and what ------------------------------------------------------------------------------
    def ops(self, *names: str) -> list[ir.OpView]:
        return ops_named(self.scope, *names)

    @staticmethod
    def at(op) -> _At:
        """Insert before ``op``, with its location."""
        return _At(op)

    def require_sm100(self, op, what: str) -> None:
        if self.target.sm < 100:
            raise LoweringFailure(op, (
                f"'{op.OPERATION_NAME}' needs {what}, which sm_100a has and {self.target} has not; "
                f"compile for --target sm_100a"))

    def require_sm90(self, op, what: str) -> None:
        if self.target.sm != 90:
            raise LoweringFailure(op, (
                f"'{op.OPERATION_NAME}' needs {what}, which sm_90a has and {self.target} has not "
                f"(use fa4.tcgen05_mma there); compile for --target sm_90a"))

    # -- constants and thread indices ----------------------------------------------------------------
    @staticmethod
    def const(value: int, bits: int = 32) -> ir.Value:
        """A signless constant; ``value`` may be given unsigned (a descriptor with bit 63 set)."""
        if value >= 1 << (bits - 1):
            value -= 1 << bits
        return arith.constant(ir.IntegerType.get_signless(bits), value)

    @staticmethod
    def flag(value: bool) -> ir.Value:
        return arith.constant(ir.IntegerType.get_signless(1), int(value))

    def tid(self) -> ir.Value:
        return nvvm.read_ptx_sreg_tid_x(ir.IntegerType.get_signless(32))

    def warp_index(self) -> ir.Value:
        """The warp's index in the CTA (``tid.x / 32``)."""
        return arith.divui(self.tid(), self.const(WARP))

    def lane(self) -> ir.Value:
        return arith.remui(self.tid(), self.const(WARP))

    def cta_rank(self) -> ir.Value:
        return nvvm.read_ptx_sreg_cluster_ctarank(ir.IntegerType.get_signless(32))

    # -- shared memory -------------------------------------------------------------------------------
    def smem_base(self) -> ir.Value:
        self._ensure_smem_symbol()
        return llvm.AddressOfOp(ir.Type.parse("!llvm.ptr<3>"), SMEM_SYMBOL).result

    def smem_address(self, value: ir.Value, extra: int = 0, *, user) -> ir.Value:
        """The address of an fa4 shared-memory value plus ``extra`` bytes; failures are reported on
        ``user`` (the op being lowered) when the value does not come from a declaration."""
        static, dynamic = self._smem_offset(value, user)
        return self.gep(self.smem_base(), static + extra, dynamic)

    def gep(self, base: ir.Value, static: int, dynamic: list[ir.Value] = ()) -> ir.Value:
        """``base + static + sum(dynamic)`` bytes."""
        i8 = ir.IntegerType.get_signless(8)
        offset = None
        for d in dynamic:
            offset = d if offset is None else arith.addi(offset, d)
        if offset is not None and static:
            offset = arith.addi(offset, self.const(static))
        if offset is None:
            if static == 0:
                return base
            return llvm.GEPOp(base.type, base, [], [static], i8, 0).result
        return llvm.GEPOp(base.type, base, [offset], [_DYNAMIC_INDEX], i8, 0).result

    def matrix_descriptor(self, value: ir.Value, offset: int, user, constant_bits: Callable[[str], int],
                          pinned: bool = False) -> ir.Value:
        """An MMA shared-memory matrix descriptor (tcgen05 or wgmma): the start address in 16-byte
        units at bits 0-13, or'ed with ``constant_bits(swizzle of the value's region)``. ``pinned``
        computes it where the MMA is (an opaque move), so LLVM does not hoist one live 64-bit
        descriptor per MMA out of a loop: a single-thread MMA warp runs on few registers.

        Unpinned, a descriptor at a constant ``offset`` from the value (a multiple of 16: the MMA ops
        verify it) is the value's own descriptor plus ``offset / 16``: the MMAs of one operand (a K
        loop's steps) share one computed descriptor and each adds a constant, one 64-bit add, as
        CUTLASS's descriptor iterator does. The sum stays inside the 14-bit start field because the
        operand lies in the CTA's shared memory (under 2^18 bytes), so it equals the descriptor computed
        from the offset address."""
        i64 = ir.IntegerType.get_signless(64)
        if not pinned and offset:
            base = self.matrix_descriptor(value, 0, user, constant_bits)
            return arith.addi(base, self.const(offset >> 4, 64))
        address = llvm.ptrtoint(i64, self.smem_address(value, offset, user=user))
        region = defining_op(value)
        while region.operation.name != "fa4.smem_region":
            region = defining_op(region.base)
        if pinned:  # a fresh value per MMA: nothing derived from it is shared or hoisted
            address = llvm.inline_asm(i64, [address], "mov.b64 $0, $1;", "=l,l", has_side_effects=True)
        start = arith.andi(arith.shrui(address, self.const(4, 64)), self.const(0x3FFF, 64))
        return arith.ori(start, self.const(constant_bits(region.swizzle), 64))

    def _smem_offset(self, value: ir.Value, user) -> tuple[int, list[ir.Value]]:
        op = defining_op(value)
        name = op.operation.name if op is not None else None
        if name == "fa4.smem_region":
            if op.offset is None:
                raise LoweringFailure(op, (
                    f"'fa4.smem_region' '{op.sym_name}' has no offset: run fa4-allocate-smem before "
                    f"lowering"))
            return op.offset, []
        if name == "fa4.smem_alias":
            static, dynamic = self._smem_offset(op.base, user)
            return static + op.offset, dynamic
        if name == "fa4.smem_stage":
            static, dynamic = self._smem_offset(op.base, user)
            stage = constant_int(op.stage)
            if stage is not None:
                return static + stage * op.bytes, dynamic
            return static, [*dynamic, arith.muli(op.stage, self.const(op.bytes))]
        raise LoweringFailure(user, (
            "shared-memory operands must come from fa4.smem_region, fa4.smem_alias or fa4.smem_stage "
            f"in the same kernel, got {'a block argument' if op is None else repr(name)}"))

    def _ensure_smem_symbol(self) -> None:
        """Declare ``.extern .shared .align 1024 .b8 fa4_smem[]`` in the kernel's module, once.

        Not ``gpu.dynamic_shared_memory``: NVPTX demotes that to a 1-byte internal symbol and folds
        loads from it (toolchain notes, section 3.4)."""
        module = self.scope.parent
        block = module.regions[0].blocks[0]
        for op in block.operations:
            if op.operation.name == "llvm.mlir.global" and \
                    ir.StringAttr(op.operation.attributes["sym_name"]).value == SMEM_SYMBOL:
                return
        decl = ir.Operation.parse(
            f"llvm.mlir.global external @{SMEM_SYMBOL}() {{addr_space = 3 : i32, alignment = "
            f"{SMEM_ALIGN} : i64}} : !llvm.array<0 x i8>")
        ir.InsertionPoint.at_block_begin(block).insert(decl)

    # -- barriers ------------------------------------------------------------------------------------
    def barrier_address(self, barriers: ir.Value, index: ir.Value, user) -> ir.Value:
        """The address of barrier ``index`` of an ``fa4.mbarrier_alloc`` array."""
        alloc = self.barrier_array(barriers, user)
        region = self._barrier_region(user)
        static = region.offset + MBAR_BYTES * alloc.index
        i = constant_int(index)
        if i is not None:
            return self.gep(self.smem_base(), static + MBAR_BYTES * i)
        return self.gep(self.smem_base(), static, [arith.muli(index, self.const(MBAR_BYTES))])

    def barrier_array(self, barriers: ir.Value, user) -> ir.OpView:
        alloc = defining_op(barriers)
        if alloc is None or alloc.operation.name != "fa4.mbarrier_alloc":
            raise LoweringFailure(user, (
                f"'{user.OPERATION_NAME}' barriers must come from fa4.mbarrier_alloc in the same kernel"))
        if alloc.index is None:
            raise LoweringFailure(alloc, (
                f"'fa4.mbarrier_alloc' '{alloc.sym_name}' has no index: run fa4-allocate-mbarriers "
                f"before lowering"))
        return alloc

    def _barrier_region(self, user) -> ir.OpView:
        if self._barrier_region_op is not None:  # found once per kernel: a walk per barrier op was
            return self._barrier_region_op        # most of fa4-lower-barriers' time
        attrs = self.scope.attributes
        name = ir.StringAttr(attrs[BARRIER_REGION_ATTR]).value if BARRIER_REGION_ATTR in attrs else None
        for region in self.ops("fa4.smem_region"):
            if region.sym_name == name:
                if region.offset is None:
                    raise LoweringFailure(region, (
                        f"'fa4.smem_region' '{name}' has no offset: run fa4-allocate-smem before lowering"))
                self._barrier_region_op = region
                return region
        raise LoweringFailure(user, (
            "the kernel has no barrier region: run fa4-allocate-mbarriers and fa4-allocate-smem "
            "before lowering"))

    # -- kernel attributes ---------------------------------------------------------------------------
    def cluster_size(self) -> int:
        attrs = self.scope.attributes
        if "nvvm.cluster_dim" not in attrs:
            return 1
        dims = list(ir.DenseI32ArrayAttr(attrs["nvvm.cluster_dim"]))
        size = 1
        for d in dims:
            size *= d
        return size


class _At:
    """``with kernel.at(op):`` sets the insertion point before ``op`` and its location."""

    def __init__(self, op):
        self.op = op.operation

    def __enter__(self):
        self._ip = ir.InsertionPoint(self.op)
        self._ip.__enter__()
        self._loc = self.op.location
        self._loc.__enter__()
        return self

    def __exit__(self, *exc):
        self._loc.__exit__(*exc)
        self._ip.__exit__(*exc)
        return False


def replace_op(op, values: list[ir.Value]) -> None:
    """Replace the results of ``op`` by ``values`` and erase it."""
    for old, new in zip(op.operation.results, values):
        old.replace_all_uses_with(new)
    op.operation.erase()
