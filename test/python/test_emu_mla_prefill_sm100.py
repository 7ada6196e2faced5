"""The MLA prefill form on sm_100a (``fa4_mlir.kernels.attention.mla_prefill``: the FA4 kernel with q/k
192 = 128 nope + 64 rope, v 128; issue 24): executed in the PTX emulator with the race checks on and
compared with the float64 ``reference.attention`` of the concatenations [q_nope | q_rope],
[k_nope | k_rope] and v (O within twice the error of the same computation with P rounded to the
kernel's dtype, the LSE within ``reference.lse_tolerance``): causal and not, odd lengths (100 x 257:
masked tails, a ragged last tile), GQA, bf16 and fp16. fp8 (e4m3 q_nope, k_nope, v with tensor-wise
scales, a bf16 or fp16 rope): against the float64 attention of the dequantized inputs, within twice
the error of ``reference.attention_fp8_yardstick`` (P times 2^FP8_P_BIAS rounded to e4m3 as the kernel
rounds it, the output rounded to bf16), the bound of the fp8 attention tests. The default run is the
CI budget's (one case a kernel); FA4_EMU_FULL_MATRIX=1 adds cases. Also: each kernel assembles without
spills and verifies, its shared memory and barriers are ``fa4-layout``'s for ``MLAConfig.fa4``, the
config's rules.
"""

from __future__ import annotations

import math
import os
import tempfile

import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.mla import MLAConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels.attention import mla_prefill

FULL = os.environ.get("FA4_EMU_FULL_MATRIX", "0") == "1"
NOPE, ROPE = 128, 64

# (dtype, causal, group, batch, seq_q, seq_k, heads)
CASES = [("bf16", False, 1, 1, 100, 257, 1), ("fp16", True, 2, 1, 130, 130, 2)]
EXTRA = [("bf16", True, 1, 2, 300, 257, 2), ("fp16", False, 2, 1, 1, 5, 4), ("bf16", False, 4, 1, 257, 100, 4),
         ("fp16", True, 1, 1, 513, 600, 1)]
ACTIVE = CASES + EXTRA if FULL else CASES
# fp8: (rope dtype, causal, group, batch, seq_q, seq_k, heads)
FP8_CASES = [("bf16", False, 1, 1, 100, 257, 1), ("fp16", True, 2, 1, 130, 200, 4), ("bf16", True, 1, 1, 257, 300, 1)]
FP8_EXTRA = [("bf16", False, 4, 2, 65, 513, 4), ("fp16", False, 1, 1, 1, 5, 2)]
FP8_ACTIVE = FP8_CASES + FP8_EXTRA if FULL else FP8_CASES
QS, KS, VS = 0.05, 0.4, 0.75  # tensor-wise dequantization scales of q_nope, k_nope, v
_compiled: dict = {}


def _kernel(dtype: str, causal: bool, group: int, rope: str = ""):
    """The emulated kernel, compiled once per session (ptxas and the protocol verifier run)."""
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.runtime import EmulatedKernel
    from fa4_mlir.runtime.artifacts import read_artifact

    key = (dtype, causal, group, rope)
    if key not in _compiled:
        config = MLAConfig(target="sm_100a", form="prefill", dtype=dtype, causal=causal, group=group, rope_dtype=rope)
        result = compile_kernel(mla_prefill.build(config))
        out = tempfile.TemporaryDirectory(prefix="fa4-mla-prefill-")  # removed when the session ends
        result.write(out.name)
        _compiled[key] = config, result.manifest, EmulatedKernel(read_artifact(out.name)), out
    return _compiled[key][:3]


def run_case(dtype, causal, group, b, sq, sk, h, seed):
    from fa4_mlir.tools.fa4_emu import launch_mla_prefill

    config, _, kernel = _kernel(dtype, causal, group)
    rng = np.random.default_rng(seed + sq + sk)
    hk = h // group
    q_nope, q_rope = (reference.random_bits(rng, (b, sq, h, d), dtype, 1.0) for d in (NOPE, ROPE))
    k_nope, k_rope, v = (reference.random_bits(rng, (b, sk, hk, d), dtype, 1.0) for d in (NOPE, ROPE, NOPE))
    o = np.full((b, sq, h, NOPE), reference.POISON[dtype], np.uint16)
    lse = np.full((b, h, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(NOPE + ROPE)
    launch_mla_prefill(kernel, config, q_nope, q_rope, k_nope, k_rope, v, o, lse, scale, seed=seed)
    f = lambda *xs: np.concatenate([reference.to_f64(x, dtype) for x in xs], axis=-1)  # noqa: E731
    q, k, vf = f(q_nope, q_rope), f(k_nope, k_rope), f(v)
    ref, ref_lse = reference.attention(q, k, vf, causal, scale)
    cmp = reference.compare(o, ref, reference.attention_yardstick(q, k, vf, causal, scale, dtype), dtype)
    return cmp, float(np.abs(lse - ref_lse).max()), reference.lse_tolerance(ref_lse)


def run_fp8_case(rope, causal, group, b, sq, sk, h, seed):
    """e4m3 q_nope, k_nope, v whose dequantized values are about N(0, 1), a rope in ``rope``; the kernel
    gets S in the e4m3 parts' units as the op gives it (q_scale k_scale in the softmax scale, q_rope
    divided by it), the reference the dequantized values (and that q_rope times q_scale k_scale)."""
    from fa4_mlir.kernels.attention.softmax import FP8_P_BIAS
    from fa4_mlir.tools.fa4_emu import launch_mla_prefill

    config, _, kernel = _kernel("fp8_e4m3", causal, group, rope)
    rng = np.random.default_rng(seed + sq + sk)
    hk = h // group
    e4m3 = lambda shape, scale: reference.e4m3_bits(rng.standard_normal(shape) / scale)  # noqa: E731
    q_nope, k_nope, v = e4m3((b, sq, h, NOPE), QS), e4m3((b, sk, hk, NOPE), KS), e4m3((b, sk, hk, NOPE), VS)
    q_rope = reference.round_to(rng.standard_normal((b, sq, h, ROPE)) / (QS * KS), rope)
    k_rope = reference.random_bits(rng, (b, sk, hk, ROPE), rope, 1.0)
    o = np.full((b, sq, h, NOPE), reference.POISON["bf16"], np.uint16)
    lse = np.full((b, h, sq), np.nan, np.float32)
    scale = 1 / math.sqrt(NOPE + ROPE)
    launch_mla_prefill(kernel, config, q_nope, q_rope, k_nope, k_rope, v, o, lse, scale * QS * KS, seed=seed,
                       v_scale=VS)
    q = np.concatenate([reference.e4m3_values(q_nope) * QS, reference.to_f64(q_rope, rope) * (QS * KS)], axis=-1)
    k = np.concatenate([reference.e4m3_values(k_nope) * KS, reference.to_f64(k_rope, rope)], axis=-1)
    vf = reference.e4m3_values(v) * VS
    ref, ref_lse = reference.attention(q, k, vf, causal, scale)
    yard = reference.attention_fp8_yardstick(q, k, vf, causal, scale, FP8_P_BIAS)
    cmp = reference.compare(o, ref, yard, "bf16")
    return cmp, float(np.abs(lse - ref_lse).max()), reference.lse_tolerance(ref_lse)


@pytest.mark.parametrize("index, case", list(enumerate(FP8_ACTIVE)),
                         ids=[f"fp8-{r}-rope-{'causal' if c else 'full'}-g{g}-{b}x{sq}x{sk}x{h}"
                              for r, c, g, b, sq, sk, h in FP8_ACTIVE])
def test_fp8_mla_prefill_in_the_emulator(index, case):
    for seed in (0, 1, 2) if FULL else (index % 3,):
        cmp, lse_err, lse_limit = run_fp8_case(*case, seed)
        assert cmp.ok and not cmp.unwritten, f"seed {seed}: {cmp.summary()}"
        assert lse_err <= lse_limit, f"seed {seed}: LSE max abs error {lse_err} (limit {lse_limit})"


@pytest.mark.parametrize("index, case", list(enumerate(ACTIVE)),
                         ids=[f"{d}-{'causal' if c else 'full'}-g{g}-{b}x{sq}x{sk}x{h}"
                              for d, c, g, b, sq, sk, h in ACTIVE])
def test_mla_prefill_in_the_emulator(index, case):
    for seed in (0, 1, 2) if FULL else (index % 3,):
        cmp, lse_err, lse_limit = run_case(*case, seed)
        assert cmp.ok and not cmp.unwritten, f"seed {seed}: {cmp.summary()}"
        assert lse_err <= lse_limit, f"seed {seed}: LSE max abs error {lse_err} (limit {lse_limit})"


@pytest.mark.parametrize("dtype, causal, group, rope", sorted({(*c[:3], "") for c in ACTIVE}
                                                             | {("fp8_e4m3", c[1], c[2], c[0]) for c in FP8_ACTIVE}))
def test_each_kernel_verifies_and_assembles_without_spills(dtype, causal, group, rope):
    config, m, _ = _kernel(dtype, causal, group, rope)
    assert (m["spill_stores"], m["spill_loads"], m["stack_frame"]) == (0, 0, 0), m
    assert m["threads"] == [512, 1, 1]
    assert m["smem_bytes"] == config.fa4.smem_used
    assert [p["name"] for p in m["params"]] == [p.name for p in mla_prefill.params(config)]


@pytest.mark.parametrize("dtype, group, rope, regions", [
    ("bf16", 1, "", {"q", "q_rope", "kv", "rope"}), ("fp16", 4, "", {"q", "q_rope", "kv", "rope"}),
    ("fp8_e4m3", 1, "bf16", {"q", "q_rope", "k", "v"})])
def test_the_kernel_places_fa4_layouts_mla_regions(ctx, dtype, group, rope, regions):
    """Every shared-memory region (q, q_rope, the fused kv ring and rope buffers, or the split k and v
    rings, ...) and barrier of the built kernel at ``fa4-layout``'s offset for ``MLAConfig.fa4``; the Q
    halves' rope blocks in q_rope (16-bit: 128 rows x 64 x 2 bytes, fp8's too)."""
    import re

    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.core.layout_ir import place_layout
    from fa4_mlir.layouts import fa4_layout

    config = MLAConfig(target="sm_100a", form="prefill", dtype=dtype, group=group, rope_dtype=rope)
    text = compile_kernel(mla_prefill.build(config), stop="fa4").mlir  # the protocol verifier runs here
    layout = fa4_layout(config.fa4)
    assert {r.name for r in layout.regions} >= regions
    _, placed = place_layout(layout, "sm_100a")
    offsets = {n: int(o) for o, n in re.findall(r'offset = (\d+) : i64, (?:swizzle = "\w+", )?sym_name = "(\w+)"',
                                                text)}
    indices = {n: int(i) for i, n in re.findall(r'index = (\d+) : i64, num_barriers = \d+ : i64, sym_name = "(\w+)"',
                                                text)}
    assert indices == placed.barrier_index
    for name, offset in placed.region_offsets.items():
        if name not in ("o", "mbarriers"):
            assert offsets[name] == offset, name
    assert placed.smem_bytes == config.fa4.smem_used
    built = mla_prefill.build(config).mlir
    tmem = re.findall(r'tmem_region"\(\) \{columns = (\d+) : i64, sym_name = "(\w+)"', built)
    assert [(n, int(c)) for c, n in tmem] == [(t.name, t.columns) for t in layout.tmem]
    rope = re.findall(r'bytes = (\d+) : i64, offset = (\d+) : i64, sym_name = "q_rope(\d)"', built)
    assert sorted((int(h), int(o), int(b)) for b, o, h in rope) == [(0, 0, 16384), (1, 16384, 16384)]


def test_the_prefill_config():
    c = MLAConfig(target="sm_100a", form="prefill", group=2, causal=True)
    f = c.fa4
    assert (f.qk_depth, f.ov_depth, f.is_mla, f.rope_dtype, f.group, f.num_q) == (192, 128, True, "bf16", 2, 2)
    assert (f.bn, f.num_kv_stages, f.qk_stages, f.fused_kv, f.rope_depth) == (128, 3, 1, True, 64)
    assert c.supported().ok and c.heads_per_tile == 1
    assert (c.attention.head_dim, c.attention.fused_group, c.attention.cta_positions) == (128, 1, 256)
    # 256 positions of one head a CTA; the K/V head is head / group
    assert mla_prefill.launch_geometry(c, 2, 257, 4, 9) == (2, 4, 2)
    from fa4_mlir.kernels.attention.mla import launch_geometry

    assert launch_geometry(c, 2, 257, 4, 9) == (2, 4, 2)


def test_the_fp8_prefill_config():
    """fp8 with a bf16 rope: the e4m3 nope parts in fp8's 64B swizzle, the rope regions sized by the rope
    dtype (spec 2.1: Q's 128 nope bytes + 128 rope bytes a row), split K/V rings whose K stages hold the
    rope after K_nope; the kernel's parameters add v_scale, its rope boxes are 32 columns (64 bytes)."""
    c = MLAConfig(target="sm_100a", form="prefill", dtype="fp8_e4m3", rope_dtype="bf16", causal=True)
    f = c.fa4
    assert (f.dtype, f.rope_dtype, f.swizzle_bytes, f.mma_k, f.bn, f.rope_depth) == ("fp8_e4m3", "bf16", 64, 32,
                                                                                      128, 64)
    assert f.q_bytes == 256 * (128 + 64 * 2)
    assert (f.num_kv_stages, f.fused_kv, f.qk_stages) == (3, False, 1) and f.supported().ok
    assert (c.attention.is_fp8, c.attention.out_dtype, c.rope) == (True, "bf16", "bf16")
    assert c.describe() == "MLAConfig sm_100a fp8_e4m3 (bf16 rope) prefill FA4 kernel causal"
    p = {x.name: x for x in mla_prefill.params(c)}
    assert list(p)[-1] == "v_scale" and p["v_scale"].kind == "f32"
    maps = {n: (x.tensor_map.dtype, x.tensor_map.box[0]) for n, x in p.items() if x.tensor_map}
    assert maps == {"q_nope": ("fp8_e4m3", 64), "q_rope": ("bf16", 32), "k_nope": ("fp8_e4m3", 64),
                    "k_rope": ("bf16", 32), "v": ("fp8_e4m3", 64), "o": ("bf16", 32)}


@pytest.mark.parametrize("kwargs, message", [
    (dict(form="decode"), r"MLAConfig.form must be one of absorbed, prefill, got 'decode'"),
    (dict(form="prefill", tile_heads=4), r"MLAConfig.tile_heads must be 0 for the prefill form \(a tile holds "
                                         r"positions of one head\), got 4"),
    (dict(form="prefill", group=0), r"MLAConfig.group must be in \[1, 128\] \(query heads per K/V head\), got 0"),
    (dict(form="prefill", block_n=64), r"MLAConfig.block_n must be 0 on sm_100a \(the kernel's layout picks BN\), "
                                       r"got 64"),
    (dict(form="prefill", split_kv=True), r"MLAConfig.split_kv must be False on sm_100a"),
    (dict(form="absorbed", group=2), r"MLAConfig.group must be 1 for the absorbed form"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        MLAConfig(target="sm_100a", **kwargs)


def test_fa4_and_attention_are_the_prefill_forms():
    for c in (MLAConfig(target="sm_100a"), MLAConfig(target="sm_90a", form="prefill")):
        with pytest.raises(ConfigError, match=r"MLAConfig.fa4 is the sm_100a prefill layout; target and form must "
                                              r"be sm_100a and prefill, got '\w+' and '\w+'"):
            c.attention


def test_the_op_runs_the_sm100_kernel_in_the_emulator():
    """``torch.ops.fa4.mla_prefill`` on CPU tensors under ``emulator(target="sm_100a")``: GQA, causal, ragged
    lengths, the LSE; the reference is the float64 attention of the concatenations."""
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft

    b, sq, sk, h, hk = 1, 70, 90, 2, 1
    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g).to(torch.bfloat16)  # noqa: E731
    q_nope, q_rope, k_nope, k_rope, v = r(b, sq, h, NOPE), r(b, sq, h, ROPE), r(b, sk, hk, NOPE), r(b, sk, hk, ROPE), \
        r(b, sk, hk, NOPE)
    with ft.emulator(target="sm_100a"):
        out, lse = ft.mla_prefill(q_nope, q_rope, k_nope, k_rope, v, causal=True, return_lse=True)
    f = lambda *xs: torch.cat(xs, -1).double().numpy()  # noqa: E731
    q, k, vf = f(q_nope, q_rope), f(k_nope, k_rope), f(v)
    k, vf = np.repeat(k, h // hk, axis=2), np.repeat(vf, h // hk, axis=2)
    scale = 1 / math.sqrt(NOPE + ROPE)
    ref, ref_lse = reference.attention(q, k, vf, True, scale)
    bits = out.view(torch.int16).numpy().view(np.uint16)
    cmp = reference.compare(bits, ref, reference.attention_yardstick(q, k, vf, True, scale, "bf16"), "bf16")
    assert cmp.ok and not cmp.unwritten, cmp.summary()
    assert float(np.abs(lse.numpy() - ref_lse).max()) <= reference.lse_tolerance(ref_lse)


def test_the_op_runs_fp8_inputs_on_sm100a_in_the_emulator():
    """e4m3 q_nope, k_nope, v with distinct tensor-wise scales and a bf16 rope, GQA 2, causal, ragged
    lengths: the bf16 output and the LSE against the float64 attention of the dequantized inputs, S =
    scale (q_scale k_scale q_nope k_nope' + q_rope k_rope') and V = v_scale v, within twice the error of
    ``reference.attention_fp8_yardstick``."""
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft
    from fa4_mlir.kernels.attention.softmax import FP8_P_BIAS

    b, sq, sk, h, hk = 1, 70, 90, 2, 1
    g = torch.Generator().manual_seed(7)
    f8 = lambda *s, scale: (torch.randn(*s, generator=g, dtype=torch.float64) / scale).to(torch.float8_e4m3fn)  # noqa: E731
    q_nope, k_nope, v = f8(b, sq, h, NOPE, scale=QS), f8(b, sk, hk, NOPE, scale=KS), f8(b, sk, hk, NOPE, scale=VS)
    q_rope, k_rope = torch.randn(b, sq, h, ROPE, generator=g).bfloat16(), torch.randn(b, sk, hk, ROPE, generator=g).bfloat16()
    with ft.emulator(target="sm_100a", seed=2) as emu:
        out, lse = ft.mla_prefill(q_nope, q_rope, k_nope, k_rope, v, causal=True, return_lse=True, q_scale=QS,
                                  k_scale=KS, v_scale=VS)
    assert [name for name, _ in emu.launches] == ["mla_attention"] and out.dtype == torch.bfloat16
    e = lambda t: reference.e4m3_values(t.view(torch.uint8).numpy())  # noqa: E731
    q = np.concatenate([e(q_nope) * QS, q_rope.double().numpy()], axis=-1)
    k = np.repeat(np.concatenate([e(k_nope) * KS, k_rope.double().numpy()], axis=-1), h // hk, axis=2)
    vf = np.repeat(e(v) * VS, h // hk, axis=2)
    scale = 1 / math.sqrt(NOPE + ROPE)
    ref, ref_lse = reference.attention(q, k, vf, True, scale)
    yard = reference.attention_fp8_yardstick(q, k, vf, True, scale, FP8_P_BIAS)
    cmp = reference.compare(out.view(torch.int16).numpy().view(np.uint16), ref, yard, "bf16")
    assert cmp.ok and not cmp.unwritten, cmp.summary()
    assert float(np.abs(lse.numpy() - ref_lse).max()) <= reference.lse_tolerance(ref_lse)


def test_fp8_op_errors_and_fake():
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch as ft
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch.mla import launch_prefill

    f8 = lambda *s: torch.zeros(*s).to(torch.float8_e4m3fn)  # noqa: E731
    bf = lambda *s: torch.zeros(*s, dtype=torch.bfloat16)  # noqa: E731
    t = {"q_nope": f8(1, 5, 2, NOPE), "q_rope": bf(1, 5, 2, ROPE), "k_nope": f8(1, 9, 1, NOPE),
         "k_rope": bf(1, 9, 1, ROPE), "v": f8(1, 9, 1, NOPE)}
    half = {n: x.bfloat16() for n, x in t.items()}
    cases = [
        ("sm_100a", {**t, "v": t["v"].bfloat16()}, {}, r"mla_prefill: v dtype must be torch.float8_e4m3fn with an "
                                                       r"fp8 q_nope, got torch.bfloat16"),
        ("sm_100a", {**t, "k_rope": t["k_rope"].half()}, {}, r"mla_prefill: k_rope dtype must be torch.bfloat16 "
                                                             r"with fp8 inputs .* got torch.float16"),
        ("sm_90a", t, {}, r"mla_prefill: q_nope dtype must be torch.bfloat16 or torch.float16 on sm_90a \(fp8 runs "
                          r"on sm_100a\), got torch.float8_e4m3fn"),
        ("sm_100a", half, {"k_scale": 2.0}, r"mla_prefill: k_scale must be None for bf16 inputs \(scales "
                                            r"dequantize fp8 inputs\), got 2.0"),
        ("sm_100a", t, {"v_scale": math.inf}, r"mla_prefill: v_scale must be finite and > 0, got inf"),
    ]
    for target, args, kwargs, message in cases:
        with ft.emulator(target=target) as emu, pytest.raises(LaunchError, match=message):
            ft.mla_prefill(**args, **kwargs)
        assert emu.launches == []
    config = MLAConfig(target="sm_100a", form="prefill", dtype="fp8_e4m3", rope_dtype="bf16")
    with pytest.raises(LaunchError, match=r"mla_prefill: v_scale must be given exactly for fp8 kernels, got None for "
                                          r"MLAConfig sm_100a fp8_e4m3 \(bf16 rope\) prefill FA4 kernel"):
        launch_prefill(config, None, *t.values(), bf(1, 5, 2, NOPE), None, 0.1)
    with FakeTensorMode():
        fake = [torch.empty(x.shape, dtype=x.dtype) for x in t.values()]
        out, lse = torch.ops.fa4.mla_prefill(*fake, return_lse=True, q_scale=0.5)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (1, 5, 2, NOPE) and tuple(lse.shape) == (1, 2, 5)


@pytest.mark.parametrize("change, message", [
    (lambda t: {**t, "v": t["v"][..., :64]}, r"mla_prefill: v must have shape \(1, 9, 1, 128\), got \(1, 9, 1, 64\)"),
    (lambda t: {**t, "k_rope": t["k_rope"].half()}, r"mla_prefill: q_nope, q_rope, k_nope, k_rope and v must have one "
                                                    r"dtype"),
    (lambda t: {**t, "q_nope": t["q_nope"][0]}, r"mla_prefill: q_nope must be 4-D \(batch, seqlen, heads, depth\)"),
])
def test_op_errors(change, message):
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch
    from fa4_mlir.errors import LaunchError

    z = lambda *s: torch.zeros(*s, dtype=torch.bfloat16)  # noqa: E731
    t = {"q_nope": z(1, 5, 3, NOPE), "q_rope": z(1, 5, 3, ROPE), "k_nope": z(1, 9, 1, NOPE), "k_rope": z(1, 9, 1, ROPE),
         "v": z(1, 9, 1, NOPE)}
    k2 = {**t, "k_nope": z(1, 9, 2, NOPE), "k_rope": z(1, 9, 2, ROPE), "v": z(1, 9, 2, NOPE)}
    with fa4_mlir.torch.emulator(target="sm_100a"):  # the checks run before any kernel is built
        with pytest.raises(LaunchError, match=message):
            torch.ops.fa4.mla_prefill(**change(t))
        with pytest.raises(LaunchError, match=r"mla_prefill: the query heads must be a multiple of the K/V heads, "
                                              r"got 3 and 2"):
            torch.ops.fa4.mla_prefill(**k2)
        with pytest.raises(LaunchError, match=r"mla_prefill: softmax_scale must be finite and > 0, got -1.0"):
            torch.ops.fa4.mla_prefill(**t, softmax_scale=-1.0)


def test_the_fake_gives_the_shapes():
    torch = pytest.importorskip("torch")
    import fa4_mlir.torch  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        z = lambda *s: torch.empty(*s, dtype=torch.bfloat16)  # noqa: E731
        out, lse = torch.ops.fa4.mla_prefill(z(2, 7, 4, NOPE), z(2, 7, 4, ROPE), z(2, 9, 2, NOPE), z(2, 9, 2, ROPE),
                                             z(2, 9, 2, NOPE), return_lse=True)
    assert tuple(out.shape) == (2, 7, 4, NOPE) and tuple(lse.shape) == (2, 4, 7) and lse.dtype == torch.float32


def test_the_verifier_finds_a_rope_buffer_reused_too_early():
    """A mutant with one rope buffer instead of ceil(nkv / 2): K tile t + 1's rope load would overwrite
    the buffer while Q1 @ K_t' may still read it (the ring slot the load waits for was released before
    that MMA was issued); the protocol verifier reports the race on region 'rope'."""
    from unittest import mock

    from fa4_mlir.core.compiler import CompileError, compile_kernel
    from fa4_mlir.kernels.attention.dims import Dims

    with mock.patch.object(Dims, "rope_bufs", property(lambda self: 1)):
        with pytest.raises(CompileError) as err:
            compile_kernel(mla_prefill.build(MLAConfig(target="sm_100a", form="prefill")), stop="fa4")
    assert any("race on stage 0 of smem 'rope'" in d for d in err.value.diagnostics)
