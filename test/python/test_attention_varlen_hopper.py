"""The sm_90a attention over packed variable-length sequences (``AttentionConfig(target="sm_90a",
varlen=True)``, ``hopper_varlen``): every varlen config through the whole compiler (protocol verifier on,
ptxas -arch=sm_90a) with zero spills and the packed kernel's parameters; its numerics in the PTX emulator
over ragged batches (empty query and key sequences, single rows, Sq != Sk both ways, causal rows that see
no key, several CTAs and K/V ring wraps, GQA); the config rules of ``varlen``. The GPU runs are the
lead's (test/gpu)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import ci_sample
from built import artifact
from varlen_cases import SM90_EVERY, check_varlen_in_emulator, packed_batch, sampled

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import attention
from fa4_mlir.kernels.attention.abi import params
from fa4_mlir.layouts import hopper_attention_layout

VARLEN = [dict(dtype=dt, head_dim=hd, causal=ca)
          for dt, hd, ca in itertools.product(("bf16", "fp16"), (64, 96, 128, 192, 256), (False, True))]
VARLEN += [dict(head_dim=64, num_q=3), dict(head_dim=64, num_q=3, causal=True, dtype="fp16")]


def _ids(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items())


# CI compiles each value of the sweep once (sm_90a: the H100 session builds the op's artifacts, and CI's
# emulator tests compile more); FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(VARLEN, pairs=()), ids=_ids)
def test_every_varlen_config_assembles_without_spills(ctx, kwargs):
    from fa4_mlir.core.layout_ir import place_layout

    config = AttentionConfig(target="sm_90a", varlen=True, **kwargs)
    source = attention.build(config)
    result = artifact(config)  # the protocol verifier runs beside ptxas; the emulator tests load this build
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["wgmma_serialized"] is False, m  # ptxas C7511: the wgmmas serialised
    assert m["threads"][0] == 128 * (config.hopper.consumers + 1)
    _, placed = place_layout(hopper_attention_layout(config), "sm_90a")
    assert m["smem_bytes"] == placed.smem_bytes  # varlen adds no shared memory
    names = [p.name for p in source.params]
    assert names[-5:] == ["cu_seqlens_q", "cu_seqlens_k", "total_q", "batch", "o_rows"]  # batch: the schedule's
    assert names == [p.name for p in params(None, None, None, runtime_group=True, varlen=True, schedule=True)]
    ptx = result.ptx
    entry = re.search(r"\.entry attention\((.*?)\)", ptx, re.S).group(1)
    kinds = re.findall(r"\.param (\.align 64 \.b8|\.u64 \.ptr|\.u32|\.f32)", entry)
    assert kinds[-5:] == [".u64 .ptr", ".u64 .ptr", ".u32", ".u32", ".u64 .ptr"] and len(kinds) == len(names)
    # every role scans the sequences' tile counts (varlen_schedule): a lane reads cu_seqlens[i] and [i + 1]
    # of both sums (read-only: ld.global.nc), the warp shuffles and votes; the rows of a tile past its
    # sequence's end are stored per thread (16-bit pairs), the LSE per row
    assert len(re.findall(r"ld\.global\.nc\.(?:u32|b32)", ptx)) >= 4
    assert re.search(r"shfl\.sync\.up\.b32", ptx) and re.search(r"vote\.sync\.ballot\.b32", ptx)
    assert re.search(r"popc\.b32", ptx)
    assert re.search(r"st\.global\.b32", ptx)
    assert "cp.async.bulk.tensor.4d.global.shared::cta" in ptx  # the TMA store of tiles inside their sequence


def test_dense_kernel_keeps_its_parameters_and_top_left_diagonal():
    dense, packed = (attention.build(AttentionConfig(target="sm_90a", causal=True, varlen=v)) for v in (False, True))
    assert [p.name for p in dense.params][-1] == "write_lse" and "cu_seqlens_q" not in dense.mlir
    assert "%kv_end = arith.minsi %seq_k, %q_end" in dense.mlir  # top-left, unchanged
    assert "%diagonal = " in packed.mlir and "= scf.while" in packed.mlir  # bottom-right per scheduled sequence
    assert re.search(r"%diagonal = arith\.addi %\w+, %c1", packed.mlir) and "%sched:" in packed.mlir


# (dtype, head dim, causal, num_q, query lengths, key lengths, heads, kv heads). Key tiles: 192 keys at
# head dim 64, 128 at 96/128, 112 at 192, 80 at 256 (two-stage rings: three tiles wrap them); CTAs of
# 128 rows (num_q 3: 192). Each case names what it covers beyond its config.
EMULATED = [
    ("bf16", 64, False, 2, [1, 150, 0, 33], [1, 40, 7, 200], 4, 1),  # a single row and key, an empty Q, GQA 4
    ("fp16", 64, True, 2, [200, 1, 17], [420, 1, 40], 4, 1),  # Sq < Sk causal, two CTAs, three key tiles
    ("bf16", 64, True, 2, [130, 5, 64], [40, 0, 64], 8, 1),  # Sq > Sk causal: rows see no key; empty K; GQA 8
    ("fp16", 64, False, 2, [0, 3, 0], [5, 0, 9], 1, 1),  # rows without a key tile (O = 0, LSE = +inf)
    ("bf16", 64, False, 2, [300, 10], [400, 10], 1, 1),  # three CTAs, ring wrap
    ("bf16", 64, True, 3, [250, 7], [100, 7], 1, 1),  # num_q 3, Sq > Sk causal
    ("fp16", 64, False, 3, [200, 0, 64], [64, 3, 250], 4, 1),  # num_q 3, GQA
    ("bf16", 96, False, 2, [150, 3], [0, 260], 2, 2),  # 150 rows, no key: two keyless CTAs
    ("fp16", 96, True, 2, [100, 1], [70, 1], 4, 1),  # causal Sq > Sk, GQA 4
    ("bf16", 96, True, 2, [1, 65], [129, 65], 1, 1),  # one row sees all 129 keys; equal lengths
    ("bf16", 96, False, 2, [33, 77, 2], [1, 200, 9], 8, 1),  # GQA 8, a single key
    ("bf16", 128, False, 2, [70, 0, 130], [100, 5, 1], 2, 1),
    ("bf16", 128, True, 2, [70, 0, 130, 5], [20, 5, 1, 0], 2, 1),  # causal: Sq > Sk, Sk = 0 and 1
    ("fp16", 128, True, 2, [129, 64], [300, 64], 8, 1),  # a row past one CTA, ring wrap, GQA 8
    ("fp16", 128, False, 2, [1, 1, 1], [1, 2, 3], 4, 1),  # single rows
    ("fp16", 128, True, 2, [128, 128], [128, 128], 4, 1),  # equal, whole tiles: the TMA store only
    ("fp16", 192, True, 2, [100, 40], [100, 200], 1, 1),
    ("bf16", 192, False, 2, [140, 0], [250, 3], 4, 1),  # three key tiles, GQA 4
    ("bf16", 192, True, 2, [200, 3], [50, 0], 1, 1),  # causal Sq > Sk over two CTAs, empty K
    ("fp16", 192, False, 2, [64, 128, 1], [112, 113, 1], 1, 1),  # lengths at the tile edges
    ("bf16", 256, True, 2, [65, 129], [64, 300], 2, 1),  # four key tiles
    ("fp16", 256, False, 2, [100, 1, 0], [1, 100, 30], 8, 1),  # GQA 8
    ("fp16", 256, True, 2, [150], [20], 1, 1),  # 130 rows that see no key, one CTA without a key tile
    ("bf16", 256, False, 2, [64, 64], [64, 64], 1, 1),  # whole warpgroup tiles
]


@pytest.mark.parametrize("dtype, d, causal, num_q, lengths_q, lengths_k, h, hk",
                         sampled(EMULATED, every=SM90_EVERY),
                         ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}-q{c[3]}-{i}"
                              for i, c in enumerate(EMULATED)])
def test_packed_batches_match_f64_reference_in_the_emulator(dtype, d, causal, num_q, lengths_q, lengths_k, h, hk):
    """O (every row written, rows that see no key exactly 0) and the LSE (+inf there) against float64,
    within twice the error of the computation at the kernel's precision (``varlen_cases``)."""
    config = AttentionConfig(target="sm_90a", dtype=dtype, head_dim=d, causal=causal, num_q=num_q, varlen=True)
    rng = np.random.default_rng(len(lengths_q) * 1000 + d)
    q, k, v, cu_q, cu_k = packed_batch(rng, lengths_q, lengths_k, h, hk, d, dtype)
    check_varlen_in_emulator(config, q, k, v, cu_q, cu_k, d ** -0.5)


_VARLEN_RULE = (r"AttentionConfig.varlen must be False with fp8_e4m3, persistent, or head dim 256/512 on sm_100a "
                r"or 512 on sm_90a \(packed variable-length sequences are built for the 16-bit one-tile kernels\), "
                r"got True")


@pytest.mark.parametrize("kwargs, message", [
    (dict(varlen=1), r"AttentionConfig.varlen must be True or False, got 1"),
    (dict(varlen=True, dtype="fp8_e4m3"), _VARLEN_RULE),
    (dict(varlen=True, persistent=True), _VARLEN_RULE),
    (dict(varlen=True, head_dim=512), _VARLEN_RULE),
    (dict(varlen=True, target="sm_100a", head_dim=256), _VARLEN_RULE),
    (dict(varlen=True, target="sm_100a", head_dim=512), _VARLEN_RULE),
])
def test_varlen_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(**{"target": "sm_90a", **kwargs})


def test_varlen_arguments_only_for_packed_kernels():
    cu = np.array([0, 3], np.int32)
    dense = AttentionConfig(target="sm_90a")
    assert attention.varlen_arguments(dense, cu, cu, 3, None, 1) == {}
    packed = AttentionConfig(target="sm_90a", varlen=True)
    assert attention.varlen_arguments(packed, cu, cu, 3, "o", 1) == {"cu_seqlens_q": cu, "cu_seqlens_k": cu,
                                                                      "total_q": 3, "batch": 1, "o_rows": "o"}
    paged = AttentionConfig(target="sm_90a", varlen=True, page_size=64)  # seqused_k gives the keys
    assert attention.varlen_arguments(paged, cu, None, 3, "o", 2) == {"cu_seqlens_q": cu, "total_q": 3, "batch": 2,
                                                                       "o_rows": "o"}


def test_the_emulator_launch_refuses_a_packed_array_it_would_copy():
    """``launch_varlen_attention`` views each packed array as a batch of one (the kernel writes O through the
    view): a non-contiguous array, which the view would copy (O lost), is an error before any launch."""
    from fa4_mlir.errors import LaunchError
    from fa4_mlir.tools.fa4_emu import launch_varlen_attention

    class NeverLaunched:
        def launch(self, *args, **kwargs):
            raise AssertionError("launched")

    config = AttentionConfig(target="sm_90a", head_dim=64, varlen=True)
    q = np.zeros((8, 2, 64), np.uint16)
    cu = np.array([0, 8], np.int32)
    with pytest.raises(LaunchError, match=r"a packed array must be C-contiguous \(the kernel writes O through a view "
                                          r"of it\), got strides \(512, 256, 2\); pass np.ascontiguousarray"):
        launch_varlen_attention(NeverLaunched(), config, q, q, q, np.zeros((8, 2, 128), np.uint16)[:, :, :64], None, 0.125,
                                cu, cu)


# The compacted schedule (varlen_schedule): many sequences, so the warp scan crosses rounds of 32; lengths at
# the tile edges (0, 1, BM - 1, BM, BM + 1 with BM = 128) and a longer one; empty sequences first and last;
# Sq != Sk both ways; one head (the emulator runs every slot's CTA).
_EDGES_Q = [0, 1, 127, 128, 129, 3, 0, 2, 300, 1]
_EDGES_K = [5, 1, 64, 130, 129, 0, 7, 2, 250, 1]
SCHEDULED = [
    ("bf16", False, _EDGES_Q * 7, _EDGES_K * 7),  # 70 sequences, three rounds of the scan
    ("fp16", True, _EDGES_Q[::-1] * 7, _EDGES_K * 7),  # causal: each sequence's longest rows first
    ("bf16", True, [2] + [1] * 39, [3] * 40),  # the slots are exactly the tiles (the host bound reached)
    ("fp16", False, [0] * 33 + [129], [1] * 33 + [200]),  # the only rows in the second round, past 33 empty ones
    # equal lengths (total_q = B max_seqlen_q): the tile without the scan (``_direct``); a sequence without keys
    ("bf16", False, [130] * 3, [70, 0, 300]),
    ("fp16", True, [256] * 2, [256, 300]),  # causal: last rows first, bottom-right against more keys
]


@pytest.mark.parametrize("dtype, causal, lengths_q, lengths_k",
                         sampled(SCHEDULED, every=SM90_EVERY),
                         ids=[f"{c[0]}-{'causal' if c[1] else 'full'}-b{len(c[2])}-{i}"
                              for i, c in enumerate(SCHEDULED)])
def test_the_compacted_schedule_covers_every_tile_once(dtype, causal, lengths_q, lengths_k):
    """Every row of every sequence written once, against float64 (``varlen_cases``: the poison must be gone,
    the race detector is on), with B up to 70 and the lengths at the tile edges."""
    config = AttentionConfig(target="sm_90a", dtype=dtype, head_dim=64, causal=causal, varlen=True)
    rng = np.random.default_rng(len(lengths_q))
    q, k, v, cu_q, cu_k = packed_batch(rng, lengths_q, lengths_k, 1, 1, 64, dtype)
    check_varlen_in_emulator(config, q, k, v, cu_q, cu_k, 0.125)


def test_the_grid_is_the_host_bound_and_each_slot_one_tile():
    """``varlen_geometry`` is min(ceil(total_q / BM) + B - 1, B ceil(max_seqlen_q / BM)) slots (here every one
    a tile: 40 sequences of one row),
    and slots run in batch order: a grid one slot short leaves the last sequence's row unwritten and
    writes every other one."""
    from fa4_mlir import reference, runtime
    from fa4_mlir.tools.fa4_emu import launch_varlen_attention

    config = AttentionConfig(target="sm_90a", head_dim=64, varlen=True)
    q, k, v, cu_q, cu_k = packed_batch(np.random.default_rng(7), [1] * 40, [2] * 40, 1, 1, 64, "bf16")

    class OneShort:  # launches the host's grid less its last slot
        def __init__(self, kernel):
            self.kernel, self.grid = kernel, None

        def launch(self, grid, args, **kwargs):
            self.grid = grid
            return self.kernel.launch((grid[0] - 1, *grid[1:]), args, **kwargs)

    short = OneShort(runtime.load("attention", config, device="emulator"))
    o = np.full(q.shape, reference.POISON["bf16"], np.uint16)
    launch_varlen_attention(short, config, q, k, v, o, None, 0.125, cu_q, cu_k)
    assert short.grid == (40, 1, 1) == attention.varlen_geometry(config, 40, 40, 1, 1, 2)
    assert (o[-1] == reference.POISON["bf16"]).all() and not (o[:-1] == reference.POISON["bf16"]).all(axis=(1, 2)).any()


def test_equal_lengths_find_their_tiles_without_the_scan():
    """total_q = B x max_seqlen_q: slot s is sequence s / T, tile s % T (T the tiles of max_seqlen_q rows), not
    the scan's. The two differ only where max_seqlen_q is below a real length, which the ops refuse; told 128
    for lengths 200 and 56 (total 256 = 2 x 128), the two slots are sequence 0's first tile and sequence 1's
    (the scan would give sequence 0's two tiles): sequence 0's rows past 128 stay unwritten, every other row
    is right, and nothing is read or written outside the arrays (the emulator checks every access)."""
    from fa4_mlir import reference, runtime
    from fa4_mlir.tools.fa4_emu import launch_varlen_attention

    config = AttentionConfig(target="sm_90a", head_dim=64, varlen=True)
    q, k, v, cu_q, cu_k = packed_batch(np.random.default_rng(5), [200, 56], [90, 140], 1, 1, 64, "bf16")

    class Told128:  # the launch as the host would make it for max_seqlen_q = 128
        def __init__(self, kernel):
            self.kernel = kernel

        def launch(self, grid, args, **kwargs):
            return self.kernel.launch(attention.varlen_geometry(config, 2, 256, 128, 1, 140),
                                      {**args, "seq_q": 128}, **kwargs)

    o = np.full(q.shape, reference.POISON["bf16"], np.uint16)
    launch_varlen_attention(Told128(runtime.load("attention", config, device="emulator")), config, q, k, v, o,
                            None, 0.125, cu_q, cu_k)
    unwritten = (o == reference.POISON["bf16"]).all(axis=(1, 2))
    assert unwritten[128:200].all() and not unwritten[:128].any() and not unwritten[200:].any()
    qf, kf, vf = (reference.to_f64(t, "bf16") for t in (q, k, v))
    ref, _ = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, False, 0.125)
    yard, _ = reference.varlen_attention(qf, kf, vf, cu_q, cu_k, False, 0.125, dtype="bf16")
    rows = np.r_[0:128, 200:256]
    result = reference.compare(o[rows], ref[rows], yard[rows], "bf16")
    assert result.ok and result.unwritten == 0, result.summary()


def test_a_batch_of_empty_sequences_writes_nothing():
    """All query sequences empty (the rows of q belong to none): every slot finds no tile, so no CTA waits on
    a barrier or writes O or the LSE (a kernel that hung would not return)."""
    from fa4_mlir import reference, runtime
    from fa4_mlir.tools.fa4_emu import launch_varlen_attention

    config = AttentionConfig(target="sm_90a", head_dim=64, causal=True, varlen=True)
    q, k, v, _, cu_k = packed_batch(np.random.default_rng(3), [8], [0, 5, 0, 4], 2, 1, 64, "bf16")
    cu_q = np.zeros(5, np.int32)
    o = np.full(q.shape, reference.POISON["bf16"], np.uint16)
    lse = np.full((2, 8), np.nan, np.float32)
    launch_varlen_attention(runtime.load("attention", config, device="emulator"), config, q, k, v, o, lse, 0.125,
                            cu_q, cu_k)
    assert (o == reference.POISON["bf16"]).all() and np.isnan(lse).all()
