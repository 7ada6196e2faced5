"""From a parsed PTX function to something a warp can execute.

``compile_kernel`` flattens the body (inline-asm ``{ }`` scopes get their registers renamed, so a
scoped ``p`` in two blocks is two registers), gives every register a slot, compiles each instruction
into an ``Op`` through the handler registry (``fa4_mlir.emu.ops``), and computes, for every branch, its
reconvergence point: the first instruction of the immediate post-dominator of the branch's block
(where a divergent warp's two paths meet again, as SIMT hardware reconverges).

An instruction outside the supported subset fails here, at load time, naming its opcode and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fa4_mlir.emu import types as T
from fa4_mlir.emu.errors import PtxSyntaxError, Unsupported
from fa4_mlir.emu.memory import RESERVED_SMEM
from fa4_mlir.emu.ptx import ast

SPECIAL_PREFIXES = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid",
                    "%gridid", "%clock", "%clock64", "%globaltimer", "%lanemask", "%cluster", "%nclusterid",
                    "%clusterid", "%is_explicit_cluster", "%dynamic_smem_size", "%total_smem_size", "%envreg",
                    "%aggr_smem_size", "%reserved_smem_offset", "%pm", "%globaltimer_lo", "%globaltimer_hi")


@dataclass
class Op:
    """One executable instruction: ``run(warp, mask)`` does it for the lanes in ``mask``."""
    index: int
    ins: ast.Instruction
    run: object = None
    kind: str = "plain"            # plain | branch | exit
    target: int = -1               # branch target (instruction index)
    reconv: int = -1               # reconvergence point of a branch (instruction index; len(ops) = exit)
    guard: int = -1                # predicate register slot, -1 if unguarded
    guard_negated: bool = False
    regs: frozenset = frozenset()  # register slots the instruction names (for the wgmma in-flight check)
    is_async_mma: bool = False
    moved: frozenset = frozenset()  # a mov's destination slots: an undefined (pending) source taints them

    @property
    def where(self) -> str:
        return f"line {self.ins.loc.line}: {self.ins.text or self.ins.full_opcode}"


@dataclass
class ParamSlot:
    name: str
    type: str
    offset: int
    size: int
    align: int
    is_aggregate: bool
    ptr_space: str | None = None


@dataclass
class Kernel:
    name: str
    ops: list
    slots: list                    # [(name, dtype)] per register slot
    params: list                   # ParamSlot in .entry order
    param_bytes: int
    shared_symbols: dict           # name -> shared-window address
    dynamic_offset: int            # where the dynamic (extern) window starts
    static_smem: int
    directives: dict
    global_symbols: dict = field(default_factory=dict)   # name -> (Variable) for module .global/.const
    local_bytes: int = 0
    local_symbols: dict = field(default_factory=dict)
    functions: dict = field(default_factory=dict)  # every .func/.entry of the module by name
    zero_registers: list | None = field(default=None, repr=False)  # the register file at launch (machine.py)


class CompileContext:
    """What a handler needs to compile one instruction: register slots and symbol addresses."""

    def __init__(self, kernel: Kernel, source: str):
        self.kernel = kernel
        self.source = source
        self.reg_slot: dict[str, int] = {}
        self.reg_type: dict[str, str] = {}
        self.labels: dict[str, int] = {}
        self._scope_names: list[dict[str, str]] = [{}]

    # -- registers ------------------------------------------------------------------------------
    def declare(self, decl: ast.RegisterDecl, scope_id: int | None) -> None:
        if decl.vector != 1:
            raise Unsupported(f"line {decl.loc.line}: vector registers (.reg .v{decl.vector}) are not supported "
                              f"by the emulator")
        if decl.type not in T.REGISTER_STORAGE or T.REGISTER_STORAGE[decl.type] is None:
            raise Unsupported(f"line {decl.loc.line}: register type .{decl.type} is not supported by the emulator")
        for name in decl.expanded():
            unique = name if scope_id is None else f"{name}@{scope_id}"
            if scope_id is not None:
                self._scope_names[-1][name] = unique
            if unique in self.reg_slot:
                continue
            self.reg_slot[unique] = len(self.kernel.slots)
            self.reg_type[unique] = decl.type
            self.kernel.slots.append((unique, T.REGISTER_STORAGE[decl.type]))

    def resolve(self, name: str) -> str:
        for scope in reversed(self._scope_names):
            if name in scope:
                return scope[name]
        return name

    def label(self, name: str) -> int | None:
        return self.labels.get(self.resolve("label:" + name))

    def slot(self, reg: ast.Register, ins: ast.Instruction) -> int:
        name = self.resolve(reg.name)
        if name not in self.reg_slot:
            raise PtxSyntaxError(f"register {reg.name} is not declared (in '{ins.text}')", ins.loc.line,
                                 ins.loc.column, self.source)
        return self.reg_slot[name]

    def is_special(self, reg: ast.Register) -> bool:
        return reg.name.startswith(SPECIAL_PREFIXES) and self.resolve(reg.name) not in self.reg_slot

    def symbol_address(self, name: str, ins: ast.Instruction) -> tuple[str, int]:
        """(state space, address in it) of a variable or parameter."""
        k = self.kernel
        if name in k.shared_symbols:
            return "shared", k.shared_symbols[name]
        for p in k.params:
            if p.name == name:
                return "param", p.offset
        if name in k.local_symbols:
            return "local", k.local_symbols[name]
        if name in k.global_symbols:
            return "global", name  # resolved at launch (the module's global variables)
        raise PtxSyntaxError(f"symbol '{name}' is not declared (in '{ins.text}')", ins.loc.line, ins.loc.column,
                             self.source)


def _align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def _param_layout(params) -> tuple[list, int]:
    slots, offset = [], 0
    for p in params:
        if p.type not in T.STORAGE or T.STORAGE[p.type] is None:
            raise Unsupported(f"line {p.loc.line}: parameter type .{p.type} of '{p.name}' is not supported")
        elem = T.width(p.type)
        count = 1
        for d in p.dims:
            if d is None:
                raise Unsupported(f"line {p.loc.line}: parameter '{p.name}' has an unsized array type")
            count *= d
        align = p.align or elem
        offset = _align(offset, align)
        slots.append(ParamSlot(p.name, p.type, offset, elem * count, align, bool(p.dims), p.ptr_space))
        offset += elem * count
    return slots, _align(max(offset, 1), 16)


def _variable_bytes(v: ast.Variable) -> int | None:
    count = v.vector
    for d in v.dims:
        if d is None:
            return None
        count *= d
    return count * T.width(v.type)


def compile_kernel(module: ast.Module, fn: ast.Function, source: str) -> Kernel:
    from fa4_mlir.emu.ops import compile_instruction  # the registry imports every handler module

    params, param_bytes = _param_layout(fn.params)
    # Shared memory: the reserved system area, static variables, then the dynamic window.
    shared, offset, dyn_align, extern_names, globals_ = {}, RESERVED_SMEM, 16, [], {}
    def nested(body):
        for stmt in body:
            if isinstance(stmt, ast.Variable):
                yield stmt
            elif isinstance(stmt, ast.Block):
                yield from nested(stmt.body)

    variables = list(module.variables) + list(nested(fn.body or ()))
    local_symbols, local_bytes = {}, 0
    for v in variables:
        if v.space == "param":
            # Call-sequence parameters ({ .param .b64 param0; st.param ...; call ...; }) are per-thread
            # storage: they live in the thread's local memory. Blocks reuse names; one slot per name.
            size = _variable_bytes(v) or 0
            if v.name not in local_symbols:
                local_bytes = _align(local_bytes, max(v.align or 8, 8))
                local_symbols[v.name] = local_bytes
                local_bytes += max(size, 8)
            continue
        if v.space == "shared":
            size = _variable_bytes(v)
            if size is None or v.extern:
                extern_names.append(v.name)
                dyn_align = max(dyn_align, v.align or 16)
                continue
            offset = _align(offset, v.align or T.width(v.type))
            shared[v.name] = offset
            offset += size
        elif v.space in ("global", "const"):
            globals_[v.name] = v
        elif v.space == "local":
            size = _variable_bytes(v) or 0
            local_bytes = _align(local_bytes, v.align or 8)
            local_symbols[v.name] = local_bytes
            local_bytes += size
        else:
            raise Unsupported(f"line {v.loc.line}: .{v.space} variables are not supported by the emulator")
    dynamic_offset = _align(offset, dyn_align)
    for name in extern_names:
        shared[name] = dynamic_offset
    kernel = Kernel(fn.name, [], [], params, param_bytes, shared, dynamic_offset, offset - RESERVED_SMEM,
                    dict(fn.directives), globals_, local_bytes, local_symbols)
    kernel.functions = {f.name: f for f in module.functions}
    ctx = CompileContext(kernel, source)

    # Flatten: declarations into slots, labels to indices, scoped blocks renamed.
    flat: list[tuple[ast.Instruction, list[dict]]] = []
    counter = [0]

    def walk(body, scope_id):
        for stmt in body:
            if isinstance(stmt, ast.RegisterDecl):
                ctx.declare(stmt, scope_id)
            elif isinstance(stmt, ast.Label):
                unique = ctx.resolve("label:" + stmt.name)
                if unique in ctx.labels:
                    raise PtxSyntaxError(f"label {stmt.name} is defined twice", stmt.loc.line, stmt.loc.column, source)
                ctx.labels[unique] = len(flat)
            elif isinstance(stmt, ast.Block):
                counter[0] += 1
                # Labels and registers declared in a { } scope are local to it (inline asm repeats them).
                ctx._scope_names.append({"label:" + s.name: f"label:{s.name}@{counter[0]}"
                                         for s in stmt.body if isinstance(s, ast.Label)})
                walk(stmt.body, counter[0])
                ctx._scope_names.pop()
            elif isinstance(stmt, ast.Instruction):
                flat.append((stmt, [dict(s) for s in ctx._scope_names]))
            elif isinstance(stmt, ast.Variable):
                pass
            else:
                raise Unsupported(f"statement {type(stmt).__name__} is not supported by the emulator")

    walk(fn.body or (), None)
    for index, (ins, scopes) in enumerate(flat):
        ctx._scope_names = scopes
        op = Op(index, ins)
        if ins.guard is not None:
            op.guard = ctx.slot(ast.Register(ins.guard), ins)
            op.guard_negated = ins.guard_negated
        compile_instruction(op, ctx)
        kernel.ops.append(op)
    ctx._scope_names = [{}]
    _reconvergence(kernel.ops)
    return kernel


# -- control flow ------------------------------------------------------------------------------------
def _reconvergence(ops: list[Op]) -> None:
    """Set ``op.reconv`` of every branch: the first instruction of its block's immediate post-dominator."""
    n = len(ops)
    leaders = {0} if n else set()
    for op in ops:
        if op.kind in ("branch", "exit"):
            if op.index + 1 < n:
                leaders.add(op.index + 1)
            if op.kind == "branch":
                leaders.add(op.target)
    starts = sorted(i for i in leaders if i < n)
    block_of = np.zeros(n + 1, np.int64)
    for b, s in enumerate(starts):
        end = starts[b + 1] if b + 1 < len(starts) else n
        block_of[s:end] = b
    exit_block = len(starts)
    succ: list[list[int]] = []
    for b, s in enumerate(starts):
        end = starts[b + 1] if b + 1 < len(starts) else n
        last = ops[end - 1]
        out = []
        if last.kind == "branch":
            out.append(int(block_of[last.target]) if last.target < n else exit_block)
            if last.guard >= 0:
                out.append(b + 1 if end < n else exit_block)
        elif last.kind == "exit":
            if last.guard >= 0:
                out.append(b + 1 if end < n else exit_block)
            else:
                out.append(exit_block)
        else:
            out.append(b + 1 if end < n else exit_block)
        succ.append(out)
    ipdom = _post_dominators(succ, exit_block)
    first = starts + [n]
    for op in ops:
        if op.kind == "branch":
            op.reconv = first[ipdom[int(block_of[op.index])]]


def _post_dominators(succ: list[list[int]], exit_block: int) -> list[int]:
    """Immediate post-dominators (Cooper, Harvey & Kennedy's iterative algorithm on the reverse CFG).
    Blocks that cannot reach the exit (infinite loops) post-dominate nothing: they get the exit."""
    nodes = exit_block + 1
    preds_rev = [[] for _ in range(nodes)]  # reverse-graph predecessors = forward successors
    rev_succ = [[] for _ in range(nodes)]   # reverse-graph successors = forward predecessors
    for b, outs in enumerate(succ):
        for s in outs:
            preds_rev[b].append(s)
            rev_succ[s].append(b)
    order, seen, stack = [], {exit_block}, [(exit_block, iter(rev_succ[exit_block]))]
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            order.append(node)
            stack.pop()
        elif nxt not in seen:
            seen.add(nxt)
            stack.append((nxt, iter(rev_succ[nxt])))
    rpo = list(reversed(order))
    number = {b: i for i, b in enumerate(rpo)}
    idom = {exit_block: exit_block}

    def intersect(a, b):
        while a != b:
            while number[a] > number[b]:
                a = idom[a]
            while number[b] > number[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            new = None
            for p in preds_rev[b]:
                if p in idom:
                    new = p if new is None else intersect(p, new)
            if new is not None and idom.get(b) != new:
                idom[b] = new
                changed = True
    return [idom.get(b, exit_block) for b in range(exit_block)]
