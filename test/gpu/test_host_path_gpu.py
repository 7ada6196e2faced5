"""The host path of ``torch.ops.fa4.flash_attention`` and ``torch.ops.fa4.gemm_residual`` on a real GPU:
the fast path (a reused plan, new addresses written into its packed parameters; fa4_mlir.torch.fastpath)
gives what the full path gives, CUDA graphs capture and replay the ops (equal to the eager call), and
``torch.compile(fullgraph=True)`` traces them without a graph break (equal to eager). Host time per
call is bench/launch_overhead.py's."""

from __future__ import annotations

import pytest


def _attention_inputs(torch, seed, b=1, s=128, h=2, d=128):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, s, h, d, generator=gen).bfloat16().cuda() for _ in range(3))


def _gemm_inputs(torch, seed, m=128, n=256, k=128):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=gen).bfloat16().cuda(), torch.randn(k, n, generator=gen).bfloat16().cuda(),
            torch.randn(m, n, generator=gen).bfloat16().cuda())


def test_fast_path_equals_the_full_path(torch_gpu):
    """Calls 2..n of a layout take the plan with new addresses; each must equal a fresh full-path call."""
    from fa4_mlir.torch import attention, ops

    torch = torch_gpu
    inputs = [_attention_inputs(torch, seed) for seed in range(4)]
    outs = [torch.ops.fa4.flash_attention(q, k, v, True, None, True) for q, k, v in inputs]
    gemm_inputs = [_gemm_inputs(torch, seed) for seed in range(4)]
    gemm_outs = [torch.ops.fa4.gemm_residual(a, b, c, 0.5, 2.0) for a, b, c in gemm_inputs]
    torch.cuda.synchronize()
    assert attention._plans and ops._plans, "the fast path did not store a plan"
    for (q, k, v), (out, lse) in zip(inputs, outs):
        attention._plans.clear()  # the full path: checks, encode, pack
        again, again_lse = torch.ops.fa4.flash_attention(q, k, v, True, None, True)
        assert torch.equal(again, out) and torch.equal(again_lse, lse)
    for (a, b, c), out in zip(gemm_inputs, gemm_outs):
        ops._plans.clear()
        assert torch.equal(torch.ops.fa4.gemm_residual(a, b, c, 0.5, 2.0), out)
    ref = torch.addmm(gemm_inputs[0][2].float(), gemm_inputs[0][0].float(), gemm_inputs[0][1].float(), beta=2.0,
                      alpha=0.5)
    assert torch.allclose(gemm_outs[0].float(), ref, atol=0.1, rtol=0.02)


@pytest.mark.parametrize("op", ["flash_attention", "gemm_residual"])
def test_op_replays_in_a_cuda_graph(torch_gpu, op):
    torch = torch_gpu
    if op == "flash_attention":
        static = list(_attention_inputs(torch, 0))

        def call():
            return torch.ops.fa4.flash_attention(*static, False, None, True)
    else:
        static = list(_gemm_inputs(torch, 0))

        def call():
            return torch.ops.fa4.gemm_residual(*static, 1.0, 1.0)

    call()  # load the kernel (and store the plan) before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = call()
    captured = captured if isinstance(captured, tuple) else (captured,)
    for seed in range(1, 4):
        fresh = _attention_inputs(torch, seed) if op == "flash_attention" else _gemm_inputs(torch, seed)
        for buffer, value in zip(static, fresh):
            buffer.copy_(value)
        eager = call()  # the same plan, other output addresses: must not disturb the captured launch
        eager = eager if isinstance(eager, tuple) else (eager,)
        graph.replay()
        torch.cuda.synchronize()
        for got, want in zip(captured, eager):
            assert torch.equal(got, want), f"{op}: replay {seed} differs from the eager call"


def test_ops_work_under_torch_compile(torch_gpu):
    torch = torch_gpu

    def f(q, k, v, a, b, c):
        out, lse = torch.ops.fa4.flash_attention(q, k, v, True, None, True)
        return out * 2, lse + 1, torch.ops.fa4.gemm_residual(a, b, c, 1.0, 0.5) - c

    compiled = torch.compile(f, fullgraph=True)  # fullgraph: a graph break is an error
    for seed in range(2):
        args = (*_attention_inputs(torch, seed), *_gemm_inputs(torch, seed))
        for got, want in zip(compiled(*args), f(*args)):
            assert torch.equal(got, want)
