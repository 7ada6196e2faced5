"""``torch.ops.fa4.flash_attn_varlen`` (``fa4_mlir.torch.flash_attn_varlen_func``) on the GPU: packed
variable-length batches against a float64 reference computed per sequence on the GPU, within twice the error
of the same computation at the kernel's precision (P rounded to the input dtype before P @ V, the rule of
``reference.compare`` and test_attention_gpu.py); rows that see no key exactly 0 with LSE +inf; the
GPU-only errors (misplaced prefix sums, CUDA graph capture); ``torch.compile``.

The batches are drawn fresh each run (the seed is in every failure message): lengths per sequence in
1..4096 with empty sequences, Sq != Sk, causal (bottom-right) and not, GQA groups 1, 4 and 8, bf16 and fp16,
head dims 64, 128 and 256 (those the target's packed kernel has), every combination at least once. Artifacts:
test/gpu/build_artifacts.py (``varlen_config``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.attention_op import varlen_head_dims

GROUPS = (1, 4, 8)
HEAD_DIMS = (64, 128, 256)
MAX_LEN = 4096
EXTRA_BATCHES = 12  # random batches beyond one per (dtype, head dim, causal, group): 36 + 12 = 48


def _reference(torch, q, k, v, cu_q, cu_k, causal: bool, scale: float):
    """(out float64, yardstick float64 at the input precision, lse float64 (H, total_q)) per sequence on the
    GPU: causal bottom-right (query i sees keys j <= i + Sk - Sq); a row that sees no key: 0 and +inf."""
    total_q, h, d = q.shape
    group = h // k.shape[1]
    out = torch.zeros(total_q, h, d, dtype=torch.float64, device=q.device)
    yard = torch.zeros_like(out)
    lse = torch.full((h, total_q), math.inf, dtype=torch.float64, device=q.device)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0 or k1 == k0:
            continue
        qs = q[q0:q1].double().transpose(0, 1)  # (H, Sq, D)
        ks, vs = (t[k0:k1].double().repeat_interleave(group, dim=1).transpose(0, 1) for t in (k, v))
        s = (qs @ ks.transpose(1, 2)) * scale
        if causal:
            sq, sk = q1 - q0, k1 - k0
            hidden = torch.ones(sq, sk, dtype=torch.bool, device=q.device).triu(1 + sk - sq)
            s.masked_fill_(hidden, -math.inf)
        m = s.amax(dim=-1, keepdim=True)
        p = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
        del s
        l = p.sum(dim=-1, keepdim=True)
        safe = torch.where(l > 0, l, torch.ones_like(l))
        out[q0:q1] = ((p @ vs) / safe).transpose(0, 1)
        yard[q0:q1] = ((p.to(q.dtype).double() @ vs) / safe).transpose(0, 1)
        lse[:, q0:q1] = torch.where(l > 0, torch.log(safe) + m, math.inf)[..., 0]
    return out, yard.to(q.dtype).double(), lse


def _errors(torch, values, ref) -> tuple[float, float]:
    diff = (values - ref).abs()
    return float(diff.max()), float(diff.square().mean().sqrt())


def _check(torch, out, lse, q, k, v, cu_q, cu_k, causal, scale, what):
    if out.numel() == 0:  # no query rows at all
        return
    ref, yard, ref_lse = _reference(torch, q, k, v, cu_q, cu_k, causal, scale)
    values = out.double()
    assert not torch.isnan(values).any(), f"{what}: NaN in the output (an element never written?)"
    max_abs, rms = _errors(torch, values, ref)
    yard_max, yard_rms = _errors(torch, yard, ref)
    floor = reference.FLOOR * float(ref.abs().max()) + reference.FLOOR  # reference.compare's rule
    assert max_abs <= 2 * yard_max + floor and rms <= 2 * yard_rms + floor, (
        f"{what}: max abs error {max_abs:.3g} (limit {2 * yard_max + floor:.3g}), rms {rms:.3g} "
        f"(limit {2 * yard_rms + floor:.3g})")
    empty = torch.isinf(ref_lse)  # (H, total_q): rows that see no key
    assert torch.equal(torch.isinf(lse) & (lse > 0), empty), f"{what}: LSE must be +inf exactly on the empty rows"
    assert not values.transpose(0, 1)[empty].any(), f"{what}: rows that see no key must be 0"
    if (~empty).any():
        seen = ref_lse[~empty]
        err = float((lse.double()[~empty] - seen).abs().max())
        assert err <= reference.lse_tolerance(seen.cpu().numpy()), f"{what}: LSE error {err}"


def _lengths(rng, b: int) -> list[int]:
    """Per sequence: 0 (an empty sequence) with probability 1/8, else uniform in 1..MAX_LEN."""
    return [0 if rng.random() < 0.125 else int(rng.integers(1, MAX_LEN + 1)) for _ in range(b)]


def _poisoned_allocator(torch, numel: int, dtype) -> None:
    """Leave a NaN block of ``numel`` elements in the caching allocator: the op's output of that size is
    likely to reuse it, so an element the kernel never writes stays NaN (a best-effort poison)."""
    torch.full((numel,), math.nan, dtype=dtype, device="cuda")


def test_random_packed_batches_match_float64(torch_gpu):
    from fa4_mlir import runtime
    from fa4_mlir.torch import flash_attn_varlen_func

    torch = torch_gpu
    dims = [d for d in HEAD_DIMS if d in varlen_head_dims(runtime.device_target(0))]
    seed = int(np.random.default_rng().integers(1 << 31))
    rng = np.random.default_rng(seed)
    combos = list(itertools.product(("bf16", "fp16"), dims, (False, True), GROUPS))
    combos += [combos[int(rng.integers(len(combos)))] for _ in range(EXTRA_BATCHES)]
    assert len(combos) >= 40 or len(dims) < 3
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for dtype_name, d, causal, group in combos:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        b, hk = int(rng.integers(1, 7)), int(rng.integers(1, 3))
        h = hk * group
        lengths_q, lengths_k = _lengths(rng, b), _lengths(rng, b)
        cu_q = [0, *itertools.accumulate(lengths_q)]
        cu_k = [0, *itertools.accumulate(lengths_k)]
        q = torch.randn(cu_q[-1], h, d, generator=gen, device="cuda").to(dtype)
        k, v = (torch.randn(cu_k[-1], hk, d, generator=gen, device="cuda").to(dtype) for _ in range(2))
        scale = float(rng.uniform(0.02, 0.3))
        what = (f"seed {seed}: {dtype_name} d{d} H{h}/{hk} causal={causal} scale {scale:.4f} lengths_q {lengths_q} "
                f"lengths_k {lengths_k}")
        _poisoned_allocator(torch, cu_q[-1] * h * d, dtype)
        out, lse = flash_attn_varlen_func(
            q, k, v, torch.tensor(cu_q, dtype=torch.int32, device="cuda"),
            torch.tensor(cu_k, dtype=torch.int32, device="cuda"), max(lengths_q), max(lengths_k),
            softmax_scale=scale, causal=causal, return_softmax_lse=True)
        assert out.shape == q.shape and out.dtype == dtype and lse.shape == (h, cu_q[-1]), what
        _check(torch, out, lse, q, k, v, cu_q, cu_k, causal, scale, what)


def test_equal_lengths_match_the_dense_op_and_default_scale(torch_gpu):
    """B sequences of one length: the packed op's O and LSE equal the dense op's on the same numbers (top-left
    and bottom-right causal agree when Sq == Sk); the default scale is 1 / sqrt(D)."""
    from fa4_mlir.torch import flash_attention, flash_attn_varlen_func

    torch = torch_gpu
    b, s, h, d = 3, 1000, 4, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda").bfloat16() for _ in range(3))
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device="cuda")
    for causal in (False, True):
        dense, dense_lse = flash_attention(q, k, v, causal=causal, return_lse=True)
        out, lse = flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu, cu, s, s,
                                          causal=causal, return_softmax_lse=True)
        torch.testing.assert_close(out.view(b, s, h, d), dense, atol=2e-2, rtol=0)
        torch.testing.assert_close(lse, dense_lse.transpose(0, 1).reshape(h, b * s), atol=1e-3, rtol=1e-4)


def test_gpu_placement_errors_and_graph_capture(torch_gpu):
    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch import flash_attn_varlen_func

    torch = torch_gpu
    q = torch.zeros(10, 2, 64, dtype=torch.bfloat16, device="cuda")
    cu = torch.tensor([0, 3, 10], dtype=torch.int32, device="cuda")
    with pytest.raises(LaunchError, match=r"flash_attn_varlen: cu_seqlens_k must be a CUDA tensor, got device 'cpu'"):
        flash_attn_varlen_func(q, q, q, cu, cu.cpu(), 7, 7)
    with pytest.raises(LaunchError, match=r"flash_attn_varlen: cu_seqlens_q\[-1\] must be the rows of q \(10\), "
                                          r"got 9"):
        flash_attn_varlen_func(q, q, q, torch.tensor([0, 3, 9], dtype=torch.int32, device="cuda"), cu, 7, 7)
    # checked eagerly: the same tensors, unmodified, are captured (no host copy), and a replay reads the
    # values the tensors hold then
    qr = torch.randn(10, 2, 64, device="cuda").bfloat16()
    eager = flash_attn_varlen_func(qr, qr, qr, cu, cu, 7, 7)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = flash_attn_varlen_func(qr, qr, qr, cu, cu, 7, 7)
    captured.zero_()
    graph.replay()
    torch.testing.assert_close(captured, eager, atol=0, rtol=0)
    cu2 = cu.clone()  # a tensor never checked: its values would need the host copy, which a capture cannot run
    with pytest.raises(LaunchError, match=r"flash_attn_varlen: the call must run outside CUDA graph capture"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            flash_attn_varlen_func(q, q, q, cu2, cu2, 7, 7)


def test_torch_compile_fullgraph(torch_gpu):
    from fa4_mlir.torch import flash_attn_varlen_func

    torch = torch_gpu
    q, k, v = (torch.randn(300, 4, 64, device="cuda").half() for _ in range(3))
    cu_q = torch.tensor([0, 100, 100, 300], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 50, 250, 300], dtype=torch.int32, device="cuda")

    def f(q, k, v):
        return flash_attn_varlen_func(q, k, v, cu_q, cu_k, 200, 200, causal=True) * 2

    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(q, k, v), f(q, k, v), atol=0, rtol=0)
