"""NVIDIA's CuTe DSL Blackwell GEMM, executed: the CUTLASS example DenseGemmKernel
(examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm.py, pinned in
test/python/emu_ptx/kernels_cute_sm100a.json) compiled by nvidia-cutlass-dsl 4.8.1 for sm_100a without a
GPU (test/python/emu_ptx/generate_cute.py), run in the PTX emulator on random bf16 inputs with the race
checks on, and compared with a float64 NumPy GEMM.

Four configurations: one CTA with a 128x128 MMA tile and a TMA-store epilogue; a CTA pair
(tcgen05.mma.cta_group::2, 256x128 tile, cluster 2x1, multicast commit, peer mbarriers); the pair with a
128x128 MMA tile (tcgen05.mma.cta_group::2 with M = 128: 64 rows of A and of D per CTA, D in the ISA's
data-path layout B, which the epilogue's tcgen05.ld reads back); and one CTA whose
epilogue stores C with st.global through a CuTe tensor passed by value (a pointer inside a .b8
aggregate, ``emu.Aggregate``). The kernels use the disable-output-lane operand of tcgen05.mma and use
tcgen05.ld results without tcgen05.wait::ld (a true register dependency, PTX ISA 9.7.16.6.4.5).
"""

from __future__ import annotations

import json
import pathlib
import re
import struct

import numpy as np
import pytest

from fa4_mlir import emu

HERE = pathlib.Path(__file__).resolve().parent / "emu_ptx"
MANIFEST = json.loads((HERE / "kernels_cute_sm100a.json").read_text())
_PROGRAMS: dict = {}


def program(name: str) -> emu.Program:
    if name not in _PROGRAMS:
        _PROGRAMS[name] = emu.load_ptx((HERE / MANIFEST[name]["file"]).read_text())
    return _PROGRAMS[name]


def bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, round to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def arguments(fixture: dict, arrays: dict, dims: dict) -> list:
    """The .entry arguments, packed as the manifest describes (the DSL's host launcher does the same)."""
    out = []
    for p in fixture["params"]:
        if p["kind"] == "bytes":
            out.append(bytes(p["size"]))
        elif p["kind"] == "tensormap":
            out.append(emu.TensorMap(arrays[p["array"]], box=tuple(p["box"]), swizzle=p["swizzle"], dtype=p["dtype"]))
        elif p["kind"] == "s32x3":
            out.append(struct.pack("<3i", *(dims[v] for v in p["values"])))
        elif p["kind"] == "aggregate":
            out.append(emu.Aggregate([(t, arrays[v] if v in arrays else eval(v, {}, dict(dims)))
                                      for t, v in p["fields"]]))
        else:
            raise AssertionError(f"unknown parameter kind {p['kind']}")
    return out


IMPLICIT = "implicit-tcgen05-fences"


def run(name: str, m: int, n: int, k: int, l: int, seed: int, race_checks=IMPLICIT, text: str | None = None):
    fixture = MANIFEST[name]
    launch = fixture["launch"]
    rng = np.random.default_rng(1000 * seed + m + n + k)
    a, b = bf16(rng.standard_normal((l, m, k))), bf16(rng.standard_normal((l, n, k)))
    c = np.full((l, m, n), 0xFFFF, np.uint16)  # a bf16 NaN: an element the kernel never writes shows
    tile_m, tile_n = launch["cta_tile_mn"]
    cm, cn, _ = launch["cluster"]
    grid = (-(-(-(-m // tile_m)) // cm) * cm, -(-(-(-n // tile_n)) // cn) * cn, l)
    kernel = emu.load_ptx(text) if text else program(name)
    kernel.launch(fixture["entry"], grid=grid, block=tuple(launch["block"]), cluster=tuple(launch["cluster"]),
                  smem_bytes=launch["smem_bytes"], seed=seed, race_checks=race_checks,
                  args=arguments(fixture, {"a": a, "b": b, "c": c}, {"M": m, "N": n, "K": k, "L": l}))
    want = np.einsum("lmk,lnk->lmn", f64(a), f64(b))
    scale = np.einsum("lmk,lnk->lmn", np.abs(f64(a)), np.abs(f64(b)))
    return f64(c), want, scale


CASES = [
    ("cute_dense_gemm_1cta", (256, 256, 256, 1)),
    ("cute_dense_gemm_1cta", (200, 136, 72, 2)),    # partial M and N tiles, K not a multiple of the 64 tile
    ("cute_dense_gemm_2cta", (512, 256, 256, 1)),
    ("cute_dense_gemm_2cta", (300, 264, 136, 1)),   # the second pair's odd CTA is entirely out of bounds
    ("cute_dense_gemm_1cta_stg", (256, 384, 192, 2)),
    # The pair with M = 128 (64 rows per CTA, data-path layout B: each CTA's D in 128 lanes x N/2 columns).
    ("cute_dense_gemm_2cta_m128", (256, 256, 256, 1)),
    ("cute_dense_gemm_2cta_m128", (150, 264, 72, 2)),  # partial M, N and K tiles; the 2nd pair's odd CTA is all out
    ("cute_dense_gemm_2cta_m128", (64, 136, 200, 1)),  # one pair whose odd CTA is entirely out of bounds
]


@pytest.mark.parametrize("name, shape", CASES, ids=[f"{n}-{'x'.join(map(str, s))}" for n, s in CASES])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cute_dense_gemm_matches_numpy(name, shape, seed):
    # Every check on (in-flight TMA loads, MMA operands and TMEM cells; the happens-before race checks),
    # in the mode where a thread sync performs the tcgen05 fences: this NVIDIA kernel emits none (the
    # strict reading's report is pinned below).
    got, want, scale = run(name, *shape, seed)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} elements of C were never written"
    # bf16 output: half an ulp from rounding (at most 2^-8 of the value, just above a power of two), plus
    # the fp32 accumulation over K (bounded by K * 2^-24 * sum |a||b|, with margin).
    err = np.abs(got - want)
    bound = 2.0 ** -8 * np.abs(want) + shape[2] * 2.0 ** -23 * scale + 1e-30
    assert (err <= bound).all(), (f"max error {err.max():.3g} at {np.unravel_index(np.argmax(err / bound), err.shape)}"
                                  f", {np.max(err / bound):.3g} x the bound")


def test_the_race_checks_still_see_a_missing_wait_in_nvidias_kernel():
    # The implicit-fences mode assumes only the tcgen05 fences: the MMA warp's wait for a stage's TMA loads
    # deleted (the first mbarrier wait before the MMA loop's tcgen05.mma), its MMA reads bytes not landed.
    name = "cute_dense_gemm_1cta"
    lines = (HERE / MANIFEST[name]["file"]).read_text().split("\n")
    mma = next(i for i, line in enumerate(lines) if "tcgen05.mma.cta_group::1" in line)
    wait = max(i for i, line in enumerate(lines[:mma]) if "mbarrier.try_wait.parity.shared.b64 P1" in line)
    lines[wait] = lines[wait].replace("mbarrier.try_wait.parity.shared.b64 P1,", "setp.eq.u32 P1, 0, 0; //")
    with pytest.raises(emu.ProtocolError, match=r"tcgen05\.mma.* reads shared bytes"):
        run(name, 256, 256, 256, 1, 0, text="\n".join(lines))


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_the_kernel_omits_the_after_thread_sync_fence_the_isa_pattern_has(name):
    # CuTe DSL 4.8.1's DenseGemmKernel executes no tcgen05.fence at all: its epilogue waits on the
    # accumulator-full mbarrier (arrived on by tcgen05.commit) and then reads TMEM with tcgen05.ld, where
    # the ISA's canonical mma -> commit -> wait -> ld pattern has tcgen05.fence::after_thread_sync before
    # the load (docs/emulator-tcgen05-isa.md sections 7.1 and 11). The race checker reports that.
    with pytest.raises(emu.ProtocolError, match=r"tcgen05\.fence::after_thread_sync"):
        run(name, 256, 256, 128, 1, 0, race_checks=True)


def test_manifest_matches_the_committed_fixtures():
    import hashlib
    for name, fixture in MANIFEST.items():
        text = (HERE / fixture["file"]).read_text()
        assert hashlib.sha256(text.encode()).hexdigest() == fixture["sha256"], name
        assert fixture["target"] == "sm_100a" and ".target sm_100a" in text
        assert fixture["source"]["commit"] == "7107b05535f8977f5ecb9d01ee203205b1fd9bc4"
        assert not re.search(r'"/[^"\s]*"|\.file\s', text), "the fixture must not name the generating machine's paths"
        group = 2 if fixture["config"]["use_2cta_instrs"] else 1
        assert f"tcgen05.mma.cta_group::{group}.kind::f16" in text


def test_a_missing_operand_is_a_clear_error():
    # The fixture launched with the disable-output-lane bytes dropped: the aggregate length is checked.
    fixture = MANIFEST["cute_dense_gemm_1cta"]
    a = np.zeros((1, 128, 64), np.uint16)
    args = arguments(fixture, {"a": a, "b": a, "c": a.copy()}, {"M": 128, "N": 128, "K": 64, "L": 1})
    args[0] = bytes(16)
    with pytest.raises(emu.LaunchArgumentError, match=r"must be 32 bytes, got 16"):
        program("cute_dense_gemm_1cta").launch(fixture["entry"], grid=(1, 1, 1), block=(128, 1, 1),
                                               smem_bytes=fixture["launch"]["smem_bytes"], args=args)
