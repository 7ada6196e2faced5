"""Run the fixtures on a real sm_90 GPU through the CUDA driver API, exactly as reference.py
describes the launches: proves the manifest's ABI (parameter order, hidden scratch pointers,
shared memory, tensormaps) and the references before an emulator runs them.

    python test/python/emu_ptx/gpu_check.py [NAME ...]      # needs cuda-bindings, numpy, a Hopper GPU

Pointer args are copied to cuMemAlloc'd buffers and back; ``TensorMap`` args are encoded with
cuTensorMapEncodeTiled (what Triton's launcher does); ``None`` is passed as 0.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np
from cuda.bindings import driver as cu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402


def ok(res):
    err, *rest = res if isinstance(res, tuple) else (res,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error {err}: {cu.cuGetErrorString(err)[1]}")
    return rest[0] if len(rest) == 1 else rest


def run(name, seed=0):
    m = reference.manifest()[name]
    grid, block, smem, args, check = reference.case(name, np.random.default_rng(seed))
    mod = ok(cu.cuModuleLoadData(reference.ptx_text(name).encode() + b"\0"))
    fn = ok(cu.cuModuleGetFunction(mod, m["entry"].encode()))
    if smem > 48 * 1024:
        ok(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 smem))
    dev = {}  # id(array) -> device pointer

    def dptr(arr):
        if id(arr) not in dev:
            p = ok(cu.cuMemAlloc(max(arr.nbytes, 1)))
            ok(cu.cuMemcpyHtoD(p, arr.ctypes.data, arr.nbytes))
            dev[id(arr)] = (int(p), arr)
        return dev[id(arr)][0]

    keep, ptrs = [], []
    for a, p in zip(args, m["params"]):
        if isinstance(a, reference.TensorMap):
            tm = ok(cu.cuTensorMapEncodeTiled(
                cu.CUtensorMapDataType(a.data_type), len(a.global_dim), dptr(a.base),
                [cu.cuuint64_t(x) for x in a.global_dim], [cu.cuuint64_t(x) for x in a.global_strides],
                [cu.cuuint32_t(x) for x in a.box_dim], [cu.cuuint32_t(x) for x in a.element_strides],
                cu.CUtensorMapInterleave(a.interleave), cu.CUtensorMapSwizzle(a.swizzle),
                cu.CUtensorMapL2promotion(a.l2_promotion), cu.CUtensorMapFloatOOBfill(a.oob_fill)))
            raw = (ctypes.c_uint64 * 24)()  # 192 bytes, so a 64-aligned 128-byte window fits
            base = (ctypes.addressof(raw) + 63) & ~63
            for i, w in enumerate(tm.opaque):
                ctypes.c_uint64.from_address(base + 8 * i).value = int(w)
            keep.append(raw)
            ptrs.append(base)
            continue
        if a is None:
            c = ctypes.c_uint64(0)
        elif isinstance(a, np.ndarray):
            c = ctypes.c_uint64(dptr(a))
        elif p["ptx_type"] == ".f32":
            c = ctypes.c_float(a)
        elif p["ptx_type"] == ".u64":
            c = ctypes.c_uint64(a)
        else:
            c = ctypes.c_uint32(a)
        keep.append(c)
        ptrs.append(ctypes.addressof(c))
    params = (ctypes.c_void_p * len(ptrs))(*ptrs)
    ok(cu.cuLaunchKernel(fn, *grid, *block, smem, 0, ctypes.addressof(params), 0))
    ok(cu.cuCtxSynchronize())
    for p, arr in dev.values():
        ok(cu.cuMemcpyDtoH(arr.ctypes.data, p, arr.nbytes))
        ok(cu.cuMemFree(p))
    ok(cu.cuModuleUnload(mod))
    check(args)


MARGINS = {}


def _recording_assert_close(orig):
    def inner(got, want, tol, what):
        err = np.abs(np.asarray(got, np.float64) - want)
        ratio = float(np.max(err / np.broadcast_to(np.maximum(tol, 1e-300), np.shape(want))))
        MARGINS[what] = max(MARGINS.get(what, 0.0), ratio)
        return orig(got, want, tol, what)
    return inner


def main(argv):
    reference._assert_close = _recording_assert_close(reference._assert_close)
    ok(cu.cuInit(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
    ok(cu.cuCtxSetCurrent(ctx))
    failed = 0
    for name in argv or reference.FIXTURES:
        for seed in (0, 1):
            try:
                run(name, seed)
                print(f"PASS {name} seed={seed}", flush=True)
            except Exception as e:  # report all
                failed += 1
                print(f"FAIL {name} seed={seed}: {type(e).__name__}: {e}", flush=True)
    for what, r in MARGINS.items():
        print(f"  max |err|/tol {r:.3g}  {what}")
    print(f"{2 * len(argv or reference.FIXTURES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
