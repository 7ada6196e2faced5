"""The sm_90a attention kernel: every shipped config through the whole compiler (protocol verifier
on, ptxas -arch=sm_90a) with zero spills and the shared memory and barriers of its layout; the
config, tile and launch rules; head dim 512's numerics in the PTX emulator (small shapes). The
numerics of every head dim run on the GPU (test/gpu/test_attention_gpu.py)."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

import ci_sample
from hopper_emulated import check_in_emulator

from fa4_mlir.configs.attention import SM90_KV_TILE, AttentionConfig
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels import attention
from fa4_mlir.kernels.attention.hopper import section_order
from fa4_mlir.layouts import hopper_attention_layout, kernel_layout

SUPPORTED = [dict(dtype=dt, head_dim=hd, causal=ca)
             for dt, hd, ca in itertools.product(("bf16", "fp16"), (64, 96, 128, 192, 256, 512), (False, True))]
SUPPORTED += [dict(group=4), dict(group=8, causal=True, head_dim=64), dict(head_dim=128, block_n=176),
              dict(head_dim=128, block_n=96, causal=True), dict(head_dim=256, block_n=64),
              dict(head_dim=512, group=8, causal=True), dict(head_dim=64, num_q=3),
              dict(head_dim=64, num_q=3, causal=True, dtype="fp16", block_n=96), dict(head_dim=128, persistent=True),
              dict(head_dim=64, causal=True, dtype="fp16", persistent=True),
              dict(head_dim=128, causal=True, block_n=64, persistent=True),
              dict(head_dim=64, causal=True, block_n=128, persistent=True),
              dict(head_dim=64, num_q=3, kv_stages=4), dict(head_dim=128, causal=True, block_n=64, kv_stages=3)]
# the op's causal walks: one K/V loop (SM90_WALK_SINGLE_LOOP), their tiles by length (SM90_WALK_SHORT_TILE)
SUPPORTED += [dict(head_dim=d, causal=True, block_n=bn, persistent=True, single_kv_loop=True, dtype=dt)
              for d, bn, dt in ((128, 64, "bf16"), (128, 128, "fp16"), (128, 0, "bf16"), (64, 64, "fp16"),
                                (64, 128, "bf16"))]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items()) or "default"


# CI compiles each value of the sweep once (sm_90a: the H100 session builds the op's artifacts, and CI's
# emulator tests compile more); FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(SUPPORTED, pairs=()), ids=_ids)
def test_every_config_assembles_without_spills_on_its_layout(ctx, kwargs):
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.core.layout_ir import place_layout

    config = AttentionConfig(target="sm_90a", **kwargs)
    placed_ir = compile_kernel(attention.build(config), stop="fa4").mlir  # the protocol verifier runs here
    result = compile_kernel(attention.build(config), stop="cubin", verify_protocol=False)
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["wgmma_serialized"] is False, m  # ptxas C7511: the wgmmas serialised
    t = config.hopper
    assert m["threads"][0] == 128 * (t.consumers + 1) == (512 if config.num_q == 3 else 384)
    _, placed = place_layout(hopper_attention_layout(config), "sm_90a")
    assert m["smem_bytes"] == placed.smem_bytes
    indices = {n: int(i) for i, n in re.findall(r'index = (\d+) : i64, num_barriers = \d+ : i64, sym_name = "(\w+)"',
                                                placed_ir)}
    assert indices == placed.barrier_index
    ptx = result.ptx
    # the MMAs: S = Q K' as SS wgmma (n = BN), O += P V as RS wgmma (n = D, B transposed: V is mn-major;
    # head dim 512: n = D / 2, each warpgroup its half of O's columns; head dim 96: the padded 128)
    bn, d = config.hopper.bn, config.hopper.head_dim // (2 if config.hopper.split_o else 1)
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{config.dtype.replace('fp', 'f')}" in ptx
    rs = re.findall(rf"wgmma.mma_async.sync.aligned.m64n{d}k16\S+ \{{[^}}]+\}}, \{{%r\d+, %r\d+, %r\d+, %r\d+\}}, "
                    r"%rd\d+, p, 1, 1, 1;", ptx)
    # per consumer warpgroup: the unmasked tiles' loop, the masked tiles' (or one loop of both) and the last tile
    assert len(rs) == t.consumers * (2 if config.single_kv_loop else 3) * bn // 16
    consumer, load = (160, 32) if t.consumers == 3 else (232, 40) if t.persistent else (240, 24)  # the walk: 40
    assert re.search(rf"setmaxnreg.inc.sync.aligned.u32\s+{consumer};", ptx)
    assert re.search(rf"setmaxnreg.dec.sync.aligned.u32\s+{load};", ptx)
    # the MMA turns go round the consumer warpgroups: each syncs its own barrier, arrives at the next's
    syncs, arrives = re.findall(r"bar.sync\s+(\d+), 256;", ptx), re.findall(r"bar.arrive\s+(\d+), 256;", ptx)
    assert len(set(arrives)) == t.consumers and set(arrives) <= set(syncs), (syncs, arrives)  # (+ d512's q_dead)


def _attrs(text: str, op: str) -> list[dict[str, str]]:
    """The attributes of each ``fa4.<op>`` without operands in ``text``, in order (any attribute order)."""
    ops = re.finditer(rf'"fa4\.{op}"\(\) \{{([^}}]*)\}}', text)
    return [dict(re.findall(r'(\w+) = "?(\w+)"?', m.group(1))) for m in ops]


def test_kernel_declares_the_layout_barriers_and_regions():
    for kwargs in (dict(), dict(head_dim=256, causal=True), dict(head_dim=512)):
        config = AttentionConfig(target="sm_90a", **kwargs)
        text = attention.build(config).mlir
        barriers = [(a["sym_name"], int(a["num_barriers"]), int(a["arrive_count"]))
                    for a in _attrs(text, "mbarrier_alloc")]
        layout = hopper_attention_layout(config)
        assert barriers == [(b.name, len(b.counts), b.counts[0]) for b in layout.barriers]
        regions = {a["sym_name"]: int(a["bytes"]) for a in _attrs(text, "smem_region")}
        assert regions == {r.name: r.bytes for r in layout.regions if r.alias_of is None and r.name != "mbarriers"}
        assert kernel_layout(config) == layout


def test_tiles_tensor_maps_and_grid():
    assert {d: AttentionConfig(target="sm_90a", head_dim=d).hopper.bn for d in (64, 96, 128, 192, 256, 512)} \
        == SM90_KV_TILE
    # head dim 96 is the 128 tile (two 64-column blocks, the second half zero-filled by TMA); 192 three blocks
    assert [AttentionConfig(target="sm_90a", head_dim=d).hopper.head_dim for d in (96, 192)] == [128, 192]
    source = attention.build(AttentionConfig(target="sm_90a", head_dim=256))
    maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
    assert maps["q"].box == maps["o"].box == (64, 1, 64, 1)  # one warpgroup's 64 rows per 64-column block
    assert maps["k"].box == maps["v"].box == (64, 1, 80, 1) and maps["k"].swizzle == "128B"
    assert source.config["block_n"] == 80
    config = AttentionConfig(target="sm_90a", group=4)
    assert attention.launch_geometry(config, 2, 1000, 32, 1000) == (8, 32, 2)  # one head per CTA
    assert attention.launch_geometry(config, 1, 129, 4, 5) == (2, 4, 1)
    # head dim 512: 64-row CTAs (both warpgroups share the rows), 32-key K/V tiles
    config = AttentionConfig(target="sm_90a", head_dim=512, group=4)
    source = attention.build(config)
    maps = {p.name: p.tensor_map for p in source.params if p.tensor_map}
    assert maps["q"].box == maps["o"].box == (64, 1, 64, 1) and maps["k"].box == maps["v"].box == (64, 1, 32, 1)
    assert (config.hopper.bm, config.hopper.bn, config.hopper.split_o, config.cta_positions) == (64, 32, True, 64)
    assert attention.launch_geometry(config, 2, 1000, 32, 1000) == (16, 32, 2)
    assert "ceil(Sq / 64)" in source.grid
    # persistent: one CTA per resident slot (at most one per tile) walks the tiles; the batch is an argument
    config = AttentionConfig(target="sm_90a", persistent=True)
    assert attention.launch_geometry(config, 2, 1000, 32, 1000, 132) == (132, 1, 1)
    assert attention.launch_geometry(config, 1, 100, 1, 5, 132) == (1, 1, 1)
    assert attention.walk_arguments(config, 3) == {"batch": 3}
    assert attention.walk_arguments(AttentionConfig(target="sm_90a"), 3) == {}
    source = attention.build(config)
    names = [p.name for p in source.params]
    assert names[names.index("num_heads") + 1:names.index("num_heads") + 3] == ["group", "batch"]
    assert "batch" not in [p.name for p in attention.build(AttentionConfig(target="sm_90a")).params]
    assert source.grid.startswith("(min(ceil(Sq / 128) * H * B, resident CTAs), 1, 1)") and source.config["persistent"]
    with pytest.raises(LaunchError, match=r"attention: a persistent kernel's launch needs the GPU's resident CTAs "
                                          r"\(Kernel.resident_ctas\), which must be an int >= 1, got 0"):
        attention.launch_geometry(config, 1, 100, 1, 5)
    with pytest.raises(LaunchError, match=r"attention: query tiles x heads x batch must be < 2\^31 for the "
                                          r"persistent kernel, got 2 x 65536 x 16384"):
        attention.launch_geometry(config, 16384, 129, 65536, 5, 132)


def test_the_group_is_a_launch_argument():
    """sm_90a: the i32 ``group`` after ``num_heads``, K/V head = head / group once per CTA; configs that
    differ only in group are one kernel (one artifact key, the manifest's config says "runtime"). sm_100a
    compiles the group in (a fused GQA tile's shape depends on it): no such parameter, a key per group."""
    from fa4_mlir.kernels.attention.abi import params
    from fa4_mlir.runtime.artifacts import ArtifactKey

    source = attention.build(AttentionConfig(target="sm_90a", group=4))
    names = [p.name for p in source.params]
    assert names[names.index("num_heads") + 1] == "group" and source.params[names.index("group")].kind == "i32"
    assert source.config["group"] == "runtime"
    assert "%kvh = arith.divui %head, %group" in source.mlir
    configs = [AttentionConfig(target="sm_90a", head_dim=d, causal=True, dtype="fp16", group=g)
               for d in (64, 512) for g in (1, 3, 8)]
    assert {c.canonical() for c in configs} == {AttentionConfig(target="sm_90a", head_dim=d, causal=True, dtype="fp16")
                                               for d in (64, 512)}
    assert len({ArtifactKey.for_config("attention", c) for c in configs}) == 2
    box = source.params[0].tensor_map
    assert "group" not in [p.name for p in params(box, box, box)]  # the sm_100a kernels' parameters
    sm100 = [AttentionConfig(group=g) for g in (1, 4)]
    assert not sm100[1].runtime_group and sm100[1].canonical() is sm100[1]
    assert len({ArtifactKey.for_config("attention", c) for c in sm100}) == 2


def test_gqa_arguments_and_their_errors():
    sm90, sm100 = AttentionConfig(target="sm_90a"), AttentionConfig(group=4)
    assert attention.gqa_arguments(sm90, 8, 2) == {"group": 4} and attention.gqa_arguments(sm90, 8, 8) == {"group": 1}
    assert attention.gqa_arguments(sm100, 8, 2) == {}  # compiled in
    for heads, kv_heads, got in ((8, 3, "3"), (8, 0, "0"), (4, 8, "8"), (8, True, "True"), (8, 2.0, "2.0")):
        with pytest.raises(LaunchError, match=rf"attention: kv_heads must be an int >= 1 that divides heads "
                                              rf"\({heads}\), got {got}$"):
            attention.gqa_arguments(sm90, heads, kv_heads)
    with pytest.raises(LaunchError, match=r"attention: heads / kv_heads must be the config's group \(4, compiled "
                                          r"into the sm_100a kernel\), got 8 / 4 = 2"):
        attention.gqa_arguments(sm100, 8, 4)


def test_causal_ctas_take_the_longest_rows_first():
    causal = attention.build(AttentionConfig(target="sm_90a", causal=True)).mlir
    heads = attention.build(AttentionConfig(target="sm_90a", causal=True, causal_order="heads")).mlir
    plain = attention.build(AttentionConfig(target="sm_90a")).mlir
    assert "%qt = arith.subi %qlast, %qx" in heads and "nctaid.x" not in plain
    # sections: the CTA's linear slot in the grid; two waves of 132 CTAs over the query tiles, at most 8 heads
    # (a power of two by selects), from 32 query tiles a head (else one head a section)
    assert re.search(r"%slot = arith.addi %\w+, %\w+", causal) and "%qlast" not in causal
    assert re.search(r"arith.divui %c264_i32, %nqx .*\n.*\n.*arith.minui %\w+, %c8_i32 ", causal)
    assert len(re.findall(r"arith.select %\w+, %c[248]_i32_\d+, ", causal)) == 3
    assert re.search(r"arith.cmpi uge, %nqx, %c32_i32 ", causal)
    assert re.search(r"%section = arith.minui %\w+, %hb", causal)
    for mlir in (causal, heads):
        assert "%kv_end = arith.minsi %seq_k, %q_end" in mlir
    # head dim 64 keeps each head's order (SM90_SECTION_MIN_HEAD_DIM)
    d64 = attention.build(AttentionConfig(target="sm_90a", head_dim=64, causal=True)).mlir
    assert "%qt = arith.subi %qlast, %qx" in d64 and "%section" not in d64


@pytest.mark.parametrize("q_tiles, heads_batch, section", [(1, 1, 1), (5, 7, 3), (8, 12, 12), (3, 10, 4), (9, 4, 1)])
def test_causal_sections_take_every_tile_once_longest_first(q_tiles, heads_batch, section):
    """``section_order``, the code the kernel builds its slot's tile with (here on ints): a bijection of the
    slots onto the (query tile, head) pairs, sections of ``section`` heads in turn (a shorter last one), and
    within a section no tile before a longer one."""
    tiles = [section_order(slot, q_tiles, heads_batch, section) for slot in range(q_tiles * heads_batch)]
    assert sorted(tiles) == [(qt, hb) for qt in range(q_tiles) for hb in range(heads_batch)]
    sections = [hb // section for _, hb in tiles]
    assert sections == sorted(sections)
    for sec in set(sections):
        levels = [qt for (qt, _), s in zip(tiles, sections) if s == sec]
        assert levels == sorted(levels, reverse=True)
    if section == 1:  # each head's tiles in turn, longest first: the "heads" order
        assert tiles == [(q_tiles - 1 - x, hb) for hb in range(heads_batch) for x in range(q_tiles)]


@pytest.mark.parametrize("kwargs, message", [
    (dict(head_dim=80), r"AttentionConfig.head_dim must be one of 64, 96, 128, 192, 256, 512 on sm_90a, got 80"),
    (dict(num_q=1), r"AttentionConfig.num_q must be 2, or 3 at head dim 64, on sm_90a \(consumer warpgroups of 64 "
                    r"rows; three fit 160 registers a thread\), got 1"),
    (dict(num_q=3), r"AttentionConfig.num_q must be 2, or 3 at head dim 64, .* got 3"),
    (dict(num_q="3", head_dim=64), r"AttentionConfig.num_q must be 2, or 3 at head dim 64, .* got '3'"),
    (dict(num_q=3, head_dim=64, block_n=144), r"AttentionConfig.block_n must be <= 128 with num_q 3 on sm_90a \(160 "
                                              r"registers a consumer thread: larger S tiles spill\), got 144"),
    (dict(head_dim=512, persistent=True), r"AttentionConfig.persistent must be False at head dim 512 \(both warpgroups "
                                          r"share one 64-row tile there\), got True"),
    (dict(persistent=1), r"AttentionConfig.persistent must be False unless target is sm_90a .*, got 1"),
    (dict(exp2_emulation=8), r"AttentionConfig.exp2_emulation must be 0 on sm_90a unless dtype is fp8_e4m3 \(only the fp8 "
                             r"kernel has a polynomial exp2 there\), got 8"),
    (dict(block_n=72), r"AttentionConfig.block_n must be 0 \(the head dim's default\) or a multiple of 16 in "
                       r"\[64, 256\] on sm_90a, got 72"),
    (dict(block_n=272), r"AttentionConfig.block_n must be 0 .* got 272"),
    (dict(head_dim=512, block_n=16), r"AttentionConfig.block_n must be 0 \(the head dim's default\) or a multiple "
                                     r"of 16 in \[32, 256\] on sm_90a, got 16"),
    (dict(causal_order="heads"), r"AttentionConfig.causal_order must be 'sections' \(the longest rows first across "
                                 r"the heads of each section\), or 'heads' \(each head's rows in turn\) for a causal "
                                 r"sm_90a kernel that is not persistent, paged or varlen, got 'heads'"),
    (dict(causal_order="heads", causal=True, persistent=True), r"AttentionConfig.causal_order must be .*, got 'heads'"),
    (dict(causal_order="rows", causal=True), r"AttentionConfig.causal_order must be .*, got 'rows'"),
    (dict(kv_stages=1), r"AttentionConfig.kv_stages must be 0 \(the default, 2\) or in \[2, 8\] on sm_90a \(K and V "
                        r"buffers each\), got 1"),
    (dict(kv_stages=9), r"AttentionConfig.kv_stages must be 0 \(the default, 2\) or in \[2, 8\] .* got 9"),
    (dict(kv_stages=2.0), r"AttentionConfig.kv_stages must be .* got 2.0"),
    (dict(single_kv_loop=1), r"AttentionConfig.single_kv_loop must be False unless target is sm_90a \(its "
                             r"consumers' K/V loops\), got 1"),
    (dict(kv_stages=3, varlen=True), r"AttentionConfig.kv_stages must be 0 with varlen or a paged K/V cache \(the "
                                     r"serving kernels keep their stages\), got 3"),
    (dict(single_kv_loop=True, page_size=64), r"AttentionConfig.single_kv_loop must be False with varlen or a paged "
                                              r"K/V cache \(the serving kernels keep their loops\), got True"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(target="sm_90a", **kwargs)


def test_unsupported_tile_is_named():
    config = AttentionConfig(target="sm_90a", head_dim=256, block_n=128)
    with pytest.raises(ConfigError, match=r"AttentionConfig sm_90a bf16 d256 2Q: shared memory must be <= 232448 "
                                          r"bytes, got 328704"):
        config.validate()
    # head dim 512: Q (64 KiB) and two K and two V stages of 48 keys (48 KiB each) do not fit
    with pytest.raises(ConfigError, match=r"AttentionConfig sm_90a bf16 d512 2Q: shared memory must be <= 232448 "
                                          r"bytes, got 263168"):
        AttentionConfig(target="sm_90a", head_dim=512, block_n=48).validate()
    # persistent: O gets a region of its own, which head dims 192 and 256 have no room for
    with pytest.raises(ConfigError, match=r"AttentionConfig sm_90a bf16 d256 2Q persistent: shared memory must be "
                                          r"<= 232448 bytes, got 295936"):
        AttentionConfig(target="sm_90a", head_dim=256, persistent=True).validate()
    # K/V stages: shared memory bounds them (head dim 128, 128 keys: 65536 bytes a K and V stage)
    with pytest.raises(ConfigError, match=r"AttentionConfig sm_90a bf16 d128 2Q 4 K/V stages: shared memory must be "
                                          r"<= 232448 bytes, got 295936"):
        AttentionConfig(target="sm_90a", head_dim=128, kv_stages=4).validate()
    with pytest.raises(ConfigError, match=r"AttentionConfig.fa4 is the sm_100a layout; target must be sm_100a"):
        config.fa4
    with pytest.raises(ConfigError, match=r"AttentionConfig.hopper is the sm_90a tile; target must be sm_90a"):
        AttentionConfig().hopper


# (dtype, causal, batch, seq_q, seq_k, heads, kv heads): ragged lengths (64-row CTAs, 32-key tiles),
# several CTAs and K/V tiles (both rings wrap), GQA, a single row and key.
EMULATED_512 = [("bf16", False, 1, 70, 45, 1, 1), ("bf16", True, 1, 130, 150, 2, 2), ("fp16", True, 1, 77, 100, 1, 1),
                ("fp16", False, 2, 33, 161, 4, 1), ("bf16", True, 1, 1, 1, 1, 1)]


# CI: all but the 33 x 161 batch of four heads (a third of the list's time; the H100 runs head dim 512);
# FA4_EMU_FULL_MATRIX=1: all
@pytest.mark.parametrize("dtype, causal, b, sq, sk, h, hk", ci_sample.in_ci(EMULATED_512, [0, 1, 2, 4]))
def test_head_dim_512_matches_f64_reference_in_the_emulator(dtype, causal, b, sq, sk, h, hk):
    """O (both warpgroups' column halves, every row written) and the LSE against float64, within twice
    the error of the same computation at the kernel's precision (``fa4_mlir.reference``)."""
    from fa4_mlir import reference

    config = AttentionConfig(target="sm_90a", head_dim=512, causal=causal, dtype=dtype, group=h // hk)
    rng = np.random.default_rng(sq * sk)
    q = reference.random_bits(rng, (b, sq, h, 512), dtype, 1.0)
    k, v = (reference.random_bits(rng, (b, sk, hk, 512), dtype, 1.0) for _ in range(2))
    check_in_emulator(config, q, k, v, 0.05)


def test_one_kernel_runs_two_groups_in_the_emulator():
    """The group is a launch argument: the kernel loaded once (one artifact for every group) runs H = 8
    query heads over 8 K/V heads (group 1) and over 2 (group 4: heads 0-3 read K/V head 0, 4-7 head 1),
    both against float64."""
    from fa4_mlir import reference, runtime

    configs = [AttentionConfig(target="sm_90a", head_dim=64, causal=True, group=g) for g in (1, 4)]
    kernel = runtime.load("attention", configs[0], device="emulator")
    assert runtime.load("attention", configs[1], device="emulator") is kernel
    rng = np.random.default_rng(8)
    q = reference.random_bits(rng, (1, 70, 8, 64), "bf16", 1.0)
    for config in configs:
        hk = 8 // config.group
        k, v = (reference.random_bits(rng, (1, 100, hk, 64), "bf16", 1.0) for _ in range(2))
        check_in_emulator(config, q, k, v, 0.125)


# (dtype, head_dim, causal, batch, seq_q, seq_k, heads, kv heads): head dims 96 (the 128 tile on TMA's
# zero-filled columns) and 192 (three column blocks, 112-key tiles), ragged lengths, GQA
EMULATED_96_192 = [("bf16", 96, False, 1, 130, 200, 2, 1), ("fp16", 96, True, 1, 70, 300, 1, 1),
                   ("fp16", 192, False, 1, 70, 250, 1, 1), ("bf16", 192, True, 2, 129, 130, 2, 2)]


@pytest.mark.parametrize("dtype, d, causal, b, sq, sk, h, hk", EMULATED_96_192)
def test_head_dims_96_and_192_match_f64_reference_in_the_emulator(dtype, d, causal, b, sq, sk, h, hk):
    """O (every element of the D columns written; none past them: O is exactly (B, Sq, H, D)) and the
    LSE against float64, within twice the error of the computation at the kernel's precision."""
    from fa4_mlir import reference

    config = AttentionConfig(target="sm_90a", head_dim=d, causal=causal, dtype=dtype, group=h // hk)
    assert config.hopper.head_dim == (128 if d == 96 else d)
    rng = np.random.default_rng(sq * sk + d)
    q = reference.random_bits(rng, (b, sq, h, d), dtype, 1.0)
    k, v = (reference.random_bits(rng, (b, sk, hk, d), dtype, 1.0) for _ in range(2))
    check_in_emulator(config, q, k, v, 1 / math.sqrt(d))


# (dtype, causal, batch, seq_q, seq_k, heads, kv heads): head dim 64 with three consumer warpgroups (num_q 3,
# 192-row CTAs): a partial second CTA, the MMA turns going round three warpgroups over several K/V tiles, GQA
EMULATED_NUM_Q3 = [("bf16", False, 1, 200, 300, 2, 1), ("fp16", True, 1, 250, 260, 1, 1)]


@pytest.mark.parametrize("dtype, causal, b, sq, sk, h, hk", EMULATED_NUM_Q3)
def test_three_consumer_warpgroups_match_f64_reference_in_the_emulator(dtype, causal, b, sq, sk, h, hk):
    from fa4_mlir import reference

    config = AttentionConfig(target="sm_90a", head_dim=64, num_q=3, causal=causal, dtype=dtype, group=h // hk)
    assert (config.hopper.bm, config.hopper.consumers, config.cta_positions) == (192, 3, 192)
    rng = np.random.default_rng(sq * sk + 3)
    q = reference.random_bits(rng, (b, sq, h, 64), dtype, 1.0)
    k, v = (reference.random_bits(rng, (b, sk, hk, 64), dtype, 1.0) for _ in range(2))
    check_in_emulator(config, q, k, v, 0.125)


# (dtype, head_dim, causal, batch, seq_q, seq_k, heads, kv heads, other fields): the persistent tile walk (two CTAs
# in the emulator, each walking several tiles: the Q ring, the K/V rings and the O stores going on across tiles),
# ragged lengths, batches, GQA, causal (the longest rows first); the op's causal walk at head dim 64 (one K/V
# loop, 64 keys a tile) with three K/V stages
EMULATED_PERSISTENT = [("bf16", 128, False, 2, 130, 200, 2, 1, {}), ("fp16", 64, True, 1, 300, 300, 2, 2, {}),
                       ("bf16", 96, True, 2, 129, 77, 1, 1, {}),
                       ("bf16", 64, True, 1, 200, 260, 2, 1, dict(block_n=64, single_kv_loop=True, kv_stages=3))]


@pytest.mark.parametrize("dtype, d, causal, b, sq, sk, h, hk, extra", EMULATED_PERSISTENT)
def test_the_persistent_tile_walk_matches_f64_reference_in_the_emulator(dtype, d, causal, b, sq, sk, h, hk, extra):
    from fa4_mlir import reference
    from fa4_mlir.kernels.attention import launch_geometry

    config = AttentionConfig(target="sm_90a", head_dim=d, causal=causal, dtype=dtype, group=h // hk, persistent=True,
                             **extra)
    tiles = -(-sq // config.cta_positions) * h * b
    assert launch_geometry(config, b, sq, h, sk, 2) == (2, 1, 1) and tiles >= 4  # each CTA walks >= 2 tiles
    rng = np.random.default_rng(sq * sk + d + 7)
    q = reference.random_bits(rng, (b, sq, h, d), dtype, 1.0)
    k, v = (reference.random_bits(rng, (b, sk, hk, d), dtype, 1.0) for _ in range(2))
    check_in_emulator(config, q, k, v, 1 / math.sqrt(d))


# (dtype, head_dim, causal, seq_q, seq_k): many K/V tiles, O rescaled by each tile's factors before the next P V
# (head dim 256: BN 80, rescale_before_pv) or where a warp's maxima grew (512: BN 32, the lazy rescale)
RISING = [("bf16", 256, False, 64, 1600), ("fp16", 256, True, 1000, 1000), ("bf16", 512, False, 64, 640)]


# CI: the non-causal cases (the causal one takes twice as long; the H100 runs both); FA4_EMU_FULL_MATRIX=1: all
@pytest.mark.parametrize("dtype, d, causal, sq, sk", ci_sample.in_ci(RISING, [0, 2]))
def test_rising_maxima_rescale_o_in_the_emulator(dtype, d, causal, sq, sk):
    """Many key tiles, the last 160 keys scaled x3: a warp's 16 rows see a larger maximum in some tiles
    (O is rescaled: before the next P V at head dim 256, after the softmax where the warp votes so at 512) and
    in none in others (512: the warp skips the rescale); O and the LSE against float64 within twice the
    error of the computation at the kernel's precision, as every attention test."""
    from fa4_mlir import reference

    config = AttentionConfig(target="sm_90a", head_dim=d, causal=causal, dtype=dtype)
    assert (config.rescale_before_pv, config.lazy_rescale) == (d == 256, d == 512)
    rng = np.random.default_rng(sk)
    ramp = np.where(np.arange(sk) >= sk - 160, 3.0, 1.0).astype(np.float32)[None, :, None, None]
    q = reference.random_bits(rng, (1, sq, 1, d), dtype, 1.0)
    k = reference.from_f32(rng.standard_normal((1, sk, 1, d), dtype=np.float32) * ramp, dtype)
    v = reference.random_bits(rng, (1, sk, 1, d), dtype, 1.0)
    scale = 1 / math.sqrt(d)
    qf, kf = (reference.to_f64(t, dtype) for t in (q, k))
    logits = np.einsum("bqhd,bkhd->bhqk", qf, kf) * scale * math.log2(math.e)
    if causal:
        logits[..., np.triu(np.ones((sq, sk), bool), 1)] = -np.inf
    tiles = [logits[..., j:j + config.hopper.bn].max(-1) for j in range(0, sk, config.hopper.bn)]
    growth = np.diff(np.maximum.accumulate(np.stack(tiles), axis=0), axis=0)  # (tiles - 1, B, H, Sq)
    rows = growth.shape[-1] // 16 * 16
    warps = (growth[..., :rows].reshape(*growth.shape[:-1], -1, 16) > 0).any(-1)  # 16 rows a warp
    assert warps.any() and not warps.all()  # both branches of the warps' vote
    check_in_emulator(config, q, k, v, scale)


def _loop_text(mlir: str, induction: str) -> str:
    """The text of the ``scf.for`` whose induction variable is ``induction``, to its closing brace."""
    lines = mlir.split("\n")
    start = next(i for i, line in enumerate(lines) if f"scf.for %{induction} = " in line)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(" " * indent + "}"))
    return "\n".join(lines[start:end + 1])


@pytest.mark.parametrize("kwargs", [dict(), dict(causal=True), dict(head_dim=64, num_q=3, causal=True)])
def test_tiles_no_row_masks_run_in_a_loop_without_the_mask(kwargs):
    """Each consumer warpgroup takes K/V tiles 1 .. n-1 in two loops: up to ``cW_unmasked`` (the first tile a
    row of the warpgroup masks, from 1 to n_tiles) with no select of the mask, from it to n_tiles with the
    mask's BN / 2 selects a thread."""
    config = AttentionConfig(target="sm_90a", **kwargs)
    mlir = attention.build(config).mlir
    for w in range(config.hopper.consumers):
        first, rest = _loop_text(mlir, f"c{w}_j"), _loop_text(mlir, f"c{w}_jm")
        assert re.search(rf"scf.for %c{w}_j = %c1_i32\w* to %c{w}_unmasked ", first)
        assert re.search(rf"scf.for %c{w}_jm = %c{w}_unmasked to %n_tiles ", rest)
        assert first.count("arith.select") == 0
        assert rest.count("arith.select") == config.hopper.bn // 2
        assert re.search(rf"%c{w}_unmasked = arith.maxsi %\w+, %c1_i32", mlir)


# (dtype, head_dim, causal, batch, seq_q, seq_k, heads, kv heads): K/V tiles in both loops, several in the
# unmasked one (ragged keys: 530 = 4 tiles of 128 + 18; causal: the last CTA's rows 384.. see tiles 1 and 2
# unmasked, 3 masked), GQA
EMULATED_PEELED = [("bf16", 64, False, 1, 70, 530, 2, 1), ("fp16", 128, True, 1, 400, 400, 1, 1)]


@pytest.mark.parametrize("dtype, d, causal, b, sq, sk, h, hk", EMULATED_PEELED)
def test_the_unmasked_and_masked_loops_match_f64_reference_in_the_emulator(dtype, d, causal, b, sq, sk, h, hk):
    from fa4_mlir import reference

    config = AttentionConfig(target="sm_90a", head_dim=d, causal=causal, dtype=dtype, group=h // hk)
    rng = np.random.default_rng(sq * sk + d + 11)
    q = reference.random_bits(rng, (b, sq, h, d), dtype, 1.0)
    k, v = (reference.random_bits(rng, (b, sk, hk, d), dtype, 1.0) for _ in range(2))
    check_in_emulator(config, q, k, v, 1 / math.sqrt(d))


def test_the_persistent_consumers_store_no_o_and_release_q_from_every_thread():
    """In the tile walk the consumers write O to shared memory and hand it to the store warp (``op{w}``), which
    TMA-stores it and frees the region; they release Q from every thread. With a thread-0 TMA store and a lane-0 Q
    release in their tile loop, ptxas computed the K/V loop's wgmma descriptors in vector registers (620 SASS
    instructions a tile against 454 at head dim 128, and spills peeled; docs/PERF.md). The K/V tiles run in the
    unmasked and masked loops, as in the one-tile kernel."""
    config = AttentionConfig(target="sm_90a", persistent=True)
    mlir = attention.build(config).mlir
    roles = mlir.split('"fa4.warp_role"() ({')[1:]
    assert len(roles) == config.hopper.consumers + 2  # the consumers, the load warp, the store warp
    blocks = config.head_dim // 64
    for w in range(config.hopper.consumers):
        body = roles[w]
        assert "fa4.tma_store" not in body and f"scf.for %c{w}_jm = %c{w}_unmasked to %n_tiles " in body
        release = re.search(r'\n( *)"fa4.pipeline_consumer_release"\(%qp, ', body)
        assert release and "scf.if" not in body[:release.start()].rsplit("\n", 2)[-1]  # not under a lane test
        assert len(re.findall(rf'"fa4.pipeline_producer_commit"\(%op{w}, ', body)) == 1
        assert len(re.findall(rf'"fa4.pipeline_producer_acquire"\(%op{w}, ', body)) == 1
    store = roles[-1]
    assert store.count('"fa4.tma_store"(%o_map, ') == config.hopper.consumers * blocks
    for w in range(config.hopper.consumers):
        wait, release = (store.index(f'"fa4.pipeline_{op}"(%op{w}, ') for op in ("consumer_wait", "consumer_release"))
        assert wait < store.index(f'"fa4.tma_store"(%o_map, %o{w}, ') < store.index("fa4.tma_store_wait", wait) \
            < release


@pytest.mark.parametrize("d, causal, dtype", [(96, True, "bf16"), (128, True, "bf16"), (64, False, "bf16"),
                                               (128, False, "fp8_e4m3"), (64, False, "fp8_e4m3")])
def test_the_persistent_walk_assembles_without_spills(ctx, d, causal, dtype):
    """The tile walk's values are each role's own (``hopper.walk``): made before the roles' dispatch, they lived
    across it and ptxas spilled 20 bytes at head dims 96 and 128, causal; the load warp computing its own then
    spilled 4 at 64 under 24 registers (it holds 40: ``PAGED_REGISTERS``). fp8 spilled 44 bytes at 128 and 24 at 64
    before the store warp took O's store (8 and 4 with it at 24 load registers)."""
    from fa4_mlir.core.compiler import compile_kernel

    config = AttentionConfig(target="sm_90a", head_dim=d, causal=causal, dtype=dtype, persistent=True)
    m = compile_kernel(attention.build(config), stop="cubin", verify_protocol=False).manifest
    assert (m["spill_stores"], m["spill_loads"], m["wgmma_serialized"]) == (0, 0, False), m


@pytest.mark.parametrize("d, dtype", [(256, "bf16"), (256, "fp16"), (128, "bf16"), (192, "bf16")])
def test_head_dim_256_rescales_o_while_s_is_computed(d, dtype):
    """``rescale_before_pv`` (head dim 256): in each K/V loop step O's D / 2 values a thread are multiplied by the
    last tile's factors between the S = Q K' group and the P V group (while S is computed), and none after the
    softmax; elsewhere O's rescale follows the softmax (and no rescale sits between the groups)."""
    config = AttentionConfig(target="sm_90a", head_dim=d, dtype=dtype)
    assert config.rescale_before_pv == (d == 256) and not config.lazy_rescale
    # the serving kernels (varlen, paged) keep the lazy rescale at 256 (they spilled 4-8 bytes rescaling before)
    for serving in (dict(page_size=100), dict(page_size=64), dict(varlen=True)):
        other = AttentionConfig(target="sm_90a", head_dim=d, dtype=dtype, **serving)
        assert not other.rescale_before_pv and other.lazy_rescale == (d == 256)
    mlir = attention.build(config).mlir
    rescale = d // 2  # O's values a thread
    for loop in (_loop_text(mlir, "c0_j"), _loop_text(mlir, "c0_jm")):
        qk, between, after = re.split(r'"fa4.wgmma_commit"', loop)
        assert len(re.findall(r'"fa4.wgmma"\(', qk)) == d // 16  # S = Q K': a k16 step a 16 columns of Q
        assert len(re.findall(r'"fa4.wgmma"\(', between)) == config.hopper.bn // 16  # O += P V: 16 keys a step
        # after the softmax: each row's exponent offset and rescale factor (4), and O's rescale unless before
        assert between.count("arith.mulf") == (rescale if d == 256 else 0)
        assert after.count("arith.mulf") == 4 + (0 if d == 256 else rescale)
