"""Calibrate the PTX emulator (fa4_mlir.emu) against a GPU: the same sm_90a artifacts run on the H100
(the cubin) and in the emulator (the PTX next to it) on identical inputs, and the outputs are compared.

    python bench/emu_calibrate.py prepare --dir out/emu-calibration        # here: fa4-compile + inputs
    python bench/emu_calibrate.py emulate --dir out/emu-calibration        # here: the emulator, seed 0
    python3 bench/emu_calibrate.py gpu --dir out/emu-calibration --out GPU # on the H100: runtime + torch
    python bench/emu_calibrate.py compare --dir out/emu-calibration --gpu GPU [--markdown FILE]

(docs/emulator-calibration.md: the device command, the cases, the bars and the results.)

``prepare`` writes ``DIR/<case>/``: the artifact (``<entry>.ptx/.cubin/.json``), ``inputs.npz`` (every
array of the launch, outputs pre-filled with NaN bits: unwritten elements show) and ``case.json``
(arguments by parameter name, grid, problem). Rows whose length is not a multiple of 16 bytes are
padded with NaN bits: the kernel must neither read nor write the padding. ``gpu`` needs no MLIR: it
loads each artifact with ``fa4_mlir.runtime``, runs it twice (the GPU must agree with itself) and
writes ``GPU/<case>.npz`` + ``GPU/<case>.json``; each case runs in a worker process that is restarted
after a CUDA error or a hang, so one failing case does not stop the others. ``emulate`` writes
``DIR/<case>/emu.npz`` + ``emu.json`` (instructions, seconds). ``compare`` takes GPU as a folder or a
``.tgz`` of it and exits 1 when a case misses its bar (docs/emulator-calibration.md).
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import math
import os
import platform
import queue
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the GPU machine runs the checkout without installing it

POISON16, POISON32 = 0xFFFF, 0xFFFFFFFF  # NaN in bf16, fp16 and f32
EMU_DTYPES = {"bf16": "bf16", "fp16": "f16"}
WIDTH = {"bf16": 16, "fp16": 16, "f32": 32}
# emulator vs GPU: (% bit-identical at least, max ulps at most) by output kind
BARS = {"copy": (100.0, 0), "gemm": (99.0, 2), "attention": (99.0, 2), "lse": (0.0, 4)}
# either vs float64: max |out - ref| / max |ref| (LSE: absolute; copy: vs the rounded reference)
REF_TOL = {"copy": 0.0, "gemm": 2 ** -6, "attention": 2 ** -6, "lse": 1e-3}

# name, dtype, rows, cols, CTAs, scale, extra fa4-compile options
COPY = [("copy-bf16-300x200", "bf16", 300, 200, 3, 1.5, ()),
        ("copy-fp16-257x1000", "fp16", 257, 1000, 5, -0.75, ("--tile-cols", "128", "--stages", "3"))]
# name, dtype, M, N, K, b_major, alpha, beta, has_c, CTAs (grid = min(CTAs, tiles)), extra options
GEMM = [("gemm-200x264x136-k", "bf16", 200, 264, 136, "k", 1.0, 1.0, 1, 99, ()),
        ("gemm-129x300x72-mn", "bf16", 129, 300, 72, "mn", 1.0, 1.0, 1, 99, ()),
        ("gemm-256x256x512-k-beta0", "bf16", 256, 256, 512, "k", 1.5, 0.0, 0, 99, ()),
        ("gemm-64x520x200-mn", "bf16", 64, 520, 200, "mn", -1.0, 0.5, 1, 99, ()),
        ("gemm-300x264x100-mn-2cta", "bf16", 300, 264, 100, "mn", 0.5, 2.0, 1, 2, ()),
        ("gemm-77x136x1000-k", "bf16", 77, 136, 1000, "k", 1.0, 1.0, 1, 99, ()),
        ("gemm-1x8x8-k", "bf16", 1, 8, 8, "k", 1.0, 1.0, 1, 99, ()),
        ("gemm-257x520x64-k-beta0-1cta", "bf16", 257, 520, 64, "k", 1.0, 0.0, 0, 1, ()),
        ("gemm-fp16-200x264x136-k", "fp16", 200, 264, 136, "k", 1.0, 1.0, 1, 99, ()),
        ("gemm-tile64x128-200x264x136-mn", "bf16", 200, 264, 136, "mn", 1.0, 1.0, 1, 3,
         ("--tile", "64x128x64"))]
# name, dtype, head dim, causal, group, B, H, Sq, Sk, extra options
ATTENTION = [("att-d64-100x300", "bf16", 64, False, 1, 1, 1, 100, 300, ()),
             ("att-d64-causal-b2h2-257x129", "bf16", 64, True, 1, 2, 2, 257, 129, ()),
             ("att-d64-gqa2-128x256", "bf16", 64, False, 2, 1, 4, 128, 256, ()),
             ("att-d64-129x1000", "bf16", 64, False, 1, 1, 1, 129, 1000, ()),
             ("att-d128-100x300", "bf16", 128, False, 1, 1, 1, 100, 300, ()),
             ("att-d128-causal-b2h2-257x129", "bf16", 128, True, 1, 2, 2, 257, 129, ()),
             ("att-d128-128x1024", "bf16", 128, False, 1, 1, 1, 128, 1024, ()),
             ("att-d128-causal-200x200", "bf16", 128, True, 1, 1, 1, 200, 200, ()),
             ("att-d128-mqa4-causal-64x200", "bf16", 128, True, 4, 1, 4, 64, 200, ()),
             ("att-d128-bn64-200x333", "bf16", 128, False, 1, 1, 1, 200, 333, ("--block-n", "64")),
             ("att-d256-100x300", "bf16", 256, False, 1, 1, 1, 100, 300, ()),
             ("att-d256-causal-b2h2-257x129", "bf16", 256, True, 1, 2, 2, 257, 129, ()),
             ("att-d256-gqa2-1x77", "bf16", 256, False, 2, 1, 2, 1, 77, ()),
             ("att-d64-5x1", "bf16", 64, False, 1, 1, 1, 5, 1, ()),
             ("att-fp16-d128-b1h2-130x260", "fp16", 128, False, 1, 1, 2, 130, 260, ()),
             ("att-fp16-d64-causal-gqa2-100x300", "fp16", 64, True, 2, 2, 2, 100, 300, ())]


class UsageError(Exception):
    pass


# -- numbers ------------------------------------------------------------------------------------------
def to_bits(x, dtype: str) -> np.ndarray:
    """float -> uint16 bit patterns of bf16 (round to nearest even) or fp16."""
    if dtype == "fp16":
        return np.asarray(x, np.float32).astype(np.float16).view(np.uint16)
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def to_f64(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "fp16":
        return bits.view(np.float16).astype(np.float64)
    return bits.view(np.float32).astype(np.float64)


def ulp_distance(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """|a - b| in units in the last place, on bit patterns: sign-magnitude mapped to a signed line, so
    +0 and -0 are 0 apart and a sign change counts the steps on both sides (NaNs lie past infinity)."""
    utype, sign = (np.uint16, 1 << 15) if width == 16 else (np.uint32, 1 << 31)
    lines = []
    for x in (a, b):
        u = np.ascontiguousarray(x).view(utype).astype(np.int64)
        lines.append(np.where(u & sign, -(u & (sign - 1)), u & (sign - 1)))
    return np.abs(lines[0] - lines[1]).astype(np.float64)


# -- cases --------------------------------------------------------------------------------------------
def all_cases() -> list[dict]:
    cases = [dict(name=n, family="copy", kernel="copy-pipeline", dtype=dt, rows=r, cols=c, ctas=ctas,
                  scale=s, options=["--dtype", dt, *opts]) for n, dt, r, c, ctas, s, opts in COPY]
    cases += [dict(name=n, family="gemm", kernel="gemm", dtype=dt, m=m, n=nn, k=k, b_major=bm, alpha=al,
                   beta=be, has_c=hc, ctas=ctas, options=["--dtype", dt, "--b-major", bm, *opts])
              for n, dt, m, nn, k, bm, al, be, hc, ctas, opts in GEMM]
    cases += [dict(name=n, family="attention", kernel="attention", dtype=dt, head_dim=d, causal=ca, group=g,
                   b=b, h=h, sq=sq, sk=sk, options=["--dtype", dt, "--head-dim", str(d), "--group", str(g),
                                                    "--causal" if ca else "--no-causal", *opts])
              for n, dt, d, ca, g, b, h, sq, sk, opts in ATTENTION]
    return cases


def select(names: list[str], only: str | None) -> list[str]:
    if not only:
        return names
    patterns = [p for p in only.split(",") if p]
    chosen = [n for n in names if any(fnmatch.fnmatch(n, p) or p in n for p in patterns)]
    if not chosen:
        raise UsageError(f"--only {only!r} must match at least one case of: {', '.join(names)}")
    return chosen


def case_dirs(root: Path, only: str | None) -> list[Path]:
    if not root.is_dir():
        raise UsageError(f"--dir must be a folder written by 'prepare', got '{root}' (run prepare first)")
    names = sorted(p.parent.name for p in root.glob("*/case.json"))
    if not names:
        raise UsageError(f"--dir '{root}' holds no <case>/case.json: run 'prepare --dir {root}' first")
    return [root / n for n in select(names, only)]


def padded(values: np.ndarray, dtype: str) -> np.ndarray:
    """2-D bit patterns with rows padded to a multiple of 16 bytes (TMA strides) with NaN bits."""
    rows, cols = values.shape
    out = np.full((rows, -(-cols // 8) * 8), POISON16, np.uint16)
    out[:, :cols] = to_bits(values, dtype)
    return out


def build_inputs(case: dict, manifest: dict, rng) -> tuple[dict, dict, dict, list, dict]:
    """(arrays, argument bindings by parameter name, grid, outputs, problem) of one case."""
    dt, cfg, fam = case["dtype"], manifest["config"], case["family"]
    out16 = lambda shape: np.full(shape, POISON16, np.uint16)  # noqa: E731
    tmap = lambda name, shape: {"array": name, "shape": list(shape)}  # noqa: E731
    if fam == "copy":
        rows, cols = case["rows"], case["cols"]
        src = padded(rng.standard_normal((rows, cols)) * 4, dt)
        arrays = {"src": src, "dst": out16(src.shape)}
        tiles = -(-cols // cfg["tile_cols"])
        total = -(-rows // cfg["tile_rows"]) * tiles
        per = -(-total // max(1, min(case["ctas"], total)))
        bind = {"src": tmap("src", (rows, cols)), "dst": tmap("dst", (rows, cols)), "num_tiles": tiles,
                "total_tiles": total, "tiles_per_cta": per, "scale": case["scale"]}
        return arrays, bind, [-(-total // per), 1, 1], [("dst", [rows, cols], dt)], \
            {"scale": case["scale"]}
    if fam == "gemm":
        m, n, k = case["m"], case["n"], case["k"]
        b_shape = (n, k) if case["b_major"] == "k" else (k, n)
        arrays = {"a": padded(rng.standard_normal((m, k)), dt),
                  "b": padded(rng.standard_normal(b_shape), dt), "c": padded(rng.standard_normal((m, n)), dt)}
        if not case["has_c"]:
            arrays["c"][:] = POISON16  # beta = 0: C must not be read
        arrays["d"] = out16(arrays["c"].shape)
        num_m, num_n = -(-m // cfg["tile_m"]), -(-n // cfg["tile_n"])
        bind = {"a": tmap("a", (m, k)), "b": tmap("b", b_shape), "c": tmap("c", (m, n)),
                "d": tmap("d", (m, n)), "num_m": num_m, "num_n": num_n, "k_tiles": -(-k // cfg["tile_k"]),
                "alpha": case["alpha"], "beta": case["beta"], "has_c": case["has_c"]}
        grid = [min(case["ctas"], num_m * num_n), 1, 1]  # persistent: the same grid on both sides
        problem = {k_: case[k_] for k_ in ("alpha", "beta", "has_c", "b_major")}
        return arrays, bind, grid, [("d", [m, n], dt)], problem
    b, h, sq, sk, d, g = case["b"], case["h"], case["sq"], case["sk"], case["head_dim"], case["group"]
    arrays = {"q": to_bits(rng.standard_normal((b, sq, h, d)) * 1.5, dt),
              "k": to_bits(rng.standard_normal((b, sk, h // g, d)), dt),
              "v": to_bits(rng.standard_normal((b, sk, h // g, d)), dt),
              "o": out16((b, sq, h, d)), "lse": np.full((b, h, sq), POISON32, np.uint32).view(np.float32)}
    scale = 1 / math.sqrt(d)
    bind = {"q": tmap("q", (b, sq, h, d)), "k": tmap("k", (b, sk, h // g, d)),
            "v": tmap("v", (b, sk, h // g, d)), "o": tmap("o", (b, sq, h, d)), "lse": {"array": "lse"},
            "seq_q": sq, "seq_k": sk, "num_heads": h, "group": g, "write_lse": 1,
            "scale_log2e": float(np.float32(scale * math.log2(math.e)))}
    grid = [-(-sq // 128), h, b]  # sm_90a: 128 query rows of one head a CTA (attention.launch_geometry)
    return arrays, bind, grid, [("o", [b, sq, h, d], dt), ("lse", [b, h, sq], "f32")], \
        {"scale": scale, "causal": case["causal"], "group": g}


def cmd_prepare(args) -> int:
    root = Path(args.dir)
    cases = all_cases()
    chosen = set(select([c["name"] for c in cases], args.only))
    root.mkdir(parents=True, exist_ok=True)
    if not args.only:  # cases of an earlier case list would be compared too
        for old in {p.parent.name for p in root.glob("*/case.json")} - chosen:
            shutil.rmtree(root / old)
    if subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(root.resolve())],
                      capture_output=True).returncode == 1:
        print(f"warning: '{root}' is not git-ignored (the device run should carry it as an ignored path)")
    built: dict[tuple, Path] = {}
    start = time.time()
    for index, case in enumerate(cases):
        if case["name"] not in chosen:
            continue
        where = root / case["name"]
        if where.exists():
            shutil.rmtree(where)
        where.mkdir()
        key = (case["kernel"], tuple(case["options"]))
        if key in built:
            for f in built[key].iterdir():
                if f.suffix in (".ptx", ".cubin") or (f.suffix == ".json" and f.name != "case.json"):
                    shutil.copy(f, where / f.name)
        else:
            cmd = [sys.executable, "-m", "fa4_mlir.tools.fa4_compile", case["kernel"], "--target", "sm_90a",
                   *case["options"], "-o", str(where)]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode:
                raise SystemExit(f"prepare: {' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")
            built[key] = where
        manifests = [p for p in where.glob("*.json") if p.name != "case.json"]
        manifest = json.loads(manifests[0].read_text())
        rng = np.random.default_rng([20251124, index])
        arrays, bind, grid, outputs, problem = build_inputs(case, manifest, rng)
        np.savez(where / "inputs.npz", **arrays)
        record = {**case, "manifest": manifests[0].name, "entry": manifest["entry"], "grid": grid,
                  "bind": bind, "outputs": [{"array": a, "shape": s, "dtype": t} for a, s, t in outputs],
                  "problem": problem,
                  "compile": f"fa4-compile {case['kernel']} --target sm_90a {' '.join(case['options'])}"}
        (where / "case.json").write_text(json.dumps(record, indent=1))
        print(f"{case['name']:36s} grid {tuple(grid)}  {record['compile']}")
    print(f"prepared {len(chosen)} cases in {root} ({time.time() - start:.1f} s)")
    return 0


def load_case(where: Path) -> tuple[dict, dict, dict]:
    case = json.loads((where / "case.json").read_text())
    manifest = json.loads((where / case["manifest"]).read_text())
    with np.load(where / "inputs.npz") as z:
        arrays = {k: z[k].copy() for k in z.files}
    return case, manifest, arrays


def view(array: np.ndarray, shape) -> np.ndarray:
    return array[tuple(slice(0, s) for s in shape)]


# -- emulator -----------------------------------------------------------------------------------------
def emulate_one(job: tuple[str, int, int]) -> dict:
    where, seed, timeout = Path(job[0]), job[1], job[2]
    from fa4_mlir import emu

    result = {"case": where.name, "seed": seed}
    start = time.time()

    def expire(*_):
        raise TimeoutError(f"emulation took more than {timeout} s (raise --timeout)")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(timeout)
    try:
        case, manifest, arrays = load_case(where)
        prog = emu.load_ptx(where / f"{case['entry']}.ptx")
        args = []
        for p in sorted(manifest["params"], key=lambda p: p["index"]):
            b = case["bind"][p["name"]]
            if p["kind"] == "tensormap":
                spec = p["tensor_map"]
                args.append(emu.TensorMap(view(arrays[b["array"]], b["shape"]), swizzle=spec["swizzle"],
                                          box=tuple(reversed(spec["box"])), dtype=EMU_DTYPES[spec["dtype"]]))
            else:
                args.append(arrays[b["array"]] if p["kind"] == "ptr" else b)
        stats = prog.launch(case["entry"], grid=tuple(case["grid"]), block=tuple(manifest["threads"]),
                            cluster=tuple(manifest["cluster"]), smem_bytes=manifest["smem_bytes"], args=args,
                            seed=seed)
        np.savez(where / "emu.npz", **{o["array"]: arrays[o["array"]] for o in case["outputs"]})
        result.update(status="ok", instructions=stats.instructions, warp_instructions=stats.warp_instructions,
                      emu_seconds=round(stats.seconds, 3))
    except BaseException as exc:  # noqa: BLE001 (a case's failure is its result; KeyboardInterrupt too)
        if isinstance(exc, KeyboardInterrupt):
            raise
        (where / "emu.npz").unlink(missing_ok=True)
        result.update(status="error", error=f"{type(exc).__name__}: {exc}"[:2000],
                      where=traceback.format_exc(limit=-3)[-1500:])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    result["seconds"] = round(time.time() - start, 3)
    (where / "emu.json").write_text(json.dumps(result, indent=1))
    return result


def cmd_emulate(args) -> int:
    import multiprocessing

    dirs = case_dirs(Path(args.dir), args.only)
    jobs = [(str(d), args.seed, args.timeout) for d in dirs]
    start, failed = time.time(), 0
    if args.jobs > 1:  # fork: children share what the parent imported (a float-op module it installed too)
        pool = multiprocessing.get_context("fork").Pool(min(args.jobs, len(jobs)), maxtasksperchild=4)
        results = pool.imap_unordered(emulate_one, jobs)
    else:
        pool, results = None, map(emulate_one, jobs)
    for r in results:
        failed += r["status"] != "ok"
        detail = (f"{r['instructions']:>11,d} instr  {r['emu_seconds']:7.2f} s" if r["status"] == "ok"
                  else f"ERROR {r['error'][:300]}")
        print(f"{r['case']:36s} {detail}", flush=True)
    if pool:
        pool.close()
        pool.join()
    print(f"emulated {len(jobs)} cases ({failed} failed) in {time.time() - start:.1f} s, {args.jobs} jobs")
    return 1 if failed else 0


# -- GPU ----------------------------------------------------------------------------------------------
PROTOCOL = "@@calib "


def _say(*words) -> None:
    print(PROTOCOL + " ".join(words), flush=True)


def gpu_worker(args) -> int:
    """Run the named cases on device 0, reporting over stdout; exit 3 after a CUDA error (the
    context is then unusable and the parent starts a fresh worker)."""
    import torch

    from fa4_mlir import runtime

    out = Path(args.out)
    torch.cuda.init()
    info = {"device": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
            "torch": torch.__version__, "cuda": torch.version.cuda}
    _say("ready", json.dumps(info))
    for name in args.cases:
        where = Path(args.dir) / name
        _say("begin", name)
        start = time.time()
        try:
            case, manifest, arrays = load_case(where)
            # the manifest's path, not the folder: the folder also holds case.json
            kernel = runtime.load_artifact(where / case["manifest"], device=0)
            names = [o["array"] for o in case["outputs"]]
            results = []
            for _ in range(2):
                dev = {k: torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a).cuda()
                       for k, a in arrays.items()}
                bind = {}
                for p in kernel.params:
                    b = case["bind"][p["name"]]
                    if p["kind"] == "tensormap":
                        t = dev[b["array"]]
                        bind[p["name"]] = runtime.GlobalTensor(t.data_ptr(), p["tensor_map"]["dtype"],
                                                               tuple(b["shape"]), tuple(t.stride()), 0)
                    else:
                        bind[p["name"]] = dev[b["array"]].data_ptr() if p["kind"] == "ptr" else b
                kernel.launch(tuple(case["grid"]), bind)
                torch.cuda.synchronize()
                results.append({k: dev[k].cpu().numpy().view(arrays[k].dtype) for k in names})
            np.savez(out / f"{name}.npz", **results[0])
            same = all(np.array_equal(results[0][k].view(np.uint8), results[1][k].view(np.uint8))
                       for k in names)
            record = {"status": "ok", "repeat_identical": same, "seconds": round(time.time() - start, 3)}
        except Exception as exc:  # noqa: BLE001
            record = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000],
                      "where": traceback.format_exc(limit=-3)[-1500:]}
        (out / f"{name}.json").write_text(json.dumps(record, indent=1))
        _say("end", name)
        if record["status"] != "ok":
            try:
                torch.cuda.synchronize()
                torch.ones(1, device="cuda").add_(1).item()
            except Exception:  # noqa: BLE001
                return 3
    return 0


def cmd_gpu(args) -> int:
    from fa4_mlir.runtime import driver

    dirs = case_dirs(Path(args.dir), args.only)
    if driver.device_count() == 0:
        raise UsageError("no CUDA GPU here (no driver, device or cuda-python): run this subcommand on the "
                         "H100 machine")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError("needs PyTorch (torch) to hold the inputs on the GPU") from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for d in dirs:  # no stale results from an earlier run
        for suffix in (".npz", ".json"):
            (out / f"{d.name}{suffix}").unlink(missing_ok=True)
    remaining, info, deadline = [d.name for d in dirs], {}, time.time() + args.budget

    def note(name: str, why: str) -> None:
        (out / f"{name}.json").write_text(json.dumps({"status": "error", "error": why}))

    while remaining and time.time() < deadline:
        cmd = [sys.executable, str(Path(__file__).resolve()), "gpu-worker", "--dir", args.dir,
               "--out", str(out), *remaining]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: ([lines.put(x) for x in proc.stdout], lines.put(None)),
                         daemon=True).start()
        current, ready, wait = None, False, args.init_timeout
        while True:
            try:
                line = lines.get(timeout=max(1.0, min(wait, deadline - time.time())))
            except queue.Empty:
                proc.kill()
                why = f"no answer in {wait:g} s (a hang?)" if time.time() < deadline else "--budget spent"
                break
            if line is None:
                why = f"worker exited with {proc.wait()}"
                break
            if not line.startswith(PROTOCOL):
                print(line, end="")
                continue
            word, _, rest = line[len(PROTOCOL):].strip().partition(" ")
            if word == "ready":
                info, ready = json.loads(rest), True
                print(f"gpu: {info['device']} (torch {info['torch']}, CUDA {info['cuda']})", flush=True)
            elif word == "begin":
                current, wait = rest, args.case_timeout
            elif word == "end":
                r = json.loads((out / f"{rest}.json").read_text())
                said = r.get("error", "")[:300] if r["status"] != "ok" else \
                    f"repeat identical: {r['repeat_identical']}"
                print(f"{rest:36s} {r['status']}  {said}", flush=True)
                remaining.remove(rest)
                current = None
        proc.wait()
        if current is not None:  # it died or hung inside this case
            note(current, f"GPU run: {why}")
            print(f"{current:36s} error  {why}", flush=True)
            remaining.remove(current)
        elif remaining and not ready:
            print(f"gpu: the worker failed before running a case ({why}); see its output above", flush=True)
            break
    for name in remaining:
        note(name, "not run: the worker could not start or --budget was spent")
    records = {d.name: json.loads((out / f"{d.name}.json").read_text()) for d in dirs}
    info.update(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command=" ".join([Path(sys.executable).name, *sys.argv]), host=platform.node(), cases=records)
    (out / "gpu.json").write_text(json.dumps(info, indent=1))
    failed = [n for n, r in records.items() if r["status"] != "ok"]
    print(f"gpu: {len(records) - len(failed)} of {len(records)} cases ran; results in {out}")
    return 1 if failed else 0


# -- compare ------------------------------------------------------------------------------------------
def reference(case: dict, arrays: dict) -> dict:
    """float64 results from the inputs."""
    fam, dt, p = case["family"], case["dtype"], case["problem"]
    x = {b["array"]: to_f64(view(arrays[b["array"]], b["shape"]), dt)
         for b in case["bind"].values() if isinstance(b, dict) and "shape" in b}
    if fam == "copy":  # the f32 product is exact (scale has 2 significant bits): round once, to the output
        return {"dst": to_f64(to_bits(x["src"] * p["scale"], dt), dt)}
    if fam == "gemm":
        ab = x["a"] @ (x["b"].T if p["b_major"] == "k" else x["b"])
        return {"d": p["alpha"] * ab + (p["beta"] * x["c"] if p["has_c"] else 0.0)}
    q, k, v = x["q"], np.repeat(x["k"], p["group"], axis=2), np.repeat(x["v"], p["group"], axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * p["scale"]
    if p["causal"]:  # top-left diagonal: query i sees keys j <= i
        s = np.where(np.arange(s.shape[3])[None, :] <= np.arange(s.shape[2])[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(-1, keepdims=True)
    return {"o": np.einsum("bhqk,bkhd->bqhd", e / total, v), "lse": (m + np.log(total))[..., 0]}


def compare_output(fam: str, out: dict, emu_full: np.ndarray, gpu_full: np.ndarray, ref: np.ndarray) -> dict:
    dt, shape = out["dtype"], out["shape"]
    kind = "lse" if out["array"] == "lse" else fam
    width = WIDTH[dt]
    utype = np.uint16 if width == 16 else np.uint32
    e_bits, g_bits = (view(a, shape).view(utype) for a in (emu_full, gpu_full))
    ulps = ulp_distance(e_bits, g_bits, width)
    identical = 100.0 * float(np.mean(e_bits == g_bits)) if e_bits.size else 100.0
    errs, notes = [], []
    scale = float(np.abs(ref).max()) if kind != "lse" and ref.size else 1.0
    for who, bits in (("emu", e_bits), ("gpu", g_bits)):
        diff = np.abs(to_f64(bits, dt) - ref)
        err = float(np.max(diff)) / (scale or 1.0) if diff.size else 0.0  # NaN if any element is NaN
        errs.append(err)
        if not err <= REF_TOL[kind]:
            notes.append(f"{who} off the float64 reference ({err:.3g} > {REF_TOL[kind]:.3g})")
    pad = np.ones(emu_full.shape, bool)
    pad[tuple(slice(0, s) for s in shape)] = False
    poison = POISON16 if width == 16 else POISON32
    info = []
    if pad.any():
        e_pad, g_pad = emu_full.view(utype)[pad], gpu_full.view(utype)[pad]
        if not np.array_equal(e_pad, g_pad):
            notes.append("emu and gpu differ in the row padding")
        elif (g_pad != poison).any():  # the H100 writes whole 16-byte chunks of a ragged row
            info.append("both wrote the same bytes into the row padding")
    bar_pct, bar_ulp = BARS[kind]
    max_ulp = float(ulps.max()) if ulps.size else 0.0
    if identical < bar_pct or not max_ulp <= bar_ulp:
        notes.insert(0, f"emu vs gpu: {identical:.3f}% identical (>= {bar_pct}%), max {max_ulp:g} ulp "
                        f"(<= {bar_ulp})")
    return {"output": out["array"], "elements": int(e_bits.size), "identical_pct": identical,
            "max_ulp": max_ulp, "emu_err": errs[0], "gpu_err": errs[1], "ok": not notes, "notes": notes + info}


def open_gpu(path: Path) -> Path:
    if path.is_dir():
        return path
    if path.is_file() and tarfile.is_tarfile(path):
        tmp = Path(tempfile.mkdtemp(prefix="emu-calibrate-"))
        with tarfile.open(path) as tar:
            tar.extractall(tmp, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        found = sorted(tmp.rglob("gpu.json")) or sorted(tmp.rglob("*.npz"))
        return found[0].parent if found else tmp
    raise UsageError(f"--gpu must be the folder 'gpu --out' wrote (or a .tgz of it), got '{path}'")


def cmd_compare(args) -> int:
    dirs = case_dirs(Path(args.dir), args.only)
    gdir = open_gpu(Path(args.gpu))
    info = json.loads((gdir / "gpu.json").read_text()) if (gdir / "gpu.json").is_file() else {}
    rows, failed, seeds = [], [], set()
    for where in dirs:
        case, _, arrays = load_case(where)
        emu_info = json.loads((where / "emu.json").read_text()) if (where / "emu.json").is_file() else {}
        found = gdir / f"{where.name}.json"
        gpu_info = json.loads(found.read_text()) if found.is_file() else {}
        problems = []
        if not (where / "emu.npz").is_file():
            problems.append("no emulator output: " + emu_info.get("error", "run 'emulate'"))
        if not (gdir / f"{where.name}.npz").is_file():
            problems.append("no GPU output: " + gpu_info.get("error", "not in --gpu"))
        if gpu_info.get("repeat_identical") is False:
            problems.append("the GPU's two runs differ")
        seconds = emu_info.get("emu_seconds")
        seeds |= {emu_info["seed"]} if "seed" in emu_info else set()
        if len(problems) > (gpu_info.get("repeat_identical") is False):
            rows.append({"case": where.name, "output": "-", "ok": False, "notes": problems, "emu_s": seconds})
        else:
            ref = reference(case, arrays)
            with np.load(where / "emu.npz") as e, np.load(gdir / f"{where.name}.npz") as g:
                for out in case["outputs"]:
                    name = out["array"]
                    row = compare_output(case["family"], out, e[name], g[name], ref[name])
                    row.update(case=where.name, emu_s=seconds)
                    row["notes"] = problems + row["notes"]
                    row["ok"] = row["ok"] and not problems
                    rows.append(row)
        if not all(r["ok"] for r in rows if r["case"] == where.name):
            failed.append(where.name)
    header = ["case", "out", "elements", "identical %", "max ulp", "emu err", "gpu err", "emu s", "ok"]
    table = [[r["case"], r["output"], str(r.get("elements", "-")),
              f"{r['identical_pct']:.3f}" if "identical_pct" in r else "-",
              f"{r['max_ulp']:g}" if "max_ulp" in r else "-",
              f"{r['emu_err']:.2e}" if "emu_err" in r else "-",
              f"{r['gpu_err']:.2e}" if "gpu_err" in r else "-",
              f"{r['emu_s']:.2f}" if r.get("emu_s") is not None else "-", "yes" if r["ok"] else "NO"]
             for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *table)]
    for line in [header, ["-" * w for w in widths], *table]:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths)))
    notes = [f"{r['case']} {r['output']}: {'; '.join(r['notes'])}" for r in rows if r["notes"]]
    print("\n".join(notes))
    print(f"{len(dirs) - len(failed)} of {len(dirs)} cases within the bar" + (f"; missed: {', '.join(failed)}"
                                                                             if failed else ""))
    if args.markdown:
        write_markdown(Path(args.markdown), header, table, notes, info, len(dirs), failed, seeds)
    return 1 if failed else 0


BEGIN, END = "<!-- emu-calibrate:begin -->", "<!-- emu-calibrate:end -->"


def write_markdown(path: Path, header, table, notes, info, total, failed, seeds) -> None:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip() or "?"
    cap = "".join(map(str, info.get("capability", ["?"])))
    lines = [BEGIN, f"Compared {date}: {total - len(failed)} of {total} cases within the bar.", "",
             f"- GPU: {info.get('device', 'unknown')} (sm_{cap}, "
             f"torch {info.get('torch', '?')}, CUDA {info.get('cuda', '?')}), run {info.get('date', '?')}: "
             f"`{info.get('command', '?')}`",
             f"- emulator: fa4_mlir.emu at {rev}, seed {', '.join(map(str, sorted(seeds))) or '?'}, "
             f"{platform.machine()} Python {platform.python_version()} (`emulate`)",
             f"- compare: `{' '.join(['python', *sys.argv])}`", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
             *["| " + " | ".join(row) + " |" for row in table], ""]
    lines += [f"- {n}" for n in notes] + ([""] if notes else []) + [END]
    block = "\n".join(lines)
    text = path.read_text() if path.is_file() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = (text.rstrip() + "\n\n" if text else "# Emulator calibration results\n\n") + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{prepare,emulate,gpu,compare}")
    default_dir = "out/emu-calibration"
    p = sub.add_parser("prepare", help="build the sm_90a artifacts and write the inputs (needs fa4-compile)")
    p.add_argument("--dir", default=default_dir, help=f"output folder, git-ignored (default: {default_dir})")
    p = sub.add_parser("emulate", help="run every case in the emulator")
    p.add_argument("--dir", default=default_dir)
    p.add_argument("--seed", type=int, default=0, help="the emulator's scheduling seed (default 0)")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="cases at once (default: 2)")
    p.add_argument("--timeout", type=int, default=300, help="seconds one case may take (default 300)")
    p = sub.add_parser("gpu", help="run every case on GPU 0 (fa4_mlir.runtime and torch; no MLIR)")
    p.add_argument("--dir", default=default_dir)
    p.add_argument("--out", required=True, help="folder for <case>.npz/.json and gpu.json")
    p.add_argument("--budget", type=float, default=240, help="seconds for the whole run (default 240)")
    p.add_argument("--case-timeout", type=float, default=30, help="seconds until a case is hung (default 30)")
    p.add_argument("--init-timeout", type=float, default=120, help="seconds for CUDA to start (default 120)")
    p = sub.add_parser("gpu-worker")  # internal: one worker process of 'gpu'
    p.add_argument("--dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("cases", nargs="+")
    p = sub.add_parser("compare", help="compare emulator and GPU outputs (and both with float64 NumPy)")
    p.add_argument("--dir", default=default_dir)
    p.add_argument("--gpu", required=True, help="the folder 'gpu --out' wrote, or a .tgz of it")
    p.add_argument("--markdown", help="write the table here (replacing the part between the "
                                      "emu-calibrate:begin/end markers if the file has them)")
    for p in sub.choices.values():
        if p.prog.split()[-1] != "gpu-worker":
            p.add_argument("--only", help="comma-separated case names, substrings or globs")
    args = parser.parse_args(argv)
    try:
        if args.command == "gpu-worker":
            return gpu_worker(args)
        run = {"prepare": cmd_prepare, "emulate": cmd_emulate, "gpu": cmd_gpu, "compare": cmd_compare}
        return run[args.command](args)
    except UsageError as exc:
        print(f"{parser.prog} {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
