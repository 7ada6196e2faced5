"""torch.ops.fa4.copy_pipeline on a real GPU: eager, torch.compile, CUDA graphs, error messages."""

from __future__ import annotations

import pytest

from fa4_mlir import runtime

SHAPES = [(128, 64), (1, 8), (129, 72), (200, 296), (1000, 64), (777, 1000), (4097, 520), (3000, 4104)]


def reference(torch, x, scale):
    return (x.float() * scale).to(x.dtype)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_op_is_exact_on_random_sizes(torch_gpu, dtype_name):
    torch = torch_gpu
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(torch.seed())
    drawn = [(int(torch.randint(1, 3000, (1,), generator=gen)), 8 * int(torch.randint(1, 300, (1,), generator=gen)))
             for _ in range(12)]
    for rows, cols in SHAPES + drawn:
        x = (torch.randn(rows, cols, device="cuda") * 4).to(dtype)
        scale = float(torch.empty(()).uniform_(-3, 3))
        out = torch.ops.fa4.copy_pipeline(x, scale)  # before the reference: its memory is fresh
        assert out.shape == x.shape and out.dtype == dtype and out.is_contiguous()
        assert torch.equal(out, reference(torch, x, scale)), f"{dtype} {rows}x{cols} scale {scale}"


def test_op_runs_on_the_current_stream(torch_gpu):
    torch = torch_gpu
    x = torch.randn(2048, 1024, device="cuda").bfloat16()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = torch.ops.fa4.copy_pipeline(x, 2.0)
        expected = reference(torch, x, 2.0)
        same = torch.equal(out, expected)
    torch.cuda.synchronize()
    assert same


def test_op_works_under_torch_compile(torch_gpu):
    torch = torch_gpu

    def f(x, y):
        return torch.ops.fa4.copy_pipeline(x, 0.5) + y

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for rows, cols in ((256, 128), (999, 520)):
        x, y = torch.randn(rows, cols, device="cuda").bfloat16(), torch.randn(rows, cols, device="cuda").bfloat16()
        assert torch.equal(compiled(x, y), f(x, y))


def test_fake_implementation_gives_shape_and_dtype(torch_gpu):
    torch = torch_gpu
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(300, 72, dtype=torch.float16, device="cuda")
        out = torch.ops.fa4.copy_pipeline(x, 3.0)
    assert out.shape == (300, 72) and out.dtype == torch.float16


def test_op_replays_in_a_cuda_graph(torch_gpu):
    torch = torch_gpu
    static_x = torch.randn(1536, 2056, device="cuda").bfloat16()
    torch.ops.fa4.copy_pipeline(static_x, 1.5)  # load the kernel before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = torch.ops.fa4.copy_pipeline(static_x, 1.5)
    for _ in range(3):
        static_x.copy_(torch.randn_like(static_x, dtype=torch.float32).bfloat16())
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, reference(torch, static_x, 1.5))


def test_op_errors_name_what_is_wrong(torch_gpu):
    torch = torch_gpu
    base = torch.randn(64, 72, device="cuda").bfloat16()
    cases = [
        (torch.randn(64, 64).bfloat16(), "must be a CUDA tensor"),
        (torch.randn(64, 64, device="cuda"), "dtype must be one of"),
        (torch.randn(4, 64, 64, device="cuda").bfloat16(), "must be 2-D"),
        (base[:, 1:65], "16-byte aligned"),
        (base[:, :60], "multiples of 16 bytes"),
        (torch.randn(64, 12, device="cuda").bfloat16(), "multiples of 16 bytes"),
        (base.t(), "unit innermost stride"),
    ]
    for x, message in cases:
        with pytest.raises(runtime.LaunchError, match=message):
            torch.ops.fa4.copy_pipeline(x, 1.0)


def test_empty_input_gives_empty_output(torch_gpu):
    torch = torch_gpu
    out = torch.ops.fa4.copy_pipeline(torch.empty(0, 64, device="cuda", dtype=torch.bfloat16), 1.0)
    assert out.shape == (0, 64)
