"""Measure the H100's approximate transcendental instructions on every f32 input (needs a GPU, torch).

    python bench/emu_mufu_probe.py --out DIR              # on the GPU: ex2 (ftz and not), lg2, rcp
    python bench/emu_mufu_probe.py --only lg2 --out DIR   # on the GPU: MUFU.LG2's structure and tables
    python bench/emu_mufu_probe.py --pack DIR/ex2_table.npz   # here: fa4_mlir/emu/isa/data/ex2_h100.npz
    python bench/emu_mufu_probe.py --pack-lg2 DIR             # here: fa4_mlir/emu/isa/data/lg2_h100.npz

Runs ``ex2.approx.ftz.f32``, ``ex2.approx.f32``, ``lg2.approx.ftz.f32`` and ``rcp.approx.ftz.f32`` on all
2^32 input bit patterns (the PTX is JIT-compiled by the driver: one instruction per thread), keeps
the results on the GPU (16 GiB each) and analyses them there in chunks. ``--out`` writes to DIR:

* ``summary.json``: per instruction, the ulp histogram against the correctly rounded result (inputs
  with a normal result), the worst case and special values; for ex2, the miss counts of candidate
  argument grids (F = 20..27 fraction bits, floor / round / trunc), the sign-magnitude table model's
  misses over every finite input for the ftz form and, with ptxas's scaling sequence, the plain one;
* ``ex2_table.npz``: the model's two tables (2^23 entries each) as deltas against RN(2^x) plus each
  entry's low byte, which ``--pack`` checks while writing the emulator's table file.

``--only lg2`` tests whether MUFU.LG2 of m * 2^e is e + (its result on [1, 2)) or (e + 1) + (its
result on [0.5, 1)), rounded to nearest or toward zero, per sign of e, and writes both tables
(``lg2_one.npz``, ``lg2_half.npz``) for ``--pack-lg2``. The models and the numbers measured on
2026-11-25 are in ``fa4_mlir/emu/isa/mufu.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

OPS = {
    "ex2_ftz": "ex2.approx.ftz.f32",
    "ex2": "ex2.approx.f32",
    "lg2_ftz": "lg2.approx.ftz.f32",
    "rcp_ftz": "rcp.approx.ftz.f32",
}
CHUNK = 1 << 26
BLOCK = 256


def ptx_module() -> str:
    kernels = []
    for name, inst in OPS.items():
        kernels.append(f"""
.visible .entry probe_{name}(.param .u64 out, .param .u32 base)
{{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .f32 %f<3>;
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x;
  mad.lo.u32 %r4, %r1, %r2, %r3;
  ld.param.u32 %r5, [base];
  add.u32 %r6, %r5, %r4;
  mov.b32 %f1, %r6;
  {inst} %f2, %f1;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r4, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.f32 [%rd3], %f2;
  ret;
}}""")
    return ".version 8.0\n.target sm_90a\n.address_size 64\n" + "\n".join(kernels) + "\n"


_MODULE = []


def run_op(torch, name):
    """All 2^32 results of one instruction, as int32 bits on the GPU (16 GiB)."""
    from fa4_mlir.runtime.driver import check, cu

    if not _MODULE:
        torch.zeros(1, device="cuda")  # the primary context, current on this thread
        _MODULE.append(check(cu().cuModuleLoadData(ptx_module().encode() + b"\0"), "cuModuleLoadData"))
    fn = check(cu().cuModuleGetFunction(_MODULE[0], f"probe_{name}".encode()), "cuModuleGetFunction")
    out = torch.empty(1 << 32, dtype=torch.int32, device="cuda")
    for base in range(0, 1 << 32, CHUNK):
        ptr = np.array([out.data_ptr() + 4 * base], np.uint64)
        b = np.array([base], np.uint32)
        args = np.array([ptr.ctypes.data, b.ctypes.data], np.uint64)
        check(cu().cuLaunchKernel(fn, CHUNK // BLOCK, 1, 1, BLOCK, 1, 1, 0, 0, args.ctypes.data, 0), name)
    torch.cuda.synchronize()
    return out


def f32_bits_of(torch, x64):
    return x64.to(torch.float32).view(torch.int32).to(torch.int64)


def ulp_histogram(torch, name, hw, ref_fn):
    """ulp difference hw - RN(exact) over inputs whose exact result is a normal f32."""
    hist = {}
    worst = None
    for base in range(0, 1 << 32, CHUNK):
        bits = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda").to(torch.int32)
        x = bits.view(torch.float32).to(torch.float64)
        ref = ref_fn(x)
        sel = torch.isfinite(ref) & (ref.abs() >= 2.0 ** -126) & (ref.abs() < 2.0 ** 128) & \
            (x.abs() >= 2.0 ** -126)
        if not sel.any():
            continue
        r = f32_bits_of(torch, ref[sel])
        h = hw[base:base + CHUNK][sel].to(torch.int64)
        same_sign = (r < 0) == (h < 0)
        d = torch.where(same_sign, h - r, torch.full_like(h, 1 << 40))
        # negative results: larger bits mean larger magnitude; report signed magnitude ulps
        values, counts = torch.unique(d.clamp(-1000, 1000), return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist()):
            hist[v] = hist.get(v, 0) + c
        m = d.abs().argmax()
        if worst is None or d.abs()[m] > worst[0]:
            worst = (int(d.abs()[m]), float(x[sel][m]))
    return {"ulp_hist": {str(k): v for k, v in sorted(hist.items())},
            "worst": {"ulps": worst[0], "x": worst[1]}}


def abs_error(torch, hw, ref_fn, lo, hi):
    """max |hw - exact| over inputs in [lo, hi] (the ISA bounds lg2.approx's error absolutely there)."""
    worst, at = 0.0, None
    for base in range(0, 1 << 32, CHUNK):
        bits = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda").to(torch.int32)
        x = bits.view(torch.float32).to(torch.float64)
        sel = (x >= lo) & (x <= hi)
        if not sel.any():
            continue
        e = (hw[base:base + CHUNK][sel].view(torch.float32).to(torch.float64) - ref_fn(x[sel])).abs()
        m = e.argmax()
        if float(e[m]) > worst:
            worst, at = float(e[m]), float(x[sel][m])
    return {"range": [lo, hi], "max_abs_error": worst, "log2_max_abs_error": float(np.log2(worst)), "x": at}


def ex2_structure(torch, hw, out_dir):
    """Find the fraction grid F of ex2.approx.ftz.f32: hw(x) = 2^floor(xq) * T(frac(xq)), xq = x on a
    grid of 2^-F. Returns the candidates' miss counts, the chosen model's misses and writes the table."""
    found = {}

    def quant(x, F, mode):
        s = x * 2.0 ** F
        q = torch.floor(s) if mode == "floor" else torch.round(s) if mode == "round" else torch.trunc(s)
        return q / 2.0 ** F

    lo, hi = -126.0, 128.0
    candidates = [(F, mode) for F in range(20, 28) for mode in ("floor", "round", "trunc")]
    misses = {f"{F}/{m}": 0 for F, m in candidates}
    tested = 0
    for base in range(0, 1 << 32, CHUNK):
        bits = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda").to(torch.int32)
        x32 = bits.view(torch.float32)
        x = x32.to(torch.float64)
        sel = (x > lo) & (x < hi) & (x.abs() >= 2.0 ** -126)
        if not sel.any():
            continue
        xs, h = x[sel], hw[base:base + CHUNK][sel]
        tested += xs.numel()
        for F, mode in candidates:
            xq = quant(xs, F, mode)
            xq32 = xq.to(torch.float32)
            exact = xq32.to(torch.float64) == xq
            idx = xq32.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
            hq = hw[idx]
            misses[f"{F}/{mode}"] += int(((hq != h) & exact).sum()) + int((~exact).sum())
    found["grid_candidates_misses"] = misses
    found["tested_inputs"] = tested
    best = min((k for k in misses if int(k.split("/")[0]) <= 24),  # one octave of f32 holds the table
               key=lambda k: (misses[k], int(k.split("/")[0])))
    F, mode = int(best.split("/")[0]), best.split("/")[1]
    found["grid"] = {"F": F, "mode": mode, "misses": misses[best]}
    # the hardware works on sign and magnitude (the grid truncates toward zero): two tables,
    # P[j] = hw(j / 2^F) in [1, 2) and N[j] = hw(-j / 2^F) in (0.5, 1], j < 2^F, and
    # hw(x) = P[j] * 2^n for x = n + j / 2^F >= 0, N[j] * 2^-n for x = -(n + j / 2^F) < 0
    j = torch.arange(0, 1 << F, dtype=torch.int64, device="cuda")
    tables = {}
    for name, sign in (("pos", 1.0), ("neg", -1.0)):
        xj = (sign * j.to(torch.float64) / 2.0 ** F).to(torch.float32)
        t_bits = hw[xj.view(torch.int32).to(torch.int64) & 0xFFFFFFFF].to(torch.int64)
        rn = f32_bits_of(torch, torch.exp2(sign * j.to(torch.float64) / 2.0 ** F))
        delta = t_bits - rn
        values, counts = torch.unique(delta, return_counts=True)
        found[f"table_{name}_delta"] = dict(zip(map(str, values.tolist()), counts.tolist()))
        tables[name] = t_bits
        # the low byte of every entry too: the table is rebuilt on the CPU from numpy's exp2, whose
        # rounding to f32 may differ from torch's where 2^x lies very near a midpoint
        tables[f"{name}_delta"] = delta.to(torch.int8).cpu().numpy()
        tables[f"{name}_low8"] = (t_bits & 0xFF).to(torch.uint8).cpu().numpy()
    np.savez_compressed(os.path.join(out_dir, "ex2_table.npz"), F=F, mode=mode,
                        **{k: v for k, v in tables.items() if k not in ("pos", "neg")})
    model_miss = 0
    model_tested = 0
    examples = []
    for base in range(0, 1 << 32, CHUNK):
        bits = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda").to(torch.int32)
        x = bits.view(torch.float32).to(torch.float64)
        sel = torch.isfinite(x)
        xs, h = x[sel], hw[base:base + CHUNK][sel].to(torch.int64) & 0xFFFFFFFF
        pred = ex2_ftz_model(torch, xs, tables["pos"], tables["neg"], F)
        bad = pred != h
        model_tested += xs.numel()
        model_miss += int(bad.sum())
        if bad.any() and len(examples) < 20:
            for k in torch.nonzero(bad)[:5].flatten().tolist():
                examples.append([float(xs[k]), int(h[k]), int(pred[k])])
    found["table_model"] = {"tested": model_tested, "misses": model_miss, "examples": examples[:20]}
    t_bits = tables
    return found, t_bits, F, mode


def ex2_ftz_model(torch, x, pos, neg, F):
    """The sign-magnitude table model of MUFU.EX2 (ex2.approx.ftz.f32) on finite float64 ``x``."""
    y = x.abs()
    y = torch.where(y < 2.0 ** -126, torch.zeros_like(y), y)  # ftz: a subnormal input is zero
    n = torch.floor(y)
    jj = torch.floor((y - n) * 2.0 ** F).to(torch.int64)
    n = n.clamp(max=200).to(torch.int64)
    up = pos[jj] + (n << 23)
    up = torch.where(up >= 0x7F800000, torch.full_like(up, 0x7F800000), up)
    down = neg[jj] - (n << 23)
    down = torch.where(down < 0x00800000, torch.zeros_like(down), down)  # ftz: subnormal results flush to +0
    return torch.where(x >= 0, up, down)


def _round_f32(torch, v, mode):
    """float64 -> f32 bits (int64) rounded to nearest or toward zero."""
    mag = v.abs()
    r = mag.to(torch.float32)
    b = r.view(torch.int32).to(torch.int64)
    if mode == "rz":
        b = b - (r.to(torch.float64) > mag).to(torch.int64)
    return torch.where(v < 0, b | (1 << 31), b)


def lg2_structure(torch, hw, out_dir):
    """Is MUFU.LG2 of m * 2^e the f32 rounding of e + (its own result for m in [1, 2))? Or of
    (e + 1) + (its result for m / 2 in [0.5, 1))? Counted per rounding and sign of e; the two tables
    are written (delta against torch's RN(log2), int32, and the entries near an f32 midpoint whole)."""
    found = {}
    mb = torch.arange(0, 1 << 23, dtype=torch.int64, device="cuda")
    tables = {}
    for name, expo in (("one", 127), ("half", 126)):
        xb = (expo << 23) | mb
        t = hw[xb].to(torch.int64)
        x = xb.to(torch.int32).view(torch.float32).to(torch.float64)
        ref = torch.log2(x)
        rn = _round_f32(torch, ref, "rn")
        tables[name] = t
        delta = t - rn
        lo = ref.abs().to(torch.float32).to(torch.float64)
        ulp = torch.nextafter(lo.to(torch.float32), torch.tensor(float("inf"), device="cuda")).to(torch.float64) - lo
        mid = torch.where(lo <= ref.abs(), lo + ulp / 2, lo - ulp / 2)  # approximate below powers of two
        fragile = torch.nonzero(((ref.abs() - mid).abs() <= ref.abs() * 2.0 ** -40) & (ref != 0)).flatten()
        found[f"{name}_delta_range"] = [int(delta.min()), int(delta.max())]
        found[f"{name}_fragile"] = int(fragile.numel())
        np.savez_compressed(os.path.join(out_dir, f"lg2_{name}.npz"), delta=delta.to(torch.int32).cpu().numpy(),
                            fragile=fragile.cpu().numpy().astype(np.uint32),
                            fragile_bits=t[fragile].cpu().numpy().astype(np.uint32))
    counts = {}
    examples = {}
    for base in range(0, 1 << 31, CHUNK):  # positive inputs
        xb = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda")
        e = (xb >> 23) - 127
        normal = (e > -127) & (e < 128)
        xb, e = xb[normal], e[normal]
        m = xb & ((1 << 23) - 1)
        h = hw[xb].to(torch.int64) & 0xFFFFFFFF
        for tname, off in (("one", 0), ("half", 1)):
            base_v = tables[tname][m].to(torch.int32).view(torch.float32).to(torch.float64)
            for mode in ("rn", "rz"):
                pred = _round_f32(torch, (e + off).to(torch.float64) + base_v, mode) & 0xFFFFFFFF
                for side, sel in (("e>0", e > 0), ("e<0", e < 0), ("e=0", e == 0), ("e=-1", e == -1)):
                    key = f"{tname}/{mode}/{side}"
                    bad = (pred != h) & sel
                    counts[key] = counts.get(key, 0) + int(bad.sum())
                    counts[key + "/n"] = counts.get(key + "/n", 0) + int(sel.sum())
                    if bad.any() and len(examples.setdefault(key, [])) < 6:
                        for k in torch.nonzero(bad)[:3].flatten().tolist():
                            examples[key].append([f"0x{int(xb[k]):08x}", f"0x{int(h[k]):08x}", f"0x{int(pred[k]):08x}"])
    found["misses"] = counts
    found["examples"] = examples
    return found


def special_values(torch, results):
    probe = [0.0, -0.0, 1e-45, -1e-45, 1e-38, float("inf"), float("-inf"), float("nan"), 1.0, -1.0,
             128.0, 127.99999, -126.0, -126.5, -127.0, -149.0, -150.0, 0.5, 2.0, 3.0, -2.0]
    xs = np.array(probe, np.float32).view(np.uint32).astype(np.int64)
    out = {}
    for name, hw in results.items():
        vals = hw[torch.tensor(xs, device="cuda")].cpu().numpy().astype(np.int64) & 0xFFFFFFFF
        out[name] = {repr(p): f"0x{int(v):08x}" for p, v in zip(probe, vals)}
    return out


def ex2_nonftz_vs_table(torch, hw_nonftz, hw_ftz, tables, F, mode):
    """ex2.approx.f32 (no ftz) is ptxas's FSETP.GEU x, -126; @!p x *= 0.5; MUFU.EX2; @!p r = r * r:
    the model is the ftz table model with that sequence around it (FMUL rounds to nearest, keeps
    subnormals)."""
    miss = tested = 0
    examples = []
    for base in range(0, 1 << 32, CHUNK):
        bits = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda").to(torch.int32)
        x32 = bits.view(torch.float32)
        fin = torch.isfinite(x32)
        x32 = x32[fin]
        low = x32 < -126
        xin = torch.where(low, x32 * 0.5, x32).to(torch.float64)
        r = ex2_ftz_model(torch, xin, tables["pos"], tables["neg"], F).to(torch.int32).view(torch.float32)
        r = torch.where(low, r * r, r)
        pred = r.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        h = hw_nonftz[base:base + CHUNK][fin].to(torch.int64) & 0xFFFFFFFF
        bad = pred != h
        tested += int(fin.sum())
        miss += int(bad.sum())
        if bad.any() and len(examples) < 20:
            for k in torch.nonzero(bad)[:5].flatten().tolist():
                examples.append([float(x32[k]), int(h[k]), int(pred[k])])
    return {"tested": tested, "misses": miss, "examples": examples}


def pack(probe_npz: str, dest: str) -> None:
    """The emulator's table file from the probe's: the same deltas against numpy's RN(2^x), checked
    against the probe's low bytes, plus the entries numpy's exp2 could round either way (2^x within
    2^-40 of a midpoint between f32 values) stored whole, so the table rebuilds identically with any
    libm accurate to 2^-40."""
    d = np.load(probe_npz)
    F = int(d["F"])
    if F != 23 or str(d["mode"]) != "trunc":
        raise SystemExit(f"the table must be F=23/trunc (what fa4_mlir.emu.isa.mufu reads), got {F}/{d['mode']}")
    out = {}
    j = np.arange(1 << F, dtype=np.float64)
    for name, sign in (("pos", 1.0), ("neg", -1.0)):
        x = np.exp2(sign * j / 2.0 ** F)
        bits = x.astype(np.float32).view(np.uint32).astype(np.int64) + d[f"{name}_delta"].astype(np.int64)
        wrong = (bits & 0xFF) != d[f"{name}_low8"]
        if wrong.any():
            raise SystemExit(f"{name}: {int(wrong.sum())} entries disagree with the probe's low bytes")
        # distance of x from the nearest f32 midpoint, relative to x
        lo = x.astype(np.float32)
        ulp = np.spacing(np.abs(lo)).astype(np.float64)
        mid = lo.astype(np.float64) + np.where(lo.astype(np.float64) <= x, 0.5, -0.5) * ulp
        fragile = np.nonzero(np.abs(x - mid) <= x * 2.0 ** -40)[0]
        out[f"{name}_delta"] = d[f"{name}_delta"]
        out[f"{name}_fragile"] = fragile.astype(np.uint32)
        out[f"{name}_fragile_bits"] = bits[fragile].astype(np.uint32)
        print(f"{name}: delta {np.unique(d[f'{name}_delta'], return_counts=True)}, {fragile.size} fragile entries")
    np.savez_compressed(dest, **out)
    print("wrote", dest, os.path.getsize(dest), "bytes")


def pack_lg2(probe_dir: str, dest: str) -> None:
    """The emulator's lg2 tables from the probe's: MUFU.LG2 of [1, 2) and of [0.5, 1), each as its first
    entry and the differences of consecutive entries' bits, int16 with the few larger ones apart (no
    libm involved in rebuilding them)."""
    out = {}
    for name, expo in (("one", 127), ("half", 126)):
        d = np.load(os.path.join(probe_dir, f"lg2_{name}.npz"))
        x = ((expo << 23) | np.arange(1 << 23, dtype=np.uint32)).view(np.float32).astype(np.float64)
        ref = np.log2(x)
        mag = np.abs(ref).astype(np.float32).view(np.uint32).astype(np.int64)
        rn = np.where(ref < 0, mag | (1 << 31), mag)
        bits = (rn + d["delta"].astype(np.int64)) & 0xFFFFFFFF  # the probe's deltas are modulo 2^32
        if (bits[d["fragile"]] != d["fragile_bits"]).any():
            raise SystemExit(f"{name}: numpy's log2 rounds differently from the GPU's away from midpoints")
        bits[d["fragile"]] = d["fragile_bits"]
        diff = np.diff(bits)
        big = np.nonzero(np.abs(diff) > 32767)[0]  # the steps near x = 1, where the result's exponent moves
        out[f"{name}_first"] = np.uint32(bits[0])
        out[f"{name}_diff"] = np.where(np.abs(diff) > 32767, 0, diff).astype(np.int16)
        out[f"{name}_big"] = big.astype(np.uint32)
        out[f"{name}_big_diff"] = diff[big].astype(np.int64)
    np.savez_compressed(dest, **out)
    print("wrote", dest, os.path.getsize(dest), "bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--pack", metavar="PROBE_NPZ")
    ap.add_argument("--pack-lg2", metavar="PROBE_DIR", help="the folder of lg2_one.npz and lg2_half.npz")
    ap.add_argument("--only", choices=("lg2",), help="measure lg2.approx.ftz.f32 alone")
    args = ap.parse_args()
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fa4_mlir", "emu", "isa", "data")
    if args.pack:
        return pack(args.pack, os.path.join(data, "ex2_h100.npz"))
    if args.pack_lg2:
        return pack_lg2(args.pack_lg2, os.path.join(data, "lg2_h100.npz"))
    if not args.out:
        ap.error("--out DIR (measure, on a GPU) or --pack PROBE_NPZ (build the emulator's table) is required")
    import torch

    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    summary = {"device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"), "errors": {}}

    def phase(key, fn):
        try:
            return fn()
        except Exception as exc:  # one failed analysis must not lose the others
            import traceback
            summary["errors"][key] = traceback.format_exc()
            print(f"{key} failed: {exc!r}", flush=True)
            return None

    def save():
        summary["total_s"] = round(time.time() - t0, 1)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)

    if args.only == "lg2":
        hw = run_op(torch, "lg2_ftz")
        summary["lg2_ftz"] = phase("lg2 structure", lambda: lg2_structure(torch, hw, args.out))
        save()
        print(json.dumps(summary)[:8000])
        return
    ftz = run_op(torch, "ex2_ftz")
    summary["specials"] = special_values(torch, {"ex2_ftz": ftz})
    summary["ex2_ftz"] = phase("ex2_ftz hist", lambda: ulp_histogram(torch, "ex2_ftz", ftz, torch.exp2)) or {}
    save()
    found = phase("ex2_ftz structure", lambda: ex2_structure(torch, ftz, args.out))
    save()
    if found:
        structure, t_bits, F, mode = found
        summary["ex2_ftz"].update(structure)
        print("ex2 structure", json.dumps(structure)[:3000], round(time.time() - t0, 1), "s", flush=True)
    nonftz = run_op(torch, "ex2")
    summary["specials"].update(special_values(torch, {"ex2": nonftz}))
    summary["ex2"] = phase("ex2 hist", lambda: ulp_histogram(torch, "ex2", nonftz, torch.exp2)) or {}
    if found:
        summary["ex2"]["vs_ftz"] = phase("ex2 vs ftz", lambda: ex2_nonftz_vs_table(
            torch, nonftz, ftz, t_bits, F, mode))
    save()
    del nonftz, ftz
    torch.cuda.empty_cache()
    for name, fn in (("lg2_ftz", torch.log2), ("rcp_ftz", lambda x: 1.0 / x)):
        hw = run_op(torch, name)
        summary["specials"].update(special_values(torch, {name: hw}))
        summary[name] = phase(name, lambda: ulp_histogram(torch, name, hw, fn)) or {}
        if name == "lg2_ftz":
            summary[name]["abs"] = phase("lg2 abs", lambda: abs_error(torch, hw, fn, 0.5, 2.0))
        del hw
        torch.cuda.empty_cache()
        save()
    print(json.dumps({k: v for k, v in summary.items() if k != "specials"})[:6000])


if __name__ == "__main__":
    main()
