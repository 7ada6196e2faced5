"""fa4 ops: warp specialisation (``fa4.warp_specialize``, ``fa4.warp_role`` with register budgets) and
named barriers."""

from __future__ import annotations

from fa4_mlir.core.declare import I32, EnumAttr, I32ArrayAttr, IntAttr, Operand, Region, StrAttr
from fa4_mlir.dialects.fa4.base import Op, REGISTER_FILE


# ===================================================================================================
# Warp roles
# ===================================================================================================

WARP_SIZE = 32
WARPGROUP = 4  # warps


class WarpSpecializeOp(Op, name="warp_specialize"):
    """Split a CTA of ``num_warps`` warps into roles; its body holds only ``fa4.warp_role`` ops.

    Warps no role names stay idle. Lowers to: a dispatch on ``warp_id = tid.x / 32`` (``scf.if``
    chain), each branch starting with the role's ``setmaxnreg``; the kernel gets
    ``.reqntid num_warps*32`` and the entry register cap that makes ptxas honour ``setmaxnreg``.
    """

    num_warps = IntAttr(min=1, max=32, doc="warps in the CTA (block size / 32)")
    body = Region(doc="the `fa4.warp_role` ops")

    def roles(self) -> list[WarpRoleOp]:
        """The well-formed roles (a malformed one is reported on itself)."""
        ops = list(self.operation.regions[0].blocks[0].operations)
        return [o for o in ops if isinstance(o, WarpRoleOp) and o.is_well_formed()]

    def verify(self):
        block_ops = list(self.operation.regions[0].blocks[0].operations)
        for o in block_ops[:-1]:
            if not isinstance(o, WarpRoleOp):
                yield f"body must hold only 'fa4.warp_role' ops, got '{o.operation.name}'"
                return
        roles = self.roles()
        if not any(isinstance(o, WarpRoleOp) for o in block_ops):
            yield "body must hold at least one 'fa4.warp_role', got none"
        owner: dict[int, str] = {}
        for role in roles:
            for w in sorted(set(role.warps)):  # repeats within a role are reported on the role
                if w >= self.num_warps:
                    yield f"warps of role '{role.sym_name}' must be < num_warps ({self.num_warps}), got {w}"
                elif w in owner:
                    yield f"warp {w} must belong to one role, got '{owner[w]}' and '{role.sym_name}'"
                else:
                    owner[w] = role.sym_name
        # setmaxnreg is warpgroup-wide: every warp of a warpgroup must execute the same one.
        if any(role.registers is not None for role in roles) and self.num_warps % WARPGROUP:
            yield (f"num_warps must be a multiple of {WARPGROUP} when a role sets registers (setmaxnreg "
                   f"needs whole warpgroups), got {self.num_warps}")
        budget: dict[int, tuple[int, str]] = {}
        for role in roles:
            if role.registers is None:
                continue
            for w in role.warps:
                wg = w // WARPGROUP
                if wg in budget and budget[wg][0] != role.registers:
                    yield (f"registers of roles sharing warpgroup {wg} must be equal (setmaxnreg is "
                           f"warpgroup-wide), got {budget[wg][0]} for '{budget[wg][1]}' and "
                           f"{role.registers} for '{role.sym_name}'")
                    return
                budget[wg] = (role.registers, role.sym_name)
        total = sum(regs * WARPGROUP * WARP_SIZE for regs, _ in budget.values())
        if total > REGISTER_FILE:
            yield (f"register budgets must total <= {REGISTER_FILE} per CTA, got {total} "
                   f"(sum of registers x 128 threads per warpgroup)")
            return
        if budget and self.num_warps % WARPGROUP == 0:
            # The CTA's registers are what its warps got at launch, the entry cap each: setmaxnreg.dec
            # returns a warpgroup's to that pool and setmaxnreg.inc waits until the pool holds what it asks
            # for, forever if the budgets add up to more (a GPU hang, which the emulator does not model).
            threads = self.num_warps * WARP_SIZE
            cap = -(-min(255, REGISTER_FILE // threads // 8 * 8) // 8) * 8  # allocated in units of 8
            wgs = self.num_warps // WARPGROUP
            total = sum(budget.get(wg, (cap, ""))[0] for wg in range(wgs)) * WARPGROUP * WARP_SIZE
            if total > cap * threads:
                yield (f"register budgets must total <= {cap * threads} per CTA of {threads} threads (the entry "
                       f"cap {cap} x {threads}: setmaxnreg.inc waits for registers the other warpgroups freed, "
                       f"forever past that), got {total} (registers x 128 threads per warpgroup, {cap} for a "
                       f"warpgroup without a budget)")


class WarpRoleOp(Op, name="warp_role"):
    """A role of a warp-specialised kernel: the code that warps ``warps`` run, with ``registers`` each.

    ``registers`` is the per-thread budget set with ``setmaxnreg`` on entry (a multiple of 8 in
    [24, 256]; roles sharing a warpgroup must agree). Lowers to: one branch of the warp dispatch,
    ``setmaxnreg.{inc,dec}.sync.aligned.u32 registers`` then the body.
    """

    sym_name = StrAttr(doc="role name, e.g. `softmax0`, `mma`, `load`")
    warps = I32ArrayAttr(min_len=1, min_value=0, doc="warp indices in the CTA")
    registers = IntAttr(min=24, max=256, multiple_of=8, optional=True, doc="setmaxnreg budget")
    body = Region(doc="the role's code")

    def verify(self):
        if len(set(self.warps)) != len(self.warps):
            yield f"warps must be distinct, got {self.warps}"
        parent = self.operation.parent
        if parent is None or parent.name != WarpSpecializeOp.OPERATION_NAME:
            got = parent.name if parent is not None else "none"
            yield f"parent must be 'fa4.warp_specialize', got '{got}'"


NAMED_BARRIERS = 16  # bar.sync ids 0..15; 0 is __syncthreads, so roles get 1..15


class NamedBarrierOp(Op, name="named_barrier"):
    """Synchronise (or arrive at) the named barrier ``sym_name`` with ``threads`` threads.

    Warps of one or more roles meet at a named barrier without stopping the rest of the CTA.
    ``fa4-lower-warp-roles`` gives each name of a kernel its own hardware id in [1, 15] (0 is the
    CTA-wide barrier). ``kind = "arrive"`` signals without waiting (a producer of the barrier).
    With ``count`` the name is a family of ``count`` barriers with consecutive ids and the op uses
    member ``index`` (an i32 operand, the same in every thread of a warp: e.g. a warpgroup's turn
    barrier when one role's code runs in several warpgroups); every op of the name gives the same
    ``count``. Lowers to: ``bar.sync id, threads`` or ``bar.arrive id, threads`` (id + index).
    """

    index = Operand(I32, variadic=True, doc="the family member, in [0, count): one operand with `count`, "
                                            "none without")
    sym_name = StrAttr(doc="barrier name, e.g. `softmax_sync`; one hardware id per name (per member)")
    threads = IntAttr(min=32, max=1024, multiple_of=32, doc="threads that take part (whole warps)")
    kind = EnumAttr(("sync", "arrive"), default="sync", doc="wait for the others, or only signal")
    count = IntAttr(min=1, max=NAMED_BARRIERS - 1, optional=True,
                    doc="barriers in the family `sym_name` (ids base .. base + count - 1)")

    def verify(self):
        given = len(list(self.index))
        if self.count is None and given:
            yield "index must come with count (a family of barriers), got an index and no count"
        elif self.count is not None and given != 1:
            yield f"index must be one i32 operand when count is set, got {given}"
