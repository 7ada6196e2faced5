"""Which results of a region the interpreter does not enter are the same in every thread.

The interpreter (``extract``) does not enter an op whose regions hold no protocol op (a loop that scans
memory, a branch over float work): it gives the op's results one value each. A result that a protocol
decision reads (a branch around barrier ops, a trip count) must then be known to be the same in every thread
of the CTA, and two roles that compute it with the same code from the same inputs must hold the same value,
or their trip counts could not be compared. This module decides both, statically, over the region's ops on a
three-level lattice:

=========  ===========================================================================================
level      values
=========  ===========================================================================================
UNIFORM    the same in every thread of the CTA: constants, kernel arguments, the CTA's place in the grid,
           ``invariant`` loads (memory the kernel never writes) at a UNIFORM address, a ``shfl.sync.idx``
           of a LANE value from a UNIFORM source lane (without segments), a ``vote.sync`` of a LANE
           predicate, and what integer ops compute from those
LANE       a function of the lane alone, the same in every warp: ``%laneid``, ``invariant`` loads at a LANE
           address, ``shfl.sync.up/down/bfly`` of a LANE value by a UNIFORM offset, integer ops over LANE
           and UNIFORM values
VARYING    anything else (``%tid.x``, ``%warpid``, plain loads, unknown ops)
=========  ===========================================================================================

Control flow: an ``scf.if`` whose condition is not UNIFORM gives results at least its condition's level; a
loop whose bounds (``scf.for``) or condition (``scf.while``) are not UNIFORM gives VARYING results (its
threads run different trip counts), and a shuffle or vote under non-UNIFORM control is VARYING (its lanes
need not all take part). Loop-carried values are joined to a fixed point.

A UNIFORM result becomes the leaf ``("fn", fingerprint, inputs, i)`` (``solve``): result ``i`` of a region
op whose structure (ops, attributes, types, the wiring of its values; not its source location) hashes to
``fingerprint``, run on ``inputs`` (the values, as terms, of everything the region reads from outside it,
operands and captured values alike). The region is deterministic (it reads only invariant memory), so equal
leaves are equal values: the copies that two roles compute of, say, the packed kernels' tile schedule
(``kernels.attention.varlen_schedule``) are one leaf, and a scenario binds it once, like an argument. Any
other result is a VARYING unknown: a branch on it around protocol ops is not verifiable.
"""

from __future__ import annotations

import hashlib

import numpy as np

from fa4_mlir.protocol.mirror import Block, Node
from fa4_mlir.protocol.model import WARP
from fa4_mlir.protocol.values import Bars, Pipe, Ptr, SmemRef, Sym, TmemRef

UNIFORM, LANE, VARYING = 0, 1, 2
_TERMINATORS = ("scf.yield", "scf.condition", "gpu.yield")
_UNIFORM_SREGS = ("ctaid", "nctaid", "cluster", "nclusterid", "clusterid")
# llvm ops with effects or inputs beyond their operands
WHERE: dict[str, str] = {}  # fingerprint -> the first region op seen with it (its op and location, for messages)
_IMPURE_LLVM = ("llvm.load", "llvm.store", "llvm.call", "llvm.inline_asm", "llvm.atomicrmw", "llvm.cmpxchg")


def captures(node: Node) -> list[int]:
    """The values ``node``'s regions read from outside them, in order of first use (memoised on the node)."""
    return _summary(node)[1]


def region_results(r, node: Node) -> list:
    """The values of ``node``'s results for the interpreter ``r``: a ``("fn", ...)`` leaf for each UNIFORM
    result, a VARYING unknown for the others."""
    fingerprint, external = _summary(node)
    values = [r.get(v) for v in node.operands] + [r.get(v) for v in external]
    env = dict(zip(list(node.operands) + external, (level(v) for v in values)))
    levels = _Analysis(env).op(node, UNIFORM)
    inputs = tuple(_key(v) for v in values)
    WHERE.setdefault(fingerprint, node.site.where())
    return [Sym(("fn", fingerprint, inputs, i)) if lv == UNIFORM else Sym(("opaque",), True)
            for i, lv in enumerate(levels)]


def level(v) -> int:
    """The level of an interpreter value: ints, references and uniform terms UNIFORM; a per-thread array
    whose every warp holds the same lane values LANE."""
    if isinstance(v, (bool, int, SmemRef, TmemRef, Bars, Pipe, Ptr)):
        return UNIFORM
    if isinstance(v, Sym):
        return VARYING if v.varying else UNIFORM
    if isinstance(v, np.ndarray) and v.size:
        if (v == v.flat[0]).all():
            return UNIFORM
        if v.size % WARP == 0 and (v.reshape(-1, WARP) == v[:WARP]).all():
            return LANE
    return VARYING


def _key(v):
    """A hashable stand-in for an input in a leaf: ints and terms as they are, a LANE array by its lanes."""
    if isinstance(v, Sym):
        return v.term
    if isinstance(v, np.ndarray) and v.size:
        return int(v.flat[0]) if (v == v.flat[0]).all() else ("lanes", tuple(int(x) for x in v[:WARP]))
    return v


def _summary(node: Node) -> tuple[str, list[int]]:
    """(a hash of the op's structure, its captured values), computed once per node."""
    cached = getattr(node, "_uniformity", None)
    if cached is None:
        defined, external, tokens = set(), [], []
        numbers: dict[int, str] = {}

        def name(v: int) -> str:
            if v not in numbers:
                if v in defined:
                    numbers[v] = f"%{len(numbers)}"
                else:
                    numbers[v] = f"$x{len(external)}"
                    external.append(v)
            return numbers[v]

        def visit(blocks: list[Block]) -> None:
            for b in blocks:
                defined.update(b.args)
                tokens.append("^(" + ",".join(name(a) for a in b.args) + ")")
                for n in b.ops:
                    tokens.append(f"{n.name}({','.join(name(v) for v in n.operands)})"
                                  f"{sorted((k, repr(a)) for k, a in n.attrs.items())}{n.result_types}")
                    for region in n.regions:
                        tokens.append("{")
                        visit(region)
                        tokens.append("}")
                    defined.update(n.results)
                    tokens.append("->" + ",".join(name(v) for v in n.results))

        for v in node.operands:
            name(v)  # the operands come first among the inputs (``region_results``)
        operands = len(external)
        for region in node.regions:
            tokens.append("{")
            visit(region)
            tokens.append("}")
        text = f"{node.name}{sorted((k, repr(a)) for k, a in node.attrs.items())}{node.result_types}" + "".join(tokens)
        cached = (hashlib.sha1(text.encode()).hexdigest()[:16], external[operands:])
        node._uniformity = cached
    return cached


class _Analysis:
    """The levels of a region's values, from the levels of what it reads from outside (``env``)."""

    def __init__(self, env: dict[int, int]):
        self.env = env
        self.constants: dict[int, int] = {}

    def get(self, v: int) -> int:
        return self.env.get(v, VARYING)

    def block(self, block: Block, control: int, args: list[int] | None = None) -> list[int]:
        """Run ``block`` (its arguments at ``args``) under ``control``; the levels its terminator yields."""
        for a, lv in zip(block.args, args or []):
            self.env[a] = lv
        for n in block.ops:
            if n.name in _TERMINATORS:
                return [self.get(v) for v in n.operands]
            for r, lv in zip(n.results, self.op(n, control)):
                self.env[r] = lv
        return []

    def op(self, n: Node, control: int) -> list[int]:
        ins = [self.get(v) for v in n.operands]
        top = max(ins, default=UNIFORM)
        name, count = n.name, len(n.results)
        if name == "scf.if":
            c = max(control, ins[0])
            arms = [self.block(region[0], c) for region in n.regions if region]
            return [max([c, *(arm[i] for arm in arms if i < len(arm))]) for i in range(count)]
        if name == "scf.for":
            return self._for(n, ins, control)
        if name == "scf.while":
            return self._while(n, ins, control)
        if n.regions:
            return [VARYING] * count
        if name in ("arith.constant", "llvm.mlir.constant"):
            value = n.attrs.get("value")
            if isinstance(value, int) and count:
                self.constants[n.results[0]] = value
            return [UNIFORM] * count
        if name.startswith("nvvm.read.ptx.sreg.") or name.startswith("gpu."):
            return [self._sreg(name)] * count
        if name == "nvvm.shfl.sync":
            return [self._shuffle(n, ins, control)] * count
        if name == "nvvm.vote.sync":
            return [UNIFORM if control == UNIFORM and ins[0] == UNIFORM and ins[1] <= LANE else VARYING] * count
        if name == "llvm.load":
            return [ins[0] if "invariant" in n.attrs and ins[0] <= LANE else VARYING] * count
        if name.startswith(("arith.", "math.", "index.", "vector.")) or (name.startswith("llvm.")
                                                                       and name not in _IMPURE_LLVM):
            return [top] * count
        return [VARYING] * count

    @staticmethod
    def _sreg(name: str) -> int:
        kind = name.removeprefix("nvvm.read.ptx.sreg.").removeprefix("gpu.")
        if kind in ("laneid", "lane_id"):
            return LANE
        if kind.startswith(_UNIFORM_SREGS) or kind in ("block_id", "grid_dim", "cluster_id"):
            return UNIFORM
        return VARYING

    def _shuffle(self, n: Node, ins: list[int], control: int) -> int:
        """(mask, value, offset, clamp): idx from one UNIFORM lane (no segments) makes a LANE value UNIFORM;
        the other modes move a LANE value between lanes by a UNIFORM offset."""
        mask, value, offset, clamp = ins[:4]
        if control != UNIFORM or mask != UNIFORM or clamp != UNIFORM or offset != UNIFORM or value > LANE:
            return VARYING
        segments = self.constants.get(n.operands[3])
        if "idx" in n.attrs.get("_kind", "") and segments is not None and (segments >> 8) & 0x1F == 0:
            return UNIFORM
        return LANE

    def _for(self, n: Node, ins: list[int], control: int) -> list[int]:
        if max(control, *ins[:3]) != UNIFORM:
            return [VARYING] * len(n.results)
        body = n.regions[0][0]
        carried = ins[3:]
        for _ in range(4):  # three levels: a fixed point within three rounds
            out = self.block(body, control, [UNIFORM, *carried])
            joined = [max(a, b) for a, b in zip(carried, out)]
            if joined == carried:
                break
            carried = joined
        return carried

    def _while(self, n: Node, ins: list[int], control: int) -> list[int]:
        before, after = n.regions[0][0], n.regions[1][0]
        carried, forwarded = list(ins), [VARYING] * len(n.results)
        for _ in range(4):
            cond, *forwarded = self.block(before, control, carried)
            if max(control, cond) != UNIFORM:
                return [VARYING] * len(n.results)
            out = self.block(after, control, forwarded)
            joined = [max(a, b) for a, b in zip(carried, out)]
            if joined == carried:
                break
            carried = joined
        return forwarded
