"""Regenerate the Triton PTX fixtures of fa4_mlir.emu (run by hand; needs Triton, no GPU).

    . .venv/bin/activate              # from the repository root
    pip install triton==3.9.0          # or the wheel at hand
    python test/python/emu_ptx/generate.py [NAME ...]
    python test/python/emu_ptx/generate.py --sm100a triton_matmul     # the same source for sm_100a
    python test/python/emu_ptx/generate.py --sm100a triton_matmul_fp8 # fp8 tl.dot: tcgen05 kind::f8f6f4

For each kernel below it compiles the Triton source for sm_90a (GPUTarget("cuda", 90, 32)),
specialised exactly as the JIT would for the argument values in shapes.py, and writes
``<name>.ptx`` (Triton's PTX, verbatim) next to this file plus one ``kernels.json`` manifest
describing each kernel's launch ABI: the ``.entry`` parameters in order (read back from the PTX),
what each one is, the hidden parameters Triton appends, block / grid / cluster / dynamic shared
memory, and the specialisation.  reference.py turns that into emulator launches with NumPy
references and does not need Triton.

Triton also assembles each PTX with its bundled ptxas (the cubin stage), so every fixture is known
to be accepted by ptxas for sm_90a.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# Keep Triton 3.9's default (FP fusion on -> fma.rn.f32) without its warning, and don't touch
# the user's ~/.triton cache.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
_CACHE = tempfile.mkdtemp(prefix="emu_ptx_triton_cache_")
atexit.register(shutil.rmtree, _CACHE, True)
os.environ["TRITON_CACHE_DIR"] = _CACHE
os.environ["TRITON_ALWAYS_COMPILE"] = "1"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton._C.libtriton import native_specialize_impl  # noqa: E402
from triton.backends.compiler import BaseBackend, GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from shapes import SHAPES, cdiv  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
# Triton 3.9 would stamp ``.version`` from its bundled ptxas (CUDA 13.4 -> 9.4) although LLVM
# generates for +ptx90 either way; pin 9.0 so ptxas 13.0 (this project's nvidia-cuda-nvcc) and
# r580 drivers (CUDA 13.0) accept the fixtures.
PTX_VERSION = 90


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@triton.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x + y, mask=m)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=m, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=m)


@triton.jit
def row_sum_bf16_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_row, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        m = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=m, other=0.0)
        acc += x.to(tl.float32)
    s = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, s, mask=rows < n_rows)


@triton.jit
def layernorm_fp16_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps,
                          BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(m, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0)
    b = tl.load(b_ptr + cols, mask=m, other=0.0)
    y = xc * rstd * w + b
    tl.store(y_ptr + row * stride + cols, y.to(tl.float16), mask=m)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                  stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    # The Triton tutorial's grouped-ordering matmul, with masks on M, N and K.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    # Host-side TensorDescriptors: out-of-bounds boxes are zero-filled on load, clipped on store.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


@triton.jit
def matmul_tma_device_kernel(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Device-side descriptors: Triton writes three CUtensorMaps into the global scratch buffer.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[lda, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[ldb, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[ldc, 1], block_shape=[BLOCK_M, BLOCK_N])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


# ----------------------------------------------------------------------------------------------
# Argument descriptions (what the JIT would see) -> ASTSource signature / constexprs / attrs
# ----------------------------------------------------------------------------------------------


class Ptr:
    """A pointer argument to an array (``dtype`` in Triton spelling, ``shape`` of the array)."""

    def __init__(self, dtype, shape, role="in", desc=""):
        self.dtype, self.shape, self.role, self.desc = dtype, list(shape), role, desc


class Const:
    """A tl.constexpr argument."""

    def __init__(self, value):
        self.value = value


class Desc:
    """A host-side triton.tools.tensor_descriptor.TensorDescriptor over a 2-D array."""

    def __init__(self, dtype, array_shape, shape, strides, block_shape, role="in", desc=""):
        self.dtype, self.array_shape, self.shape = dtype, list(array_shape), list(shape)
        self.strides, self.block_shape, self.role, self.desc = list(strides), list(block_shape), role, desc


def jit_specialise(fn, args: dict):
    """Build (signature, constexprs, attrs, spec) the way JITFunction.run would for these args."""
    signature, constexprs, attrs, spec = {}, {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        v = args[name]
        if isinstance(v, Const):
            signature[name], constexprs[name] = "constexpr", v.value
            spec[name] = {"kind": "constexpr", "value": v.value}
        elif isinstance(v, Ptr):
            signature[name] = "*" + v.dtype
            attrs[(i,)] = [["tt.divisibility", 16]]
            spec[name] = {"kind": "pointer", "divisibility": 16}
        elif isinstance(v, Desc):
            signature[name] = f"tensordesc<{v.dtype}{v.block_shape}>"
            spec[name] = {"kind": "tensordesc"}
        else:
            ty, key = native_specialize_impl(BaseBackend, v, False, True, True)
            if ty == "constexpr":  # int == 1: folded into the kernel
                signature[name], constexprs[name] = "constexpr", key
                spec[name] = {"kind": "specialised_to_1", "value": v}
            else:
                signature[name] = ty
                if key == "D":
                    attrs[(i,)] = [["tt.divisibility", 16]]
                spec[name] = {"kind": "scalar", "type": ty, "value": v, "divisibility": 16 if key == "D" else 1}
    return signature, constexprs, attrs, spec


def kernel_specs():
    S = SHAPES
    specs = {}

    for name in ("triton_vector_add", "triton_vector_add_d16"):
        s = S[name]
        n = s["n"]
        specs[name] = dict(
            fn=vector_add_kernel, num_warps=4, num_stages=3, grid=[cdiv(n, s["BLOCK"]), 1, 1],
            args=dict(x_ptr=Ptr("fp32", [n]), y_ptr=Ptr("fp32", [n]), out_ptr=Ptr("fp32", [n], "out"),
                      n=n, BLOCK=Const(s["BLOCK"])),
            what="out[i] = x[i] + y[i] for i < n, BLOCK elements per program",
        )

    s = S["triton_softmax"]
    specs["triton_softmax"] = dict(
        fn=softmax_kernel, num_warps=4, num_stages=3, grid=[s["n_rows"], 1, 1],
        args=dict(out_ptr=Ptr("fp32", [s["n_rows"], s["out_stride"]], "out"),
                  in_ptr=Ptr("fp32", [s["n_rows"], s["in_stride"]]),
                  in_row_stride=s["in_stride"], out_row_stride=s["out_stride"], n_cols=s["n_cols"],
                  BLOCK_N=Const(s["BLOCK_N"])),
        what="row softmax of in[:, :n_cols] (fp32), one program per row",
    )

    s = S["triton_row_sum_bf16"]
    specs["triton_row_sum_bf16"] = dict(
        fn=row_sum_bf16_kernel, num_warps=4, num_stages=3, grid=[cdiv(s["n_rows"], s["BLOCK_M"]), 1, 1],
        args=dict(x_ptr=Ptr("bf16", [s["n_rows"], s["stride"]]), out_ptr=Ptr("fp32", [s["n_rows"]], "out"),
                  n_rows=s["n_rows"], n_cols=s["n_cols"], stride_row=s["stride"],
                  BLOCK_M=Const(s["BLOCK_M"]), BLOCK_N=Const(s["BLOCK_N"])),
        what="out[r] = sum(x[r, :n_cols]) with bf16 x and fp32 accumulation, BLOCK_M rows per program",
    )

    s = S["triton_layernorm_fp16"]
    R, C = s["n_rows"], s["n_cols"]
    specs["triton_layernorm_fp16"] = dict(
        fn=layernorm_fp16_kernel, num_warps=4, num_stages=3, grid=[R, 1, 1],
        args=dict(x_ptr=Ptr("fp16", [R, s["stride"]]), y_ptr=Ptr("fp16", [R, s["stride"]], "out"),
                  w_ptr=Ptr("fp32", [C]), b_ptr=Ptr("fp32", [C]), mean_ptr=Ptr("fp32", [R], "out"),
                  rstd_ptr=Ptr("fp32", [R], "out"), stride=s["stride"], n_cols=C, eps=float(s["eps"]),
                  BLOCK_N=Const(s["BLOCK_N"])),
        what="y = (x - mean) * rstd * w + b per row (fp16 x/y, fp32 w/b/mean/rstd, fp32 eps)",
    )

    for name in ("triton_matmul", "triton_matmul_128", "triton_matmul_unaligned"):
        s = S[name]
        M, N, K = s["M"], s["N"], s["K"]
        specs[name] = dict(
            fn=matmul_kernel, num_warps=4, num_stages=3,
            grid=[cdiv(M, s["BLOCK_M"]) * cdiv(N, s["BLOCK_N"]), 1, 1],
            args=dict(a_ptr=Ptr("bf16", [M, s["lda"]]), b_ptr=Ptr("bf16", [K, s["ldb"]]),
                      c_ptr=Ptr("fp32", [M, s["ldc"]], "out"), M=M, N=N, K=K,
                      stride_am=s["lda"], stride_ak=1, stride_bk=s["ldb"], stride_bn=1, stride_cm=s["ldc"],
                      stride_cn=1, BLOCK_M=Const(s["BLOCK_M"]), BLOCK_N=Const(s["BLOCK_N"]),
                      BLOCK_K=Const(s["BLOCK_K"]), GROUP_M=Const(s["GROUP_M"])),
            what="C[:M,:N] (fp32) = A[:M,:K] (bf16) @ B[:K,:N] (bf16), fp32 accumulate, tl.dot",
        )

    # fp8 (A e4m3, B e5m2: tl.dot lowers to tcgen05.mma .kind::f8f6f4 with mixed formats and an N-major B).
    # sm_100a only: Hopper's fp8 wgmma needs both operands K-major, a different kernel.
    s = S["triton_matmul_fp8"]
    M, N, K = s["M"], s["N"], s["K"]
    specs["triton_matmul_fp8"] = dict(
        fn=matmul_kernel, num_warps=4, num_stages=3, targets=("sm_100a",),
        grid=[cdiv(M, s["BLOCK_M"]) * cdiv(N, s["BLOCK_N"]), 1, 1],
        args=dict(a_ptr=Ptr("fp8e4nv", [M, s["lda"]]), b_ptr=Ptr("fp8e5", [K, s["ldb"]]),
                  c_ptr=Ptr("fp32", [M, s["ldc"]], "out"), M=M, N=N, K=K,
                  stride_am=s["lda"], stride_ak=1, stride_bk=s["ldb"], stride_bn=1, stride_cm=s["ldc"],
                  stride_cn=1, BLOCK_M=Const(s["BLOCK_M"]), BLOCK_N=Const(s["BLOCK_N"]),
                  BLOCK_K=Const(s["BLOCK_K"]), GROUP_M=Const(s["GROUP_M"])),
        what="C[:M,:N] (fp32) = A[:M,:K] (fp8 e4m3) @ B[:K,:N] (fp8 e5m2), fp32 accumulate, tl.dot",
    )

    s = S["triton_matmul_tma"]
    M, N, K = s["M"], s["N"], s["K"]
    BM, BN, BK = s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]
    specs["triton_matmul_tma"] = dict(
        fn=matmul_tma_kernel, num_warps=4, num_stages=3, grid=[cdiv(M, BM), cdiv(N, BN), 1],
        args=dict(a_desc=Desc("bf16", [M, s["lda"]], [M, K], [s["lda"], 1], [BM, BK]),
                  b_desc=Desc("bf16", [K, s["ldb"]], [K, N], [s["ldb"], 1], [BK, BN]),
                  c_desc=Desc("bf16", [M, s["ldc"]], [M, N], [s["ldc"], 1], [BM, BN], "out"),
                  K=K, BLOCK_M=Const(BM), BLOCK_N=Const(BN), BLOCK_K=Const(BK)),
        what="C (bf16) = A (bf16) @ B (bf16), fp32 accumulate, operands through host TMA descriptors",
    )

    s = S["triton_matmul_tma_device"]
    M, N, K = s["M"], s["N"], s["K"]
    BM, BN, BK = s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]
    specs["triton_matmul_tma_device"] = dict(
        fn=matmul_tma_device_kernel, num_warps=4, num_stages=3, grid=[cdiv(M, BM), cdiv(N, BN), 1],
        args=dict(a_ptr=Ptr("bf16", [M, s["lda"]]), b_ptr=Ptr("bf16", [K, s["ldb"]]),
                  c_ptr=Ptr("bf16", [M, s["ldc"]], "out"), M=M, N=N, K=K, lda=s["lda"], ldb=s["ldb"],
                  ldc=s["ldc"], BLOCK_M=Const(BM), BLOCK_N=Const(BN), BLOCK_K=Const(BK)),
        what="C (bf16) = A (bf16) @ B (bf16), descriptors built on the device (tensormap in global scratch)",
    )
    return specs


# ----------------------------------------------------------------------------------------------
# PTX reading
# ----------------------------------------------------------------------------------------------

ENTRY_RE = re.compile(r"\.visible\s+\.entry\s+(\w+)\s*\((.*?)\)", re.S)
PARAM_RE = re.compile(r"\.param\s+(.*?)\s+(\w+)\s*(\[\d+\])?\s*$")


def read_entry(ptx: str):
    m = ENTRY_RE.search(ptx)
    assert m, "no .entry in PTX"
    params = []
    for decl in m.group(2).split(","):
        decl = decl.strip()
        if not decl:
            continue
        pm = PARAM_RE.match(decl)
        assert pm, decl
        quals, pname, arr = pm.group(1), pm.group(2), pm.group(3)
        toks = quals.split()
        base = [t for t in toks if re.fullmatch(r"\.(b|u|s|f)\d+", t)]
        align = [int(toks[i + 1]) for i, t in enumerate(toks) if t == ".align"]
        nbytes = int(arr[1:-1]) if arr else int(base[0][2:]) // 8
        params.append(dict(ptx_name=pname, ptx_decl=decl, ptx_type=base[0], align=align[0] if align else None,
                           bytes=nbytes, state_space_hint=".global" if ".ptr" in toks else None))
    directives = {}
    tail = ptx[m.end():m.end() + 400].split("{", 1)[0]
    for d in ("reqntid", "maxntid", "minnctapersm", "maxnreg", "reqnctapercluster", "explicitcluster",
              "maxclusterrank"):
        dm = re.search(r"\." + d + r"\b\s*([0-9, ]*)", tail)
        if dm:
            directives[d] = [int(x) for x in dm.group(1).replace(",", " ").split()] or True
    return m.group(1), params, directives


DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "i32": 4, "i64": 8}


def describe_params(spec, kernel_args, md, ptx_params, ptx):
    """Map each PTX .entry parameter to what the launcher passes for it."""
    out = []
    grid = spec["grid"]
    nprog = grid[0] * grid[1] * grid[2] * md.num_ctas
    tdmeta = list(md.tensordesc_meta or [])
    for name in spec["fn"].arg_names:
        v = spec["args"][name]
        if isinstance(v, Const):
            continue
        if isinstance(v, Ptr):
            out.append(dict(kind="pointer", arg=name, dtype=v.dtype, shape=v.shape, role=v.role,
                            note="device pointer to the array (row-major, contiguous)"))
        elif isinstance(v, Desc):
            meta = tdmeta.pop(0) if tdmeta else None
            out.append(dict(kind="tensormap", arg=name, dtype=v.dtype, array_shape=v.array_shape, shape=v.shape,
                            strides=v.strides, block_shape=v.block_shape, role=v.role, tensordesc_meta=meta,
                            note="by-value 128-byte CUtensorMap (cuTensorMapEncodeTiled of the array with "
                                 "global dims = shape, box = block_shape); see tensordesc_meta"))
            for d, sz in enumerate(v.shape):
                out.append(dict(kind="scalar", arg=f"{name}.shape[{d}]", type="i32", value=sz,
                                note="descriptor shape, appended by the launcher after the CUtensorMap"))
            for d, st in enumerate(v.strides):
                out.append(dict(kind="scalar", arg=f"{name}.strides[{d}]", type="i64", value=st,
                                note="descriptor stride in elements, appended after the shapes"))
        else:
            sp = kernel_args[name]
            if sp["kind"] == "specialised_to_1":
                continue
            out.append(dict(kind="scalar", arg=name, type=sp["type"], value=v))
    gsz, gal = md.global_scratch_size, md.global_scratch_align
    out.append(dict(kind="global_scratch", arg="<global_scratch>",
                    bytes_per_program=gsz, buffer_align=gal, total_bytes=gsz * nprog,
                    note=("null (0): this kernel uses no global scratch" if gsz == 0 else
                          f"pointer to a device buffer (Triton does not clear it; the kernel writes before it reads) of grid_size*num_ctas*{gsz} = "
                          f"{gsz * nprog} bytes aligned to {gal}; program p uses bytes "
                          f"[p*{gsz}, (p+1)*{gsz}) where p is the linear CTA id")))
    psz, pal = md.profile_scratch_size, md.profile_scratch_align
    out.append(dict(kind="profile_scratch", arg="<profile_scratch>", bytes_per_program=psz, buffer_align=pal,
                    total_bytes=psz * nprog,
                    note="null (0): only used by proton intra-kernel profiling" if psz == 0 else
                    "profiling buffer"))
    assert len(out) == len(ptx_params), (spec["fn"].__name__, len(out), len(ptx_params))
    merged = []
    for i, (a, p) in enumerate(zip(out, ptx_params)):
        # Triton keeps every parameter in the signature, read or not (e.g. a descriptor's shape).
        used = len(re.findall(r"\b" + re.escape(p["ptx_name"]) + r"\b", ptx)) > 1
        merged.append(dict(index=i, **p, **a, read_by_kernel=used))
    return merged


def portable(ptx: str) -> str:
    """The PTX with its ``.file`` debug paths reduced to names inside the repository or the triton
    package, so a fixture does not record the machine it was generated on."""
    def local(match):
        path = match.group(2)
        for anchor in ("test/python/emu_ptx/", "site-packages/"):
            if anchor in path:
                path = path[path.index(anchor) + (0 if anchor.startswith("test") else len(anchor)):]
                break
        else:
            path = path.rsplit("/", 1)[-1]
        return f'{match.group(1)}"{path}"'
    return re.sub(r'^(\s*\.file\s+\d+\s+)"([^"]*)"', local, ptx, flags=re.M)


def compile_one(name, spec):
    fn = spec["fn"]
    signature, constexprs, attrs, kargs = jit_specialise(fn, spec["args"])
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    k = triton.compile(src, target=TARGET, options={"num_warps": spec["num_warps"],
                                                      "num_stages": spec["num_stages"],
                                                      "ptx_version": PTX_VERSION})
    md = k.metadata
    ptx = portable(k.asm["ptx"])
    entry, params, directives = read_entry(ptx)
    assert entry == md.name
    nw = md.num_warps
    manifest = dict(
        file=f"{name}.ptx",
        entry=entry,
        triton_fn=fn.__name__,
        what=spec["what"],
        triton_version=triton.__version__,
        target=f"sm_{TARGET.arch}a",
        ptx_version=re.search(r"^\.version\s+(\S+)", ptx, re.M).group(1),
        num_warps=nw,
        num_stages=spec["num_stages"],
        num_ctas=md.num_ctas,
        block=[32 * nw, 1, 1],
        grid=list(spec["grid"]),
        cluster=[md.num_ctas, 1, 1],
        smem_bytes=md.shared,
        entry_directives=directives,
        global_scratch_size=md.global_scratch_size,
        global_scratch_align=md.global_scratch_align,
        profile_scratch_size=md.profile_scratch_size,
        profile_scratch_align=md.profile_scratch_align,
        tensordesc_meta=list(md.tensordesc_meta or []),
        launch_cooperative_grid=md.launch_cooperative_grid,
        launch_pdl=md.launch_pdl,
        enable_fp_fusion=md.enable_fp_fusion,
        shapes=SHAPES[name],
        triton_signature=signature,
        specialisation=kargs,
        params=describe_params(spec, kargs, md, params, ptx),
        ptx_lines=ptx.count("\n"),
        ptx_sha256=hashlib.sha256(ptx.encode()).hexdigest(),
    )
    return ptx, manifest


def main(argv):
    global TARGET
    suffix = ""
    if argv[:1] == ["--sm100a"]:  # Blackwell fixtures (tcgen05): <name>_sm100a.ptx, kernels_sm100a.json
        TARGET, suffix, argv = GPUTarget("cuda", 100, 32), "_sm100a", argv[1:]
    specs = kernel_specs()
    target = f"sm_{TARGET.arch}a"
    names = argv or [n for n in specs if target in specs[n].get("targets", ("sm_90a", "sm_100a"))]
    man_path = HERE / f"kernels{suffix}.json"
    manifest = json.loads(man_path.read_text()) if man_path.exists() and argv else {}
    for name in names:
        ptx, entry = compile_one(name, specs[name])
        entry["file"] = f"{name}{suffix}.ptx"
        (HERE / entry["file"]).write_text(ptx)
        manifest[name] = entry
        print(f"{name}: {entry['entry']} {entry['ptx_lines']} lines, smem {entry['smem_bytes']}, "
              f"{len(entry['params'])} params, global_scratch {entry['global_scratch_size']}")
    manifest = {k: manifest[k] for k in specs if k in manifest}
    man_path.write_text(json.dumps(manifest, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
