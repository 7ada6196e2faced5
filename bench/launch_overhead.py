"""Host cost of one launch, piece by piece (microseconds per call).

    FA4_CACHE_DIR=.fa4-cache python bench/launch_overhead.py [--only fa4] [--check-gpu-bound]

The headline column, "host": the host time of a call while the GPU is provably busy. Before each
timed batch the stream gets a long GPU spin (``torch.cuda._sleep``, sized from a calibration so that
it outlasts the batch), then N calls (default 300: the launch queue holds about 1000 entries before
the host blocks) are timed with ``perf_counter``, and the synchronize comes after the timed region.
An event recorded right after the spin must still be pending when the timed region ends (the spin
was running, so no call waited for the GPU); a batch where it is not is timed again with a longer
spin. The median per call over the batches. The column "loop": the older measure, the median of 5
runs of 2000 calls with one synchronize at the end of each, which a GPU slower than the host bounds.

``torch.ops.fa4.flash_attention`` (bf16, B1 S128 H1 D128) and ``torch.ops.fa4.gemm_residual`` (bf16,
128^3) launched by the C++ host launcher (fa4_mlir.torch.host_launcher, where it builds), on the Python
fast path (a stored plan: fa4_mlir.torch.fastpath) and with both off (every check, the
tensor maps from the per-kernel cache, the launch through cuda-python: the code before the fast
path), next to PyTorch's floor: ``torch.library.Library`` no-ops (the dispatcher and one
``new_empty``; flash_attention's schema with its two outputs' ``torch.empty`` on the
CompositeExplicitAutograd key, as the op is registered, and on the CUDA key), two ``torch.empty``,
``torch.clone``; then the op bodies below the dispatcher and ``PackedLaunch.launch`` alone. With
``--only all``, the parts of ``torch.ops.fa4.copy_pipeline`` (loop column only): the whole op, a no-op
custom op, the memoised ``runtime.load``, the two tensor-map encodings, and ``Kernel.launch`` with
pre-encoded maps. ``--check-gpu-bound`` prints the GPU time per call of the two ops from CUDA events.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import statistics
import time

import torch

import fa4_mlir.torch  # noqa: F401
from fa4_mlir import runtime
from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
from fa4_mlir.runtime import driver
from fa4_mlir.runtime import kernel as kernel_module
from fa4_mlir.runtime.tensormap import encode_tiled
from fa4_mlir.torch import attention, host_launcher, ops
from fa4_mlir.torch.tensors import global_tensor


@torch.library.custom_op("fa4_bench::noop", mutates_args=())
def noop(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x.new_empty(x.shape)


_lib = torch.library.Library("fa4_bench", "FRAGMENT")
_lib.define("noop_lib(Tensor x, float scale) -> Tensor")
_lib.impl("noop_lib", lambda x, scale: x.new_empty(x.shape), "CUDA")
_ATTENTION_SCHEMA = ("(Tensor q, Tensor k, Tensor v, bool causal=False, float? softmax_scale=None, "
                     "bool return_lse=False, Tensor? q_scale=None, Tensor? k_scale=None, float? v_scale=None) "
                     "-> (Tensor, Tensor)")


def _attention_outputs(q, k, v, causal=False, softmax_scale=None, return_lse=False, q_scale=None, k_scale=None,
                       v_scale=None):
    return (torch.empty(q.shape, dtype=q.dtype, device=q.device),
            torch.empty((0,), dtype=torch.float32, device=q.device))


# flash_attention's schema, an empty body (its two outputs): the floor of torch.ops.fa4.flash_attention on
# its dispatch key, and on the CUDA key (what registering the op there instead would save)
for _name, _key in (("noop_attention", "CompositeExplicitAutograd"), ("noop_attention_cuda", "CUDA")):
    _lib.define(_name + _ATTENTION_SCHEMA)
    _lib.impl(_name, _attention_outputs, _key)

class Spin:
    """``torch.cuda._sleep`` sized in milliseconds: its cycles per millisecond measured once."""

    def __init__(self) -> None:
        cycles = 20_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # load the spin kernel
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        self.cycles_per_ms = cycles / start.elapsed_time(end)

    def __call__(self, ms: float) -> None:
        torch.cuda._sleep(int(ms * self.cycles_per_ms))


_spin: Spin | None = None


def host_us(fn, n: int = 300, batches: int = 9) -> tuple[float, int]:
    """Host time per call of ``fn`` with the GPU busy: the median over ``batches`` batches of ``n``
    calls, each behind a GPU spin that must still run when the batch's timed region ends (checked
    with an event recorded after the spin; a batch that outran its spin is timed again behind a
    spin twice as long). Also how many batches were retimed."""
    global _spin
    if _spin is None:
        _spin = Spin()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    spin_ms = max(5.0, 4e3 * (time.perf_counter() - start))  # 4x an unhurried batch (which includes the GPU)
    per_call, retimed = [], 0
    while len(per_call) < batches:
        _spin(spin_ms)
        spinning = torch.cuda.Event()
        spinning.record()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        busy = not spinning.query()  # after the timed region: the spin was still running at its end
        torch.cuda.synchronize()
        if not busy:
            retimed += 1
            if retimed > 20:
                raise RuntimeError(f"host_us: the GPU spin ({spin_ms:.0f} ms) ended before {n} calls did, "
                                   f"20 times")
            spin_ms *= 2
            continue
        per_call.append(elapsed / n * 1e6)
    return statistics.median(per_call), retimed


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


@contextlib.contextmanager
def host_launcher_off():
    """The ops on the Python fast path: the C++ host launcher detached."""
    host_launcher.detach()
    try:
        yield
    finally:
        host_launcher.reattach()


@contextlib.contextmanager
def fast_path_off():
    """The ops as before the fast path: no plans, launches through cuda-python."""
    saved = [(m, m.libcuda) for m in (attention, ops, kernel_module)]
    for module, _ in saved:
        module.libcuda = lambda: None
    attention._plans.clear()
    ops._plans.clear()
    try:
        with host_launcher_off():
            yield
    finally:
        for module, found in saved:
            module.libcuda = found


def gpu_us(fn, n: int = 200) -> float:
    """GPU time per call (CUDA events around n back-to-back calls)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n * 1e3


def ops_table(check_gpu_bound: bool, calls: int = 300) -> None:
    q = torch.randn(1, 128, 1, 128, device="cuda").bfloat16()
    a, b, c = (torch.randn(128, 128, device="cuda").bfloat16() for _ in range(3))
    fa4 = {
        "torch.ops.fa4.flash_attention (bf16 B1 S128 H1 D128)": lambda: torch.ops.fa4.flash_attention(q, q, q),
        "torch.ops.fa4.gemm_residual (bf16 128^3)": lambda: torch.ops.fa4.gemm_residual(a, b, c, 1.0, 1.0),
    }
    for fn in fa4.values():  # the first plans: builds (once) and attaches the host launcher where it can
        fn()
    launcher = ("attached" if host_launcher.attached() else
                f"not attached ({host_launcher.toolchain_missing() or 'FA4_HOST_LAUNCHER or a failed build'})")
    print(f"device: {driver.device_name(0)}; torch {torch.__version__}; the C++ host launcher: {launcher}\n")
    print("host: us per call with the GPU busy (the headline); loop: us per call of a synchronized loop; "
          "retimed: batches that outran their GPU spin (timed again behind a longer one)\n")
    print("| what | host | loop | retimed |\n|---|---|---|---|")

    def row(name, fn):
        host, retimed = host_us(fn, calls)
        print(f"| {name} | {host:.1f} | {per_call_us(fn):.1f} | {retimed} |", flush=True)

    for name, fn in fa4.items():
        row(name, fn)
    held = collections.deque(maxlen=8)  # outputs kept a while, as a model does: new addresses every call
    row("torch.ops.fa4.flash_attention, outputs held (a new output address every call)",
        lambda: held.append(torch.ops.fa4.flash_attention(q, q, q)))
    held.clear()
    if host_launcher.attached():
        with host_launcher_off():
            for name, fn in fa4.items():
                row(f"{name}, Python fast path (host launcher detached)", fn)
    fast_path = hasattr(attention, "_plans")  # False: run on the code before the fast path
    with fast_path_off() if fast_path else contextlib.nullcontext():
        for name, fn in fa4.items() if fast_path else ():
            row(f"{name}, fast path off (the code before)", fn)
    floor = {
        "Library.impl no-op (CUDA key; the dispatcher + new_empty)": lambda: torch.ops.fa4_bench.noop_lib(q, 1.0),
        "flash_attention's schema, body = its two torch.empty (the op's floor, its key)":
            lambda: torch.ops.fa4_bench.noop_attention(q, q, q),
        "the same on the CUDA key": lambda: torch.ops.fa4_bench.noop_attention_cuda(q, q, q),
        "torch.empty x2": lambda: (torch.empty((1, 128, 1, 128), dtype=torch.bfloat16, device=q.device),
                                   torch.empty((0,), dtype=torch.float32, device=q.device)),
        "torch.clone": lambda: torch.clone(q),
        "flash_attention_op, no dispatcher": lambda: attention.flash_attention_op(q, q, q),
        "gemm_residual, no dispatcher": lambda: ops.gemm_residual(a, b, c, 1.0, 1.0),
    }
    if host_launcher.attached():  # a C++ kernel behind torch.ops: no tensors in, a list of 4 ints out
        floor["torch.ops.fa4_host.stats() (Python to a C++ op and back)"] = lambda: torch.ops.fa4_host.stats()
    for name, fn in floor.items():
        row(name, fn)
    if fast_path:
        torch.ops.fa4.flash_attention(q, q, q)
        plan = next(iter(attention._plans.values()))
        out = torch.empty_like(q)
        addresses = (q.data_ptr(), q.data_ptr(), q.data_ptr(), out.data_ptr(), out.data_ptr())
        stream = torch.cuda.current_stream().cuda_stream
        row("PackedLaunch.launch alone (attention)", lambda: plan.launch.launch(addresses, stream))
        other = torch.empty_like(q)
        moved = [(q.data_ptr(),) * 3 + (o.data_ptr(),) * 2 for o in (out, other)]
        row("PackedLaunch.launch alone (attention), o and lse moved every call",
            lambda: plan.launch.launch(moved.reverse() or moved[0], stream))
    if check_gpu_bound:
        for name, fn in fa4.items():
            print(f"| GPU time of {name} | | {gpu_us(fn):.1f} | |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("fa4", "all"), default="all", help="fa4: only the two ops' table")
    parser.add_argument("--check-gpu-bound", action="store_true", help="also the GPU time per call of the ops")
    parser.add_argument("--calls", type=int, default=300,
                        help="calls per timed batch of the host column (at most 400: the launch queue's room)")
    opts = parser.parse_args()
    if not 1 <= opts.calls <= 400:
        parser.error(f"--calls must be in 1..400 (the launch queue holds about 1000 launches), got {opts.calls}")
    ops_table(opts.check_gpu_bound, opts.calls)
    if opts.only == "fa4":
        return
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
    print("| copy_pipeline's parts | us per call |\n|---|---|")
    for name, fn in cases.items():
        print(f"| {name} | {per_call_us(fn):.1f} |", flush=True)


if __name__ == "__main__":
    main()
