"""NumPy launches and references for the Triton PTX fixtures (no Triton needed).

    import numpy as np
    from reference import FIXTURES, case, ptx_text
    for name in FIXTURES:
        grid, block, smem_bytes, args, check = case(name, np.random.default_rng(0))
        prog = fa4_mlir.emu.load_ptx(ptx_text(name))
        prog.launch(entry(name), grid=grid, block=block, cluster=(1, 1, 1), smem_bytes=smem_bytes,
                    args=args, seed=0)
        check(args)

``args`` follows the ``.entry`` parameter order exactly (kernels.json ``params``):

* a pointer parameter gets a NumPy array; the launcher copies it into (>= 16-byte aligned, better
  256-byte like cudaMalloc) global memory, passes its address, and copies it back into the same
  array after the kernel, so ``check(args)`` reads the results from the arrays it handed out.
  bf16 arrays are ``np.uint16`` holding the bf16 bit patterns (NumPy has no bfloat16); fp16 is
  ``np.float16``.
* a ``.u32`` / ``.u64`` scalar gets a Python int, a ``.f32`` scalar a Python float.
* ``None`` is a null pointer (0): Triton's hidden trailing profile-scratch pointer, and its
  global-scratch pointer when the kernel needs none.
* a ``TensorMap`` is a by-value ``.param .align 64 .b8 [128]`` CUtensorMap; it holds the arguments
  Triton's launcher gives ``cuTensorMapEncodeTiled`` (the array in ``base``), and the emulator
  encodes it in whatever 128-byte layout its ``tensormap.replace`` / ``cp.async.bulk.tensor``
  implementation reads (the hardware layout is undocumented).

Input padding (columns beyond the logical size inside a larger leading dimension) is filled with
NaN, and outputs start as NaN-free sentinels, so a leaked masked load or a stray store fails
``check``.  Tolerances are against float64 NumPy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

try:
    from .shapes import SHAPES, cdiv, spec_key
except ImportError:  # run as a script / imported with this folder on sys.path
    from shapes import SHAPES, cdiv, spec_key

HERE = Path(__file__).resolve().parent
SENTINEL = -12288.0  # what output arrays hold before the launch (exact in fp32, fp16 and bf16)


@lru_cache(None)
def manifest() -> dict:
    """kernels.json (the sm_90a fixtures), then the fixtures only kernels_sm100a.json has (the fp8 matmul,
    whose Hopper form would be a different kernel); a name in both keeps its sm_90a entry."""
    out = json.loads((HERE / "kernels.json").read_text())
    for name, entry in json.loads((HERE / "kernels_sm100a.json").read_text()).items():
        out.setdefault(name, entry)
    return out


FIXTURES = tuple(n for n, m in manifest().items() if m["target"] == "sm_90a")
SM100A_ONLY = tuple(n for n, m in manifest().items() if m["target"] == "sm_100a")


def ptx_text(name: str) -> str:
    return (HERE / manifest()[name]["file"]).read_text()


def entry(name: str) -> str:
    return manifest()[name]["entry"]


# ----------------------------------------------------------------------------------------------
# dtypes
# ----------------------------------------------------------------------------------------------


def f32_to_bf16_bits(x) -> np.ndarray:
    """Round-to-nearest-even fp32 -> bf16 bit patterns (np.uint16); NaN stays NaN."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def bf16_bits_to_f32(b) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


BF16_NAN = np.uint16(0x7FC0)
FP8_NAN = np.uint8(0x7F)  # a NaN in both e4m3 (S.1111.111) and e5m2 (S.11111.11)


def fp8_bits_to_f64(bits, fmt: str) -> np.ndarray:
    """e4m3 (bias 7, no infinities, S.1111.111 NaN) or e5m2 (bias 15, IEEE-style specials) bytes as float64
    (PTX ISA "Alternate floating point data formats")."""
    b = np.asarray(bits, np.uint8).astype(np.int64)
    ebits, mbits, bias = (4, 3, 7) if fmt == "e4m3" else (5, 2, 15)
    sign = np.where(b >> 7, -1.0, 1.0)
    e, m = (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
    value = np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (1 + m / (1 << mbits)) * 2.0 ** (e - bias)) * sign
    top = (1 << ebits) - 1
    if fmt == "e4m3":
        return np.where((e == top) & (m == (1 << mbits) - 1), np.nan, value)
    return np.where(e == top, np.where(m == 0, sign * np.inf, np.nan), value)


@dataclass
class TensorMap:
    """A CUtensorMap passed by value, as Triton 3.9's launcher encodes it for a host
    TensorDescriptor (``cuTensorMapEncodeTiled``).  Dimension lists are innermost first
    (CUDA order), i.e. reversed from the NumPy shape."""

    base: np.ndarray            # the array; the map's global address is its device address
    data_type: int              # CUtensorMapDataType: 9 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 (PTX elemtype 10)
    elem_bytes: int
    global_dim: list            # [K, M] for an M x K view
    global_strides: list        # bytes, dims 1..rank-1 (Triton also computes a last one, ignored)
    box_dim: list               # block_shape reversed
    element_strides: list = field(default_factory=lambda: [1, 1])
    interleave: int = 0         # CU_TENSOR_MAP_INTERLEAVE_NONE
    swizzle: int = 3            # CU_TENSOR_MAP_SWIZZLE_128B (Triton's tensordesc_meta "swizzle")
    l2_promotion: int = 2       # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
    oob_fill: int = 0           # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds reads give zeros


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _launch_facts(name):
    m = manifest()[name]
    return tuple(m["grid"]), tuple(m["block"]), int(m["smem_bytes"])


def _hidden(name):
    """Triton's two trailing parameters: global scratch, profile scratch."""
    m = manifest()[name]
    out = []
    for p in m["params"][-2:]:
        assert p["kind"] in ("global_scratch", "profile_scratch"), p
        out.append(np.zeros(p["total_bytes"], np.uint8) if p["total_bytes"] > 0 else None)
    return out


def _check_spec(name, **values):
    """The sizes must specialise like the ones the fixture was compiled for."""
    spec = manifest()[name]["specialisation"]
    for k, v in values.items():
        s = spec[k]
        want = {"constexpr": "constexpr", "specialised_to_1": "constexpr"}.get(s["kind"])
        if want is None:
            want = "D" if s.get("divisibility") == 16 else ""
        assert spec_key(v) == want, f"{name}: {k}={v} does not match the fixture's specialisation {s}"


def _check_arity(name, args):
    params = manifest()[name]["params"]
    assert len(args) == len(params), (name, len(args), len(params))
    for a, p in zip(args, params):
        if p["kind"] == "tensormap":
            assert isinstance(a, TensorMap) and p["bytes"] == 128
        elif p["kind"] == "pointer":
            assert isinstance(a, np.ndarray) and p["ptx_type"] == ".u64"
        elif p["kind"] == "scalar":
            assert isinstance(a, float) == (p["ptx_type"] == ".f32"), (name, p)


def _pad(rng_vals, rows, cols, ld, fill):
    a = np.full((rows, ld), fill, dtype=rng_vals.dtype)
    a[:, :cols] = rng_vals
    return a


def _assert_close(got, want, tol, what):
    got = np.asarray(got, np.float64)
    err = np.abs(got - want)
    bad = ~(err <= tol)  # NaN counts as bad
    if bad.any():
        i = np.argwhere(bad)[0]
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements out of tolerance; first at {tuple(i)}: "
            f"got {got[tuple(i)]!r}, want {want[tuple(i)]!r}, tol {np.broadcast_to(tol, want.shape)[tuple(i)]!r}")


def _assert_untouched(arr, region_mask, what):
    a = np.asarray(arr)
    vals = bf16_bits_to_f32(a) if a.dtype == np.uint16 else a.astype(np.float64)
    bad = region_mask & (vals != SENTINEL)
    if bad.any():
        raise AssertionError(f"{what}: {int(bad.sum())} padding elements were written (masked-off store)")


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------


def _vector_add(name, rng):
    s = SHAPES[name]
    n = s["n"]
    _check_spec(name, n=n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, SENTINEL, np.float32)
    args = [x, y, out, n, *_hidden(name)]

    def expected(args):
        x, y = args[0], args[1]
        return {2: (x.astype(np.float64) + y).astype(np.float32)}

    def check(args):
        want = expected(args)[2]
        if not np.array_equal(args[2], want):  # one fp32 rounding: exact
            _assert_close(args[2], want.astype(np.float64), 0.0, f"{name} out")

    return args, check, expected


def _softmax(name, rng):
    s = SHAPES[name]
    R, C = s["n_rows"], s["n_cols"]
    _check_spec(name, in_row_stride=s["in_stride"], out_row_stride=s["out_stride"], n_cols=C)
    x = (rng.standard_normal((R, C)) * 3).astype(np.float32)
    x[0, :] = -1e30  # an all-huge-negative row (no NaN: the max is subtracted first)
    x[1, 5] = 80.0   # one dominant element
    inp = _pad(x, R, C, s["in_stride"], np.float32(np.nan))
    out = np.full((R, s["out_stride"]), SENTINEL, np.float32)
    args = [out, inp, s["in_stride"], s["out_stride"], C, *_hidden(name)]

    def ref(args):
        x = args[1][:, :C].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def expected(args):
        full = np.full((R, s["out_stride"]), SENTINEL, np.float32)
        full[:, :C] = ref(args)
        return {0: full}

    def check(args):
        # ex2.approx + div.full: a few ulp
        _assert_close(args[0][:, :C], ref(args), 1e-6 + 1e-5 * ref(args), f"{name} out")
        pad = np.zeros(args[0].shape, bool)
        pad[:, C:] = True
        _assert_untouched(args[0], pad, f"{name} out")

    return args, check, expected


def _row_sum_bf16(name, rng):
    s = SHAPES[name]
    R, C, ld = s["n_rows"], s["n_cols"], s["stride"]
    _check_spec(name, n_rows=R, n_cols=C, stride_row=ld)
    x = f32_to_bf16_bits(rng.standard_normal((R, C)).astype(np.float32))
    xb = _pad(x, R, C, ld, BF16_NAN)
    out = np.full(R, SENTINEL, np.float32)
    args = [xb, out, R, C, ld, *_hidden(name)]

    def ref(args):
        return bf16_bits_to_f32(args[0][:, :C]).astype(np.float64).sum(axis=1)

    def expected(args):
        return {1: ref(args).astype(np.float32)}

    def check(args):
        mag = np.abs(bf16_bits_to_f32(args[0][:, :C]).astype(np.float64)).sum(axis=1)
        _assert_close(args[1], ref(args), 1e-5 * mag + 1e-6, f"{name} out")  # fp32 accumulation

    return args, check, expected


def _layernorm_fp16(name, rng):
    s = SHAPES[name]
    R, C, ld, eps = s["n_rows"], s["n_cols"], s["stride"], float(s["eps"])
    _check_spec(name, stride=ld, n_cols=C)
    x = (rng.standard_normal((R, C)) * 2 + 0.5).astype(np.float16)
    xb = np.full((R, ld), np.float16(np.nan), np.float16)
    xb[:, :C] = x
    if ld == C:  # no padding to poison; keep the layout simple
        xb = x.copy()
    w = (1 + 0.1 * rng.standard_normal(C)).astype(np.float32)
    b = (0.1 * rng.standard_normal(C)).astype(np.float32)
    y = np.full((R, ld), SENTINEL, np.float16)
    mean = np.full(R, SENTINEL, np.float32)
    rstd = np.full(R, SENTINEL, np.float32)
    args = [xb, y, w, b, mean, rstd, ld, C, eps, *_hidden(name)]

    def ref(args):
        x = args[0][:, :C].astype(np.float64)
        mu = x.mean(axis=1)
        var = ((x - mu[:, None]) ** 2).mean(axis=1)
        rs = 1 / np.sqrt(var + np.float32(eps))
        yy = (x - mu[:, None]) * rs[:, None] * args[2].astype(np.float64) + args[3]
        return yy, mu, rs

    def expected(args):
        yy, mu, rs = ref(args)
        full = np.full((R, ld), SENTINEL, np.float16)
        full[:, :C] = yy.astype(np.float16)
        return {1: full, 4: mu.astype(np.float32), 5: rs.astype(np.float32)}

    def check(args):
        yy, mu, rs = ref(args)
        _assert_close(args[4], mu, 1e-5 * np.abs(args[0][:, :C].astype(np.float64)).mean(axis=1) + 1e-6,
                      f"{name} mean")
        _assert_close(args[5], rs, 1e-5 * rs, f"{name} rstd")
        # fp16 output: half an fp16 ulp of rounding plus the fp32 arithmetic
        _assert_close(args[1][:, :C], yy, 1e-3 * np.abs(yy) + 1e-3, f"{name} y")
        if ld > C:
            pad = np.zeros(args[1].shape, bool)
            pad[:, C:] = True
            _assert_untouched(args[1], pad, f"{name} y")

    return args, check, expected


def _matmul_inputs(name, rng):
    s = SHAPES[name]
    M, N, K = s["M"], s["N"], s["K"]
    a = f32_to_bf16_bits(rng.uniform(-1, 1, (M, K)).astype(np.float32))
    b = f32_to_bf16_bits(rng.uniform(-1, 1, (K, N)).astype(np.float32))
    return s, M, N, K, _pad(a, M, K, s["lda"], BF16_NAN), _pad(b, K, N, s["ldb"], BF16_NAN)


def _mm_ref(abuf, bbuf, M, N, K):
    a = bf16_bits_to_f32(abuf[:, :K]).astype(np.float64)
    b = bf16_bits_to_f32(bbuf[:K, :N]).astype(np.float64)
    return a @ b, np.abs(a) @ np.abs(b)


def _matmul(name, rng):
    s, M, N, K, abuf, bbuf = _matmul_inputs(name, rng)
    _check_spec(name, M=M, N=N, K=K, stride_am=s["lda"], stride_ak=1, stride_bk=s["ldb"], stride_bn=1,
                stride_cm=s["ldc"], stride_cn=1)
    c = np.full((M, s["ldc"]), SENTINEL, np.float32)
    args = [abuf, bbuf, c, M, N, K, s["lda"], s["ldb"], s["ldc"], *_hidden(name)]

    def expected(args):
        full = np.full((M, s["ldc"]), SENTINEL, np.float32)
        full[:, :N] = _mm_ref(args[0], args[1], M, N, K)[0]
        return {2: full}

    def check(args):
        ref, mag = _mm_ref(args[0], args[1], M, N, K)
        # bf16 x bf16 products are exact in fp32; only the fp32 accumulation order differs
        _assert_close(args[2][:, :N], ref, 2e-5 * mag + 1e-6, f"{name} C")
        pad = np.zeros(args[2].shape, bool)
        pad[:, N:] = True
        _assert_untouched(args[2], pad, f"{name} C")

    return args, check, expected


def _matmul_fp8(name, rng):
    """A (e4m3) @ B (e5m2) from random bytes (every finite code: subnormals, both signs, the largest
    magnitudes), padding NaN; fp32 C against the float64 product of the dequantised inputs."""
    s = SHAPES[name]
    M, N, K = s["M"], s["N"], s["K"]
    _check_spec(name, M=M, N=N, K=K, stride_am=s["lda"], stride_ak=1, stride_bk=s["ldb"], stride_bn=1,
                stride_cm=s["ldc"], stride_cn=1)

    def finite(shape, fmt):
        bits = rng.integers(0, 256, shape, dtype=np.uint8)
        bits[~np.isfinite(fp8_bits_to_f64(bits, fmt))] &= 0xBB  # e4m3 0x7F -> 0x3B; e5m2 exponent 31 -> 27
        return bits
    abuf = _pad(finite((M, K), "e4m3"), M, K, s["lda"], FP8_NAN)
    bbuf = _pad(finite((K, N), "e5m2"), K, N, s["ldb"], FP8_NAN)
    c = np.full((M, s["ldc"]), SENTINEL, np.float32)
    args = [abuf, bbuf, c, M, N, K, s["lda"], s["ldb"], s["ldc"], *_hidden(name)]

    def ref(args):
        a = fp8_bits_to_f64(args[0][:, :K], "e4m3")
        b = fp8_bits_to_f64(args[1][:K, :N], "e5m2")
        return a @ b, np.abs(a) @ np.abs(b)

    def expected(args):
        full = np.full((M, s["ldc"]), SENTINEL, np.float32)
        full[:, :N] = ref(args)[0]
        return {2: full}

    def check(args):
        want, mag = ref(args)
        # fp8 x fp8 products are exact in fp32; only the fp32 accumulation differs
        _assert_close(args[2][:, :N], want, 2e-5 * mag + 1e-6, f"{name} C")
        pad = np.zeros(args[2].shape, bool)
        pad[:, N:] = True
        _assert_untouched(args[2], pad, f"{name} C")

    return args, check, expected


def _tmap(arr, rows, cols, ld, box_rows, box_cols, swizzle):
    return TensorMap(base=arr, data_type=9, elem_bytes=2, global_dim=[cols, rows],
                     global_strides=[ld * 2], box_dim=[box_cols, box_rows], swizzle=swizzle)


def _bf16_mm_check(name, args, a_i, b_i, c_i, M, N, K, ldc):
    get = (lambda x: x.base) if isinstance(args[a_i], TensorMap) else (lambda x: x)
    ref, mag = _mm_ref(get(args[a_i]), get(args[b_i]), M, N, K)
    cbuf = get(args[c_i])
    got = bf16_bits_to_f32(cbuf[:, :N]).astype(np.float64)
    # bf16 output: one rounding (<= 2^-8 relative) after the fp32 accumulation; allow one bf16 ulp
    # (2^-7) since accumulation-order differences can flip a rounding (the H100 reached 0.97 of 2^-8)
    _assert_close(got, ref, 2.0 ** -7 * np.abs(ref) + 2e-5 * mag + 1e-6, f"{name} C")
    pad = np.zeros(cbuf.shape, bool)
    pad[:, N:] = True
    _assert_untouched(cbuf, pad, f"{name} C")


def _bf16_mm_expected(args, a, b, M, N, K, ldc):
    full = np.full((M, ldc), SENTINEL, np.float32)
    full[:, :N] = _mm_ref(a, b, M, N, K)[0]
    return f32_to_bf16_bits(full)


def _matmul_tma(name, rng):
    s, M, N, K, abuf, bbuf = _matmul_inputs(name, rng)
    _check_spec(name, K=K)
    BM, BN, BK = s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]
    c = np.full((M, s["ldc"]), f32_to_bf16_bits(np.float32(SENTINEL)), np.uint16)
    metas = manifest()[name]["tensordesc_meta"]
    ta = _tmap(abuf, M, K, s["lda"], BM, BK, metas[0]["swizzle"])
    tb = _tmap(bbuf, K, N, s["ldb"], BK, BN, metas[1]["swizzle"])
    tc = _tmap(c, M, N, s["ldc"], BM, BN, metas[2]["swizzle"])
    # each descriptor is followed by its shape (i32 each) and strides (i64 each, in elements)
    args = [ta, M, K, s["lda"], 1, tb, K, N, s["ldb"], 1, tc, M, N, s["ldc"], 1, K, *_hidden(name)]

    def expected(args):
        return {10: _bf16_mm_expected(args, args[0].base, args[5].base, M, N, K, s["ldc"])}

    def check(args):
        _bf16_mm_check(name, args, 0, 5, 10, M, N, K, s["ldc"])

    return args, check, expected


def _matmul_tma_device(name, rng):
    s, M, N, K, abuf, bbuf = _matmul_inputs(name, rng)
    _check_spec(name, M=M, N=N, K=K, lda=s["lda"], ldb=s["ldb"], ldc=s["ldc"])
    c = np.full((M, s["ldc"]), f32_to_bf16_bits(np.float32(SENTINEL)), np.uint16)
    args = [abuf, bbuf, c, M, N, K, s["lda"], s["ldb"], s["ldc"], *_hidden(name)]

    def expected(args):
        return {2: _bf16_mm_expected(args, args[0], args[1], M, N, K, s["ldc"])}

    def check(args):
        _bf16_mm_check(name, args, 0, 1, 2, M, N, K, s["ldc"])

    return args, check, expected


_BUILDERS = {
    "triton_vector_add": _vector_add,
    "triton_vector_add_d16": _vector_add,
    "triton_softmax": _softmax,
    "triton_row_sum_bf16": _row_sum_bf16,
    "triton_layernorm_fp16": _layernorm_fp16,
    "triton_matmul": _matmul,
    "triton_matmul_128": _matmul,
    "triton_matmul_unaligned": _matmul,
    "triton_matmul_fp8": _matmul_fp8,
    "triton_matmul_tma": _matmul_tma,
    "triton_matmul_tma_device": _matmul_tma_device,
}


def case(name: str, rng: np.random.Generator):
    """(grid, block, smem_bytes, args, check) for one emulator launch of fixture ``name``.

    ``check(args)`` raises AssertionError unless the output arrays in ``args`` hold the right
    results; ``check.expected(args)`` gives {arg index: expected output array} (for self-tests)."""
    args, check, expected = _BUILDERS[name](name, rng)
    _check_arity(name, args)
    check.expected = expected
    grid, block, smem = _launch_facts(name)
    return grid, block, smem, args, check
