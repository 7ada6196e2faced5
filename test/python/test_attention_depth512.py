"""The depth-256/512 pair-CTA attention kernel (fa4_mlir.kernels.attention.depth512, issue 23): its
built shared memory, barriers and TMEM are the reference layout's (spec 1.5, 2.2, 2.3, 3.4), every
supported config passes the protocol verifier and assembles without spills, its PTX uses the pair
instructions, and it computes attention in the PTX emulator (race checks on) against the float64
reference, including tiles where the lazy rescale fires."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import ci_sample

from fa4_mlir import reference
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels import attention
from fa4_mlir.layouts import depth512_layout
from fa4_mlir.placement import place_contiguous, place_smem

# spec 1.5's worked totals: (smem bytes, num_kv_stages)
WORKED = {512: (229780, 4), 256: (230084, 8)}
# spec 3.4: barrier index by name with split_o (d512) and without (d256)
SPEC_INDEX = {
    512: {"PO_lo": 0, "PO_hi": 1, "S_even_consumer": 2, "S_odd_consumer": 3, "C_producer": 4, "C_consumer": 5,
          "S_even_producer": 6, "S_odd_producer": 7, "O_mma_lo": 8, "O_mma_hi": 9, "kv_producer": 10},
    256: {"PO_lo": 0, "S_even_consumer": 1, "S_odd_consumer": 2, "C_producer": 3, "C_consumer": 4,
          "S_even_producer": 5, "S_odd_producer": 6, "O_mma_lo": 7, "kv_producer": 8},
}
# spec 2.3: TMEM columns (first, count) per CTA
SPEC_TMEM = {512: {"O_lo": (0, 128), "O_hi": (128, 128), "S_even": (256, 128), "S_odd": (384, 128)},
             256: {"O": (0, 256), "S_even": (256, 128), "S_odd": (384, 128)}}
# every head dim, dtype and mask with group 1 (one head per row), 3 (unfused GQA: 3 does not divide the
# BM rows) and 4 (fused GQA); the causal d512 unfused kernels once spilled (a copy of q_start kept live
# across the softmax loop for the LSE write). The full sweep over groups {1, 3, 4, 8, 16, 64, 128} is
# spill-free too, but takes 2-4 s per compile.
COMPILED = [dict(head_dim=h, dtype=t, causal=c, group=g)
            for h in (256, 512) for t in ("bf16", "fp16") for c in (False, True) for g in (1, 3, 4)]


def _compile(kwargs, stop="cubin"):
    from fa4_mlir.core.compiler import compile_kernel

    return compile_kernel(attention.build(AttentionConfig(**kwargs)), stop=stop)  # the protocol verifier runs


def _attrs(text: str, op: str) -> dict[str, dict[str, str]]:
    """sym_name -> attributes of every ``op`` in the printed fa4-stage module."""
    out = {}
    for m in re.finditer(rf'"fa4\.{op}"\(\) \{{([^}}]*)\}}', text):
        attrs = dict(re.findall(r'(\w+) = ("[^"]*"|[-\w]+)', m.group(1)))
        out[attrs["sym_name"].strip('"')] = {k: v.strip('"') for k, v in attrs.items()}
    return out


@pytest.mark.parametrize("depth", [256, 512])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_the_built_kernel_places_the_reference_layout(depth, dtype):
    config = AttentionConfig(head_dim=depth, dtype=dtype)
    text = _compile(dict(head_dim=depth, dtype=dtype), stop="fa4").mlir
    layout = depth512_layout(config.depth512)
    regions = _attrs(text, "smem_region")
    placed = place_smem([(r.name, r.bytes, r.align, r.alias_of, 0) for r in layout.regions])
    for r in layout.regions:
        if r.alias_of is None:
            assert (int(regions[r.name]["offset"]), int(regions[r.name]["bytes"])) == (placed.offsets[r.name], r.bytes)
    smem, nkv = WORKED[depth]
    assert re.search(rf"fa4\.smem_bytes = {smem} ", text) and placed.total == smem == config.depth512.smem_used
    assert config.depth512.num_kv_stages == nkv
    barriers = _attrs(text, "mbarrier_alloc")
    indices = place_contiguous([(b.name, len(b.counts)) for b in layout.barriers]).offsets
    assert [b.name for b in layout.barriers] == list(barriers)
    for b in layout.barriers:
        got = barriers[b.name]
        assert int(got["index"]) == indices[b.name]
        assert (int(got["num_barriers"]), int(got["arrive_count"])) == (len(b.counts), b.counts[0])
        assert int(got.get("cta_group", 1)) == b.cta_group
        assert got["arrival"] == b.arrival
    assert {n: indices[n] for n in SPEC_INDEX[depth]} == SPEC_INDEX[depth]
    assert int(barriers["kv_consumer"]["index"]) == SPEC_INDEX[depth]["kv_producer"] + nkv
    tmem = _attrs(text, "tmem_region")
    assert {n: (int(a["column"]), int(a["columns"])) for n, a in tmem.items()} == SPEC_TMEM[depth]
    assert "fa4.tmem_columns = 512 " in text


# CI compiles each value of the sweep once; FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(COMPILED, pairs=()), ids=[json.dumps(k) for k in COMPILED])
def test_every_config_verifies_and_assembles_without_spills(kwargs):
    result = _compile(kwargs)
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"], m["stack_frame"]) == (0, 0, 0), m
    assert m["threads"] == [384, 1, 1] and m["cluster"] == [2, 1, 1]
    assert m["smem_bytes"] == WORKED[kwargs["head_dim"]][0]


@pytest.mark.parametrize("depth", [256, 512])
def test_the_ptx_uses_the_pair_instructions(depth):
    ptx = _compile(dict(head_dim=depth), stop="ptx").ptx
    assert "tcgen05.mma.cta_group::2.kind::f16" in ptx
    assert re.search(r"tcgen05\.commit\.cta_group::2\.mbarrier::arrive::one\.shared::cluster\.multicast::cluster\.b64",
                     ptx)
    assert "tcgen05.alloc.cta_group::2" in ptx and "tcgen05.dealloc.cta_group::2" in ptx
    # the peer's arrivals on the leader's barriers: mapa, then the CTA-scope release (a cluster-scope one
    # costs a GPU-wide fence per arrival)
    assert "mapa.shared::cluster" in ptx and "mbarrier.arrive.shared::cluster.b64" in ptx
    assert "mbarrier.arrive.release.cluster" not in ptx
    tma = r"cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global(\.tile)?\.mbarrier::complete_tx::bytes"
    assert re.search(tma + r"\.cta_group::2", ptx)
    assert "barrier.cluster.arrive" in ptx and "barrier.cluster.wait" in ptx
    registers = sorted({int(r) for r in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)})
    # d256: the reference's softmax 256 / correction 184 / MMA + load 64 (warps 8-11 share one budget);
    # d512 keeps every warpgroup at the entry budget (see depth512.common.registers)
    assert registers == ([64, 184, 256] if depth == 256 else [])


def test_the_pair_kernel_refuses_other_head_dims():
    from fa4_mlir.kernels.attention import depth512

    with pytest.raises(ValueError, match=r"config must be an sm_100a AttentionConfig with head_dim 256 or 512, got "
                                         r"AttentionConfig sm_100a bf16 d128"):
        depth512.build(AttentionConfig(head_dim=128))


def test_config_routes_head_dims_256_and_512_to_the_pair_kernel():
    c = AttentionConfig(head_dim=512, group=4)
    assert c.is_depth512 and c.depth512.qk_depth == 512 and c.fused_group == 4
    assert (c.rows, c.positions, c.cta_positions) == (64, 16, 32)
    assert attention.launch_geometry(c, 2, 100, 8, 300) == (2 * 4, 2, 2)
    assert attention.launch_geometry(AttentionConfig(head_dim=256), 1, 257, 3, 5) == (4, 3, 1)
    # a fused group must fill whole positions of each CTA's BM rows (d512: BM 64)
    assert [AttentionConfig(head_dim=512, group=g).fused_group for g in (64, 128)] == [64, 1]
    with pytest.raises(ConfigError, match=r"AttentionConfig.fa4 is the FA4 layout; head_dim must be one of 64, "
                                          r"96, 128, got 256 \(use .depth512\)"):
        AttentionConfig(head_dim=256).fa4
    with pytest.raises(ConfigError, match=r"AttentionConfig.depth512 is the sm_100a head dim 256/512 layout"):
        AttentionConfig(head_dim=128).depth512
    with pytest.raises(ConfigError, match=r"AttentionConfig.num_q must be 2 for head dim 256/512"):
        AttentionConfig(head_dim=256, num_q=1)
    with pytest.raises(ConfigError, match=r"AttentionConfig.exp2_emulation must be 0 for head dim 256/512"):
        AttentionConfig(head_dim=512, exp2_emulation=16)
    with pytest.raises(LaunchError, match=r"heads \(6\) must be a multiple of group \(4\)"):
        attention.launch_geometry(c, 1, 8, 6, 8)


EMU_CASES = [
    ("--head-dim", "256", "--shape", "1x200x300x1"),
    ("--head-dim", "256", "--causal", "--shape", "1x129x257x1"),
    ("--head-dim", "256", "--dtype", "fp16", "--group", "4", "--shape", "1x100x200x4"),
    ("--head-dim", "512", "--shape", "1x63x600x1"),
    ("--head-dim", "512", "--causal", "--shape", "1x300x300x1"),
    ("--head-dim", "512", "--dtype", "fp16", "--group", "4", "--causal", "--shape", "1x70x130x8"),
]


@pytest.mark.parametrize("argv", ci_sample.in_ci(EMU_CASES, range(0, len(EMU_CASES), 2), one_arg=True),
                         ids=[" ".join(c) for c in EMU_CASES])  # CI: every other case
def test_the_kernel_is_right_in_the_emulator(capsys, argv):
    from fa4_mlir.tools import fa4_emu

    code = fa4_emu.main(["attention", *argv, "--target", "sm_100a", "--seed", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err or out
    report = json.loads(out)
    assert report["ok"], report
    for name, check in report["checks"].items():
        assert check["ok"], (name, check)
        if "unwritten" in check:
            assert check["unwritten"] == 0, (name, check)


@pytest.mark.parametrize("depth, causal", [(256, False), (512, True)])
def test_a_growing_row_maximum_rescales_o(depth, causal):
    # keys of later tiles score 8x higher: the row maximum grows by far more than the lazy-rescale
    # threshold (8 in log2 units), so the correction warpgroup rescales O in TMEM
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_attention

    config = AttentionConfig(head_dim=depth, causal=causal)
    bn = config.depth512.bn
    rng = np.random.default_rng(7)
    sq, sk = 300, 2 * bn + 40  # causal: the last pair (rows 256..299) reaches tile 1
    q = reference.random_bits(rng, (1, sq, 1, depth), "bf16", 1.0)
    kf = rng.standard_normal((1, sk, 1, depth))
    kf[:, bn:] *= 8.0
    k = reference.from_f32(kf.astype(np.float32), "bf16")
    v = reference.random_bits(rng, (1, sk, 1, depth), "bf16", 1.0)
    o = np.full((1, sq, 1, depth), reference.POISON["bf16"], np.uint16)
    lse = np.full((1, 1, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(depth)
    kernel = runtime.load("attention", config, device="emulator", debug=False)
    launch_attention(kernel, config, q, k, v, o, lse, scale, seed=3)
    qf, kf64, vf = (reference.to_f64(t, "bf16") for t in (q, k, v))
    ref, ref_lse = reference.attention(qf, kf64, vf, causal, scale)
    check = reference.compare(o, ref, reference.attention_yardstick(qf, kf64, vf, causal, scale, "bf16"), "bf16")
    assert check.ok, check.summary()
    assert float(np.abs(lse - ref_lse).max()) <= reference.lse_tolerance(ref_lse)

