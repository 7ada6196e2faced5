"""The sm_100a attention kernel (sm_90a: test_attention_hopper.py): every supported config through the whole compiler (protocol
verifier on, ptxas -arch=sm_100a), with zero spills and exactly the shared memory and barrier
placement fa4-layout prints for its FA4Config; plus the config and launch rules."""

from __future__ import annotations

import itertools
import os
import re

import pytest

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels import attention
from fa4_mlir.layouts import fa4_layout

SUPPORTED = [dict(dtype=dt, head_dim=hd, num_q=nq, causal=ca)
             for dt, hd, nq, ca in itertools.product(("bf16", "fp16"), (64, 96, 128), (1, 2), (False, True))]
SUPPORTED += [dict(group=4), dict(group=3, causal=True), dict(group=8, num_q=1), dict(exp2_emulation=8),
              dict(head_dim=64, group=16, causal=True, num_q=1)]
# fp8 e4m3: every head dim x Q tiles x scales (fused and split K/V rings both occur), plus causal / GQA
FP8 = [dict(dtype="fp8_e4m3", head_dim=hd, num_q=nq, token_scales=ts)
       for hd, nq, ts in itertools.product((64, 128), (1, 2), (False, True))]
FP8 += [dict(dtype="fp8_e4m3", causal=True, group=4, token_scales=True),
        dict(dtype="fp8_e4m3", head_dim=64, num_q=1, causal=True, group=8)]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items()) or "default"


# CI compiles every fourth bf16/fp16 config (the fingerprint test builds others) and every fp8 one;
# FA4_FULL_SWEEP=1 compiles all
SWEPT = SUPPORTED + FP8 if os.environ.get("FA4_FULL_SWEEP", "0") == "1" else SUPPORTED[::4] + FP8


@pytest.mark.parametrize("kwargs", SWEPT, ids=_ids)
def test_every_config_assembles_without_spills_on_the_reference_layout(ctx, kwargs):
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.core.layout_ir import place_layout

    config = AttentionConfig(**kwargs)
    placed_ir = compile_kernel(attention.build(config), stop="fa4").mlir  # the protocol verifier runs here
    result = compile_kernel(attention.build(config), stop="cubin", verify_protocol=False)
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["threads"][0] == 512
    _, placed = place_layout(fa4_layout(config.fa4), "sm_100a")
    assert m["smem_bytes"] == placed.smem_bytes
    offsets = {n: int(o) for o, n in re.findall(r'offset = (\d+) : i64, (?:swizzle = "\w+", )?sym_name = "(\w+)"',
                                                placed_ir)}
    indices = {n: int(i) for i, n in re.findall(r'index = (\d+) : i64, num_barriers = \d+ : i64, sym_name = "(\w+)"',
                                                placed_ir)}
    assert indices == placed.barrier_index
    for name, offset in placed.region_offsets.items():
        if name not in ("o", "mbarriers"):
            assert offsets[name] == offset, name


def test_kernel_declares_the_layout_barriers_in_order():
    for kwargs in (dict(), dict(num_q=1), dict(head_dim=64)):
        config = AttentionConfig(**kwargs)
        text = attention.build(config).mlir
        barriers = [(m.group(2), int(m.group(1))) for m in re.finditer(
            r'mbarrier_alloc"\(\) \{[^}]*num_barriers = (\d+) : i64, sym_name = "(\w+)"', text)]
        assert barriers == [(b.name, len(b.counts)) for b in fa4_layout(config.fa4).barriers]
        assert 'arrive_counts = array<i32: 256, 128>' in text  # the combined "P stage 0 + O rescaled"
        tmem = re.findall(r'tmem_region"\(\) \{columns = (\d+) : i64, sym_name = "(\w+)"', text)
        assert [(n, int(c)) for c, n in tmem] == [(t.name, t.columns) for t in fa4_layout(config.fa4).tmem]


def test_tensor_maps_and_grid():
    source = attention.build(AttentionConfig(group=4))
    maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
    assert maps["q"].box == (64, 4, 32, 1) and maps["o"].box == (64, 4, 32, 1)  # 32 positions x 4 heads
    assert maps["k"].box == maps["v"].box == (64, 1, 128, 1) and maps["k"].swizzle == "128B"
    assert attention.launch_geometry(AttentionConfig(group=4), 2, 1000, 32, 1000) == (16, 8, 2)
    assert attention.launch_geometry(AttentionConfig(num_q=1, group=3), 1, 129, 6, 5) == (2, 6, 1)


def test_fp8_tensor_maps_and_instructions():
    """fp8: 64B-swizzled Q/K/V boxes of 64 elements, the bf16 O in 32-column chunks, the per-token
    scale maps (one fp32 per row of a tile, per key of a K tile), kind::f8f6f4 MMAs and P cast to e4m3."""
    from fa4_mlir.core.compiler import compile_kernel

    config = AttentionConfig(dtype="fp8_e4m3", group=4, token_scales=True)
    source = attention.build(config)
    maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
    assert maps["q"].box == (64, 4, 32, 1) and maps["q"].swizzle == "64B" and maps["q"].dtype == "fp8_e4m3"
    assert maps["k"].box == maps["v"].box == (64, 1, config.fa4.bn, 1) and maps["v"].swizzle == "64B"
    assert maps["o"].box == (32, 4, 32, 1) and maps["o"].swizzle == "64B" and maps["o"].dtype == "bf16"
    assert maps["q_scale"].box == (32, 4, 1) and maps["k_scale"].box == (config.fa4.bn, 1, 1)
    assert [p.name for p in source.params][-3:] == ["v_scale", "q_scale", "k_scale"]
    ptx = compile_kernel(source, stop="ptx", verify_protocol=False).ptx
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in ptx and "kind::f16" not in ptx
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx


@pytest.mark.parametrize("args, message", [
    ((1, 0, 8, 8), r"batch, seq_q, heads and seq_k must be >= 1, got 1, 0, 8, 8"),
    ((1, 8, 6, 8), r"heads \(6\) must be a multiple of group \(4\)"),
])
def test_launch_geometry_errors(args, message):
    with pytest.raises(LaunchError, match=message):
        attention.launch_geometry(AttentionConfig(group=4), *args)


@pytest.mark.parametrize("kwargs, message", [
    (dict(head_dim=80), r"AttentionConfig.head_dim must be one of 64, 96, 128, 256, 512 on sm_100a, got 80"),
    (dict(num_q=3), r"AttentionConfig.num_q must be 1 \(BM 128\) or 2 \(BM 256\), got 3"),
    (dict(group=0), r"AttentionConfig.group must be in \[1, 128\]"),
    (dict(dtype="fp8"), r"AttentionConfig.dtype must be one of bf16, fp16, fp8_e4m3, got 'fp8'"),
    (dict(dtype="fp8_e4m3", head_dim=96), r"AttentionConfig.head_dim must be one of 64, 128, 256, 512 for fp8_e4m3 on sm_100a, "
                                          r"got 96"),
    (dict(token_scales=True), r"AttentionConfig.token_scales must be False unless dtype is fp8_e4m3"),
    (dict(dtype="fp8_e4m3", token_scales=True, group=64),
     r"AttentionConfig.token_scales must be False for group 64 or 128 on sm_100a \(a tile holds 128 / group "
     r"positions of a head: its q_scale TMA row of that many fp32 must be >= 16 bytes\), got True"),
    (dict(exp2_emulation=3), r"AttentionConfig.exp2_emulation must be even and in \[0, 32\]"),
    (dict(block_n=128), r"AttentionConfig.block_n must be 0 on sm_100a \(the reference layout picks BN\), got 128"),
    (dict(causal=1), r"AttentionConfig.causal must be True or False, got 1"),
    (dict(kv_stages=3), r"AttentionConfig.kv_stages must be 0 on sm_100a \(the reference layout picks the stages\), "
                        r"got 3"),
    (dict(single_kv_loop=True), r"AttentionConfig.single_kv_loop must be False unless target is sm_90a \(its "
                                r"consumers' K/V loops\), got True"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(**kwargs)


def test_e4m3_instruction_descriptor_is_the_isas():
    """fa4-lower-tmem's kind::f8f6f4 descriptor for e4m3 (format code 0) reads back, in the emulator's
    independent decoder, as the MMAs the fp8 kernel issues: Q@K' (K-major B) and P@V (MN-major V)."""
    from fa4_mlir.emu.isa.tcgen05_desc import decode_instr_descriptor
    from fa4_mlir.passes.lower_tmem import instruction_descriptor

    for n, major in ((128, "k"), (192, "k"), (128, "mn"), (64, "mn")):
        got = decode_instr_descriptor(instruction_descriptor("e4m3", 128, n, major), kind="f8f6f4")
        assert (got.m, got.n, got.d_type, got.a_type, got.b_type) == (128, n, "f32", "e4m3", "e4m3")
        assert got.a_k_major and got.b_k_major == (major == "k")
