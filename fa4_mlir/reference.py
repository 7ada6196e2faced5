"""Float64 NumPy references of the built-in kernels, their error budgets, and the bf16/fp16 bit
patterns NumPy holds data in (NumPy has no bfloat16: bf16 and fp16 arrays are ``uint16`` bits).

The GPU tests (test/gpu, on a GPU or in the emulator) and ``fa4-emu`` check kernels with these:

* ``copy-pipeline``: exact. Every element must be bit-identical to ``scaled``: the f32 product of the
  element and the f32 scale, rounded once (the kernel's math).
* ``gemm`` and ``attention``: the max and the rms error against the float64 reference must be at
  most twice those of a *yardstick*, the same computation done in NumPy at the kernel's precision
  (``gemm_yardstick``: the correctly rounded result; ``attention_yardstick``: P rounded to the input
  type before P @ V, as the kernel feeds its second MMA, then the output rounded), plus
  ``1e-6 * max|ref|``. The rule is the one the GPU tests used against torch in the same precision
  (FA4's ``check_tensor_vs_ref``), with a yardstick that needs no torch.

No MLIR, no CUDA, no torch: NumPy only.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

POISON = {"bf16": 0xFFFF, "fp16": 0xFFFF}  # NaN in both: an element the kernel never wrote
HALF_DTYPES = ("bf16", "fp16")
FLOOR = 1e-6  # of max|ref|: what separates "twice the yardstick's error" from zero when both are exact


# -- bits ----------------------------------------------------------------------------------------------

def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, rounding to nearest even (what cvt.rn.bf16.f32 does). NaN stays NaN."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def to_f32(bits: np.ndarray, dtype: str) -> np.ndarray:
    """bf16/fp16 bits -> float32 values (exact)."""
    if dtype == "bf16":
        return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def to_f64(bits: np.ndarray, dtype: str) -> np.ndarray:
    return to_f32(bits, dtype).astype(np.float64)


def from_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values -> bf16/fp16 bits, rounded to nearest even."""
    if dtype == "bf16":
        return bf16_bits(values)
    return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to ``dtype`` (bits). fp16 is rounded once; bf16 through float32, which
    differs from one rounding only when the float32 lands exactly on a bf16 tie (about 2^-16 of
    random values, each then one ulp off)."""
    values = np.asarray(values, dtype=np.float64)
    if dtype == "fp16":
        return values.astype(np.float16).view(np.uint16)
    return bf16_bits(values.astype(np.float32))


def random_bits(rng: np.random.Generator, shape, dtype: str, scale: float = 4.0) -> np.ndarray:
    """Normal values of standard deviation ``scale`` as ``dtype`` bits."""
    return from_f32(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale), dtype)


# -- references -------------------------------------------------------------------------------------------

def scaled(bits: np.ndarray, scale: float, dtype: str) -> np.ndarray:
    """copy-pipeline's exact result (bits): widen to f32, multiply by the f32 scale, round once."""
    return from_f32(to_f32(bits, dtype) * np.float32(scale), dtype)


def copy_pipeline(x: np.ndarray, scale: float) -> np.ndarray:
    """``scale * x`` in float64 (``x`` as values)."""
    return np.asarray(x, np.float64) * np.float64(np.float32(scale))


def gemm_residual(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """``alpha * a @ b + beta * c`` in float64 for a (M, K), b (K, N), c (M, N) values; with
    ``beta == 0`` C is not read (NaN in it does not propagate), as the kernel and torch.addmm do."""
    product = np.float64(np.float32(alpha)) * (np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    if beta == 0:
        return product
    return product + np.float64(np.float32(beta)) * np.asarray(c, np.float64)


def gemm_yardstick(ref: np.ndarray, dtype: str) -> np.ndarray:
    """The GEMM at the kernel's precision: the float64 result rounded once (bits)."""
    return round_to(ref, dtype)


def _heads_first(t: np.ndarray, heads: int) -> np.ndarray:
    """(B, S, Hk, D) values -> (B, heads, S, D) float64, each K/V head repeated for its query heads."""
    t = np.asarray(t, np.float64).transpose(0, 2, 1, 3)
    return np.repeat(t, heads // t.shape[1], axis=1) if t.shape[1] != heads else t


def _softmax_parts(q, k, causal: bool, scale: float, bottom_right: bool = False):
    """Per batch: (scaled logits' row max, P = exp(S - max), row sums) as (B, H, Sq, Sk) pieces. Causal
    hides key j from query i when j > i (top-left), or j > i + Sk - Sq (``bottom_right``); a row that
    sees no key has max -inf, P 0 and sum 0."""
    heads = q.shape[2]
    qt, kt = _heads_first(q, heads), _heads_first(k, heads)
    s = (qt @ kt.transpose(0, 1, 3, 2)) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s[..., np.triu(np.ones((sq, sk), bool), 1 + (sk - sq if bottom_right else 0))] = -np.inf
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0), out=s)
    return m, p, p.sum(axis=-1, keepdims=True)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float):
    """``softmax(scale * q k') v`` and the log-sum-exp in float64: q (B, Sq, H, D), k and v
    (B, Sk, Hk, D) values, Hk dividing H (query head h reads K/V head h // (H / Hk)); ``causal`` hides
    key j from query i when j > i (the top-left diagonal). Returns (out (B, Sq, H, D), lse (B, H, Sq))."""
    m, p, l = _softmax_parts(q, k, causal, scale)
    out = (p @ _heads_first(v, q.shape[2])) / l
    return out.transpose(0, 2, 1, 3), (np.log(l) + m)[..., 0]


def attention_yardstick(q, k, v, causal: bool, scale: float, dtype: str) -> np.ndarray:
    """Attention at the kernel's precision (bits): P = exp(S - max) rounded to ``dtype`` before P @ V,
    the row sums from the unrounded P, the output rounded once."""
    _, p, l = _softmax_parts(q, k, causal, scale)
    p_low = to_f64(round_to(p, dtype), dtype)
    out = (p_low @ _heads_first(v, q.shape[2])) / l
    return round_to(out.transpose(0, 2, 1, 3), dtype)


def varlen_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, cu_seqlens_q, cu_seqlens_k, causal: bool,
                     scale: float, dtype: str | None = None):
    """Attention of packed sequences in float64: q (total_q, H, D), k and v (total_k, Hk, D) values,
    sequence b's rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and keys [cu_seqlens_k[b], cu_seqlens_k[b + 1]);
    causal is bottom-right aligned per sequence (FlashAttention's: query i of Sq sees keys j <= i + Sk - Sq).
    A row that sees no key (an empty key sequence, or causal with Sq > Sk) has O = 0 and LSE = +inf.
    Returns (out (total_q, H, D), lse (H, total_q)); with ``dtype``, out is instead the yardstick at that
    precision (``attention_yardstick``'s rounding), as bits."""
    total_q, heads, d = q.shape
    out = np.zeros((total_q, heads, v.shape[2]))
    lse = np.full((heads, total_q), np.inf)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1, k0, k1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1]), int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        if q1 == q0 or k1 == k0:
            continue
        m, p, l = _softmax_parts(q[None, q0:q1], k[None, k0:k1], causal, scale, bottom_right=True)
        if dtype is not None:
            p = to_f64(round_to(p, dtype), dtype)
        seen = l[0, :, :, 0] > 0  # (H, Sq): rows with a visible key
        o = (p @ _heads_first(v[None, k0:k1], heads)) / np.where(l > 0, l, 1.0)
        out[q0:q1] = o[0].transpose(1, 0, 2)
        lse[:, q0:q1] = np.where(seen, np.log(np.where(seen, l[0, :, :, 0], 1.0)) + m[0, :, :, 0], np.inf)
    return (out if dtype is None else round_to(out, dtype)), lse


def attention_partials(q: np.ndarray, k: np.ndarray, v: np.ndarray, cu_seqlens_k, causal: bool, scale: float,
                       split_keys: int, num_splits: int, dtype: str | None = None):
    """What a split-KV kernel writes (``AttentionConfig.split_kv``), in float64: q (B, Sq, H, D) values, k and v
    packed (total_k, Hk, D) with sequence b's keys at rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]) (``paged_keys``
    makes them from a cache), bottom-right causal. Range s holds keys [s split_keys, (s + 1) split_keys) of each
    sequence; a row's partial O is normalised over its visible keys there and its LSE is their log-sum-exp; a row
    with none there has O 0 and LSE -inf. Returns (o (B, Sq, H, num_splits, D), lse (B, H, Sq, num_splits));
    with ``dtype`` P is rounded to it before P V (``attention_yardstick``'s rounding, O not rounded: fp32)."""
    b_count, sq, heads, _ = q.shape
    o = np.zeros((b_count, sq, heads, num_splits, v.shape[2]))
    lse = np.full((b_count, heads, sq, num_splits), -np.inf)
    rows = np.arange(sq)[:, None]
    for b in range(b_count):
        k0, sk = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1]) - int(cu_seqlens_k[b])
        if sk == 0:
            continue
        qt, kt, vt = (_heads_first(t, heads)[0] for t in (q[b:b + 1], k[None, k0:k0 + sk], v[None, k0:k0 + sk]))
        logits = (qt @ kt.transpose(0, 2, 1)) * scale  # (H, Sq, Sk_b)
        keys = np.arange(sk)[None, :]
        if causal:
            logits[:, keys.repeat(sq, 0) > rows + sk - sq] = -np.inf
        for s in range(num_splits):
            lo, hi = s * split_keys, min((s + 1) * split_keys, sk)
            if lo >= hi:
                continue
            part = logits[..., lo:hi]
            m = part.max(axis=-1, keepdims=True)
            seen = np.isfinite(m)
            p = np.exp(part - np.where(seen, m, 0.0))
            total = p.sum(axis=-1, keepdims=True)
            if dtype is not None:
                p = to_f64(round_to(p, dtype), dtype)
            out = (p @ vt[:, lo:hi]) / np.where(seen, total, 1.0)  # (H, Sq, D)
            o[b, :, :, s] = out.transpose(1, 0, 2)
            lse[b, :, :, s] = np.where(seen, np.log(np.where(seen, total, 1.0)) + np.where(seen, m, 0.0),
                                       -np.inf)[..., 0]
    return o, lse


def paged_keys(cache: np.ndarray, block_table: np.ndarray, seqused_k) -> tuple[np.ndarray, np.ndarray]:
    """A paged cache (num_pages, page_size, Hk, D) as packed rows: sequence b's ``seqused_k[b]`` keys (key j
    in row j % page_size of page ``block_table[b, j // page_size]``) back to back, and their int32 prefix
    sums; for ``varlen_attention``."""
    page = cache.shape[1]
    rows = [cache[block_table[b, j // page], j % page] for b in range(len(seqused_k)) for j in range(int(seqused_k[b]))]
    packed = np.stack(rows) if rows else np.zeros((0, *cache.shape[2:]), cache.dtype)
    return packed, np.concatenate([[0], np.cumsum(seqused_k)]).astype(np.int32)


def combine_partials(o_part: np.ndarray, lse_part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split-KV partials merged in float64: o_part (B, Sq, H, S, D), each key range's output normalised
    over its keys, and lse_part (B, H, Sq, S), its natural-log LSE (-inf: the row saw no key of the range).
    Returns (o (B, Sq, H, D), lse (B, H, Sq)): ``lse = ln sum_s exp(LSE_s)``, ``o = sum_s exp(LSE_s - lse)
    O_s``; a row whose ranges are all -inf has o = 0 and lse = +inf. A range of weight 0 adds nothing,
    whatever its O_s holds."""
    lse_part = np.asarray(lse_part, np.float64)
    m = lse_part.max(axis=-1, keepdims=True, initial=-np.inf)
    seen = np.isfinite(m)
    w = np.where(np.isfinite(lse_part), np.exp(lse_part - np.where(seen, m, 0.0)), 0.0)  # (B, H, Sq, S)
    total = w.sum(axis=-1, keepdims=True)
    w = w / np.where(seen, total, 1.0)
    o_part = np.asarray(o_part, np.float64)
    o = np.einsum("bqhsd,bhqs->bqhd", np.where(w.transpose(0, 2, 1, 3)[..., None] > 0, o_part, 0.0), w)
    lse = np.where(seen, np.log(np.where(seen, total, 1.0)) + np.where(seen, m, 0.0), np.inf)[..., 0]
    return o, lse


# -- fp8 e4m3 ---------------------------------------------------------------------------------------------

E4M3_MAX = 448.0
E4M3_ONE = 0x38  # 1.0 as an e4m3 byte (sign 0, exponent 7 = the bias, mantissa 0)


def e4m3_values(bits: np.ndarray) -> np.ndarray:
    """e4m3 (OCP fp8, ``float8_e4m3fn``) bytes -> float64: sign, 4 exponent bits (bias 7), 3 mantissa bits,
    subnormals at exponent 0 (2^-6 * m / 8), no infinities, NaN = S.1111.111."""
    b = np.asarray(bits, np.uint8).astype(np.int64)
    e, m = (b >> 3) & 0xF, b & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return np.where(b & 0x80, -mag, mag)


def round_e4m3(x: np.ndarray) -> np.ndarray:
    """float64 ``x`` rounded to e4m3 values, to nearest even and saturated to +-448 (what
    ``cvt.rn.satfinite.e4m3x2.f32`` does to a float32 that is exactly ``x``)."""
    x = np.asarray(x, np.float64)
    mag = np.abs(x)
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    quantum = 2.0 ** (np.maximum(exp, -6) - 3)  # 3 mantissa bits; subnormals below 2^-6
    rounded = np.minimum(np.round(mag / quantum) * quantum, E4M3_MAX)  # np.round: half to even
    return np.copysign(rounded, x)


def e4m3_bits(x: np.ndarray) -> np.ndarray:
    """float64 ``x`` -> e4m3 bytes, rounded as ``round_e4m3`` (to nearest even, saturated to +-448)."""
    rounded = round_e4m3(x)
    magnitudes = e4m3_values(np.arange(0x7F))  # the codes 0..126 (0x7F is NaN), increasing
    code = np.searchsorted(magnitudes, np.abs(rounded)).astype(np.uint8)
    return np.where(np.signbit(rounded), code | 0x80, code).astype(np.uint8)


def dequantize(x_bits: np.ndarray, scale) -> np.ndarray:
    """e4m3 bytes (B, S, H, D) times their scale: a float, or per token (B, H, S)."""
    values = e4m3_values(x_bits)
    if np.ndim(scale) == 0:
        return values * float(np.float32(scale))
    return values * np.asarray(scale, np.float64).transpose(0, 2, 1)[..., None]


def attention_fp8_yardstick(q, k, v, causal: bool, scale: float, p_bias: float,
                            rounded_sums: bool = False) -> np.ndarray:
    """fp8 attention at the kernel's precision (bf16 bits) from the dequantized float64 q, k, v: P =
    exp(S - max) * 2^p_bias rounded to e4m3 before P @ V (the kernel's exp2 bias keeps P out of e4m3's
    subnormals), the row sums from the unrounded P (``rounded_sums``: from the rounded P, as a kernel whose
    tensor core sums the P it multiplies: the sm_90a one at head dims 64 and 128), the output rounded to bf16
    once."""
    _, p, l = _softmax_parts(q, k, causal, scale)
    bias = 2.0 ** p_bias
    p_low = round_e4m3(p * bias)
    sums = p_low.sum(axis=-1, keepdims=True) if rounded_sums else l * bias
    out = (p_low @ _heads_first(v, q.shape[2])) / sums
    return round_to(out.transpose(0, 2, 1, 3), "bf16")


def attention_fp8_lse_yardstick(q, k, causal: bool, scale: float, p_bias: float) -> np.ndarray:
    """The log-sum-exp of a kernel whose row sums are of the e4m3-rounded P (``attention_fp8_yardstick``'s
    ``rounded_sums``): max + log(sum(round_e4m3(P * 2^p_bias)) / 2^p_bias), in float64, (B, H, Sq)."""
    m, p, _ = _softmax_parts(q, k, causal, scale)
    bias = 2.0 ** p_bias
    return (np.log(round_e4m3(p * bias).sum(axis=-1, keepdims=True) / bias) + m)[..., 0]


def fp8_lse_limit(ref_lse: np.ndarray, yard_lse: np.ndarray) -> float:
    """The largest LSE error that passes for a kernel whose sums are of the rounded P: twice the rounding's
    own error (``attention_fp8_lse_yardstick`` against the float64 LSE) plus ``lse_tolerance``."""
    return 2 * float(np.abs(yard_lse - ref_lse).max(initial=0.0)) + lse_tolerance(ref_lse)


# -- multi-head latent attention (absorbed) ---------------------------------------------------------------

def mla_attention(q_nope: np.ndarray, q_rope: np.ndarray, kv: np.ndarray, k_rope: np.ndarray, causal: bool,
                  scale: float):
    """Absorbed multi-head latent attention in float64: ``S = scale * (q_nope kv' + q_rope k_rope')``,
    ``O = softmax(S) kv``, for q_nope (B, Sq, H, Dl), q_rope (B, Sq, H, Dr), the latent kv (B, Sk, Dl)
    and k_rope (B, Sk, Dr) values shared by every query head; ``causal`` as in ``attention``. It is
    attention with Q = [q_nope, q_rope], K = [kv, k_rope] and V = kv, one K/V head. Returns
    (out (B, Sq, H, Dl), lse (B, H, Sq))."""
    q, k, v = _mla_qkv(q_nope, q_rope, kv, k_rope)
    return attention(q, k, v, causal, scale)


def mla_attention_yardstick(q_nope, q_rope, kv, k_rope, causal: bool, scale: float, dtype: str) -> np.ndarray:
    """``mla_attention`` at the kernel's precision (bits), as ``attention_yardstick``."""
    q, k, v = _mla_qkv(q_nope, q_rope, kv, k_rope)
    return attention_yardstick(q, k, v, causal, scale, dtype)


def mla_attention_fp8_yardstick(q_nope, q_rope, kv, k_rope, causal: bool, scale: float, p_bias: float) -> np.ndarray:
    """``mla_attention`` of the dequantized float64 inputs at the fp8 kernel's precision, as
    ``attention_fp8_yardstick`` (P times 2^p_bias rounded to e4m3, the output rounded to bf16)."""
    q, k, v = _mla_qkv(q_nope, q_rope, kv, k_rope)
    return attention_fp8_yardstick(q, k, v, causal, scale, p_bias)


def _mla_qkv(q_nope, q_rope, kv, k_rope):
    kv = np.asarray(kv, np.float64)[:, :, None, :]
    q = np.concatenate([np.asarray(q_nope, np.float64), np.asarray(q_rope, np.float64)], axis=-1)
    k = np.concatenate([kv, np.asarray(k_rope, np.float64)[:, :, None, :]], axis=-1)
    return q, k, kv


# -- comparison -------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Comparison:
    """``out`` against the float64 ``ref``: errors, bit-identical elements and the verdict."""

    max_abs: float
    max_rel: float  # max_abs / max|ref|
    rms: float
    identical: int  # elements bit-identical to the expected bits (exact, or the correctly rounded ref)
    total: int
    unwritten: int  # elements still holding POISON (NaN): never written by the kernel
    limit_max: float  # the largest max_abs that passes
    limit_rms: float
    ok: bool
    rule: str
    exact: bool = False  # the rule is bit-identity (the limits are then the exact result's errors)

    def summary(self) -> str:
        unwritten = f", {self.unwritten} never written" if self.unwritten else ""
        if self.exact:
            return (f"{self.identical}/{self.total} bit-identical (all must be){unwritten}; max abs error "
                    f"{self.max_abs:.3g}, max rel error {self.max_rel:.3g}, rms error {self.rms:.3g}")
        return (f"max abs error {self.max_abs:.3g} (limit {self.limit_max:.3g}), "
                f"max rel error {self.max_rel:.3g}, rms error {self.rms:.3g} (limit {self.limit_rms:.3g}), "
                f"{self.identical}/{self.total} bit-identical{unwritten}")


def _errors(values: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    if values.size == 0:
        return 0.0, 0.0
    diff = np.abs(values - ref)
    if np.isnan(diff).any():
        return math.inf, math.inf
    return float(diff.max()), float(np.sqrt(np.mean(diff * diff)))


def compare_exact(out: np.ndarray, expected: np.ndarray, ref: np.ndarray, dtype: str) -> Comparison:
    """``out`` (bits) must equal ``expected`` (bits) everywhere; errors against ``ref`` are reported."""
    out, expected = np.asarray(out, np.uint16), np.asarray(expected, np.uint16)
    values = to_f64(out, dtype)
    max_abs, rms = _errors(values, ref)
    top = float(np.abs(ref).max()) if ref.size else 0.0
    identical = int(np.count_nonzero(out == expected))
    return Comparison(max_abs, max_abs / top if top else max_abs, rms, identical, out.size,
                      int(np.count_nonzero(out == POISON[dtype])), *_errors(to_f64(expected, dtype), ref),
                      identical == out.size, "bit-identical to scale * x in f32, rounded once", True)


def compare(out: np.ndarray, ref: np.ndarray, yardstick: np.ndarray, dtype: str) -> Comparison:
    """``out`` (bits) against ``ref`` (float64) with the budget of twice ``yardstick``'s errors (bits)
    plus FLOOR * max|ref|; ``identical`` counts elements equal to ``ref`` correctly rounded."""
    out = np.asarray(out, np.uint16)
    values = to_f64(out, dtype)
    max_abs, rms = _errors(values, ref)
    yard_max, yard_rms = _errors(to_f64(yardstick, dtype), ref)
    top = float(np.abs(ref).max()) if ref.size else 0.0
    floor = FLOOR * top + FLOOR
    limit_max, limit_rms = 2 * yard_max + floor, 2 * yard_rms + floor
    return Comparison(max_abs, max_abs / top if top else max_abs, rms,
                      int(np.count_nonzero(out == round_to(ref, dtype))), out.size,
                      int(np.count_nonzero(out == POISON[dtype])), limit_max, limit_rms,
                      max_abs <= limit_max and rms <= limit_rms,
                      "max and rms errors <= 2x those of the same computation at the kernel's precision "
                      "+ 1e-6 max|ref|")


def lse_tolerance(ref_lse: np.ndarray) -> float:
    """The largest LSE error that passes (fp32 output, ex2.approx and log2 in f32)."""
    return 1e-3 * float(np.abs(ref_lse).max()) + 1e-3


# -- fp8 e4m3 attention (sm_100a) ---------------------------------------------------------------------------

FP8_P_BIAS = 8.0  # the sm_100a kernel's exp2 bias: P is scaled by 2^8 before its e4m3 cast (softmax.py)


def _dequantized(t, scale) -> np.ndarray:
    """(B, S, Hx, D) fp8 values times a tensor-wise (float) or per-token ((B, Hx, S)) scale."""
    t = np.asarray(t, np.float64)
    if np.ndim(scale) == 0:
        return t * float(scale)
    return t * np.asarray(scale, np.float64).transpose(0, 2, 1)[..., None]


def attention_fp8(q, k, v, causal: bool, scale: float, q_scale=1.0, k_scale=1.0, v_scale: float = 1.0):
    """fp8 attention in float64 on the dequantized inputs: ``attention(q * q_scale, k * k_scale,
    v * v_scale)``. q (B, Sq, H, D), k and v (B, Sk, Hk, D) are the e4m3 values (float64); q_scale and
    k_scale are floats (tensor-wise) or (B, H, Sq) / (B, Hk, Sk) per-token arrays. Returns (out, lse)."""
    return attention(_dequantized(q, q_scale), _dequantized(k, k_scale), np.asarray(v, np.float64) * float(v_scale),
                     causal, scale)


def attention_fp8_scaled_yardstick(q, k, v, causal: bool, scale: float, q_scale=1.0, k_scale=1.0,
                                   v_scale: float = 1.0) -> np.ndarray:
    """fp8 attention at the sm_100a kernel's precision (bf16 bits). The logits as the kernel forms them
    in float32: S = q k' of the e4m3 values (exact products, an fp32 result); per-token scales make the
    log2-unit logit ``(S * k_scale) * (softmax scale * log2(e) * q_scale)``, each product rounded to
    fp32 (with scales up to 1e3 the logits reach 1e7, where fp32's spacing is 1: the rounding is the
    logits' own, which no fp32 kernel avoids), and P = exp2(logit - max + FP8_P_BIAS); tensor-wise ones
    are folded into the softmax scale by the host, P = exp2((S - max) * scale * log2(e) + FP8_P_BIAS).
    P is rounded to e4m3 before P @ V (P <= 2^8 < 448; normal e4m3 down to logit - max = -14),
    the row sums from the unrounded P, O = (P @ V) * v_scale / sum rounded once to bf16. The kernel's
    P is relative to the running maximum (fp8's rescale threshold 0 adopts every larger one) rather
    than the row's: the same e4m3 rounding at other points, statistically alike."""
    heads, f32 = q.shape[2], np.float32
    qt, kt = _heads_first(q, heads), _heads_first(k, heads)
    s = (qt @ kt.transpose(0, 1, 3, 2)).astype(f32)
    if np.ndim(q_scale) or np.ndim(k_scale):  # per-token (a float one broadcast, as the torch op does)
        b, sq, sk = s.shape[0], s.shape[2], s.shape[3]
        qs = np.broadcast_to(np.asarray(q_scale, f32), (b, heads, sq))
        ks = np.broadcast_to(np.asarray(k_scale, f32), (b, k.shape[2], sk))
        ks = np.repeat(ks, heads // k.shape[2], axis=1)
        row = (qs * f32(scale * math.log2(math.e))).astype(f32)
        s = ((s * ks[:, :, None, :]).astype(f32) * row[..., None]).astype(f32)
        row = np.ones_like(row)
    else:
        row = np.full(s.shape[:3], f32(scale * float(q_scale) * float(k_scale) * math.log2(math.e)), f32)
    if causal:
        sq, sk = s.shape[-2:]
        s[..., np.triu(np.ones((sq, sk), bool), 1)] = -np.inf
    m = s.max(axis=-1, keepdims=True)
    p = np.exp2((s.astype(np.float64) - m) * row[..., None].astype(np.float64) + FP8_P_BIAS)
    out = (round_e4m3(p) @ _heads_first(v, heads)) * float(v_scale) / p.sum(axis=-1, keepdims=True)
    return round_to(out.transpose(0, 2, 1, 3), "bf16")
