"""The absorbed-MLA forward on sm_100a (fa4_mlir.kernels.attention.depth512.mla, issue 24): executed in
the PTX emulator with the race checks on and compared with the float64 ``reference.mla_attention``
under the depth-512 emulator matrix's bounds (O within twice the error of the same computation with P
rounded to the kernel's dtype, the LSE within ``reference.lse_tolerance``). Decode (Sq 1 and 2 with 16
and 128 heads: the heads fill the pair's rows) and prefill-like shapes (Sq = Sk, 16 heads, several
query tiles), causal and not, odd key counts (1, 100, 257: masked tails, one and two key tiles).
Each case takes seconds (CI: the i-th case under scheduler seed i % 3); FA4_EMU_FULL_MATRIX=1 runs
every case under seeds 0, 1, 2 and adds longer prefill shapes (``EXTRA``).
Also the config's rules and the launch geometry's errors, and the ptxas/verifier facts of each kernel.
"""

from __future__ import annotations

import math
import os
import re
import tempfile

import numpy as np
import pytest

import ci_sample

from fa4_mlir import reference
from fa4_mlir.configs.depth512 import Depth512Config
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels.attention.depth512 import mla

SEEDS = (0, 1, 2)
FULL = os.environ.get("FA4_EMU_FULL_MATRIX", "0") == "1"
LATENT, ROPE = mla.LATENT, mla.ROPE

# (heads, causal, batch, seq_q, seq_k); five kernels (one compile each, about 8 s)
CASES = [
    (16, False, 1, 1, 1), (16, True, 2, 2, 100), (128, False, 1, 1, 257), (128, True, 1, 2, 300),
    (16, False, 1, 2, 513), (16, True, 1, 130, 130), (3, True, 1, 5, 70), (128, False, 2, 2, 100),
]
# FA4_EMU_FULL_MATRIX=1 adds longer prefill-like shapes (about a minute each) and two more head counts
EXTRA = [(16, False, 1, 257, 257), (16, True, 1, 260, 257), (32, False, 1, 3, 100), (64, True, 1, 5, 700)]
ACTIVE = CASES + EXTRA if FULL else CASES
_compiled: dict = {}


def _kernel(heads: int, causal: bool):
    """The emulated kernel of (heads, causal), compiled once per session (ptxas and the protocol
    verifier run) and checked for spills."""
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.runtime import EmulatedKernel
    from fa4_mlir.runtime.artifacts import read_artifact

    key = (heads, causal)
    if key not in _compiled:
        config = Depth512Config(rope_depth=ROPE, group=heads)
        result = compile_kernel(mla.build(config, causal=causal))
        out = tempfile.TemporaryDirectory(prefix="fa4-mla-")  # removed when the session ends
        result.write(out.name)
        _compiled[key] = config, result.manifest, EmulatedKernel(read_artifact(out.name)), out
    return _compiled[key][:3]


def launch(kernel, config, q_nope, q_rope, kv, k_rope, o, lse, scale, seed):
    """Run the emulated kernel on host arrays (bf16 bits); kv and k_rope get their unit head axis."""
    from fa4_mlir.runtime import GlobalTensor

    b, sq, h, _ = q_nope.shape
    sk = kv.shape[1]
    e = config.dtype
    t = lambda a: GlobalTensor.host(a, e)  # noqa: E731
    kv4, rope4 = kv.reshape(b, sk, 1, LATENT), k_rope.reshape(b, sk, 1, ROPE)
    return kernel.launch(mla.launch_geometry(config, b, sq, h, sk),
                         {"q_nope": t(q_nope), "q_rope": t(q_rope), "kv": t(kv4), "kv_v": t(kv4),
                          "k_rope": t(rope4), "o": t(o), "lse": lse, "seq_q": sq, "seq_k": sk, "num_heads": h,
                          "scale_log2e": scale * math.log2(math.e), "write_lse": int(lse is not None)}, seed=seed)


def run_case(heads, causal, batch, seq_q, seq_k, seed):
    config, _, kernel = _kernel(heads, causal)
    rng = np.random.default_rng(seed)
    e = config.dtype
    q_nope = reference.random_bits(rng, (batch, seq_q, heads, LATENT), e, 1.0)
    q_rope = reference.random_bits(rng, (batch, seq_q, heads, ROPE), e, 1.0)
    kv = reference.random_bits(rng, (batch, seq_k, LATENT), e, 1.0)
    k_rope = reference.random_bits(rng, (batch, seq_k, ROPE), e, 1.0)
    o = np.full((batch, seq_q, heads, LATENT), reference.POISON[e], np.uint16)
    lse = np.full((batch, heads, seq_q), np.nan, np.float32)
    scale = 1 / math.sqrt(LATENT + ROPE)
    launch(kernel, config, q_nope, q_rope, kv, k_rope, o, lse, scale, seed)
    f = [reference.to_f64(x, e) for x in (q_nope, q_rope, kv, k_rope)]
    ref, ref_lse = reference.mla_attention(*f, causal, scale)
    yard = reference.mla_attention_yardstick(*f, causal, scale, e)
    return reference.compare(o, ref, yard, e), float(np.abs(lse - ref_lse).max()), reference.lse_tolerance(ref_lse)


def test_the_cases_cover_the_issues_shapes():
    assert len(CASES) >= 8
    assert {c[0] for c in CASES if c[3] <= 2} >= {16, 128} and {c[3] for c in CASES} >= {1, 2}
    assert any(c[3] == c[4] and 130 <= c[3] <= 260 for c in CASES)  # prefill-like
    assert {1, 100, 257} <= {c[4] for c in CASES} and {c[1] for c in CASES} == {False, True}


# CI: every pair of head count and mask (``ci_sample.covering``) under one seed; FA4_EMU_FULL_MATRIX=1: every case
# under all three, and EXTRA
CI_CASES = ci_sample.covering([{"heads": c[0], "causal": c[1]} for c in CASES])
SELECTED = ci_sample.in_ci(list(enumerate(ACTIVE)), CI_CASES + list(range(len(CASES), len(ACTIVE))))


@pytest.mark.parametrize("index, case", SELECTED,
                         ids=[f"h{h}-{'causal' if c else 'full'}-{b}x{sq}x{sk}" for h, c, b, sq, sk in ACTIVE])
def test_mla_in_the_emulator(index, case):
    for seed in SEEDS if FULL else (SEEDS[index % len(SEEDS)],):
        cmp, lse_err, lse_limit = run_case(*case, seed)
        assert cmp.ok and not cmp.unwritten, f"seed {seed}: {cmp.summary()}"
        assert lse_err <= lse_limit, f"seed {seed}: LSE max abs error {lse_err} (limit {lse_limit})"


@pytest.mark.parametrize("heads, causal", sorted({(c[0], c[1]) for c in ACTIVE}))
def test_each_kernel_verifies_and_assembles_without_spills(heads, causal):
    config, m, _ = _kernel(heads, causal)
    assert (m["spill_stores"], m["spill_loads"], m["stack_frame"]) == (0, 0, 0), m
    assert m["threads"] == [384, 1, 1] and m["cluster"] == [2, 1, 1]
    assert m["smem_bytes"] == config.smem_used == 205188
    assert [p["name"] for p in m["params"]] == [p.name for p in mla.params(*mla.boxes(mla.Spec(config)))]


def test_the_built_kernel_places_the_mla_layout():
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.layouts import depth512_layout
    from fa4_mlir.placement import place_contiguous, place_smem

    config = Depth512Config(rope_depth=ROPE, group=128)
    text = compile_kernel(mla.build(config), stop="fa4").mlir
    layout = depth512_layout(config)
    placed = place_smem([(r.name, r.bytes, r.align, r.alias_of, 0) for r in layout.regions])
    regions = {a["sym_name"]: a for a in _attrs(text, "smem_region")}
    for r in layout.regions:
        if r.alias_of is None:
            assert (int(regions[r.name]["offset"]), int(regions[r.name]["bytes"])) == (placed.offsets[r.name], r.bytes)
    assert f"fa4.smem_bytes = {placed.total} " in text and placed.total == config.smem_used
    barriers = {a["sym_name"]: a for a in _attrs(text, "mbarrier_alloc")}
    indices = place_contiguous([(b.name, len(b.counts)) for b in layout.barriers]).offsets
    assert list(barriers) == [b.name for b in layout.barriers]
    assert {n: int(a["index"]) for n, a in barriers.items()} == indices
    # Q's five depth chunks: four latent chunks of 64 x 128 and the 64 x 64 rope chunk right after them
    aliases = {a["sym_name"]: (int(a["offset"]), int(a["bytes"])) for a in _attrs(text, "smem_alias")
               if a["sym_name"].startswith("q_")}
    assert aliases == {**{f"q_{s}": (s * 16384, 16384) for s in range(4)}, "q_4": (65536, 8192)}


def _attrs(text: str, op: str) -> list[dict[str, str]]:
    """The attributes of every ``op`` in the printed fa4-stage module."""
    out = []
    for m in re.finditer(rf'"fa4\.{op}"\([^)]*\) \{{([^}}]*)\}}', text):
        out.append({k: v.strip('"') for k, v in re.findall(r'(\w+) = ("[^"]*"|[-\w]+)', m.group(1))})
    return out


def test_the_mla_layout():
    c = Depth512Config(rope_depth=ROPE, group=16).validate()
    assert (c.bm, c.bn, c.mma_m, c.num_kv_stages, c.num_k_chunks, c.q_bytes) == (64, 256, 128, 3, 5, 64 * 576 * 2)
    assert (c.smem_used, c.tmem_used, c.num_mbarriers) == (205188, 512, 16)
    assert {k: v[0] for k, v in c.tmem_columns.items()} == {"O_lo": 0, "O_hi": 128, "S_even": 256, "S_odd": 384}


@pytest.mark.parametrize("kwargs, message", [
    (dict(rope_depth=32), r"Depth512Config.rope_depth must be 0 or 64 \(absorbed MLA\), got 32"),
    (dict(rope_depth=64, qk_depth=256), r"Depth512Config.qk_depth must be 512 with rope_depth 64 \(the MLA "
                                        r"latent\), got 256"),
    (dict(rope_depth=64, ov_depth=256), r"Depth512Config.ov_depth must be 512 \(or None\) with rope_depth 64 "
                                        r"\(V is the latent\), got 256"),
    (dict(rope_depth=64, dtype="fp8_e4m3"), r"Depth512Config.rope_dtype must be bf16 or fp16 with an fp8_e4m3 "
                                            r"dtype \(else None or the dtype\) with rope_depth 64, got None"),
    (dict(rope_depth=64, page_size=64), r"Depth512Config.page_size must be 0 with rope_depth 64 \(MLA is not "
                                        r"paged\), got 64"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Depth512Config(**kwargs)


def test_build_and_launch_errors():
    with pytest.raises(ConfigError, match=r"mla config's rope_depth must be 64 \(absorbed MLA\), got 0"):
        mla.build(Depth512Config(qk_depth=512))
    with pytest.raises(TypeError, match=r"config must be a Depth512Config, got dict"):
        mla.build({})
    with pytest.raises(ConfigError, match=r"mla causal must be True or False, got 1"):
        mla.build(Depth512Config(rope_depth=64, group=16), causal=1)
    config = Depth512Config(rope_depth=64, group=16)
    with pytest.raises(LaunchError, match=r"heads must be the config's group \(16; the kernel packs the heads "
                                          r"into its rows\), got 8"):
        mla.launch_geometry(config, 1, 1, 8, 1)
    with pytest.raises(LaunchError, match=r"batch, seq_q, heads and seq_k must be >= 1, got 1, 0, 16, 1"):
        mla.launch_geometry(config, 1, 0, 16, 1)
    with pytest.raises(LaunchError, match=r"heads / fused heads and batch must be <= 65535, got 1, 65536"):
        mla.launch_geometry(config, 65536, 1, 16, 1)


def test_launch_geometry():
    # 16 heads: 8 positions per pair; 128 heads: one position per pair (heads split over the pair);
    # 3 heads do not divide 128: one head per pair, 128 positions
    assert mla.launch_geometry(Depth512Config(rope_depth=64, group=16), 2, 17, 16, 5) == (6, 1, 2)
    assert mla.launch_geometry(Depth512Config(rope_depth=64, group=128), 1, 2, 128, 5) == (4, 1, 1)
    assert mla.launch_geometry(Depth512Config(rope_depth=64, group=3), 1, 129, 3, 5) == (4, 3, 1)


@pytest.mark.parametrize("param, change", [("k_rope", "leader only"), ("q_rope", "dropped"), ("kv_v", "dropped")])
def test_the_verifier_rejects_a_broken_rope_or_v_load(param, change):
    """Mutants of the MLA kernel's loads (in the printed fa4 IR): the peer's half of the K rope chunk, or
    the first Q rope / V load removed; the protocol verifier finds the slot's bytes no longer match."""
    from fa4_mlir.core.compiler import CompileError, compile_kernel

    src = mla.build(Depth512Config(rope_depth=ROPE, group=16))
    lines = src.mlir.split("\n")
    arg = f"%arg{[p.name for p in src.params].index(param)}"
    i = next(i for i, line in enumerate(lines) if re.search(rf'"fa4\.tma_load"\({arg}\b', line))
    indent = re.match(r"\s*", lines[i]).group(0)
    new = [f"{indent}scf.if %leader {{", "  " + lines[i], f"{indent}}}"] if change == "leader only" else []
    with pytest.raises(CompileError) as exc:
        compile_kernel("\n".join(lines[:i] + new + lines[i + 1:]), stop="fa4")
    classes = re.findall(r"protocol error \[([a-z-]+)\]", "\n".join([str(exc.value), *exc.value.diagnostics]))
    assert classes and classes[0] == "tx-mismatch", classes
