"""fp8 e4m3 attention on sm_90a in the PTX emulator (``torch.ops.fa4.flash_attention`` on CPU tensors):
head dims 64/128/256, causal and not, GQA, odd lengths, tensor-wise and per-token Q/K scales.

The reference is float64 attention of the dequantized inputs (``q * q_scale``, ``k * k_scale``,
``v * v_scale``). Error bound: the kernel's max and rms errors must be at most twice those of a yardstick
that does what the kernel must round (``reference.attention_fp8_yardstick``: P = exp(S - max) * 2^8, the
kernel's exp2 bias, rounded to e4m3 before P @ V, row sums of the unrounded P, the output rounded to bf16)
plus 1e-6 max|ref| (``reference.compare``); the LSE within ``reference.lse_tolerance``. Per-token scales
are log-uniform in 1e-3..1e3; each token's fp8 values are N(0, 1) / scale (clipped to 2^-6..2^8 times
N(0, 1), then rounded to e4m3), so the dequantized values stay near N(0, 1) where e4m3 can hold them.

The default run takes a covering subset of the numerics cases (every head dim, causal, GQA, odd lengths,
tensor-wise and per-token scales, the polynomial exp2 and plain ex2); FA4_EMU_FULL_MATRIX=1 runs them all.

Also: the emulator's e4m3 RS wgmma (A from registers, 4 bytes a register) against the e4m3 layout of the
PTX ISA, every fp8 config through the whole compiler (protocol verifier, ptxas, zero spills; one
compile each), the polynomial exp2's count in the PTX, the op's fp8 errors, and the V^T operand the op makes.
"""

from __future__ import annotations

import math
import os

import ci_sample
import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs import attention as attention_configs
from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.configs.attention_op import default_exp2, default_one_role, default_tile
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels.attention import hopper_fp8

torch = pytest.importorskip("torch")

# (batch, seq_q, seq_k, heads, kv heads, head dim, causal, per-token scales)
CASES = [(1, 70, 150, 2, 1, 64, False, False), (1, 129, 200, 2, 2, 64, True, True),
         (2, 65, 300, 2, 1, 128, False, True), (1, 130, 130, 1, 1, 128, True, False),
         (1, 1, 1, 1, 1, 128, False, True), (1, 40, 257, 2, 2, 256, False, True),
         (1, 150, 90, 2, 1, 256, True, False)]
# the default run's subset: d64 GQA tensor-wise, d128 GQA per-token batch 2, d256 causal GQA tensor-wise, all
# odd lengths (d64 runs the polynomial exp2 by default, d128 and d256 only ex2); FA4_EMU_FULL_MATRIX=1: every case
FULL = os.environ.get("FA4_EMU_FULL_MATRIX", "0") == "1"
RUN_CASES = CASES if FULL else [CASES[i] for i in (0, 2, 6)]


_COMPILED: dict = {}


def _compiled(config):
    """``config`` compiled once per session in this process (protocol verifier on, ptxas, cubin) and stored
    in the runtime's cache, where the emulator's load finds it (else it compiles it again, in a subprocess)."""
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels import attention
    from fa4_mlir.runtime import artifacts

    if config not in _COMPILED:
        result = compile_kernel(attention.build(config), stop="cubin")  # the protocol verifier runs at stage fa4
        key = artifacts.ArtifactKey.for_config("attention", config)
        if artifacts.lookup(key) is None:
            artifacts.store(key, result.write)
        _COMPILED[config] = result
    return _COMPILED[config]


def _op_config(d: int, causal: bool, group: int, tokens: bool, num_q: int = 0, seq_k: int = 1 << 20,
               exp2: tuple = ()) -> AttentionConfig:
    """The config ``flash_attention`` runs for these fp8 inputs of ``seq_k`` keys on sm_90a (``num_q`` 0: the op's
    choice; its tile by length, ``default_tile``; ``exp2`` (count, packed f16): other exponentials than the op's)."""
    op_num_q, block_n = default_tile("sm_90a", "fp8_e4m3", d, causal, seq_k)
    exp2_fields = dict(zip(("exp2_emulation", "exp2_f16x2"), exp2)) or default_exp2("sm_90a", "fp8_e4m3", d)
    return AttentionConfig(target="sm_90a", dtype="fp8_e4m3", head_dim=d, causal=causal, group=group,
                           token_scales=tokens, num_q=num_q or op_num_q, block_n=block_n,
                           one_consumer_role=default_one_role("sm_90a", d, causal, seq_k), **exp2_fields)


def _log_uniform(gen, shape):
    return torch.exp(torch.empty(shape, dtype=torch.float64).uniform_(math.log(1e-3), math.log(1e3), generator=gen))


def _quantized(gen, shape, scale):
    """fp8 values whose dequantized values (times ``scale``, per token (B, heads, S) or a float) are about
    N(0, 1): N(0, 1) / scale, the factor clipped to [2^-6, 2^8]."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if isinstance(scale, torch.Tensor):
        factor = (1 / scale).clamp(2.0 ** -6, 2.0 ** 8).permute(0, 2, 1)[..., None]  # (B, S, heads, 1)
    else:
        factor = 1 / scale
    return (x * factor).clamp(-448, 448).to(torch.float8_e4m3fn)


def _bits(t):
    return t.view(torch.uint8).numpy()


@pytest.mark.parametrize("case", RUN_CASES, ids=lambda c: "B{}-Sq{}-Sk{}-H{}/{}-D{}-causal{}-tokens{}".format(*c))
def test_matches_f64_reference_of_the_dequantized_inputs(case):
    _check_case(case)


# head dim 64 with 192-row tiles (num_q 3, the op's choice: SM90_NUM_Q) and with 128-row tiles (num_q 2, set
# through SM90_NUM_Q): per-token scales, causal, GQA, a partial second CTA, several K/V tiles
NUM_Q_CASES = [((1, 200, 300, 2, 1, 64, True, True), 3), ((1, 100, 129, 1, 1, 64, False, False), 2)]


@pytest.mark.parametrize("case, num_q", NUM_Q_CASES,
                         ids=lambda c: "B{}-Sq{}-Sk{}-H{}/{}-D{}-causal{}-tokens{}".format(*c) if isinstance(c, tuple)
                         else f"num_q{c}")
def test_head_dim_64_tiles_match_f64_reference(case, num_q, monkeypatch):
    monkeypatch.setitem(attention_configs.SM90_NUM_Q, ("fp8_e4m3", 64, case[6]), num_q)
    _check_case(case, num_q=num_q)


@pytest.mark.parametrize("short", [True, False], ids=["128-keys", "192-keys"])
def test_head_dim_128_takes_128_keys_up_to_4k_and_matches_f64_reference(short, monkeypatch):
    """fp8 head dim 128: the op runs 128 keys a tile up to 4096 keys (``SM90_SHORT_TILE``), 192 above; both tiles
    in the emulator (the long one forced at few keys), causal over two query tiles and three K/V tiles."""
    key = ("fp8_e4m3", 128, True)
    assert default_tile("sm_90a", *key, 4096) == (2, 128) == default_tile("sm_90a", "fp8_e4m3", 128, False, 4096)
    assert default_tile("sm_90a", *key, 4097) == (2, 0) and AttentionConfig(
        target="sm_90a", dtype="fp8_e4m3", head_dim=128).hopper.bn == 192
    if not short:
        monkeypatch.setitem(attention_configs.SM90_SHORT_TILE_KEYS, key, 0)
    assert _op_config(128, True, 2, False, seq_k=300).hopper.bn == (128 if short else 192)
    _check_case((1, 200, 300, 2, 1, 128, True, False))


@pytest.mark.parametrize("d", [128, 256], ids=["d128-columns-sums", "d256-fadd-sums"])
def test_packed_exp2_matches_f64_reference_with_every_row_sum_form(d, monkeypatch):
    """The packed f16 exponentials (``exp2_f16x2``, the op's at head dim 64 with "wgmma" row sums) at the head dims
    the op runs without them, 8 of 32 through the op in the emulator: 128 ("columns" row sums, the sums read from
    O's accumulator) and 256 (the softmax's FADD row sums, which widen the packed halves: ``hopper_fp8.as_f32``)."""
    monkeypatch.setitem(attention_configs.SM90_FP8_EXP2_EMULATION, d, 8)
    monkeypatch.setattr(attention_configs, "SM90_FP8_EXP2_F16X2", frozenset({64, d}))
    config = _op_config(d, True, 1, False)
    assert config.exp2_f16x2 and config.exp2_emulation == 8
    assert config.hopper.row_sums == ("columns" if d == 128 else "")
    _check_case((1, 90, 150, 1, 1, d, True, False))


@pytest.mark.parametrize("d", [128, 256], ids=["d128-columns-sums", "d256-fadd-sums"])
def test_one_consumer_role_matches_f64_reference(d, monkeypatch):
    """fp8 with one consumer role (``AttentionConfig.one_consumer_role``: the op's at head dim 256 from 4k keys
    causal and 16k non-causal, at 128 from 16k), the op's table lowered to the test's keys, through the op in the
    emulator: per-token scales and "columns" row sums at 128, causal GQA and the softmax's row sums at 256."""
    for causal in (False, True):
        monkeypatch.setitem(attention_configs.SM90_ONE_CONSUMER_ROLE_KEYS, (d, causal), 1)
    case = (1, 130, 200, 2, 1, 128, False, True) if d == 128 else (1, 150, 90, 2, 1, 256, True, False)
    assert _op_config(d, case[6], 2, case[7], seq_k=case[2]).one_consumer_role
    _check_case(case)


def _check_case(case, num_q: int = 0):
    from fa4_mlir.torch import flash_attention
    from fa4_mlir.torch.emulated import emulator

    b, sq, sk, h, hk, d, causal, tokens = case
    gen = torch.Generator().manual_seed(sq * 1000 + sk)
    if tokens:
        qs, ks = _log_uniform(gen, (b, h, sq)), _log_uniform(gen, (b, hk, sk))
    else:
        qs, ks = float(torch.rand(1, generator=gen)) + 0.5, float(torch.rand(1, generator=gen)) * 0.1 + 0.02
    vs = float(torch.rand(1, generator=gen)) * 4 + 0.1
    q, k, v = _quantized(gen, (b, sq, h, d), qs), _quantized(gen, (b, sk, hk, d), ks), _quantized(gen, (b, sk, hk, d), vs)
    scale = 1 / math.sqrt(d)
    config = _op_config(d, causal, h // hk, tokens, seq_k=sk)
    assert not num_q or config.num_q == num_q
    m = _compiled(config).manifest
    assert (m["spill_stores"], m["spill_loads"], m.get("stack_frame", 0)) == (0, 0, 0), m
    with emulator(target="sm_90a", seed=sq):
        out, lse = flash_attention(q, k, v, causal=causal, return_lse=True, v_scale=vs,
                                   q_scale=qs.float() if tokens else qs, k_scale=ks.float() if tokens else ks)
    assert out.dtype == torch.bfloat16 and out.shape == (b, sq, h, d)

    def f32(x):
        return x.float().numpy() if isinstance(x, torch.Tensor) else float(np.float32(x))

    qf, kf, vf = reference.dequantize(_bits(q), f32(qs)), reference.dequantize(_bits(k), f32(ks)), \
        reference.dequantize(_bits(v), vs)
    ref, ref_lse = reference.attention(qf, kf, vf, causal, scale)
    rounded = bool(config.hopper.row_sums)  # the tensor core sums the e4m3 P (head dims 64 and 128)
    yard = reference.attention_fp8_yardstick(qf, kf, vf, causal, scale, hopper_fp8.P_BIAS, rounded_sums=rounded)
    bits = out.view(torch.int16).numpy().view(np.uint16)
    result = reference.compare(bits, ref, yard, "bf16")
    assert result.ok, f"{case}: {result.summary()}"
    err = float(np.abs(lse.numpy() - ref_lse).max())
    limit = reference.fp8_lse_limit(ref_lse, reference.attention_fp8_lse_yardstick(qf, kf, causal, scale,
                                                                                  hopper_fp8.P_BIAS)) \
        if rounded else reference.lse_tolerance(ref_lse)
    assert err <= limit, f"{case}: LSE error {err} (limit {limit})"


def test_emulator_rs_wgmma_reads_e4m3_fragments_in_the_isa_layout():
    """The RS wgmma's A register bytes go where the ISA's k32 A fragment puts them: register r of lane l in
    warp w holds row 16w + l/4 + 8 (r % 2), K 4 (l % 4) + 16 (r // 2) + byte (byte 0 lowest); checked
    through an m64n8k32 e4m3 wgmma in the emulator against float64 A @ B."""
    from fa4_mlir.emu.isa import wgmma_layout as L

    rows, cols = L.a_fragment_coords(32, 1)
    t = np.arange(128)[:, None]
    i = np.arange(16)[None, :]
    assert (rows == 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 4) % 2)).all()
    assert (cols == 4 * (t % 4) + i % 4 + 16 * (i // 8)).all()
    _run_rs_e4m3_wgmma()


def _run_rs_e4m3_wgmma():
    """An m64n8k32 e4m3 RS wgmma, B (8 x 32) K-major without swizzle in shared memory, in the emulator."""
    from fa4_mlir import emu
    from fa4_mlir.emu.isa import wgmma_layout as L

    rng = np.random.default_rng(0)
    # 0, +-0.5, +-1, +-2, +-4 (e4m3 0x00, 0x30, 0x38, 0x40, 0x48): every sum is exact, so any misplaced
    # byte shows
    codes = np.array([0x00, 0x30, 0x38, 0x40, 0x48, 0xB0, 0xB8, 0xC0, 0xC8], np.uint8)
    a_bits, b_bits = rng.choice(codes, (64, 32)), rng.choice(codes, (8, 32))
    fr, fc = L.a_fragment_coords(32, 1)
    regs = a_bits[fr, fc].reshape(128, 4, 4).astype(np.uint32)  # thread, register, byte
    words = regs[..., 0] | regs[..., 1] << 8 | regs[..., 2] << 16 | regs[..., 3] << 24
    # no swizzle, K-major: element (n, k) at n * 16 + k % 16 + (k // 16) * LBO, LBO = 128 bytes
    smem_b = np.concatenate([b_bits[:, :16].reshape(-1), b_bits[:, 16:].reshape(-1)]).view(np.uint32)
    out = np.zeros((128, 4), np.float32)
    prog = emu.load_ptx(_RS_PTX)
    prog.launch("k", block=(128, 1, 1), smem_bytes=1024, args=[words.astype(np.uint32), smem_b, out])
    ref = reference.e4m3_values(a_bits) @ reference.e4m3_values(b_bits).T  # (64, 8)
    drows, dcols = L.accumulator_coords(8)
    assert (out == ref[drows, dcols]).all()


_RS_PTX = """
.version 8.6
.target sm_90a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 a, .param .u64 b, .param .u64 d)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<8>;
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [a];
    mul.wide.u32 %rd2, %r0, 16;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd3];
    setp.lt.u32 %p1, %r0, 64;
    @!%p1 bra COPIED;
    ld.param.u64 %rd4, [b];
    mul.wide.u32 %rd5, %r0, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u32 %r5, [%rd6];
    mov.u32 %r6, smem;
    mul.lo.u32 %r7, %r0, 4;
    add.u32 %r8, %r6, %r7;
    st.shared.u32 [%r8], %r5;
COPIED:
    fence.proxy.async.shared::cta;
    bar.sync 0;
    mov.u32 %r6, smem;
    cvt.u64.u32 %rd7, %r6;
    shr.u64 %rd7, %rd7, 4;
    and.b64 %rd7, %rd7, 0x3FFF;
    or.b64 %rd7, %rd7, 0x0000001000080000;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, %rd7, 0, 1, 1;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    ld.param.u64 %rd8, [d];
    add.s64 %rd9, %rd8, %rd2;
    st.global.v4.f32 [%rd9], {%f1, %f2, %f3, %f4};
    ret;
}
"""


FP8_CONFIGS = [dict(d=d, tokens=t, causal=c) for d in (64, 128, 256) for t in (False, True) for c in (False, True)]
FP8_CONFIGS += [dict(d=64, tokens=t, causal=c, num_q=2) for t, c in ((False, False), (True, True))]  # 128-row tiles
FP8_CONFIGS += [dict(d=128, tokens=t, causal=c, seq_k=4096) for t, c in ((False, True), (True, False))]  # short tile
# the packed f16 exponentials (exp2_f16x2) where the op does not take them: each row-sum form, both kinds of scales
FP8_CONFIGS += [dict(d=d, tokens=t, causal=c, exp2=(8, True)) for d, t, c in ((128, True, False), (256, False, True))]


# CI compiles each value of the sweep once (sm_90a: the H100 session builds the op's artifacts, and CI's
# emulator tests compile more); FA4_EMU_FULL_MATRIX=1 compiles every config
@pytest.mark.parametrize("kwargs", ci_sample.covered(FP8_CONFIGS, pairs=()),
                         ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_every_fp8_config_verifies_and_assembles_without_spills_on_its_layout(ctx, kwargs):
    import re

    from fa4_mlir.core.layout_ir import place_layout
    from fa4_mlir.kernels.attention.exp2 import emulated
    from fa4_mlir.layouts import hopper_attention_layout

    config = _op_config(group=1, **kwargs)
    emulation = config.exp2_emulation
    result = _compiled(config)
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"], m.get("stack_frame", 0)) == (0, 0, 0), m
    _, placed = place_layout(hopper_attention_layout(config), "sm_90a")
    assert m["smem_bytes"] == placed.smem_bytes
    t, d = config.hopper, config.head_dim
    ptx = result.ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{t.bn}k32.f32.e4m3.e4m3" in ptx  # S = Q K' (SS)
    o_n = d + (t.sum_rows if t.row_sums == "columns" else 0)  # "columns": O's wgmmas also sum P's rows
    rs = re.findall(rf"wgmma.mma_async.sync.aligned.m64n{o_n}k32.f32.e4m3.e4m3 \{{[^}}]+\}}, "
                    r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1;", ptx)
    # "wgmma": an n8 wgmma a k step sums P's rows, the first of each tile from zero (scale-d p false)
    sums = re.findall(r"wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 \{[^}]+\}, "
                      r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1;", ptx)
    assert t.row_sums == attention_configs.SM90_FP8_ROW_SUMS.get(d, "")
    assert len(sums) == (len(rs) if t.row_sums == "wgmma" else 0)
    assert m["wgmma_serialized"] is False  # ptxas did not serialise the wgmmas (C7511: too few registers)
    n = t.consumers
    assert n == config.num_q == kwargs.get("num_q", 3 if d == 64 else 2)  # the op's: 192-row tiles at 64
    # O += P V^T (RS, K-major V^T): per warpgroup, the K/V loops (the unmasked tiles', then the masked tiles'; one
    # loop with per-token scales over three warpgroups, which spilled peeled) and the last tile
    loops = 1 if config.token_scales and n == 3 else 2
    # copies of the consumers' code: one a warpgroup, or one for all with one consumer role (the op's at head dims
    # 128 and 256 on long keys: here but at 4096 keys)
    copies = 1 if config.one_consumer_role else n
    assert len(rs) == copies * (loops + 1) * t.bn // 32
    # the packed f16 polynomial: pairs of a row's bn / 4 values, each pair two f16x2 FMAs and one cvt to e4m3x2
    pairs = copies * (loops + 1) * 2 * len(emulated(t.bn // 8, emulation)) if config.exp2_f16x2 else 0
    assert config.exp2_f16x2 == (d == 64 or "exp2" in kwargs)
    assert ptx.count("fma.rn.f16x2") == 2 * pairs and ptx.count("cvt.rn.satfinite.e4m3x2.f16x2") == pairs
    # the other pairs: 4 probabilities per cvt pair
    assert ptx.count("cvt.rn.satfinite.e4m3x2.f32") == copies * (loops + 1) * t.bn // 4 - pairs
    # the f32 polynomial exp2 (one rounding-down add each): per warpgroup, tile 0 and the loops, two rows of bn / 4
    f32_form = 0 if config.exp2_f16x2 else copies * (loops + 1) * 2 * len(emulated(t.bn // 4, emulation))
    assert ptx.count("add.rm.ftz.f32") == f32_form


@pytest.mark.parametrize("sum_rows", [0, 8])
def test_v_transposed_puts_each_key_where_the_accumulator_holds_it(sum_rows):
    from fa4_mlir.torch.attention import v_transposed

    v = torch.arange(2 * 37 * 3 * 4, dtype=torch.float32).reshape(2, 37, 3, 4) % 200
    vt = v_transposed(v.to(torch.float8_e4m3fn), sum_rows).float()
    assert vt.shape == (2, 3, 4 + sum_rows, 48)
    src = v.to(torch.float8_e4m3fn).float()
    for pos in range(48):
        g, r = divmod(pos, 16)
        q, a, b = r // 4, (r // 2) % 2, r % 2
        key = 16 * g + 8 * a + 2 * q + b  # what the S accumulator holds at fragment position 4q + 2a + b
        expected = src[:, key] if key < 37 else torch.zeros(2, 3, 4)
        assert torch.equal(vt[:, :, :4, pos], expected), pos
    assert torch.equal(vt[:, :, 4:], torch.ones(2, 3, sum_rows, 48))  # the rows the P V wgmmas sum P's rows over
    with pytest.raises(ValueError, match=r"v_transposed: sum_rows must be 0 or 8 \(one n8 wgmma's rows of ones\), "
                                         r"got 4"):
        v_transposed(v.to(torch.float8_e4m3fn), 4)


def test_fa4_emu_v_transpose_matches_the_ops():
    """fa4-emu's NumPy V^T (no torch) against the op's torch copy, with and without the rows of ones."""
    from fa4_mlir.tools.fa4_emu_fp8 import v_transposed_bits
    from fa4_mlir.torch import v_transpose as vt

    v = (torch.randn(2, 37, 3, 64) * 8).to(torch.float8_e4m3fn)
    for rows in (0, 8):
        assert np.array_equal(v_transposed_bits(v.view(torch.uint8).numpy(), rows),
                              vt._torch_transposed(v, rows).view(torch.uint8).numpy()), rows


def test_hopper_tile_row_sums_are_fp8_and_named():
    from fa4_mlir.configs.attention import HopperTile

    assert HopperTile(128, 192, elem_bytes=1, row_sums="columns").v_stage_bytes == 192 * (128 + 8)
    assert HopperTile(128, 128).v_stage_bytes == HopperTile(128, 128).kv_stage_bytes == 128 * 128 * 2
    # the op's tiles: the sums at 64 and 128, not at 256 nor in the persistent walk (which spills with them)
    tiles = {(d, p): AttentionConfig(target="sm_90a", dtype="fp8_e4m3", head_dim=d, persistent=p).hopper.row_sums
             for d in (64, 128, 256) for p in (False, True)}
    assert tiles == {(64, False): "wgmma", (128, False): "columns", (256, False): "",
                     (64, True): "", (128, True): "", (256, True): ""}
    for bad, tile in (("rows", dict(elem_bytes=1)), ("wgmma", {})):
        with pytest.raises(ConfigError, match=rf"HopperTile.row_sums must be one of '', 'columns', 'wgmma' \(''"
                                              rf" unless elem_bytes is 1: fp8 sums P's rows on the tensor core\), "
                                              rf"got '{bad}'"):
            HopperTile(128, 128, row_sums=bad, **tile)


def test_p_bias_keeps_p_below_the_e4m3_maximum():
    assert 2 ** hopper_fp8.P_BIAS < reference.E4M3_MAX < 2 ** (hopper_fp8.P_BIAS + 1)


def test_reference_e4m3_rounding_matches_torch():
    x = torch.randn(4096, dtype=torch.float64) * torch.exp(torch.randn(4096, dtype=torch.float64) * 4)
    ours = reference.round_e4m3(x.numpy())
    theirs = x.float().clamp(-448, 448).to(torch.float8_e4m3fn).double().numpy()
    both = x.float().double().numpy() == x.numpy()  # torch rounds through f32: compare where that is exact
    assert (ours[both] == theirs[both]).all()
    bits = x.float().double().clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert (reference.e4m3_bits(x.float().double().numpy()) == bits).all()  # the bytes, -0 included
    assert (reference.e4m3_values(np.arange(256, dtype=np.uint8))[:127]
            == torch.arange(127, dtype=torch.uint8).view(torch.float8_e4m3fn).double().numpy()).all()


def test_fp8_config_and_op_errors():
    from fa4_mlir.torch import flash_attention
    from fa4_mlir.torch.emulated import emulator

    with pytest.raises(ConfigError, match="block_n must be 0 or a multiple of 64 for fp8_e4m3 on sm_90a"):
        AttentionConfig(target="sm_90a", dtype="fp8_e4m3", head_dim=128, block_n=96)
    with pytest.raises(ConfigError, match="head_dim must be one of 64, 128, 256 for fp8_e4m3 on sm_90a"):
        AttentionConfig(target="sm_90a", dtype="fp8_e4m3", head_dim=512)
    with pytest.raises(ConfigError, match=r"exp2_emulation must be even and in \[0, 32\] \(exponentials per 32 "
                                          r"computed by polynomial\), got 7"):
        AttentionConfig(target="sm_90a", dtype="fp8_e4m3", head_dim=128, exp2_emulation=7)
    with pytest.raises(ConfigError, match="exp2_emulation must be 0 on sm_90a unless dtype is fp8_e4m3"):
        AttentionConfig(target="sm_90a", dtype="bf16", head_dim=128, exp2_emulation=8)
    f16x2 = (r"exp2_f16x2 must be False unless target is sm_90a, dtype fp8_e4m3 and exp2_emulation > 0 \(the packed "
             r"form of the fp8 consumer's polynomial exponentials, whose P is rounded to e4m3\), got {}")
    for kwargs, got in ((dict(target="sm_90a", dtype="fp8_e4m3", head_dim=64), "True"),  # no polynomial to pack
                        (dict(target="sm_90a", dtype="bf16", head_dim=64), "True"),
                        (dict(target="sm_100a", dtype="fp8_e4m3", head_dim=128, exp2_emulation=8), "True"),
                        (dict(target="sm_90a", dtype="fp8_e4m3", head_dim=64, exp2_emulation=8), "1")):
        with pytest.raises(ConfigError, match=f16x2.format(got)):
            AttentionConfig(**kwargs, exp2_f16x2=True if got == "True" else 1)
    assert AttentionConfig(target="sm_90a", dtype="fp8_e4m3", head_dim=64, exp2_emulation=32).exp2_emulation == 32
    f8 = torch.zeros(1, 8, 2, 128).to(torch.float8_e4m3fn)
    bf = torch.zeros(1, 8, 2, 128, dtype=torch.bfloat16)
    cases = [
        ((bf, bf, bf), {"q_scale": 2.0}, "q_scale must be None for bf16 inputs"),
        ((bf, bf, bf), {"v_scale": 2.0}, "v_scale must be None for bf16 inputs"),
        ((bf, bf, bf), {"k_scale": torch.ones(1, 2, 8)}, "k_scale must be None for bf16 inputs"),
        ((f8, f8, f8), {"q_scale": torch.ones(1, 2, 9)}, r"q_scale must broadcast to \(batch, heads, seqlen\)"),
        ((f8, f8, f8), {"k_scale": torch.ones(3, 8)}, r"k_scale must broadcast to \(batch, heads, seqlen\)"),
        ((f8, f8, f8), {"q_scale": torch.ones(1, 2, 8, dtype=torch.int32)}, "q_scale must be a float, None or a floating"),
        ((f8, f8, f8), {"v_scale": 0.0}, "v_scale must be finite and > 0"),
        ((f8, f8, f8), {"v_scale": math.inf}, "v_scale must be finite and > 0"),
        ((f8, f8, f8), {"q_scale": -1.0}, r"flash_attention: q_scale must be finite and > 0, got -1.0"),
        ((f8[..., :64].repeat(1, 1, 1, 8),) * 3, {}, "head_dim must be one of 64, 128, 256 on sm_90a in the emulator "
                                                     "for fp8, got 512"),
    ]
    with emulator(target="sm_90a"):
        for args, kwargs, message in cases:
            with pytest.raises(LaunchError, match=message):
                flash_attention(*args, **kwargs)


def test_triton_v_transpose_matches_the_torch_copy():
    """The op's Triton V^T copy (used on CUDA) against its torch permute, in Triton's CPU interpreter."""
    import os
    import subprocess
    import sys

    pytest.importorskip("triton")
    code = """
import torch
from fa4_mlir.torch import v_transpose as vt
kernel = vt._triton_kernel()
for shape, rows in [((2, 37, 3, 64), 8), ((1, 200, 2, 128), 8), ((2, 16, 1, 256), 0), ((1, 1, 1, 64), 0),
                   ((1, 70, 2, 128), 0)]:
    v = (torch.randn(shape) * 8).to(torch.float8_e4m3fn)
    strided = torch.cat([v, v], dim=2)[:, :, shape[2]:]  # every other head block: outer strides doubled
    for x in (v, strided):
        ours = vt._triton_transposed(kernel, x, rows).view(torch.uint8)
        assert torch.equal(vt._torch_transposed(x, rows).view(torch.uint8), ours), (shape, rows)
print("ok")
"""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("form", ["exp2_poly", "exp2_poly_fma"])
def test_polynomial_exp2_is_within_2e4_of_exp2_in_the_emulator(form):
    """Both polynomial forms (``kernels/attention/exp2.py``) built into a one-warp kernel, run in the
    emulator: relative error <= 2e-4 against float64 2^x on [-126, 100] (the degree-3 polynomial's own
    error is about 1e-4), -inf gives 0 exactly."""
    from fa4_mlir import dsl, emu
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.dsl import math as fm
    from fa4_mlir.kernels.attention import exp2

    k = dsl.Kernel("poly", "sm_90a", num_warps=1)
    k.ptr("x", doc="x[32] f32")
    k.ptr("y", doc="y[32] f32")
    with k.body() as arg:
        f32 = fm.f32()
        t = dsl.tid_x()
        x = dsl.llvm.load(f32, dsl.element_ptr(arg.x, t, f32))
        dsl.llvm.store(getattr(exp2, form)(x), dsl.element_ptr(arg.y, t, f32))
    ptx = compile_kernel(k.source(grid="(1, 1, 1)"), stop="ptx").ptx
    assert ("add.rm.ftz.f32" in ptx) == (form == "exp2_poly_fma") and "ex2" not in ptx
    fixed = [-np.inf, -126.0, -125.5, -100.25, -30.3, -8.0, -1.5, -1.0, -0.25, -1e-7, 0.0, 1e-7, 0.1, 1.0, 7.99, 8.0,
             100.0]
    x = np.concatenate([fixed, np.random.default_rng(0).uniform(-40, 9, 32 - len(fixed))]).astype(np.float32)
    y = np.zeros(32, np.float32)
    emu.load_ptx(ptx).launch("poly", block=(32, 1, 1), args=[x, y])
    ref = np.exp2(x.astype(np.float64))
    assert y[0] == 0.0
    rel = np.abs(y[1:] - ref[1:]) / ref[1:]
    assert rel.max() <= 2e-4, (x[1:][rel.argmax()], rel.max())


def test_packed_f16_exp2_rounds_like_exp2_to_e4m3_in_the_emulator():
    """``exp2.exp2_poly_f16x2`` (``AttentionConfig.exp2_f16x2``) built into a one-warp kernel, run in the
    emulator on 64 values a thread-pair (lo, hi): each half within 6e-3 of float64 2^x on [-14, 8] (f16's
    rounding of x and the degree-2 polynomial, ``exp2.py``); below -14 (and -inf) 2^-14, which e4m3 rounds to 0;
    rounded to e4m3, at most 3% of the values land on the neighbouring e4m3 value and none further."""
    from fa4_mlir import dsl, emu
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.dsl import math as fm
    from fa4_mlir.kernels.attention import exp2

    k = dsl.Kernel("packed", "sm_90a", num_warps=1)
    k.ptr("x", doc="x[64] f32: lanes' (lo, hi) pairs")
    k.ptr("y", doc="y[32] f16x2 words")
    with k.body() as arg:
        f32, i32 = fm.f32(), dsl.i32()
        t = dsl.tid_x()
        lo, hi = (dsl.llvm.load(f32, dsl.element_ptr(arg.x, t * 2 + h, f32)) for h in (0, 1))
        dsl.llvm.store(exp2.exp2_poly_f16x2(lo, hi), dsl.element_ptr(arg.y, t, i32))
    ptx = compile_kernel(k.source(grid="(1, 1, 1)"), stop="ptx").ptx
    assert "fma.rn.f16x2" in ptx and "add.s16x2" in ptx and "ex2" not in ptx
    rng = np.random.default_rng(1)
    fixed = [-np.inf, -1e30, -200.0, -14.5, -14.0, -13.99, -8.5, -0.5, -1e-6, 0.0, 0.4999, 0.5, 1.0, 7.99, 8.0]
    for sample in range(4):  # 256 values, the fixed ones first
        x = np.concatenate([fixed, rng.uniform(-14, 8, 64 - len(fixed))]) if sample == 0 else rng.uniform(-14, 8, 64)
        x = x.astype(np.float32)
        words = np.zeros(32, np.uint32)
        emu.load_ptx(ptx).launch("packed", block=(32, 1, 1), args=[x, words])
        y = words.view(np.float16).astype(np.float64)  # little-endian: the low half (lo) first, as x
        low = x <= -14
        assert np.all(y[low] == 2.0 ** -14), (x[low], y[low])
        ref = np.exp2(x[~low].astype(np.float64))
        rel = np.abs(y[~low] - ref) / ref
        assert rel.max() <= 6e-3, (x[~low][rel.argmax()], rel.max())
        ours, exact = (torch.tensor(v, dtype=torch.float32).to(torch.float8_e4m3fn).view(torch.uint8).int()
                       for v in (y, np.exp2(x.astype(np.float64))))
        steps = (ours - exact).abs()
        assert steps.max() <= 1 and steps.float().mean() <= 0.03, (steps.max(), steps.float().mean())
        assert torch.all(ours[torch.from_numpy(low)] == 0)
