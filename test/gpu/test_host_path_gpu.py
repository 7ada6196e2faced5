"""The host path of ``torch.ops.fa4.flash_attention`` and ``torch.ops.fa4.gemm_residual`` on a real GPU:
the fast path (a reused plan, new addresses written into its packed parameters; fa4_mlir.torch.fastpath)
gives what the full path gives and rewrites only the addresses that moved, CUDA graphs capture and
replay the ops (equal to the eager call), and ``torch.compile(fullgraph=True)`` traces them without a
graph break (equal to eager). Each runs twice: with the compiled host launcher
(fa4_mlir.torch.host_launcher, "cxx") and with the Python fast path ("python"). Host time per call is
bench/launch_overhead.py's."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["cxx", "python"])
def launcher(request, torch_gpu):
    """Which fast path serves the test: the C++ host launcher attached ("cxx"; built here if it was not:
    a GPU machine with the CUDA toolkit must build it) or detached ("python"). Plans are dropped before
    and after."""
    from fa4_mlir.torch import host_launcher

    attached = host_launcher.ensure()
    if request.param == "cxx" and not attached:
        missing = host_launcher.toolchain_missing()
        if missing:
            pytest.skip(f"the host launcher cannot be built here: {missing}")
        pytest.fail("the host launcher did not attach although its toolchain is here (see the warning)")
    if request.param == "python":
        host_launcher.detach()
    _clear_plans()
    yield request.param
    _clear_plans()
    host_launcher.reattach()


def _clear_plans():
    from fa4_mlir.torch import attention, host_launcher, ops

    attention._plans.clear()
    ops._plans.clear()
    host_launcher.clear()


def _attention_inputs(torch, seed, b=1, s=128, h=2, d=128):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, s, h, d, generator=gen).bfloat16().cuda() for _ in range(3))


def _gemm_inputs(torch, seed, m=128, n=256, k=128):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=gen).bfloat16().cuda(), torch.randn(k, n, generator=gen).bfloat16().cuda(),
            torch.randn(m, n, generator=gen).bfloat16().cuda())


def test_fast_path_equals_the_full_path(torch_gpu, launcher):
    """Calls 2..n of a layout take the plan with new addresses; each must equal a fresh full-path call."""
    from fa4_mlir.torch import attention, host_launcher, ops

    torch = torch_gpu
    before = host_launcher.stats()
    inputs = [_attention_inputs(torch, seed) for seed in range(4)]
    outs = [torch.ops.fa4.flash_attention(q, k, v, True, None, True) for q, k, v in inputs]
    gemm_inputs = [_gemm_inputs(torch, seed) for seed in range(4)]
    gemm_outs = [torch.ops.fa4.gemm_residual(a, b, c, 0.5, 2.0) for a, b, c in gemm_inputs]
    torch.cuda.synchronize()
    assert attention._plans and ops._plans, "the fast path did not store a plan"
    if launcher == "cxx":  # one miss per op (the first call), then 3 launches from the C++ plan each
        after = host_launcher.stats()
        assert (after["hits"] - before["hits"], after["misses"] - before["misses"], after["plans"]) == (6, 2, 2)
    for (q, k, v), (out, lse) in zip(inputs, outs):
        _clear_plans()  # the full path: checks, encode, pack
        again, again_lse = torch.ops.fa4.flash_attention(q, k, v, True, None, True)
        assert torch.equal(again, out) and torch.equal(again_lse, lse)
    # Without return_lse a planned call passes the lse pointer the plan was built with (never written)
    _clear_plans()
    no_lse = [torch.ops.fa4.flash_attention(q, k, v, False, None, False)[0] for q, k, v in inputs]
    for (q, k, v), out in zip(inputs, no_lse):
        _clear_plans()
        assert torch.equal(torch.ops.fa4.flash_attention(q, k, v, False, None, False)[0], out)
    for (a, b, c), out in zip(gemm_inputs, gemm_outs):
        _clear_plans()
        assert torch.equal(torch.ops.fa4.gemm_residual(a, b, c, 0.5, 2.0), out)
    ref = torch.addmm(gemm_inputs[0][2].float(), gemm_inputs[0][0].float(), gemm_inputs[0][1].float(), beta=2.0,
                      alpha=0.5)
    assert torch.allclose(gemm_outs[0].float(), ref, atol=0.1, rtol=0.02)


class _CountingLib:
    """A PackedLaunch's libcuda that counts cuTensorMapReplaceAddress calls (the rest passes through)."""

    def __init__(self, lib):
        self._lib, self.replaces = lib, 0

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def cuTensorMapReplaceAddress(self, tensor_map, address):
        self.replaces += 1
        return self._lib.cuTensorMapReplaceAddress(tensor_map, address)


@pytest.mark.parametrize("op", ["flash_attention", "gemm_residual"])
def test_fast_path_writes_only_the_moved_addresses(torch_gpu, monkeypatch, op):
    from fa4_mlir.torch import host_launcher

    host_launcher.ensure()
    host_launcher.detach()  # the Python plan's writes are what this test counts
    try:
        _python_fast_path_writes_only_the_moved_addresses(torch_gpu, monkeypatch, op)
    finally:
        host_launcher.reattach()


def _python_fast_path_writes_only_the_moved_addresses(torch_gpu, monkeypatch, op):
    """A planned call rewrites exactly the tensor maps whose address changed since the plan's last
    launch: none in a steady loop (an output freed before the next call gets its block back from the
    caching allocator), the input's and the output's when they move; every result equals the full
    path's."""
    from fa4_mlir.torch import attention, ops

    torch = torch_gpu
    if op == "flash_attention":
        plans, first, other = attention._plans, _attention_inputs(torch, 0), _attention_inputs(torch, 1)

        def call(q, k, v):
            return torch.ops.fa4.flash_attention(q, k, v, True, None, True)
    else:
        plans, first, other = ops._plans, _gemm_inputs(torch, 0), _gemm_inputs(torch, 1)

        def call(a, b, c):
            return (torch.ops.fa4.gemm_residual(a, b, c, 0.5, 2.0),)
    moved = (other[0], *first[1:])  # the first input elsewhere, the others where they were
    wanted = {}
    for inputs in (first, moved):
        plans.clear()  # the full path
        wanted[inputs[0].data_ptr()] = [t.clone() for t in call(*inputs)]
    plan = next(iter(plans.values()))
    counting = _CountingLib(plan.launch._lib)
    monkeypatch.setattr(plan.launch, "_lib", counting)
    kept, skipped = [], 0
    for inputs, keep in [(first, False)] * 4 + [(moved, True), (moved, False), (moved, False), (first, True)]:
        before, replaces = plan.launch._addresses, counting.replaces
        outs = call(*inputs)
        now = plan.launch._addresses
        assert now == tuple(t.data_ptr() for t in (*inputs, *outs))
        moved_maps = sum(x != y for x, y in zip(before[:4], now[:4]))  # q, k, v, o / a, b, c, d: tensor maps
        assert counting.replaces - replaces == moved_maps
        skipped += before == now
        torch.cuda.synchronize()
        assert all(torch.equal(got, want) for got, want in zip(outs, wanted[inputs[0].data_ptr()])), (
            f"{op}: a planned call differs from the full path")
        if keep:
            kept.append(outs)  # its output's block stays taken: the next call's output moves
        del outs  # (no other name may hold an output: its block must be free for the next call)
    assert skipped, f"{op}: no call found every address unchanged (the caching allocator gave other blocks)"


@pytest.mark.parametrize("op", ["flash_attention", "gemm_residual"])
def test_op_replays_in_a_cuda_graph(torch_gpu, launcher, op):
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


def test_ops_work_under_torch_compile(torch_gpu, launcher):
    torch = torch_gpu

    def f(q, k, v, a, b, c):
        out, lse = torch.ops.fa4.flash_attention(q, k, v, True, None, True)
        return out * 2, lse + 1, torch.ops.fa4.gemm_residual(a, b, c, 1.0, 0.5) - c

    compiled = torch.compile(f, fullgraph=True)  # fullgraph: a graph break is an error
    for seed in range(2):
        args = (*_attention_inputs(torch, seed), *_gemm_inputs(torch, seed))
        for got, want in zip(compiled(*args), f(*args)):
            assert torch.equal(got, want)


def test_host_launcher_defers_what_it_cannot_launch(torch_gpu, launcher, monkeypatch):
    """A planned layout whose call the C++ side must not launch goes to the Python path, which raises
    the op's error: a tensor-map address that is not 16-byte aligned, CUDA tensors inside an emulator
    block; and a call under another FA4_DEBUG_TIMEOUT_MS is another layout (the variables that pick the
    build are part of the key)."""
    import fa4_mlir.torch
    from fa4_mlir.errors import LaunchError
    from fa4_mlir.torch import host_launcher

    torch = torch_gpu
    q, k, v = _attention_inputs(torch, 0)
    want = torch.ops.fa4.flash_attention(q, k, v, False, None, False)[0]
    torch.ops.fa4.flash_attention(q, k, v, False, None, False)  # planned (C++ and Python)
    flat = torch.empty(q.numel() + 8, dtype=q.dtype, device=q.device)
    shifted = flat[1:1 + q.numel()].view(q.shape)  # the same sizes and strides, 2 bytes off alignment
    shifted.copy_(q)
    with pytest.raises(LaunchError, match="aligned"):
        torch.ops.fa4.flash_attention(shifted, k, v, False, None, False)
    with fa4_mlir.torch.emulator(target="sm_90a"), pytest.raises(LaunchError, match="must be a CPU tensor"):
        torch.ops.fa4.flash_attention(q, k, v, False, None, False)
    before = host_launcher.stats()
    got = torch.ops.fa4.flash_attention(q, k, v, False, None, False)[0]
    assert torch.equal(got, want)
    if launcher == "cxx":  # the emulator block closed: the C++ plan serves again
        assert host_launcher.stats()["hits"] == before["hits"] + 1
        monkeypatch.setenv("FA4_DEBUG_TIMEOUT_MS", "50")  # FA4_DEBUG unset: the same kernel, another key
        for _ in range(2):
            assert torch.equal(torch.ops.fa4.flash_attention(q, k, v, False, None, False)[0], want)
        after = host_launcher.stats()
        assert (after["hits"], after["misses"], after["plans"]) == (before["hits"] + 2, before["misses"] + 1,
                                                                    before["plans"] + 1)


def test_host_launcher_output_addresses_move(torch_gpu, launcher):
    """Outputs kept alive (a new address every call) and inputs that change every call: each planned
    launch writes them and equals the full path's result."""
    torch = torch_gpu
    held, wanted = [], []
    for seed in range(6):
        q, k, v = _attention_inputs(torch, seed % 3)
        a, b, c = _gemm_inputs(torch, seed % 3)
        held.append((torch.ops.fa4.flash_attention(q, k, v, True, None, True),
                     torch.ops.fa4.gemm_residual(a, b, c, 1.0, -1.0)))
    for seed in range(3):
        _clear_plans()
        q, k, v = _attention_inputs(torch, seed)
        a, b, c = _gemm_inputs(torch, seed)
        wanted.append((torch.ops.fa4.flash_attention(q, k, v, True, None, True),
                       torch.ops.fa4.gemm_residual(a, b, c, 1.0, -1.0)))
    torch.cuda.synchronize()
    for i, ((out, lse), d) in enumerate(held):
        (want_out, want_lse), want_d = wanted[i % 3]
        assert torch.equal(out, want_out) and torch.equal(lse, want_lse) and torch.equal(d, want_d), i


def test_concurrent_calls_on_their_own_streams(torch_gpu, launcher):
    """Four threads, each on its own CUDA stream, call both ops on their own inputs through one plan per
    op (the C++ side writes a plan's addresses and stream and launches under the plan's lock; the
    dispatcher runs C++ kernels without the GIL). Every result equals the single-threaded one."""
    import threading

    torch = torch_gpu
    inputs = [(_attention_inputs(torch, seed), _gemm_inputs(torch, seed)) for seed in range(4)]
    wanted = [(torch.ops.fa4.flash_attention(*qkv, True, None, True), torch.ops.fa4.gemm_residual(*abc, 0.5, 2.0))
              for qkv, abc in inputs]
    torch.cuda.synchronize()
    got, errors = [[] for _ in inputs], []

    def work(i):
        try:
            stream = torch.cuda.Stream()
            qkv, abc = inputs[i]
            with torch.cuda.stream(stream):
                stream.wait_stream(torch.cuda.default_stream())
                for _ in range(50):
                    got[i].append((torch.ops.fa4.flash_attention(*qkv, True, None, True),
                                   torch.ops.fa4.gemm_residual(*abc, 0.5, 2.0)))
            stream.synchronize()
        except Exception as exc:  # reported below: an assertion in a thread would be lost
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, results in enumerate(got):
        (want_out, want_lse), want_d = wanted[i]
        for (out, lse), d in results:
            assert torch.equal(out, want_out) and torch.equal(lse, want_lse) and torch.equal(d, want_d), i
