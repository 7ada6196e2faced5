"""Operand access compiled once per instruction: readers, writers and address computations.

A reader returns the operand's 32 lanes as raw bits in the storage dtype of the instruction's type;
a register read at a different width is truncated or extended as PTX does. Register arrays are never
modified in place (a write replaces the slot's array), so readers may return them without copying.
"""

from __future__ import annotations

import struct

import numpy as np

from fa4_mlir.emu import types as T
from fa4_mlir.emu.errors import PtxSyntaxError, Unsupported
from fa4_mlir.emu.machine import FULL, LANES, WARP
from fa4_mlir.emu.memory import LOCAL_BASE, PARAM_BASE, SHARED_BASE
from fa4_mlir.emu.ptx import ast


def syntax(ctx, ins, message: str) -> PtxSyntaxError:
    return PtxSyntaxError(f"{message} (in '{ins.text}')", ins.loc.line, ins.loc.column, ctx.source)


def _constant(bits: int, dtype) -> np.ndarray:
    arr = np.full(WARP, bits, dtype)
    arr.setflags(write=False)
    return arr


def immediate_bits(imm: ast.Immediate, type_name: str, ctx, ins) -> int:
    """The raw bits of literal ``imm`` as a value of ``type_name``."""
    nbits = 8 * T.width(type_name) if type_name != "pred" else 1
    mask = (1 << nbits) - 1
    if imm.kind == "int":
        value = int(imm.value)
        if type_name in ("f32", "f64"):  # an integer literal used as a float operand is its value
            return immediate_bits(ast.Immediate(float(value), "float"), type_name, ctx, ins)
        return value & mask
    if imm.kind == "f32":
        if type_name == "f64":
            return struct.unpack("<Q", struct.pack("<d", struct.unpack("<f", struct.pack("<I", imm.value))[0]))[0]
        if type_name not in ("f32", "b32", "u32", "s32"):
            raise syntax(ctx, ins, f"a 0f literal must be used with a 32-bit type, got .{type_name}")
        return int(imm.value)
    if imm.kind == "f64":
        if type_name == "f32":
            return struct.unpack("<I", struct.pack("<f", struct.unpack("<d", struct.pack("<Q", imm.value))[0]))[0]
        if T.width(type_name) != 8:
            raise syntax(ctx, ins, f"a 0d literal must be used with a 64-bit type, got .{type_name}")
        return int(imm.value)
    if imm.kind == "float":
        if type_name == "f64":
            return struct.unpack("<Q", struct.pack("<d", float(imm.value)))[0]
        if type_name == "f32":
            return struct.unpack("<I", struct.pack("<f", float(imm.value)))[0]
    raise syntax(ctx, ins, f"literal {imm.value!r} cannot be used as a .{type_name} operand")


def special_reader(name: str, ctx, ins):
    """Readers of %tid.x, %laneid, %ctaid.y, %cluster_ctarank and the other special registers."""
    axis = {"x": 0, "y": 1, "z": 2}
    base, _, comp = name.partition(".")

    def per_warp(fn):
        def read(warp):
            cached = warp.special_cache.get(name)
            if cached is None:
                cached = warp.special_cache[name] = np.asarray(fn(warp), np.uint32)
                if cached.shape != (WARP,):
                    cached = warp.special_cache[name] = np.full(WARP, cached, np.uint32)
            return cached
        return read

    if base == "%tid" and comp in axis:
        return per_warp(lambda w: w.tid[axis[comp]])
    if base == "%ntid" and comp in axis:
        return per_warp(lambda w: w.launch.block[axis[comp]])
    if base == "%ctaid" and comp in axis:
        return per_warp(lambda w: w.cta.ctaid[axis[comp]])
    if base == "%nctaid" and comp in axis:
        return per_warp(lambda w: w.launch.grid[axis[comp]])
    if base == "%clusterid" and comp in axis:
        return per_warp(lambda w: w.cta.ctaid[axis[comp]] // w.launch.cluster[axis[comp]])
    if base == "%nclusterid" and comp in axis:
        return per_warp(lambda w: w.launch.grid[axis[comp]] // w.launch.cluster[axis[comp]])
    if base == "%cluster_ctaid" and comp in axis:
        return per_warp(lambda w: w.cta.ctaid[axis[comp]] % w.launch.cluster[axis[comp]])
    if base == "%cluster_nctaid" and comp in axis:
        return per_warp(lambda w: w.launch.cluster[axis[comp]])
    if name == "%cluster_ctarank":
        return per_warp(lambda w: w.cta.cluster_rank)
    if name == "%cluster_nctarank":
        return per_warp(lambda w: int(np.prod(w.launch.cluster)))
    if name == "%is_explicit_cluster":
        return per_warp(lambda w: int(w.launch.cluster != (1, 1, 1) or "explicitcluster" in w.kernel.directives))
    if name == "%laneid":
        return lambda w: LANES
    if name == "%warpid":
        return per_warp(lambda w: w.wid)
    if name == "%nwarpid":
        return per_warp(lambda w: len(w.cta.warps))
    if name in ("%smid", "%gridid"):
        return per_warp(lambda w: 0)
    if name == "%nsmid":
        return per_warp(lambda w: 132)
    if name == "%dynamic_smem_size":
        return per_warp(lambda w: w.launch.smem_bytes)
    if name in ("%total_smem_size", "%aggr_smem_size"):
        return per_warp(lambda w: w.cta.smem.size)
    if name.startswith("%lanemask_"):
        kind = name[len("%lanemask_"):]
        table = {"eq": lambda l: 1 << l, "lt": lambda l: (1 << l) - 1, "le": lambda l: (2 << l) - 1,
                 "gt": lambda l: (0xFFFFFFFF << (l + 1)) & 0xFFFFFFFF, "ge": lambda l: (0xFFFFFFFF << l) & 0xFFFFFFFF}
        if kind in table:
            values = np.array([table[kind](l) for l in range(WARP)], np.uint32)
            return lambda w: values
    if name in ("%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
        def clock(warp):
            return np.full(WARP, warp.launch.now, np.uint64 if name != "%clock" else np.uint32)
        return clock
    if name.startswith("%envreg"):
        return lambda w: np.zeros(WARP, np.uint32)
    raise Unsupported(f"line {ins.loc.line}: special register {name} is not supported by the emulator: {ins.text}")


def reader(ctx, operand, type_name: str, ins):
    """A function warp -> the operand's lanes as bits of ``type_name`` (bool for pred)."""
    dtype = T.STORAGE[type_name] if type_name != "pred" else np.bool_
    signed = type_name in T.SIGNED
    if isinstance(operand, ast.Register):
        if ctx.is_special(operand):
            special = special_reader(operand.name, ctx, ins)
            return lambda w: T.fit(special(w), dtype, False)
        slot = ctx.slot(operand, ins)
        reg_dtype = np.dtype(ctx.kernel.slots[slot][1])
        if reg_dtype == np.dtype(dtype):
            return lambda w: w.regs[slot]
        return lambda w: T.fit(w.regs[slot], dtype, signed)
    if isinstance(operand, ast.Negated):
        inner = reader(ctx, operand.operand, "pred", ins)
        return lambda w: ~inner(w)
    if isinstance(operand, ast.Immediate):
        if type_name == "pred":
            const = _constant(bool(operand.value), np.bool_)
        else:
            const = _constant(immediate_bits(operand, type_name, ctx, ins), dtype)
        return lambda w: const
    if isinstance(operand, ast.Symbol):
        space, address = ctx.symbol_address(operand.name, ins)
        if space == "global":
            name = operand.name
            return lambda w: np.full(WARP, w.launch.global_symbol(name), dtype)
        const = _constant(address, dtype)
        if space == "shared":  # each CTA's own window
            return lambda w: (const + np.array(w.cta.window, dtype=dtype)) if w.cta.window else const
        return lambda w: const
    raise syntax(ctx, ins, f"operand {operand} must be a register, literal or symbol")


def writer(ctx, operand, type_name: str, ins):
    """A function (warp, value bits, mask) that writes the lanes in ``mask`` of a register."""
    if isinstance(operand, ast.Register) and operand.name == "_":
        return lambda w, v, m: None
    if not isinstance(operand, ast.Register) or ctx.is_special(operand):
        raise syntax(ctx, ins, f"destination must be a register, got {operand}")
    slot = ctx.slot(operand, ins)
    reg_dtype = np.dtype(ctx.kernel.slots[slot][1])
    signed = type_name in T.SIGNED

    def write(warp, value, mask):
        if value.dtype != reg_dtype:
            value = T.fit(value, reg_dtype, signed)
        if mask is FULL:
            warp.regs[slot] = value
        else:
            warp.regs[slot] = np.where(mask, value, warp.regs[slot])
    return write


def address(ctx, operand, ins, default_space: str | None = None):
    """(space, fn warp -> uint64 addresses) of an ``[base+offset]`` operand. ``space`` is the symbol's
    state space when the base is a variable or parameter, else ``default_space``."""
    if not isinstance(operand, ast.Address):
        raise syntax(ctx, ins, f"operand must be an address [..], got {operand}")
    offset = np.uint64(operand.offset & 0xFFFFFFFFFFFFFFFF)
    base = operand.base
    if base is None:
        const = _constant(int(offset), np.uint64)
        return default_space, lambda w: const
    if isinstance(base, ast.Symbol):
        space, addr = ctx.symbol_address(base.name, ins)
        if space == "global":
            name = base.name
            return "global", lambda w: np.full(WARP, w.launch.global_symbol(name) + int(offset), np.uint64)
        const = _constant((addr + int(offset)) & 0xFFFFFFFFFFFFFFFF, np.uint64)
        if space == "shared":
            return space, lambda w: (const + np.uint64(w.cta.window)) if w.cta.window else const
        return space, lambda w: const
    slot = ctx.slot(base, ins)
    reg_dtype = np.dtype(ctx.kernel.slots[slot][1])
    if reg_dtype == np.uint64:
        if offset:
            return default_space, lambda w: w.regs[slot] + offset
        return default_space, lambda w: w.regs[slot]
    if reg_dtype == np.uint32:
        off32 = np.uint32(operand.offset & 0xFFFFFFFF)
        return default_space, lambda w: (w.regs[slot] + off32).astype(np.uint64)
    raise syntax(ctx, ins, f"address register {base.name} must be 32 or 64 bits")


def generic_to(space: str, addresses: np.ndarray) -> np.ndarray:
    """Window-relative addresses of generic ``addresses`` in ``space`` (shared, param, local)."""
    base = {"shared": SHARED_BASE, "param": PARAM_BASE, "local": LOCAL_BASE}[space]
    return addresses - np.uint64(base)


def lanes(mask) -> np.ndarray:
    return LANES if mask is FULL else LANES[mask]
