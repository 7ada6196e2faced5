"""Host cost of one launch, piece by piece (microseconds per call, median of 5 runs of N calls).

    FA4_CACHE_DIR=.fa4-cache python bench/launch_overhead.py

Times the parts of ``torch.ops.fa4.copy_pipeline`` on a small tensor: the whole op, a no-op custom
op (PyTorch's dispatch floor), the memoised ``runtime.load``, the two tensor-map encodings, and
``Kernel.launch`` with pre-encoded maps; ``torch.clone`` for scale.
"""

from __future__ import annotations

import statistics
import time

import torch

import fa4_mlir.torch  # noqa: F401
from fa4_mlir import runtime
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.runtime.tensormap import encode_tiled
from fa4_mlir.torch import ops
from fa4_mlir.torch.tensors import global_tensor


@torch.library.custom_op("fa4_bench::noop", mutates_args=())
def noop(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x.new_empty(x.shape)


_lib = torch.library.Library("fa4_bench", "FRAGMENT")
_lib.define("noop_lib(Tensor x, float scale) -> Tensor")
_lib.impl("noop_lib", lambda x, scale: x.new_empty(x.shape), "CUDA")


def per_call_us(fn, n: int = 2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def main() -> None:
    x = torch.randn(128, 64, device="cuda").bfloat16()
    out = torch.empty_like(x)
    config = CopyPipelineConfig(target=runtime.device_target(0))
    kernel = runtime.load("copy-pipeline", config)
    spec = {p["name"]: p.get("tensor_map") for p in kernel.params}
    src, dst = encode_tiled(global_tensor(x, "bf16"), spec["src"]), encode_tiled(global_tensor(out, "bf16"), spec["dst"])
    stream = torch.cuda.current_stream().cuda_stream
    cases = {
        "torch.ops.fa4.copy_pipeline": lambda: torch.ops.fa4.copy_pipeline(x, 1.0),
        "its Python body (no dispatcher)": lambda: ops.copy_pipeline(x, 1.0),
        "custom op no-op (dispatch floor)": lambda: torch.ops.fa4_bench.noop(x, 1.0),
        "Library.impl no-op (CUDA key)": lambda: torch.ops.fa4_bench.noop_lib(x, 1.0),
        "torch.clone": lambda: torch.clone(x),
        "CopyPipelineConfig(...)": lambda: CopyPipelineConfig(target="sm_90a"),
        "runtime.load (memoised)": lambda: runtime.load("copy-pipeline", config),
        "torch.empty + torch current stream": lambda: (torch.empty(x.shape, dtype=x.dtype, device=x.device),
                                                       torch.cuda.current_stream(0).cuda_stream),
        "encode_tiled x2": lambda: (encode_tiled(global_tensor(x, "bf16"), spec["src"]),
                                    encode_tiled(global_tensor(out, "bf16"), spec["dst"])),
        "Kernel.launch (pre-encoded maps)": lambda: kernel.launch(
            (1,), {"src": src, "dst": dst, "num_tiles": 1, "total_tiles": 1, "tiles_per_cta": 1, "scale": 1.0}, stream=stream),
        "Kernel.launch (GlobalTensors, cached maps)": lambda: kernel.launch(
            (1,), {"src": global_tensor(x, "bf16"), "dst": global_tensor(out, "bf16"), "num_tiles": 1, "total_tiles": 1, "tiles_per_cta": 1, "scale": 1.0},
            stream=stream),
    }
    for name, fn in cases.items():
        print(f"| {name} | {per_call_us(fn):.1f} |", flush=True)


if __name__ == "__main__":
    main()
