"""Fuzz the torch ops' argument checks: every bad call must end in an fa4 error that names what is wrong.

    python test/fuzz/fuzz_torch.py --seed 0 --count 2000

Each case takes a valid call of one op (``flash_attention``, ``flash_attn_varlen_func``,
``flash_attn_with_kvcache``, ``mla_attention``, ``mla_prefill``, ``gemm_residual``) on small CPU tensors and
mutates one to three of its arguments: a tensor's dtype, rank, one of its sizes, its layout (transposed,
strided, broadcast), its device (``meta``), the tensor replaced by None or a number; a scalar set to NaN,
infinity, a negative, zero, a huge value, a string or a bool; and the metadata's values (prefix sums that fall,
pages past the pool, lengths past the cache). The call runs under the PTX emulator's placement with kernel
loading replaced by a stop (``Accepted``): no kernel is built or run, so a case costs milliseconds, and a call
the checks let through ends there.

How a call may end: it returns (an empty problem), it is accepted, or it raises an ``Fa4Error`` (LaunchError,
ConfigError, ...) with a message. A call that raises anything else from inside fa4_mlir (an IndexError three
frames deep, numpy's or torch's own message about an argument fa4 should have checked) is a finding; so is a
message-less fa4 error. torch's schema check of an argument's Python type at the op boundary is allowed (it
names the argument and the type it wants).

On a GPU, ``--device cuda`` moves the tensors there and launches what the checks accept (small problems, real
kernels, then a synchronize): a kernel fault (an illegal address from metadata the checks missed) is a finding,
and the run stops there, the CUDA context being lost. Findings print with their case number; ``--case N``
reruns one and prints its traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np
import torch

import fa4_mlir.torch as fa4_torch
from fa4_mlir.errors import CudaError, Fa4Error
from fa4_mlir.torch import emulated

FA4_DIR = os.path.dirname(os.path.abspath(fa4_torch.__file__)).rsplit(os.sep, 1)[0]


class Accepted(Exception):
    """The op asked for its kernel: its checks let the call through."""


class _Stop(emulated.emulator):
    def load(self, kernel, config):
        raise Accepted(kernel)

    def run(self, kernel, grid, args):  # pragma: no cover - load stops first
        raise Accepted(kernel)


# -- valid calls ----------------------------------------------------------------------------------------
def _t(rng, *shape, dtype=torch.bfloat16):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)


def _dense(rng):
    b, s, h, d = int(rng.integers(1, 3)), int(rng.integers(1, 70)), 2, int(rng.choice([64, 128]))
    args = {"q": _t(rng, b, s, h, d), "k": _t(rng, b, s, h, d), "v": _t(rng, b, s, h, d)}
    return fa4_torch.flash_attention, args, {"causal": bool(rng.integers(2)), "softmax_scale": None, "q_scale": None,
                                             "k_scale": None, "v_scale": None, "return_lse": False}


def _varlen(rng):
    lengths = [int(x) for x in rng.integers(0, 40, int(rng.integers(1, 4)))]
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
    total, d = int(cu[-1]), 64
    args = {"q": _t(rng, total, 2, d), "k": _t(rng, total, 2, d), "v": _t(rng, total, 2, d),
            "cu_seqlens_q": cu, "cu_seqlens_k": cu.clone()}
    return fa4_torch.flash_attn_varlen_func, args, {"max_seqlen_q": max(lengths), "max_seqlen_k": max(lengths),
                                                    "causal": bool(rng.integers(2))}


def _kvcache(rng):
    b, pages, page, d = 2, 6, 64, 64
    args = {"q": _t(rng, b, 1, 8, d), "k_cache": _t(rng, pages, page, 2, d), "v_cache": _t(rng, pages, page, 2, d),
            "cache_seqlens": torch.tensor([70, 130], dtype=torch.int32),
            "block_table": torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int32)}
    return fa4_torch.flash_attn_with_kvcache, args, {"causal": True, "num_splits": 0}


def _mla(rng):
    b, sq, sk, h = 1, 2, int(rng.integers(1, 100)), 16
    args = {"q_nope": _t(rng, b, sq, h, 512), "q_rope": _t(rng, b, sq, h, 64), "kv_latent": _t(rng, b, sk, 512),
            "k_rope": _t(rng, b, sk, 64)}
    return fa4_torch.mla_attention, args, {"causal": False, "softmax_scale": None, "q_scale": None}


def _mla_prefill(rng):
    b, s, h = 1, int(rng.integers(1, 80)), 2
    args = {"q_nope": _t(rng, b, s, h, 128), "q_rope": _t(rng, b, s, h, 64), "k_nope": _t(rng, b, s, h, 128),
            "k_rope": _t(rng, b, s, 1, 64), "v": _t(rng, b, s, h, 128)}
    return fa4_torch.mla_prefill, args, {"causal": True}


def _gemm(rng):
    m, n, k = (int(rng.integers(1, 200)) for _ in range(3))
    args = {"a": _t(rng, m, k), "b": _t(rng, k, n), "c": _t(rng, m, n)}
    return fa4_torch.gemm_residual, args, {"alpha": 1.0, "beta": 1.0}


OPS = {"flash_attention": _dense, "flash_attn_varlen_func": _varlen, "flash_attn_with_kvcache": _kvcache,
       "mla_attention": _mla, "mla_prefill": _mla_prefill, "gemm_residual": _gemm}
INT_TENSORS = ("cu_seqlens_q", "cu_seqlens_k", "cache_seqlens", "block_table")


# -- mutations ------------------------------------------------------------------------------------------
_DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool, torch.bfloat16, torch.float16,
           torch.float8_e4m3fn, torch.float8_e5m2, torch.uint8]
_SCALARS = [math.nan, math.inf, -math.inf, -1.0, 0.0, 1e40, "x", True, None, 3, -7, 2 ** 40]


def _mutate_tensor(rng, t: torch.Tensor):
    how = int(rng.integers(9))
    if how == 0:
        return t.to(_DTYPES[int(rng.integers(len(_DTYPES)))]), "dtype"
    if how == 1:
        return t.unsqueeze(0), "rank +1"
    if how == 2:
        return (t[0] if t.dim() and t.shape[0] else t.reshape(-1)), "rank -1"
    if how == 3 and t.dim():
        dim = int(rng.integers(t.dim()))
        size = int(rng.choice([0, 1, 2, 3, 65, 96, 130, 576]))
        shape = list(t.shape)
        shape[dim] = size
        return torch.zeros(shape, dtype=t.dtype), f"size[{dim}]={size}"
    if how == 4 and t.dim() >= 2:
        return t.transpose(-1, -2), "transposed"
    if how == 5 and t.dim() and t.shape[-1] > 1:
        return t[..., ::2], "strided"
    if how == 6 and t.dim():
        return t[..., :1].expand(t.shape), "broadcast"
    if how == 7:
        return t.to("meta"), "meta"
    return (None if rng.integers(2) else 1.5), "not a tensor"


def _mutate_metadata(rng, t: torch.Tensor):
    values = t.contiguous().clone()
    how = int(rng.integers(5))
    flat = values.view(-1)
    if flat.numel() == 0:
        return values, "empty"
    i = int(rng.integers(flat.numel()))
    if how == 0:
        flat[i] = -1
        return values, f"[{i}]=-1"
    if how == 1:
        flat[i] = 10 ** 6
        return values, f"[{i}]=1e6"
    if how == 2 and flat.numel() > 1:
        return values.flip(-1).contiguous(), "reversed"
    if how == 3:
        flat[i] = flat[i] + 1
        return values, f"[{i}]+1"
    return values.to(torch.int64), "int64"


@dataclass
class Case:
    index: int
    op: str
    mutations: list = field(default_factory=list)


def make_case(seed: int, index: int):
    """(case, function, tensors, scalars) of case ``index`` of ``seed`` (independent of the others)."""
    rng = np.random.default_rng([seed, index])
    op = list(OPS)[int(rng.integers(len(OPS)))]
    fn, tensors, scalars = OPS[op](rng)
    case = Case(index, op)
    for _ in range(int(rng.integers(1, 4))):
        if rng.random() < 0.7 or not scalars:
            name = list(tensors)[int(rng.integers(len(tensors)))]
            t = tensors[name]
            if isinstance(t, torch.Tensor) and name in INT_TENSORS and t.dtype in (torch.int32, torch.int64) \
                    and t.device.type == "cpu" and rng.random() < 0.6:
                tensors[name], what = _mutate_metadata(rng, t)
            elif isinstance(t, torch.Tensor):
                tensors[name], what = _mutate_tensor(rng, t)
            else:
                continue
        else:
            name = list(scalars)[int(rng.integers(len(scalars)))]
            if rng.random() < 0.2:  # a tensor where a number (or a per-token scale) goes
                scalars[name] = torch.rand(tuple(int(x) for x in rng.integers(0, 4, int(rng.integers(0, 4)))))
                what = f"tensor {tuple(scalars[name].shape)}"
            else:
                scalars[name] = _SCALARS[int(rng.integers(len(_SCALARS)))]
                what = repr(scalars[name])
        case.mutations.append(f"{name}: {what}")
    return case, fn, tensors, scalars


# -- running --------------------------------------------------------------------------------------------
def _in_fa4(frame_file: str) -> bool:
    return os.path.abspath(frame_file).startswith(FA4_DIR + os.sep)


def classify(exc: BaseException | None) -> str:
    """"ok" (returned, accepted, or a clean fa4 error) or what makes the ending a finding."""
    if exc is None or isinstance(exc, Accepted):
        return "ok"
    if isinstance(exc, CudaError) or "CUDA error" in str(exc):  # a launch the checks let through faulted
        return f"CUDA error: {str(exc).splitlines()[0][:100]}"
    if isinstance(exc, Fa4Error):
        return "ok" if str(exc).strip() else "fa4 error without a message"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _in_fa4(f.filename)]
    if not frames:
        return "ok"  # torch's own schema check, before any fa4 code ran
    innermost = frames[-1]
    if "torch.ops.fa4." in (innermost.line or "") and len(frames) == 1:
        return "ok"  # the schema check of the call's Python types, at the op boundary
    return f"{type(exc).__name__} at {os.path.relpath(innermost.filename, FA4_DIR)}:{innermost.lineno}"


def _to(value, device: str):
    return value.to(device) if isinstance(value, torch.Tensor) and value.device.type == "cpu" else value


def run_case(seed: int, index: int, device: str = "cpu"):
    """``device`` "cpu": under the stop (no kernel); "cuda": the CPU tensors moved to the GPU and an accepted
    call launched for real, then synchronized (a kernel fault is a finding)."""
    case, fn, tensors, scalars = make_case(seed, index)
    exc = None
    try:
        if device == "cpu":
            with _Stop(target="sm_90a" if index % 2 else "sm_100a"):
                fn(**tensors, **scalars)
        else:
            fn(**{n: _to(t, device) for n, t in tensors.items()}, **{n: _to(x, device) for n, x in scalars.items()})
            torch.cuda.synchronize()
    except Exception as caught:  # noqa: BLE001 - classifying every ending is the point
        exc = caught
    return case, classify(exc), exc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fuzz_torch.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=500, help="cases to run (default 500)")
    p.add_argument("--case", type=int, action="append", default=None, help="rerun this case with its traceback")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: stop where the op loads its kernel (default); cuda: launch accepted calls on the GPU")
    args = p.parse_args(argv)
    ids = args.case if args.case is not None else range(args.count)
    findings: dict[str, list[int]] = {}
    endings = {"accepted": 0, "fa4 error": 0, "other": 0}
    for i in ids:
        case, verdict, exc = run_case(args.seed, i, args.device)
        if isinstance(exc, Accepted) or exc is None:
            endings["accepted"] += 1
        elif isinstance(exc, Fa4Error):
            endings["fa4 error"] += 1
        else:
            endings["other"] += 1
        if args.case is not None:
            print(f"case {i}: {case.op} {case.mutations}: {verdict}")
            if exc is not None:
                traceback.print_exception(exc)
        if verdict != "ok":
            findings.setdefault(verdict, []).append(i)
            if verdict.startswith("CUDA error"):  # the context is lost: later cases would all fail
                print(f"case {i}: {case.op} {case.mutations}: {verdict}; stopping")
                break
    print(f"seed {args.seed}: {len(ids)} cases; {endings['accepted']} accepted, {endings['fa4 error']} fa4 errors, "
          f"{endings['other']} other endings; {sum(map(len, findings.values()))} findings")
    for verdict, cases in sorted(findings.items(), key=lambda kv: -len(kv[1])):
        more = " ..." if len(cases) > 6 else ""
        print(f"  {len(cases):4d}  {verdict}  (cases {', '.join(map(str, cases[:6]))}{more})")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
