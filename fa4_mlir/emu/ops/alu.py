"""Arithmetic, logic, comparison, selection, moves and conversions.

The semantics of each operation live in ``fa4_mlir.emu.isa.integers`` (integer and bit operations),
``isa.floats`` (floating point) and ``isa.convert`` (cvt); this module only binds operands to them.
Results are computed for all 32 lanes and written for the active ones.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.emu import types as T
from fa4_mlir.emu.errors import ProtocolError
from fa4_mlir.emu.machine import FULL
from fa4_mlir.emu.isa import integers as INT
from fa4_mlir.emu.memory import CLUSTER_SHIFT, LOCAL_BASE, PARAM_BASE, SHARED_BASE
from fa4_mlir.emu.ops import handles, unsupported
from fa4_mlir.emu.ops.operands import reader, syntax, writer
from fa4_mlir.emu.ptx import ast

FLOAT_TYPES = {"f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "f32x2"}
INT_TYPES = {"s16", "s32", "s64", "u16", "u32", "u64", "b16", "b32", "b64", "s8", "u8", "b8", "pred", "u16x2", "s16x2"}
CMP = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
       "num", "nan"}
BOOL_OPS = {"and", "or", "xor"}


def split_types(op, count: int = 1) -> tuple[list[str], frozenset]:
    """The last ``count`` modifiers that name types, and the other modifiers as a set."""
    mods = list(op.ins.modifiers)
    types = [m for m in mods if T.is_type(m)]
    if len(types) < count:
        raise unsupported(op, f"expected {count} type modifier(s)")
    types = types[-count:]
    flags = frozenset(m for m in mods if m not in types)
    return types, flags


def _operands(op, n: int):
    if len(op.ins.operands) != n:
        raise unsupported(op, f"expected {n} operands, got {len(op.ins.operands)}")
    return op.ins.operands


def _floats():
    from fa4_mlir.emu.isa import floats
    return floats


# -- generic n-ary arithmetic -------------------------------------------------------------------------
_ARITY = {"add": 2, "sub": 2, "mul": 2, "mad": 3, "fma": 3, "div": 2, "rem": 2, "min": 2, "max": 2, "abs": 1,
          "neg": 1, "and": 2, "or": 2, "xor": 2, "not": 1, "cnot": 1, "shl": 2, "shr": 2, "bfe": 3, "bfi": 4,
          "brev": 1, "popc": 1, "clz": 1, "bfind": 1, "prmt": 3, "lop3": 4, "rcp": 1, "sqrt": 1, "rsqrt": 1,
          "ex2": 1, "lg2": 1, "sin": 1, "cos": 1, "tanh": 1, "copysign": 2, "mul24": 2, "mad24": 3, "sad": 3,
          "dp4a": 3, "dp2a": 3, "shf": 3, "bmsk": 2, "szext": 2, "fns": 3}
# Result type when it differs from the instruction type.
_U32_RESULT = {"popc", "clz", "bfind"}


def _mixed(op) -> tuple[str, frozenset] | None:
    """(the narrow type, modifiers) of a mixed-precision form (PTX ISA "Mixed precision floating point
    instructions", sm_100+): ``add``/``sub{.rnd}{.sat}.f32.atype d, a, c`` and
    ``fma.rnd{.sat}.f32.abtype d, a, b, c`` with ``a`` (and ``b``) .f16 or .bf16, ``c`` and ``d`` .f32."""
    types, flags = split_types(op, 2) if len([m for m in op.ins.modifiers if T.is_type(m)]) == 2 else (None, None)
    if op.ins.opcode not in ("add", "sub", "fma") or not types or types[0] != "f32" or types[1] not in ("f16", "bf16"):
        return None
    rounding = flags & {"rn", "rz", "rm", "rp"}
    if flags - {"rn", "rz", "rm", "rp", "sat"} or len(rounding) > 1 or (op.ins.opcode == "fma" and not rounding):
        raise unsupported(op, f"modifiers {sorted(flags)} (mixed precision: one of .rn/.rz/.rm/.rp, required for "
                              f"fma, and .sat)")
    return types[1], flags


def _mixed_arith(op, ctx, narrow: str, flags: frozenset) -> None:
    """The narrow operands widen exactly to f32; then the f32 instruction with the same modifiers."""
    ins, name = op.ins, op.ins.opcode
    n = _ARITY[name]
    operands = _operands(op, n + 1)
    reads = [reader(ctx, o, t, ins) for o, t in zip(operands[1:], [narrow] * (n - 1) + ["f32"])]
    write = writer(ctx, operands[0], "f32", ins)
    floats = _floats()
    flags = flags | ({"rn"} if not flags & {"rn", "rz", "rm", "rp"} else set())
    widen = (lambda bits: bits.astype(np.uint32) << np.uint32(16)) if narrow == "bf16" else \
        (lambda bits: bits.view(np.float16).astype(np.float32).view(np.uint32))

    def run(w, m):
        values = [r(w) for r in reads]
        write(w, floats.arith(name, "f32", [widen(v) for v in values[:-1]] + values[-1:], flags), m)
    op.run = run


@handles(*_ARITY)
def _arith(op, ctx) -> None:
    ins, name = op.ins, op.ins.opcode
    mixed = _mixed(op)
    if mixed is not None:
        return _mixed_arith(op, ctx, *mixed)
    (type_name,), flags = split_types(op)
    n = _ARITY[name]
    if name == "dp4a" or name == "dp2a":
        types, flags = split_types(op, 2)
        type_name = f"{types[0]}.{types[1]}"
    operands = _operands(op, n + 1)
    dst_type = type_name
    if name in ("dp4a", "dp2a"):
        dst_type = "s32" if "s32" in types else "u32"
    if name in _U32_RESULT:
        dst_type = "u32"
    if "wide" in flags:
        dst_type = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}.get(type_name)
        if dst_type is None:
            raise unsupported(op, f".wide needs a 16- or 32-bit type, got .{type_name}")
    src_types = [type_name] * n
    if name in ("shl", "shr", "bfe") or (name == "shf"):
        src_types = [type_name, "u32"] + (["u32"] if name in ("bfe", "shf") else [])
        if name == "shf":
            src_types = ["b32", "b32", "u32"]
    if name == "bfi":
        src_types = [type_name, type_name, "u32", "u32"]
    if name == "lop3":
        src_types = [type_name] * 3 + ["b32"]
    if name in ("mad", "fma") and "wide" in flags:
        src_types = [type_name, type_name, dst_type]
    if name in ("dp4a", "dp2a"):
        src_types = ["b32", "b32", types[0]]
    if name == "prmt":
        src_types = ["b32", "b32", "b32"]
    is_float = type_name in FLOAT_TYPES
    if not is_float and type_name not in INT_TYPES and name not in ("dp4a", "dp2a"):
        raise unsupported(op, f"type .{type_name}")
    reads = [reader(ctx, o, t, ins) for o, t in zip(operands[1:], src_types)]
    write = writer(ctx, operands[0], dst_type, ins)
    impl = _floats().arith if is_float else INT.arith
    # Resolve unsupported forms now (load time), not at the first execution.
    probe = [np.zeros(1, T.STORAGE[t] if t != "pred" else np.bool_) for t in src_types]
    try:
        impl(name, type_name, probe, flags)
    except (ZeroDivisionError, FloatingPointError):
        pass
    except Exception as exc:  # the semantics module names the form it does not support
        if type(exc).__name__ == "Unsupported":
            raise unsupported(op, str(exc)) from None
        raise
    if n == 1:
        r0 = reads[0]
        op.run = lambda w, m: write(w, impl(name, type_name, [r0(w)], flags), m)
    elif n == 2:
        r0, r1 = reads
        op.run = lambda w, m: write(w, impl(name, type_name, [r0(w), r1(w)], flags), m)
    else:
        op.run = lambda w, m: write(w, impl(name, type_name, [r(w) for r in reads], flags), m)


# -- moves -------------------------------------------------------------------------------------------
@handles("mov")
def _mov(op, ctx) -> None:
    ins = op.ins
    (type_name,), flags = split_types(op)
    if flags:
        raise unsupported(op, f"modifiers {sorted(flags)}")
    dst, src = _operands(op, 2)
    width = T.width(type_name)
    if isinstance(src, ast.Vector):  # pack: element 0 in the low bits
        parts = len(src.elements)
        part_type = {2: {4: "b16", 8: "b32"}, 4: {4: "b8", 8: "b16"}}.get(parts, {}).get(width)
        if part_type is None:
            raise unsupported(op, f"packing {parts} parts into .{type_name}")
        reads = [reader(ctx, e, part_type, ins) for e in src.elements]
        write = writer(ctx, dst, type_name, ins)
        bits, out = 8 * T.width(part_type), T.STORAGE[type_name]

        def pack(w, m):
            value = np.zeros(32, out)
            for i, r in enumerate(reads):
                value |= r(w).astype(out) << out(bits * i)
            write(w, value, m)
        op.run = pack
        return
    if isinstance(dst, ast.Vector):  # unpack
        parts = len(dst.elements)
        part_type = {2: {4: "b16", 8: "b32"}, 4: {4: "b8", 8: "b16"}}.get(parts, {}).get(width)
        if part_type is None:
            raise unsupported(op, f"unpacking .{type_name} into {parts} parts")
        read = reader(ctx, src, type_name, ins)
        writes = [writer(ctx, e, part_type, ins) for e in dst.elements]
        bits, pt = 8 * T.width(part_type), T.STORAGE[part_type]
        src_dtype = T.STORAGE[type_name]

        def unpack(w, m):
            value = read(w)
            for i, wr in enumerate(writes):
                wr(w, (value >> src_dtype(bits * i)).astype(pt), m)
        op.run = unpack
        return
    read = reader(ctx, src, type_name, ins)
    write = writer(ctx, dst, type_name, ins)
    op.run = lambda w, m: write(w, read(w), m)


@handles("selp")
def _selp(op, ctx) -> None:
    (type_name,), flags = split_types(op)
    d, a, b, c = _operands(op, 4)
    ra, rb = reader(ctx, a, type_name, op.ins), reader(ctx, b, type_name, op.ins)
    rc = reader(ctx, c, "pred", op.ins)
    write = writer(ctx, d, type_name, op.ins)
    op.run = lambda w, m: write(w, np.where(rc(w), ra(w), rb(w)), m)


@handles("setp")
def _setp(op, ctx) -> None:
    ins = op.ins
    (type_name,), flags = split_types(op)
    cmps = [f for f in flags if f in CMP]
    bools = [f for f in flags if f in BOOL_OPS]
    rest = flags - set(cmps) - set(bools) - {"ftz"}
    if len(cmps) != 1 or len(bools) > 1 or rest:
        raise unsupported(op, "setp needs one comparison, at most one of and/or/xor")
    cmp = cmps[0]
    operands = ins.operands
    if len(operands) != (4 if bools else 3):
        raise unsupported(op, f"expected {4 if bools else 3} operands")
    dst = operands[0]
    dsts = list(dst.elements) if isinstance(dst, ast.Vector) else [dst]
    ra, rb = reader(ctx, operands[1], type_name, ins), reader(ctx, operands[2], type_name, ins)
    rc = reader(ctx, operands[3], "pred", ins) if bools else None
    writes = [writer(ctx, d, "pred", ins) for d in dsts]
    paired = type_name in ("f16x2", "bf16x2")  # setp.f16x2 p|q: p from the low halves, q from the high
    if type_name in FLOAT_TYPES:
        cmp_flags = frozenset(flags & {"ftz"})
        FP = _floats()
        if paired:
            compare = lambda a, b: FP.compare_pair(cmp, type_name, a, b, cmp_flags)  # noqa: E731
        else:
            compare = lambda a, b: FP.compare(cmp, type_name, a, b, cmp_flags)  # noqa: E731
    else:
        compare = lambda a, b: INT.compare(cmp, type_name, a, b)  # noqa: E731
    try:
        compare(np.zeros(1, T.STORAGE[type_name]), np.zeros(1, T.STORAGE[type_name]))
    except Exception as exc:
        if type(exc).__name__ == "Unsupported":
            raise unsupported(op, str(exc)) from None
        raise
    boolop = bools[0] if bools else None

    def run(w, m):
        t = compare(ra(w), rb(w))
        if paired:
            lo, hi = t
            if boolop is not None:
                c = rc(w)
                combine = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[boolop]
                lo, hi = combine(lo, c), combine(hi, c)
            writes[0](w, lo, m)
            if len(writes) > 1:
                writes[1](w, hi, m)
            return
        if boolop is None:
            writes[0](w, t, m)
            if len(writes) > 1:
                writes[1](w, ~t, m)
            return
        c = rc(w)
        combine = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[boolop]
        writes[0](w, combine(t, c), m)
        if len(writes) > 1:
            writes[1](w, combine(~t, c), m)
    op.run = run


@handles("slct")
def _slct(op, ctx) -> None:
    types, flags = split_types(op, 2)
    d, a, b, c = _operands(op, 4)
    ra, rb = reader(ctx, a, types[0], op.ins), reader(ctx, b, types[0], op.ins)
    rc = reader(ctx, c, types[1], op.ins)
    write = writer(ctx, d, types[0], op.ins)
    if types[1] == "f32":
        op.run = lambda w, m: write(w, np.where(rc(w).view(np.float32) >= 0, ra(w), rb(w)), m)
    else:
        op.run = lambda w, m: write(w, np.where(rc(w).view(np.int32) >= 0, ra(w), rb(w)), m)


# -- conversions -------------------------------------------------------------------------------------
@handles("cvt")
def _cvt(op, ctx) -> None:
    ins = op.ins
    types, flags = split_types(op, 2)
    dst_type, src_type = types
    from fa4_mlir.emu.isa import convert as CV
    packed = dst_type in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2") and src_type in ("f32",)
    if packed and len(ins.operands) == 3:
        d, a, b = ins.operands
        ra, rb = reader(ctx, a, src_type, ins), reader(ctx, b, src_type, ins)
        write = writer(ctx, d, dst_type, ins)
        _probe(op, lambda: CV.pack(dst_type, np.zeros(1, np.uint32), np.zeros(1, np.uint32), flags))
        op.run = lambda w, m: write(w, CV.pack(dst_type, ra(w), rb(w), flags), m)
        return
    d, a = _operands(op, 2)
    if src_type in ("e4m3x2", "e5m2x2") or (dst_type == "f16x2" and src_type == "f16x2"):
        read = reader(ctx, a, src_type, ins)
        write = writer(ctx, d, dst_type, ins)
        _probe(op, lambda: CV.unpack(dst_type, src_type, np.zeros(1, T.STORAGE[src_type]), flags))
        op.run = lambda w, m: write(w, CV.unpack(dst_type, src_type, read(w), flags), m)
        return
    read = reader(ctx, a, src_type, ins)
    write = writer(ctx, d, dst_type, ins)
    _probe(op, lambda: CV.convert(dst_type, src_type, np.zeros(1, T.STORAGE[src_type]), flags))
    op.run = lambda w, m: write(w, CV.convert(dst_type, src_type, read(w), flags), m)


def _probe(op, call) -> None:
    try:
        call()
    except Exception as exc:
        if type(exc).__name__ == "Unsupported":
            raise unsupported(op, str(exc)) from None
        raise


@handles("cvta")
def _cvta(op, ctx) -> None:
    ins = op.ins
    mods = list(ins.modifiers)
    to = "to" in mods
    spaces = [m for m in mods if m in ("shared", "shared::cta", "shared::cluster", "global", "param", "local", "const")]
    (type_name,), _ = split_types(op)
    if len(spaces) != 1 or type_name not in ("u64", "b64"):
        raise unsupported(op, "cvta needs one state space and .u64 (64-bit addressing)")
    space = spaces[0].split("::")[0]
    base = np.uint64({"shared": SHARED_BASE, "param": PARAM_BASE, "local": LOCAL_BASE}.get(space, 0))
    d, a = _operands(op, 2)
    read, write = reader(ctx, a, "u64", ins), writer(ctx, d, "u64", ins)
    if to:
        op.run = lambda w, m: write(w, read(w) - base, m)
    else:
        op.run = lambda w, m: write(w, read(w) + base, m)


@handles("mapa")
def _mapa(op, ctx) -> None:
    """``mapa.shared::cluster.{u32,u64} d, a, rank``: the address of the variable at shared::cluster
    address ``a`` in the CTA of cluster rank ``rank`` (PTX ISA "mapa"): its offset in the window of that
    rank's slot (``memory.CLUSTER_SHIFT``)."""
    ins = op.ins
    mods = list(ins.modifiers)
    if len(mods) != 2 or mods[0] != "shared::cluster" or mods[1] not in ("u32", "u64"):
        raise unsupported(op, "only mapa.shared::cluster.u32/.u64 is modelled")
    d, a, r = _operands(op, 3)
    type_name = mods[1]
    read, rank, write = reader(ctx, a, type_name, ins), reader(ctx, r, "u32", ins), writer(ctx, d, type_name, ins)
    dtype = np.uint64 if type_name == "u64" else np.uint32
    low = dtype((1 << CLUSTER_SHIFT) - 1)

    def run(w, m):
        ranks = rank(w)
        size = len(w.launch.cluster_ctas)
        bad = ranks >= size
        if (bad & (m if m is not FULL else True)).any():
            raise ProtocolError(f"{w.where(op)}: mapa rank must be below the cluster's {size} CTA(s), got "
                                f"{int(ranks[np.argmax(bad)])}")
        addr = read(w)
        if type_name == "u64":
            addr = np.where((addr >= np.uint64(SHARED_BASE)), addr - np.uint64(SHARED_BASE), addr)
        write(w, (addr & low) | (ranks.astype(dtype) << dtype(CLUSTER_SHIFT)), m)
    op.run = run
