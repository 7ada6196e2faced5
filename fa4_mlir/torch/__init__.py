"""fa4_mlir.torch: fa4 kernels as PyTorch custom ops (``torch.ops.fa4.*``). No MLIR import.

Importing this module registers the ops (``fa4_mlir.torch.ops``). Each has a fake (meta) implementation, so it traces under
``torch.compile``, and launches on the current CUDA stream, so it records into CUDA graphs. Load
(and, where the compiler is installed, build) the kernel before capturing a graph: call the op once
eagerly first.

    import fa4_mlir.torch
    y = torch.ops.fa4.copy_pipeline(x, 2.0)
    d = fa4_mlir.torch.gemm_residual(a, b, c, alpha=1.0, beta=1.0)  # torch.addmm(c, a, b)
    o = fa4_mlir.torch.flash_attention(q, k, v, causal=True)  # (B, S, H, D), like flash-attn
    o = fa4_mlir.torch.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k)  # packed (total, H, D)
    o = fa4_mlir.torch.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, block_table)  # decode
    o = fa4_mlir.torch.mla_attention(q_nope, q_rope, kv_latent, k_rope)  # MLA, absorbed (sm_90)
    o = fa4_mlir.torch.mla_prefill(q_nope, q_rope, k_nope, k_rope, v, causal=True)  # MLA prefill

On CPU tensors the ops run the kernels' PTX in the CPU emulator, only when asked:
``with fa4_mlir.torch.emulator(target="sm_100a"):`` or FA4_DEVICE=emulator (``fa4_mlir.torch.emulated``).
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the machine
    raise ImportError("fa4_mlir.torch needs PyTorch: pip install torch") from None

from fa4_mlir.torch import ops  # noqa: F401  (registers torch.ops.fa4.*)
from fa4_mlir.torch.attention import flash_attention
from fa4_mlir.torch.emulated import emulator
from fa4_mlir.torch.kvcache import flash_attn_with_kvcache
from fa4_mlir.torch.mla import mla_attention
from fa4_mlir.torch.mla_prefill import mla_prefill
from fa4_mlir.torch.varlen import flash_attn_varlen_func

copy_pipeline = torch.ops.fa4.copy_pipeline
gemm_residual = torch.ops.fa4.gemm_residual

__all__ = ["copy_pipeline", "emulator", "flash_attention", "flash_attn_varlen_func", "flash_attn_with_kvcache",
           "gemm_residual", "mla_attention", "mla_prefill"]
