"""Host cost of the ``flash_attention`` and ``gemm_residual`` op bodies with the CUDA driver stubbed:
where the microseconds of a launch go, measured on any machine (no GPU, CPU-only PyTorch).

    FA4_CACHE_DIR=.fa4-cache python bench/host_path_stubbed.py [--profile] [-n 20000]

The op bodies run below the dispatcher on CPU tensors posing as device-0 tensors: ``placement``
answers device 0, the current stream is 0, and the driver is a stub: cuda-python's functions are
Python stubs that return success (so cuda-python's own argument conversion, 8-10 us per call on the
GPU machine, is NOT counted), and the ctypes launcher (``fa4_mlir.runtime.launcher``) calls a stub
``libcuda`` compiled here with ``cc`` whose functions return CUDA_SUCCESS (so ctypes' conversion IS
counted). ``torch.empty`` allocates CPU memory instead of taking a cached CUDA block. The kernels'
manifests are the real ones (the sm_90a artifacts in the cache; none is launched). What this cannot
show (the dispatcher, the CUDA caching allocator, the driver's own time) bench/launch_overhead.py
measures on the GPU.

The CPU allocator hands a call's output another address than the last call's (the CUDA caching
allocator, in a steady loop, the same one), so the op-body rows include one tensor-map rewrite; the
``PackedLaunch.launch`` rows show the launch with its addresses unchanged and with o and lse moved,
and "outputs held" the attention body when every output address is new (a model keeps its outputs).
"""

from __future__ import annotations

import argparse
import cProfile
import pathlib
import pstats
import statistics
import subprocess
import tempfile
import time

import torch

from fa4_mlir.runtime import driver

_STUB_C = r"""
#include <stdint.h>
#include <string.h>
typedef int CUresult;
/* What the last launch passed (the first 8 bytes of each of its first param_count parameters), and counts;
   fail_launch set makes every launch fail (CUDA_ERROR_LAUNCH_FAILED). */
int launches, replaces, param_count, context_sets, fail_launch;
uint64_t last_words[16];
unsigned last_grid[3], last_block[3], last_smem, last_cluster[3];
void *last_stream, *last_function, *context = (void *)0x1000;
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *stream, void **params, void **extra) {
  if (fail_launch) return 719;
  launches++;
  last_function = f;
  last_grid[0] = gx; last_grid[1] = gy; last_grid[2] = gz;
  last_block[0] = bx; last_block[1] = by; last_block[2] = bz;
  last_smem = smem;
  last_stream = stream;
  for (int i = 0; i < param_count && i < 16; i++) memcpy(&last_words[i], params[i], 8);
  return 0;
}
typedef struct {
  unsigned grid[3], block[3], smem;
  void *stream, *attrs;
  unsigned num_attrs;
} CUlaunchConfig;
typedef struct { int id; char pad[4]; unsigned value[16]; } CUlaunchAttribute;
/* A launch with attributes may carry one: the cluster dimension (id 4), recorded in last_cluster. */
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, void *f, void **params, void **extra) {
  const CUlaunchAttribute *attrs = (const CUlaunchAttribute *)config->attrs;
  if (config->num_attrs > 1 || (config->num_attrs && attrs[0].id != 4)) return 1; /* CUDA_ERROR_INVALID_VALUE */
  for (int i = 0; i < 3; i++) last_cluster[i] = config->num_attrs ? attrs[0].value[i] : 1;
  return cuLaunchKernel(f, config->grid[0], config->grid[1], config->grid[2], config->block[0], config->block[1],
                        config->block[2], config->smem, config->stream, params, extra);
}
/* The stub's "tensor map" holds its address in its first 8 bytes, so a launch shows which address
   each map parameter carried. */
CUresult cuTensorMapReplaceAddress(void *map, void *address) {
  replaces++;
  if (((uintptr_t)address) % 16) return 1; /* CUDA_ERROR_INVALID_VALUE */
  memcpy(map, &address, 8);
  return 0;
}
CUresult cuCtxGetCurrent(void **ctx) { *ctx = context; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { context_sets++; context = ctx; return 0; }
"""

CTX = 0x1000  # the context both stubs report current
STUB_CLUSTERS = 62  # the stub's active clusters of a cluster kernel (fewer than SMs / 2, as on the H100)


def stub_libcuda() -> str:
    """Compile the stub driver library; its path."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="fa4-stub-cuda-"))
    (folder / "stub.c").write_text(_STUB_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(folder / "libcuda.so.1"), str(folder / "stub.c")],
                   check=True)
    return str(folder / "libcuda.so.1")


class FakeDriver:
    """cuda.bindings.driver with the calls the runtime makes answered by Python stubs."""

    def __init__(self, real):
        self._real = real
        ok = real.CUresult.CUDA_SUCCESS
        attrs = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
                 "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448, "MULTIPROCESSOR_COUNT": 132}
        by_value = {int(getattr(real.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{k}")): v for k, v in attrs.items()}
        ctx = real.CUcontext(CTX)
        self.cuInit = lambda flags: (ok,)
        self.cuDeviceGetCount = lambda: (ok, 1)
        self.cuDeviceGet = lambda ordinal: (ok, real.CUdevice(ordinal))
        self.cuDeviceGetAttribute = lambda attr, dev: (ok, by_value[int(attr)])
        self.cuDeviceGetName = lambda n, dev: (ok, b"stub H100\0")
        self.cuDevicePrimaryCtxRetain = lambda dev: (ok, ctx)
        self.cuCtxGetCurrent = lambda: (ok, ctx)
        self.cuCtxSetCurrent = lambda c: (ok,)
        self.cuCtxGetDevice = lambda: (ok, real.CUdevice(0))
        self.cuModuleLoadData = lambda image: (ok, real.CUmodule(0x2000))
        self.cuModuleGetFunction = lambda module, name: (ok, real.CUfunction(0x3000))
        self.cuFuncSetAttribute = lambda *a: (ok,)
        self.cuOccupancyMaxActiveBlocksPerMultiprocessor = lambda *a: (ok, 1)
        self.cuOccupancyMaxActiveClusters = lambda function, config: (ok, STUB_CLUSTERS)
        self.cuLaunchKernel = lambda *a: (ok,)
        self.cuLaunchKernelEx = lambda *a: (ok,)
        self.cuTensorMapEncodeTiled = self._encode
        self.cuStreamIsCapturing = lambda s: (ok, real.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)
        self.cuStreamSynchronize = lambda s: (ok,)

    def _encode(self, dtype, rank, address, *rest):
        """A zero "tensor map" holding its address in its first 8 bytes (as the stub libcuda's replace)."""
        encoded = self._real.CUtensorMap()
        encoded.opaque = [self._real.cuuint64_t(address)] + [self._real.cuuint64_t(0)] * 15
        return self._real.CUresult.CUDA_SUCCESS, encoded

    def __getattr__(self, name):
        return getattr(self._real, name)


def install_stubs(patch=setattr, libcuda_path: str | None = None):
    """Point the runtime and the torch ops at the stubs: ``patch(owner, name, value)`` sets each
    attribute (``setattr``, or pytest's ``monkeypatch.setattr`` to undo them). The stub libcuda (its
    ctypes handle, or None for the code before the ctypes launcher)."""
    import fa4_mlir.torch  # noqa: F401
    from fa4_mlir import runtime
    from fa4_mlir.runtime import kernel, tensormap
    from fa4_mlir.torch import attention, ops

    fake = FakeDriver(driver.cu())
    for module in (driver, kernel, tensormap):
        patch(module, "cu", lambda: fake)
    patch(driver, "_contexts", {})
    clear_driver_caches()  # the driver's memoised answers come from the stub from now on
    try:
        from fa4_mlir.runtime import launcher
    except ImportError:  # the code before the ctypes launcher
        launcher = None
    lib = None
    if launcher is not None:
        patch(launcher, "LIBCUDA_NAMES", (libcuda_path or stub_libcuda(),))
        launcher.libcuda.cache_clear()
        lib = launcher.libcuda()
    patch(runtime, "device_target", lambda device=None: "sm_90a")
    patch(runtime, "_loaded", {})
    for module in (attention, ops):
        patch(module, "placement", lambda op, named: 0)
        patch(module, "current_stream", lambda device: 0)
        patch(module, "_kernels", {})
        if hasattr(module, "_plans"):
            patch(module, "_plans", type(module._plans)())
    # CPU tensors stand in for CUDA ones: the GPU branch of tensors.tma_operand (device index None).
    patch(attention, "tma_operand", _tma_operand_gpu)
    return lib


def clear_driver_caches() -> None:
    """Forget what the driver answered (device count, capability, name, the ctypes libcuda): after
    the stubs are removed, the next call asks the real driver."""
    for memoised in (driver.init, driver.capability, driver.device_name):
        memoised.cache_clear()
    try:
        from fa4_mlir.runtime import launcher
    except ImportError:  # the code before the ctypes launcher
        return
    launcher.libcuda.cache_clear()


def _tma_operand_gpu(t, dtype):
    from fa4_mlir.runtime.tensormap import GlobalTensor
    from fa4_mlir.torch.tensors import tma_view

    t, strides = tma_view(t)
    return GlobalTensor(t.data_ptr(), dtype, tuple(t.shape), strides, t.device.index)


def per_call_us(fn, n: int) -> float:
    for _ in range(200):
        fn()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20000, help="calls per run (5 runs, the median)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of each op")
    opts = parser.parse_args()
    install_stubs()
    from fa4_mlir.torch import attention, ops

    q = torch.randn(1, 128, 1, 128).bfloat16()
    a, b, c = (torch.randn(128, 128).bfloat16() for _ in range(3))
    held = []

    def attention_held():  # the outputs kept a while, as a model does: every output address is new
        held.append(attention.flash_attention_op(q, q, q, False, None, True))
        if len(held) > 4:
            held.pop(0)

    attention.flash_attention_op(q, q, q)
    plan = next(iter(attention._plans.values()))
    outs = [torch.empty_like(q) for _ in range(2)]
    same = (q.data_ptr(),) * 3 + (outs[0].data_ptr(),) * 2
    moved = [(q.data_ptr(),) * 3 + (o.data_ptr(),) * 2 for o in outs]
    cases = {
        "flash_attention_op body (B1 S128 H1 D128 bf16)": lambda: attention.flash_attention_op(q, q, q),
        "gemm_residual body (128^3 bf16)": lambda: ops.gemm_residual(a, b, c, 1.0, 1.0),
        "flash_attention_op body, return_lse, outputs held": attention_held,
        "PackedLaunch.launch (attention), addresses as the last call's": lambda: plan.launch.launch(same, 0),
        "PackedLaunch.launch (attention), o and lse moved": lambda: plan.launch.launch(moved.reverse() or moved[0], 0),
        "torch.empty x2 (CPU)": lambda: (torch.empty((1, 128, 1, 128), dtype=q.dtype, device=q.device),
                                         torch.empty((0,), dtype=torch.float32, device=q.device)),
        "data_ptr x4": lambda: (q.data_ptr(), q.data_ptr(), q.data_ptr(), q.data_ptr()),
        "shape + stride() + dtype + device x3": lambda: [(t.shape, t.stride(), t.dtype, t.device) for t in (q, q, q)],
    }
    print("| what (driver stubbed, CPU tensors) | us per call |\n|---|---|")
    for name, fn in cases.items():
        print(f"| {name} | {per_call_us(fn, opts.n):.2f} |", flush=True)
    if opts.profile:
        for name, fn in list(cases.items())[:2]:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(opts.n):
                fn()
            profiler.disable()
            print(f"\n== {name}: {opts.n} calls")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
