"""Test shapes shared by generate.py (needs Triton) and reference.py (NumPy only).

Triton's JIT specialises every integer argument on its value: an int equal to 1 becomes a
compile-time constant (it vanishes from the PTX parameter list) and an int divisible by 16 gets
``tt.divisibility = 16`` (wider vector loads / cp.async are then legal).  generate.py compiles each
kernel exactly as ``kernel[grid](...)`` would for the argument values below, so a fixture is only
valid for sizes with the same specialisation: reference.py checks that with ``spec_key``.
Pointers are assumed 16-byte aligned (what torch's caching allocator gives), so every pointer
parameter is compiled with ``tt.divisibility = 16``; the emulator must place arrays on >=16-byte
(better: 128-byte, or 256 like cudaMalloc) boundaries.
"""

from __future__ import annotations


def spec_key(v: int) -> str:
    """Triton's integer specialisation: 'constexpr' (==1), 'D' (% 16 == 0) or '' (none)."""
    if v == 1:
        return "constexpr"
    return "D" if v % 16 == 0 else ""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


SHAPES = {
    # n % 16 != 0: scalar masked ld/st.global.b32 (no vectorisation).
    "triton_vector_add": dict(n=3000, BLOCK=1024),
    # n % 16 == 0 but not a multiple of BLOCK: ld.global.v4.b32 with a masked tail block.
    "triton_vector_add_d16": dict(n=3008, BLOCK=1024),
    # 37 x 300 fp32, contiguous rows (stride 300, not a multiple of 16), one program per row.
    "triton_softmax": dict(n_rows=37, n_cols=300, in_stride=300, out_stride=300, BLOCK_N=512),
    # bf16 rows, fp32 accumulation: 45 x 720 inside a 45 x 736 buffer, 4 rows per program.
    "triton_row_sum_bf16": dict(n_rows=45, n_cols=720, stride=736, BLOCK_M=4, BLOCK_N=256),
    # fp16 layernorm with fp32 weight/bias/eps, 29 x 200 (stride 200), one program per row.
    "triton_layernorm_fp16": dict(n_rows=29, n_cols=200, stride=200, eps=1e-5, BLOCK_N=256),
    # C(fp32, M x N) = A(bf16, M x K) @ B(bf16, K x N): M, N, K not multiples of the tiles;
    # N, K and all leading dims multiples of 16 (the cp.async 16-byte path).
    "triton_matmul": dict(M=100, N=80, K=144, lda=144, ldb=80, ldc=80,
                          BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8),
    # Same kernel with 128 x 128 tiles (on sm_100a: M = 128 tcgen05.mma, 4 warps over 128 TMEM lanes).
    "triton_matmul_128": dict(M=200, N=160, K=144, lda=144, ldb=160, ldc=160,
                              BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
    # Same kernel, sizes and leading dims NOT multiples of 16: the slow path (no 16-byte cp.async).
    "triton_matmul_unaligned": dict(M=100, N=72, K=136, lda=136, ldb=72, ldc=72,
                                    BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8),
    # fp8 A (e4m3) x fp8 B (e5m2), fp32 C (sm_100a only: tcgen05.mma .kind::f8f6f4, 128x128x128 tiles);
    # M, N not multiples of the tiles, K not of BLOCK_K; leading dims padded by 16 bytes (NaN-filled).
    "triton_matmul_fp8": dict(M=200, N=160, K=288, lda=304, ldb=176, ldc=160,
                              BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8),
    # Host-side TensorDescriptor (by-value CUtensorMap params), bf16 output; TMA clips/zero-fills.
    "triton_matmul_tma": dict(M=100, N=72, K=136, lda=144, ldb=80, ldc=80,
                              BLOCK_M=64, BLOCK_N=64, BLOCK_K=64),
    # Device-side tl.make_tensor_descriptor: descriptors are built in the global scratch buffer.
    "triton_matmul_tma_device": dict(M=100, N=72, K=136, lda=144, ldb=80, ldc=80,
                                     BLOCK_M=64, BLOCK_N=64, BLOCK_K=64),
}
