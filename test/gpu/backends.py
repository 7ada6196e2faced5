"""Where the GPU tests run their kernels: on a GPU, or in the PTX emulator on the CPU.

The tests take the ``backend`` fixture (conftest.py) and run one body on either:

* ``GpuBackend``: device memory through cuda-python (``array``, ``tensor``, ``host``) and the
  ``torch.ops.fa4`` ops on CUDA tensors (``copy_pipeline``, ``gemm_residual``, ``flash_attention``,
  ``mla_attention``);
* ``EmulatorBackend``: NumPy arrays and ``runtime.load(..., device="emulator")``, the ops launched as
  ``torch.ops.fa4`` launches them (``fa4_mlir.tools.fa4_emu``'s launchers).

Data crosses as NumPy: bf16/fp16 as ``uint16`` bits, fp32 as float32. References and error budgets
are ``fa4_mlir.reference``'s in both modes. ``backend.pick(gpu, emulator)`` chooses a shape list:
the emulator runs the small one unless pytest has ``--emulator-full``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fa4_mlir import runtime
from fa4_mlir.runtime import GlobalTensor
from fa4_mlir.runtime.emulated import DEFAULT_TARGET, RESIDENT_CTAS


class Backend:
    name: str
    target: str
    full: bool  # emulator: run the GPU-size grids

    def pick(self, gpu, emulator):
        return gpu if self.name == "gpu" or self.full else emulator

    def load(self, kernel: str, config, debug=None):
        raise NotImplementedError


class EmulatorBackend(Backend):
    name = "emulator"
    target = DEFAULT_TARGET  # sm_90a: the emulator runs Hopper code

    def __init__(self, full: bool, seed: int):
        self.full = full
        self.seed = seed  # the emulator's schedule: warp interleaving and async completion times

    def __repr__(self) -> str:
        return f"emulator (schedule seed {self.seed})"

    def one_dtype(self, dtype: str) -> None:
        """Skip ``dtype`` unless it is bf16: the emulator backend reads the numerics of one dtype in CI (the GPU
        runs both; both in the emulator with --emulator-full or FA4_EMU_FULL_MATRIX=1)."""
        if dtype != "bf16" and not (self.full or os.environ.get("FA4_EMU_FULL_MATRIX", "0") == "1"):
            pytest.skip(f"the emulator backend runs bf16 in CI, {dtype} with --emulator-full or FA4_EMU_FULL_MATRIX=1")

    def load(self, kernel: str, config, debug=None):
        return runtime.load(kernel, config, device="emulator", debug=debug)

    def load_file(self, path):
        return runtime.load_file(path, target=self.target, device="emulator")

    # -- memory: the arrays themselves ---------------------------------------------------------------
    def array(self, host: np.ndarray):
        return np.array(host, copy=True)

    def tensor(self, handle: np.ndarray, dtype: str, shape=None) -> GlobalTensor:
        """A GlobalTensor of ``handle``'s leading ``shape`` (default: all of it)."""
        view = handle if shape is None else handle[tuple(slice(0, n) for n in shape)]
        return GlobalTensor.host(view, dtype)

    def pointer(self, handle):
        return handle

    def host(self, handle) -> np.ndarray:
        return np.array(handle, copy=True)

    def launch(self, kernel, grid, args) -> None:
        kernel.launch(grid, args, seed=self.seed)

    def close(self) -> None:
        pass

    # -- the ops ----------------------------------------------------------------------------------------
    def copy_pipeline(self, x: np.ndarray, scale: float, dtype: str, ctas: int | None = None) -> np.ndarray:
        from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
        from fa4_mlir.tools.fa4_emu import launch_copy_pipeline

        config = CopyPipelineConfig(dtype=dtype, target=self.target)
        out = np.empty(x.shape, np.uint16)
        launch_copy_pipeline(self.load("copy-pipeline", config), config, x, out, scale, ctas=ctas, seed=self.seed)
        return out

    def gemm_residual(self, a, b, c, alpha: float, beta: float, dtype: str, b_major: str) -> np.ndarray:
        """``alpha * a @ b + beta * c`` for a (M, K), b (K, N), c (M, N) bits; ``b_major`` "k" hands the
        kernel B as the transpose of a row-major (N, K) array (an nn.Linear weight), as the op does."""
        from fa4_mlir.configs.gemm import GemmConfig
        from fa4_mlir.kernels.gemm import choose_schedule
        from fa4_mlir.tools.fa4_emu import launch_gemm

        config = choose_schedule(GemmConfig(dtype=dtype, target=self.target, b_major=b_major), a.shape[0],
                                 b.shape[1], RESIDENT_CTAS)
        b_mem = np.ascontiguousarray(b.T) if b_major == "k" else b
        d = np.empty((a.shape[0], b.shape[1]), np.uint16)
        launch_gemm(self.load("gemm", config), config, a, b_mem, c, d, alpha, beta, seed=self.seed)
        return d

    def flash_attention(self, q, k, v, causal: bool, scale: float, dtype: str):
        """(out bits (B, Sq, H, D), lse (B, H, Sq) float32) for (B, S, H, D) bits, as the op computes."""
        from fa4_mlir.configs.attention import AttentionConfig
        from fa4_mlir.tools.fa4_emu import launch_attention

        config = AttentionConfig(target=self.target, dtype=dtype, head_dim=q.shape[3], causal=causal,
                                 group=q.shape[2] // k.shape[2])
        out = np.empty(q.shape, np.uint16)
        lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), np.float32)
        launch_attention(self.load("attention", config), config, q, k, v, out, lse, scale, seed=self.seed)
        return out, lse

    def mla_attention(self, q_nope, q_rope, kv, k_rope, causal: bool, scale: float, dtype: str):
        """(out bits (B, Sq, H, 512), lse (B, H, Sq) float32) of the absorbed MLA, as the op computes."""
        from fa4_mlir.configs.mla import MLAConfig
        from fa4_mlir.tools.fa4_emu import launch_mla_attention
        from fa4_mlir.torch.mla import tile_heads

        config = MLAConfig(target=self.target, dtype=dtype, causal=causal, tile_heads=tile_heads(q_nope.shape[2]))
        out = np.empty(q_nope.shape, np.uint16)
        lse = np.empty((q_nope.shape[0], q_nope.shape[2], q_nope.shape[1]), np.float32)
        launch_mla_attention(self.load("mla-attention", config), config, q_nope, q_rope, kv, k_rope, out, lse, scale,
                             seed=self.seed)
        return out, lse


class DeviceBuffer:
    """Device memory through cuda-python (no PyTorch)."""

    def __init__(self, nbytes: int, shape, dtype):
        from fa4_mlir.runtime.driver import check, cu

        self.nbytes, self.shape, self.dtype = nbytes, tuple(shape), np.dtype(dtype)
        self.address = int(check(cu().cuMemAlloc(max(nbytes, 16)), "cuMemAlloc"))

    @property
    def strides(self) -> tuple[int, ...]:
        strides, step = [], 1
        for size in reversed(self.shape):
            strides.append(step)
            step *= size
        return tuple(reversed(strides))

    def upload(self, host: np.ndarray) -> None:
        from fa4_mlir.runtime.driver import check, cu

        host = np.ascontiguousarray(host)
        check(cu().cuMemcpyHtoD(self.address, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")

    def download(self) -> np.ndarray:
        from fa4_mlir.runtime.driver import check, cu

        host = np.empty(self.shape, dtype=self.dtype)
        check(cu().cuCtxSynchronize(), "cuCtxSynchronize")
        check(cu().cuMemcpyDtoH(host.ctypes.data, self.address, host.nbytes), "cuMemcpyDtoH")
        return host

    def free(self) -> None:
        from fa4_mlir.runtime.driver import check, cu

        check(cu().cuMemFree(self.address), "cuMemFree")


class GpuBackend(Backend):
    name = "gpu"
    full = True

    def __repr__(self) -> str:
        return f"GPU {self.ordinal} ({self.target})"

    def __init__(self, ordinal: int, torch_loader):
        self.ordinal = ordinal
        self.target = runtime.device_target(ordinal)
        self._torch_loader = torch_loader  # the torch_gpu fixture: skips (or fails) without PyTorch
        self._buffers: list[DeviceBuffer] = []

    def load(self, kernel: str, config, debug=None):
        return runtime.load(kernel, config, device=self.ordinal, debug=debug)

    def load_file(self, path):
        return runtime.load_file(path, device=self.ordinal)

    # -- memory: cuda-python buffers ----------------------------------------------------------------
    def array(self, host: np.ndarray) -> DeviceBuffer:
        buffer = DeviceBuffer(host.nbytes, host.shape, host.dtype)
        buffer.upload(host)
        self._buffers.append(buffer)
        return buffer

    def tensor(self, handle: DeviceBuffer, dtype: str, shape=None) -> GlobalTensor:
        return GlobalTensor(handle.address, dtype, tuple(shape or handle.shape), handle.strides, self.ordinal)

    def pointer(self, handle: DeviceBuffer) -> int:
        return handle.address

    def host(self, handle: DeviceBuffer) -> np.ndarray:
        return handle.download()

    def launch(self, kernel, grid, args) -> None:
        kernel.launch(grid, args)

    def close(self) -> None:
        for buffer in self._buffers:
            buffer.free()
        self._buffers.clear()

    # -- the ops: torch.ops.fa4 on CUDA tensors -----------------------------------------------------------
    @property
    def torch(self):
        return self._torch_loader()

    def _cuda(self, bits: np.ndarray, dtype: str):
        torch = self.torch
        kind = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(kind).cuda()

    def _bits(self, tensor) -> np.ndarray:
        return tensor.contiguous().view(self.torch.int16).cpu().numpy().view(np.uint16)

    def copy_pipeline(self, x: np.ndarray, scale: float, dtype: str, ctas: int | None = None) -> np.ndarray:
        return self._bits(self.torch.ops.fa4.copy_pipeline(self._cuda(x, dtype), scale))

    def gemm_residual(self, a, b, c, alpha: float, beta: float, dtype: str, b_major: str) -> np.ndarray:
        b_cuda = self._cuda(b, dtype)
        if b_major == "k":  # the transpose of a row-major (N, K) tensor, as an nn.Linear weight
            b_cuda = b_cuda.t().contiguous().t()
        out = self.torch.ops.fa4.gemm_residual(self._cuda(a, dtype), b_cuda, self._cuda(c, dtype), alpha, beta)
        return self._bits(out)

    def flash_attention(self, q, k, v, causal: bool, scale: float, dtype: str):
        from fa4_mlir.torch import flash_attention

        out, lse = flash_attention(self._cuda(q, dtype), self._cuda(k, dtype), self._cuda(v, dtype), causal=causal,
                                   softmax_scale=scale, return_lse=True)
        return self._bits(out), lse.cpu().numpy()

    def mla_attention(self, q_nope, q_rope, kv, k_rope, causal: bool, scale: float, dtype: str):
        from fa4_mlir.torch import mla_attention

        out, lse = mla_attention(*(self._cuda(t, dtype) for t in (q_nope, q_rope, kv, k_rope)), causal=causal,
                                 softmax_scale=scale, return_lse=True)
        return self._bits(out), lse.cpu().numpy()
