"""Does the PTX emulator catch a missing synchronisation? A mutation study on our sm_90a kernels.

    python bench/emu_mutants.py [--seeds 20] [--kinds all] [--kernels copy,gemm,...] [--markdown FILE] [--json FILE]

Builds the sm_90a PTX of the copy pipeline, the GEMM (with and without the residual C) and the
attention forward (non causal and causal) with ``fa4-compile --target sm_90a``, checks that every
unmutated kernel meets its tolerance against a float64 NumPy reference under every seed (default and
long completion delays), then derives mutants by editing the PTX text. Each mutant removes exactly
one synchronisation, in place (the PTX keeps its line numbers):

* ``mbarrier wait``: an ``mbarrier.try_wait``/``test_wait`` becomes ``setp.eq.u32 P, 0, 0`` (its
  predicate is true at once, so the retry loop around it falls through);
* ``wgmma.wait_group``: deleted, and separately ``N`` raised to ``N + 1``;
* ``bulk wait_group``: ``cp.async.bulk.wait_group(.read) N`` (the TMA-store drain) deleted;
* ``bar.sync`` / ``bar.arrive`` (named barriers) deleted; with ``--kinds all`` also ``fence.proxy.async``,
  ``wgmma.fence``, ``fence.mbarrier_init`` and ``tcgen05.fence::*`` (the emulator executes fences as no-ops);
* with ``--target sm_100a`` (issue 21; the 1-CTA kernels): ``tcgen05.commit``, ``tcgen05.wait::ld`` and
  ``tcgen05.wait::st`` deleted.

Each mutant runs under scheduler seeds 0, 1, ... (at most ``--seeds``) until one detects it: the
emulator raises an ``EmulationError`` (Deadlock, ProtocolError, MemoryFault, ...) or an output is
outside the tolerance. A line the first launch of a kernel never executes (found by replacing it with
``trap``) runs under the kernel's other launches (the GEMM without C). An escape is then investigated:
the seeds run again with completion delays up to LONG_DELAY (a race longer than the default delays),
outputs are compared bit for bit with the unmutated kernel's, and the rest must have a written reason
in ``EXPLAINED`` whose experiment the study runs (an equivalent mutant's twin removed too, a warp held
back, shared memory filled with NaN, a wait that never blocks). An escape without a confirmed reason
is "UNEXPLAINED" and makes the exit status 1, as does an emulator crash. One process, one mutant at
a time: about 9 minutes on two cores (docs/emulator-mutants.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from fa4_mlir import emu
from fa4_mlir.emu import machine, memory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emu_mutants_checks as checks  # noqa: E402
from emu_mutants_report import EXPLAINED, GENERIC, NOOP_KINDS, machine_words, markdown  # noqa: E402

SEEDS = 20
DEFAULT_DELAY = 400   # Program.launch's max_delay: async completions 1..400 warp-instructions after issue
LONG_DELAY = 100_000  # the second pass over escapes: completions up to 100k warp-instructions late
RUN_LIMIT_S = 120  # one launch of a mutant; a longer one is reported as a hang


# -- numbers -----------------------------------------------------------------------------------------
def bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def f64(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns -> float64."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _worst(err: np.ndarray) -> float:
    """Max of an error array where NaN (a garbage output) counts as infinite."""
    err = np.where(np.isnan(err), np.inf, err)
    return float(err.max()) if err.size else 0.0


# -- the kernels -------------------------------------------------------------------------------------
@dataclass
class Variant:
    """One launch of a kernel: its arguments and how to judge its outputs."""
    label: str          # "" for a kernel's first launch, else what differs ("has_c=0")
    make_args: object   # () -> (launch args, {output name: array the kernel writes})
    check: object       # ({name: array}) -> {name: error / tolerance}; <= 1 passes
    baseline_bits: dict = field(default_factory=dict)  # output bytes of the unmutated kernel
    grid: tuple | None = None  # None: the case's grid


@dataclass
class Case:
    """One kernel at one shape: its PTX, its launches and their tolerance."""
    key: str
    title: str
    ptx: str
    entry: str
    grid: tuple
    block: tuple
    smem: int
    variants: list
    tolerance: str      # words, for the report


TARGET = "sm_90a"  # --target: which of our kernels the study mutates


def build(kernel: str, out: str, *options: str) -> tuple[str, dict]:
    """``fa4-compile KERNEL --target TARGET OPTIONS -o OUT``; returns (PTX text, manifest)."""
    subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", kernel, "--target", TARGET, *options,
                    "-o", out], check=True, stdout=subprocess.DEVNULL)
    manifest = json.load(open(os.path.join(out, f"{kernel.replace('-', '_')}.json")))
    with open(os.path.join(out, f"{manifest['entry']}.ptx"), encoding="utf-8") as f:
        return f.read(), manifest


def tensor_map(array: np.ndarray, param: dict) -> emu.TensorMap:
    spec = param["tensor_map"]  # the manifest's box is innermost first, the emulator's outermost first
    return emu.TensorMap(array, box=tuple(reversed(spec["box"])), swizzle=spec["swizzle"], dtype=spec["dtype"])


def copy_case(tmp: str, m: int = 256, n: int = 256, scale: float = 1.5) -> Case:
    """copy-pipeline: out = scale * in; one CTA streams all m/128 x n/64 tiles (4-stage ring, reused)."""
    ptx, man = build("copy-pipeline", os.path.join(tmp, "copy"))
    ps, cfg = man["params"], man["config"]
    src = bf16(np.random.default_rng(1).standard_normal((m, n)))
    ref = scale * f64(src)
    num_tiles = -(-n // cfg["tile_cols"])
    total = -(-m // cfg["tile_rows"]) * num_tiles

    def make_args():
        dst = np.zeros((m, n), np.uint16)
        return [tensor_map(src, ps[0]), tensor_map(dst, ps[1]), num_tiles, total, total, scale], {"out": dst}

    def check(outs):
        return {"out": _worst(np.abs(f64(outs["out"]) - ref) / (np.abs(ref) * 2 ** -7 + 1e-30))}

    return Case("copy", f"copy-pipeline {m}x{n}, 1 CTA, {total} tiles", ptx, man["entry"], (1, 1, 1),
                tuple(man["threads"]), man["smem_bytes"], [Variant("", make_args, check)],
                "|out - ref| <= 2^-7 |ref|")


def gemm_case(tmp: str, m: int = 256, n: int = 256, k: int = 256, alpha: float = 0.75, beta: float = 1.25) -> Case:
    """gemm: D = alpha A B' + beta C; one persistent CTA takes both 128x256 tiles, so the A/B stages,
    the C buffers and the D staging buffers are all reused. Launched with C (has_c=1) and, for the
    epilogue path that has no C loads, without (has_c=0: D = alpha A B')."""
    ptx, man = build("gemm", os.path.join(tmp, "gemm"))
    ps, cfg = man["params"], man["config"]
    rng = np.random.default_rng(2)
    a, b, c = (bf16(rng.standard_normal(s)) for s in ((m, k), (n, k), (m, n)))
    num_m, num_n = -(-m // cfg["tile_m"]), -(-n // cfg["tile_n"])

    def variant(has_c: int) -> Variant:
        ref = alpha * (f64(a) @ f64(b).T) + (beta * f64(c) if has_c else 0)

        def make_args():
            d = np.zeros((m, n), np.uint16)
            return [tensor_map(a, ps[0]), tensor_map(b, ps[1]), tensor_map(c, ps[2]), tensor_map(d, ps[3]), num_m,
                    num_n, -(-k // cfg["tile_k"]), alpha, beta, has_c], {"d": d}

        def check(outs):
            return {"d": _worst(np.abs(f64(outs["d"]) - ref) / (np.abs(ref) + 1) / 2 ** -7)}
        return Variant("" if has_c else "has_c=0", make_args, check)

    return Case("gemm", f"gemm {m}x{n}x{k} + residual C (has_c=0: without), 1 persistent CTA, {num_m * num_n} tiles",
                ptx, man["entry"], (1, 1, 1), tuple(man["threads"]), man["smem_bytes"], [variant(1), variant(0)],
                "|D - ref| <= 2^-7 (|ref| + 1)")


def attention_case(tmp: str, causal: bool, sq: int, sk: int, d: int = 64, block_n: int = 64,
                   boost: float = 1.0, longer: tuple | None = None) -> Case:
    """attention forward, one head: O = softmax(scale Q K') V and the LSE; causal is FA's top-left
    diagonal (key j visible to query i iff j <= i). ``boost`` scales the keys of the last K/V tile, so the
    running row maximum jumps there and the sm_100a correction warpgroup's lazy rescale runs.
    ``longer``: (sq, sk, first boosted key) of a second launch, studied only for the mutants the first
    one leaves unexecuted or as shape gaps (a longer causal grid whose last CTAs reuse the K/V ring)."""
    name = "attention-causal" if causal else "attention"
    tiling = ("--block-n", str(block_n)) if TARGET == "sm_90a" else ()  # sm_100a: the config's own (128)
    ptx, man = build("attention", os.path.join(tmp, name), "--head-dim", str(d), *tiling,
                     "--causal" if causal else "--no-causal")
    rows = man["config"].get("num_q", 1) * 128 if TARGET == "sm_100a" else 128  # query rows per CTA
    block_n = man["config"].get("block_n") or (_sm100_block_n(d) if TARGET == "sm_100a" else block_n)
    shapes = [(sq, sk, (sk - 1) // block_n * block_n)] + ([longer] if longer else [])
    variants = [_attention_launch(man["params"], causal, d, *shape, boost, rows, label="" if i == 0 else
                                  f"{shape[0]} queries x {shape[1]} keys, {-(-shape[0] // rows)} CTAs")
                for i, shape in enumerate(shapes)]
    tiles = -(-min(sk, sq) // block_n) if causal else -(-sk // block_n)
    then = f"; then, for the mutants it leaves unexecuted or as shape gaps, {variants[1].label}" if longer else ""
    return Case(name, f"attention{' causal' if causal else ''} d{d} block_n {block_n}, {sq} queries x {sk} keys, "
                f"{-(-sq // rows)} CTA(s), up to {tiles} K/V tiles per CTA{then}", ptx, man["entry"], (-(-sq // rows), 1, 1),
                tuple(man["threads"]), man["smem_bytes"], variants, "|O - ref| <= 2e-2, |LSE - ref| <= 1e-3")


def _attention_launch(ps, causal: bool, d: int, sq: int, sk: int, boost_from: int, boost: float, rows: int,
                      label: str) -> Variant:
    """One launch of the attention case: random Q, K, V (keys from ``boost_from`` on scaled by ``boost``),
    its float64 reference, its arguments and its check."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, s, 1, d)) for s in (sq, sk, sk))
    k[:, boost_from:] *= boost
    q, k, v = bf16(q), bf16(k), bf16(v)
    scale = 1 / math.sqrt(d)
    s = np.einsum("qd,kd->qk", f64(q[0, :, 0]), f64(k[0, :, 0])) * scale
    if causal:
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None], s, -np.inf)
    mx = s.max(1, keepdims=True)
    p = np.exp(s - mx)
    ref_o = (p / p.sum(1, keepdims=True)) @ f64(v[0, :, 0])
    ref_lse = (mx + np.log(p.sum(1, keepdims=True)))[:, 0]

    def make_args():
        o, lse = np.zeros((1, sq, 1, d), np.uint16), np.zeros((1, 1, sq), np.float32)
        named = {"q": tensor_map(q, ps[0]), "k": tensor_map(k, ps[1]), "v": tensor_map(v, ps[2]),
                 "o": tensor_map(o, ps[3]), "lse": lse, "seq_q": sq, "seq_k": sk, "num_heads": 1, "group": 1,
                 "scale_log2e": scale * math.log2(math.e), "write_lse": 1}  # group: sm_90a's launch argument
        return [named[p["name"]] for p in ps], {"o": o, "lse": lse}

    def check(outs):
        return {"o": _worst(np.abs(f64(outs["o"][0, :, 0]) - ref_o) / 2e-2),
                "lse": _worst(np.abs(outs["lse"][0, 0].astype(np.float64) - ref_lse) / 1e-3)}

    return Variant(label, make_args, check, grid=(-(-sq // rows), 1, 1))


def _sm100_block_n(d: int) -> int:
    """The sm_100a attention's K/V tile (keys) at head dim ``d``, from its config (fa4_mlir.layouts)."""
    from fa4_mlir.configs.attention import AttentionConfig
    from fa4_mlir.kernels.attention.dims import Dims

    return Dims(AttentionConfig(target="sm_100a", head_dim=d)).f.bn


MAKERS = {
    "copy": lambda tmp: copy_case(tmp),
    # sm_100a: four tiles, so each of the two TMEM accumulator stages is reused (its empty barrier waited on)
    "gemm": lambda tmp: gemm_case(tmp) if TARGET == "sm_90a" else gemm_case(tmp, m=512),
    # sm_100a: 256 queries (both Q halves of the 2Q CTA hold real rows) and 6 K/V tiles of 192 keys (head dim
    # 64), so the 4-stage K and V rings are reused by the peeled first tile and the loop; the last tile's
    # keys are boosted so the row maximum jumps and the correction warpgroup's lazy rescale runs.
    "attention": lambda tmp: attention_case(tmp, causal=False, sq=128, sk=320) if TARGET == "sm_90a" else
    attention_case(tmp, causal=False, sq=256, sk=1152, boost=4.0),
    # sm_100a: one CTA's 2 tiles use each ring stage once, so the ring's waits and releases (and the rescale of
    # Q0's rows) are studied in a second launch: 1024 x 1024, 4 CTAs, the last one's rows see all 6 tiles, and
    # the keys from 768 on are boosted so both Q halves of the last CTA rescale at its 5th tile.
    "attention-causal": lambda tmp: attention_case(tmp, causal=True, sq=256, sk=256,
                                                   boost=1.0 if TARGET == "sm_90a" else 4.0,
                                                   longer=None if TARGET == "sm_90a" else (1024, 1024, 768)),
}


# -- running -----------------------------------------------------------------------------------------
class Hang(Exception):
    """A launch ran past RUN_LIMIT_S (a spin loop the emulator does not see as a deadlock)."""


def _alarm(signum, frame):
    raise Hang(f"ran past {RUN_LIMIT_S} s")


@dataclass
class Outcome:
    detected: bool
    how: str           # error class and first message line, or "max error x tolerance"
    outputs: dict | None = None


def run_once(case: Case, program: emu.Program, seed: int, max_delay: int = DEFAULT_DELAY, variant: int = 0) -> Outcome:
    launch = case.variants[variant]
    args, outs = launch.make_args()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, RUN_LIMIT_S)
    try:
        program.launch(case.entry, grid=launch.grid or case.grid, block=case.block, smem_bytes=case.smem, args=args, seed=seed,
                       max_delay=max_delay)
    except emu.EmulationError as exc:
        return Outcome(True, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    except Hang as exc:
        return Outcome(True, f"hang: {exc}")
    except Exception as exc:  # noqa: BLE001 - an emulator crash is a finding, not a detection (main fails on it)
        return Outcome(True, f"EMULATOR CRASH {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    errors = launch.check(outs)
    worst = max(errors, key=errors.get)
    if errors[worst] > 1:
        return Outcome(True, f"wrong result: max error of {worst} = {errors[worst]:.3g} x tolerance", outs)
    return Outcome(False, f"max error {errors[worst]:.3g} x tolerance ({worst})", outs)


def first_detection(case: Case, program, seeds: int, max_delay: int = DEFAULT_DELAY, start: int = 0,
                    variant: int = 0) -> dict:
    """Seeds start..seeds-1 until one detects; {"seed": s or None, "how": ..., "bit_identical": outputs ==
    the unmutated kernel's}. ``program``: a Program, or a () -> Program for a fresh one per seed."""
    same_bits, how = True, ""
    for seed in range(start, seeds):
        out = run_once(case, program() if callable(program) else program, seed, max_delay, variant)
        if out.detected:
            return {"seed": seed, "how": out.how}
        same_bits &= {k: v.tobytes() for k, v in out.outputs.items()} == case.variants[variant].baseline_bits
        how = out.how
    return {"seed": None, "how": how, "bit_identical": same_bits}


def baseline(case: Case, seeds: int) -> dict:
    """The unmutated kernel, every launch, every seed, with the default and with the long completion
    delays: each must pass. Are the outputs bit-identical across seeds?"""
    program = emu.load_ptx(case.ptx)
    worst, identical, start = 0.0, True, time.perf_counter()
    for i, launch in enumerate(case.variants):
        for max_delay in (DEFAULT_DELAY, LONG_DELAY):
            for seed in range(seeds):
                out = run_once(case, program, seed, max_delay, i)
                if out.detected:
                    raise SystemExit(f"{case.key} {launch.label}: the UNMUTATED kernel fails under seed {seed} "
                                     f"(max_delay {max_delay}): {out.how}")
                worst = max(worst, max(launch.check(out.outputs).values()))
                bits = {k: v.tobytes() for k, v in out.outputs.items()}
                launch.baseline_bits = launch.baseline_bits or bits
                identical &= bits == launch.baseline_bits
    return {"seeds": seeds, "max_error_x_tol": worst, "bit_identical": identical,
            "seconds_per_run": (time.perf_counter() - start) / (2 * seeds * len(case.variants))}


# -- mutants -----------------------------------------------------------------------------------------
@dataclass
class Mutant:
    kernel: str
    kind: str          # the synchronisation removed
    line: int          # 1-based PTX line
    text: str          # the original instruction
    replacement: str   # what the line became
    ordinal: int       # index among the kernel's sites of this kind (1-based), for EXPLAINED
    ptx: str = ""

    @property
    def ident(self) -> str:
        return f"{self.kernel}:{self.kind}#{self.ordinal}"


_WAIT = re.compile(r"^(\s*)mbarrier\.(try_wait|test_wait)(\.\S+)?\s+([%\w]+)\s*,")
_WGMMA_WAIT = re.compile(r"^(\s*)wgmma\.wait_group\.sync\.aligned\s+(\d+)\s*;")
_BULK_WAIT = re.compile(r"^(\s*)cp\.async\.bulk\.wait_group(\.read)?\s+(\d+)\s*;")
_DELETE = [("tcgen05.commit", re.compile(r"^\s*tcgen05\.commit\.")),
           ("tcgen05.wait::ld", re.compile(r"^\s*tcgen05\.wait::ld\.")),
           ("tcgen05.wait::st", re.compile(r"^\s*tcgen05\.wait::st\.")),
           ("bar.sync", re.compile(r"^\s*(bar|barrier)\.sync(\.aligned)?\s")),
           ("bar.arrive", re.compile(r"^\s*(bar|barrier)\.arrive(\.aligned)?\s")),
           ("fence.proxy.async", re.compile(r"^\s*fence\.proxy\.async")),
           ("wgmma.fence", re.compile(r"^\s*wgmma\.fence\.")),
           ("fence.mbarrier_init", re.compile(r"^\s*fence\.mbarrier_init")),
           ("tcgen05.fence::before_thread_sync", re.compile(r"^\s*tcgen05\.fence::before_thread_sync")),
           ("tcgen05.fence::after_thread_sync", re.compile(r"^\s*tcgen05\.fence::after_thread_sync"))]
KINDS = ["mbarrier wait", "wgmma.wait_group deleted", "wgmma.wait_group N+1", "bulk wait_group deleted", "bar.sync",
         "bar.arrive", "tcgen05.commit", "tcgen05.wait::ld", "tcgen05.wait::st", "fence.proxy.async", "wgmma.fence",
         "fence.mbarrier_init", "tcgen05.fence::before_thread_sync", "tcgen05.fence::after_thread_sync"]
DEFAULT_KINDS = KINDS[:9]
# sm_100a also deletes every fence our kernels emit: the race checks (fa4_mlir.emu.races) model the proxy and
# tcgen05 fences; fence.mbarrier_init stays a no-op (a 1-CTA launch orders the init by bar.sync).
SM100_KINDS = DEFAULT_KINDS + ["fence.proxy.async", "fence.mbarrier_init", "tcgen05.fence::before_thread_sync",
                               "tcgen05.fence::after_thread_sync"]


def sites(ptx: str) -> list[tuple[str, int, str, str]]:
    """(kind, line index, original text, replacement) for every synchronisation in the PTX."""
    found = []
    for i, line in enumerate(ptx.split("\n")):
        text = line.strip()
        if m := _WAIT.match(line):
            found.append(("mbarrier wait", i, text, f"{m.group(1)}setp.eq.u32 {m.group(4)}, 0, 0;"))
        elif m := _WGMMA_WAIT.match(line):
            n = int(m.group(2))
            found.append(("wgmma.wait_group deleted", i, text, ""))
            found.append(("wgmma.wait_group N+1", i, text, f"{m.group(1)}wgmma.wait_group.sync.aligned {n + 1};"))
        elif _BULK_WAIT.match(line):
            found.append(("bulk wait_group deleted", i, text, ""))
        else:
            for kind, pattern in _DELETE:
                if pattern.match(line):
                    found.append((kind, i, text, ""))
                    break
    return found


def mutants(case: Case) -> list[Mutant]:
    lines = case.ptx.split("\n")
    out, count = [], {}
    for kind, i, text, replacement in sites(case.ptx):
        count[kind] = count.get(kind, 0) + 1
        mutated = list(lines)
        mutated[i] = replacement or f"\t// mutant: removed {text}"
        out.append(Mutant(case.key, kind, i + 1, text, replacement.strip() or "(deleted)", count[kind],
                          "\n".join(mutated)))
    return out


def probe_reached(case: Case, line: int, variant: int = 0) -> bool:
    """Does any warp execute PTX line ``line`` in this launch? (the line replaced by ``trap``, seed 0)"""
    lines = case.ptx.split("\n")
    lines[line - 1] = "\ttrap;"
    out = run_once(case, emu.load_ptx("\n".join(lines)), 0, variant=variant)
    return out.detected and out.how.startswith("Trap")


def study(case: Case, mutant: Mutant, seeds: int, all_mutants: list[Mutant], first: int = 0) -> dict:
    """The mutant under seeds 0..seeds-1 in the first launch of its kernel (from ``first``) that executes its
    line; an escape is then probed (detected with long delays? its reason's experiment) and explained. A
    shape gap (the line runs, but what it protects does not at this shape) or an escape left unexplained
    moves on to the next launch."""
    start = time.perf_counter()
    program = emu.load_ptx(mutant.ptx)
    result: dict = {"seed": None, "reached": False, "variant": first}
    for i in range(first, len(case.variants)):
        result = {**first_detection(case, program, 1, variant=i), "variant": i}
        if result["seed"] is not None:
            result["reached"] = True
            break
        result["reached"] = probe_reached(case, mutant.line, i)
        if result["reached"]:
            entry = EXPLAINED.get(explained_key(mutant))
            if mutant.kind in GENERIC and not (entry and entry["text"] == mutant.text):
                # The kind's experiment first: one that shows the deletion orders nothing makes the other
                # seeds (and the long-delay pass) pointless, and the study affordable (the lowering fences
                # every tcgen05 access: most fence mutants are redundant fences).
                result.update(reached=True, variant=i)
                escape, why = explain_generic(case, mutant, result, seeds, all_mutants)
                if escape == "equivalent":
                    result.update(escape=escape, why=why, seeds_run=1)
                    break
            # seeds 1.. (an unexecuted line changes nothing: no point running them)
            rest = first_detection(case, program, seeds, start=1, variant=i)
            result = {**rest, "bit_identical": result["bit_identical"] and rest.get("bit_identical", True),
                      "reached": True, "variant": i}
            break
    if result["seed"] is None and "escape" not in result:
        entry = EXPLAINED.get(explained_key(mutant))
        generic = result["reached"] and mutant.kind in GENERIC and not (entry and entry["text"] == mutant.text)
        if generic:  # its experiment did not confirm it at seed 0: again, after all seeds
            result["escape"], result["why"] = explain_generic(case, mutant, result, seeds, all_mutants)
        if not generic or result["escape"] == "UNEXPLAINED":
            if result["reached"] and mutant.kind not in NOOP_KINDS:
                long = first_detection(case, program, seeds, LONG_DELAY, variant=result["variant"])
                result["long_delay"] = {"seed": long["seed"], "how": long["how"]}
            if not generic or result["long_delay"]["seed"] is not None:
                result["escape"], result["why"] = explain(case, mutant, result, seeds, all_mutants)
    if result.get("escape") in ("shape gap", "UNEXPLAINED") and result["variant"] + 1 < len(case.variants):
        # What the deleted synchronisation protects may not run at this launch's shape: study the next one.
        later = study(case, mutant, seeds, all_mutants, first=result["variant"] + 1)
        gap = (f"{'a shape gap' if result['escape'] == 'shape gap' else 'unexplained'} in the "
               f"{_launch_words(case, result['variant'])} ({result['why']})")
        if later["seed"] is not None:
            later["how"] = f"{later['how']} (in the {_launch_words(case, later['variant'])}: {gap})"
        else:
            later["why"] = f"{later['why']} (before that, {gap})"
        later["seconds"] += time.perf_counter() - start
        return later
    result["launch"] = case.variants[result["variant"]].label
    result["seconds"] = time.perf_counter() - start
    return result


def _launch_words(case: Case, variant: int) -> str:
    label = case.variants[variant].label
    return f"launch {label}" if label else "first launch"


# -- experiments behind the written reasons ----------------------------------------------------------
def _ops_at(program, entry: str, line: int) -> list:
    return [op for op in program.kernel(entry).ops if op.where.startswith(f"line {line}:")]


def held(ptx: str, entry: str, line: int, until: int):
    """A () -> Program whose first warp to reach PTX line ``line`` waits there for ``until``
    warp-instructions (a starved warp: the uniform random scheduler practically never does this)."""
    def make():
        program = emu.load_ptx(ptx)
        for op in _ops_at(program, entry, line):
            def run(w, m, orig=op.run):
                if getattr(w.launch, "held", False):
                    return orig(w, m)
                w.launch.held, go = True, []
                w.launch.schedule(lambda: go.append(1), delay=until)
                w.wait = machine.Wait(lambda: bool(go), lambda: f"held back at line {line}", retry=True)
                return machine.WAIT
            op.run = run
        return program
    return make


@contextlib.contextmanager
def nan_filled_smem():
    """Shared memory that starts as 0xFF bytes (NaN as bf16 and f32) instead of the emulator's 0xA5."""
    original = memory.SharedMemory.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.buf[:] = 0xFF
    memory.SharedMemory.__init__ = init
    try:
        yield
    finally:
        memory.SharedMemory.__init__ = original


def blocks_ever(case: Case, line: int, seeds: int, variant: int) -> bool:
    """Does the unmutated kernel's wait at ``line`` ever block (not find its phase complete), in any seed,
    with either completion delay?"""
    program, blocked = emu.load_ptx(case.ptx), []
    for op in _ops_at(program, case.entry, line):
        def run(w, m, orig=op.run):
            result = orig(w, m)
            blocked.append(result is machine.WAIT)
            return result
        op.run = run
    for max_delay in (DEFAULT_DELAY, LONG_DELAY):
        for seed in range(seeds):
            run_once(case, program, seed, max_delay, variant)
    return any(blocked) or not blocked


def confirm(case: Case, mutant_program, unmutated_program, seeds: int, max_delay: int, variant: int) -> dict | None:
    """The first seed that detects the mutant, if the unmutated kernel passes that seed and all before it
    under the same conditions; else None."""
    found = first_detection(case, mutant_program, seeds, max_delay, variant=variant)
    if found["seed"] is None:
        return None
    for seed in range(found["seed"] + 1):
        prog = unmutated_program() if callable(unmutated_program) else unmutated_program
        if run_once(case, prog, seed, max_delay, variant).detected:
            return None
    return found


# -- why an undetected mutant escaped ---------------------------------------------------------------
DELAY_BLIND = ("emulator blind spot: a real race whose window is longer than the default completion delays "
               f"(max_delay={DEFAULT_DELAY} warp-instructions): the copy has landed by the time the data is read; "
               f"detected with max_delay={LONG_DELAY}")


def _short(how: str, n: int = 160) -> str:
    return how if len(how) <= n else how[:n].rsplit(" ", 1)[0] + " ..."


def _upto(seed: int) -> str:
    return "seed 0" if seed == 0 else f"seeds 0-{seed}"


def _site(all_mutants: list[Mutant], kind: str, ordinal: int) -> Mutant | None:
    return next((m for m in all_mutants if m.kind == kind and m.ordinal == ordinal), None)


def explained_key(mutant: Mutant) -> str:
    """EXPLAINED's key: kernel:kind#ordinal, prefixed by the target for sm_100a (the kernels share names)."""
    return mutant.ident if TARGET == "sm_90a" else f"{TARGET}:{mutant.ident}"


def explain(case: Case, mutant: Mutant, result: dict, seeds: int, all_mutants: list[Mutant]) -> tuple[str, str]:
    """(category, reason) of an escape; category "UNEXPLAINED" when no reason is confirmed."""
    if not result["reached"]:
        return "unexecuted", ("not executed by any launch of this study (the line replaced by trap never traps, "
                              "seed 0), so only seed 0 ran: a gap in the study's shapes, not in the emulator")
    if mutant.kind in NOOP_KINDS:
        return "fence no-op", NOOP_KINDS[mutant.kind]
    if result["long_delay"]["seed"] is not None:
        return "long delays", f"{DELAY_BLIND} (seed {result['long_delay']['seed']}: {result['long_delay']['how']})"
    entry = EXPLAINED.get(explained_key(mutant))
    if not entry or entry["text"] != mutant.text:
        return "UNEXPLAINED", "UNEXPLAINED"
    check, why, variant = entry["check"], entry["why"], result["variant"]
    if check[0] in ("never_blocks", "gap_never_blocks"):
        if blocks_ever(case, mutant.line, seeds, variant):
            return "UNEXPLAINED", "UNEXPLAINED (the unmutated kernel's wait here does block)"
        return "equivalent" if check[0] == "never_blocks" else "shape gap", \
            f"{why} Checked: it never blocks in the unmutated kernel (seeds 0-{seeds - 1}, both delays)."
    if check[0] == "ordered_next":  # the race checks order the access the wait protected through another path
        lines = case.ptx.split("\n")
        at = next((k + 1 for k in range(mutant.line, min(len(lines), mutant.line + 40)) if check[1] in lines[k]), None)
        if at is None:
            return "UNEXPLAINED", f"UNEXPLAINED (no {check[1]} within 40 lines after it)"
        runs = dict(run_once=run_once, seeds=min(seeds, CHECK_SEEDS), delays=(DEFAULT_DELAY, LONG_DELAY),
                    variant=variant)
        try:
            met, total = checks.ordered_access(case, mutant.ptx, at, **runs)
        except RuntimeError as exc:
            return "UNEXPLAINED", f"UNEXPLAINED (the experiment's run failed: {_short(str(exc))})"
        if not met:
            return "UNEXPLAINED", f"UNEXPLAINED (the access at line {at} never met another warp's access)"
        return "equivalent", (f"{why} Checked (seeds 0-{runs['seeds'] - 1}, max_delay {DEFAULT_DELAY} and "
                              f"{LONG_DELAY}): in {met} of the mutant's {total} executions of line {at} another warp's "
                              f"access to those bytes was on record, and the race checks found it ordered before.")
    if check[0] in ("never_awaited", "gap_never_awaited"):
        runs = dict(run_once=run_once, seeds=min(seeds, CHECK_SEEDS), delays=(DEFAULT_DELAY, LONG_DELAY),
                    variant=variant)
        arrivals, waits = checks.never_awaited(case, mutant.line, **runs)
        if not arrivals or waits:
            return "UNEXPLAINED", f"UNEXPLAINED ({arrivals} arrivals, {waits} waits on their mbarriers after them)"
        return "equivalent" if check[0] == "never_awaited" else "shape gap", (
            f"{why} Checked (seeds 0-{runs['seeds'] - 1}, max_delay {DEFAULT_DELAY} and {LONG_DELAY}): the "
            f"unmutated kernel's commit arrives {arrivals} times and no warp waits on those mbarriers afterwards.")
    if check[0] == "nan_fill":
        with nan_filled_smem():
            found = confirm(case, emu.load_ptx(mutant.ptx), emu.load_ptx(case.ptx), seeds, LONG_DELAY, variant)
        if found is None:
            return "UNEXPLAINED", "UNEXPLAINED (not detected with NaN-filled shared memory either)"
        return "masked by fill", (f"{why} Checked: with shared memory filled with NaN bits and max_delay={LONG_DELAY}, "
                                  f"seed {found['seed']} detects it ({_short(found['how'])}) and the unmutated kernel "
                                  f"passes {_upto(found['seed'])}.")
    site = _site(all_mutants, check[1], check[2])
    if site is None:
        return "UNEXPLAINED", f"UNEXPLAINED (its {check[1]} #{check[2]} is gone)"
    if check[0] == "hold":
        until = check[3]
        found = confirm(case, held(mutant.ptx, case.entry, site.line, until),
                        held(case.ptx, case.entry, site.line, until), seeds, DEFAULT_DELAY, variant)
        if found is None:
            return "UNEXPLAINED", f"UNEXPLAINED (holding the warp at line {site.line} does not expose it)"
        return "scheduler", (f"{why.replace('{held}', str(site.line))} Checked: holding the first warp that reaches "
                             f"line {site.line} there for {until:,} warp-instructions, seed {found['seed']} detects it "
                             f"({_short(found['how'])}) and the unmutated kernel passes {_upto(found['seed'])}.")
    lines = mutant.ptx.split("\n")
    lines[site.line - 1] = site.ptx.split("\n")[site.line - 1]
    both = emu.load_ptx("\n".join(lines))
    found, delay = first_detection(case, both, seeds, variant=variant), ""
    if found["seed"] is None:
        found, delay = first_detection(case, both, seeds, LONG_DELAY, variant=variant), f", max_delay={LONG_DELAY}"
    if found["seed"] is None:
        return "UNEXPLAINED", f"UNEXPLAINED (removing it with its twin at line {site.line} is not detected either)"
    return "equivalent", (f"{why.replace('{twin}', str(site.line))} Checked: removing both (lines {mutant.line} and "
                          f"{site.line}) is detected (seed {found['seed']}{delay}: {_short(found['how'])}).")


CHECK_SEEDS = 3  # seeds (each with both delays) of the generic experiments: each warp's path, not the timing


def explain_generic(case: Case, mutant: Mutant, result: dict, seeds: int, all_mutants: list[Mutant]) -> tuple[str, str]:
    """The GENERIC reason of the mutant's kind, if its experiment (emu_mutants_checks) confirms it."""
    entry, variant = GENERIC[mutant.kind], result["variant"]
    check, why = entry["check"], entry["why"]
    runs = dict(run_once=run_once, seeds=min(seeds, CHECK_SEEDS), delays=(DEFAULT_DELAY, LONG_DELAY), variant=variant)
    done = f"seeds 0-{runs['seeds'] - 1}, max_delay {DEFAULT_DELAY} and {LONG_DELAY}"
    if check[0] == "twin_near":
        near = [m for m in all_mutants if m.kind == check[1] and m is not mutant and abs(m.line - mutant.line) <= check[2]]
        if not near:
            return "UNEXPLAINED", f"UNEXPLAINED (no {check[1]} within {check[2]} lines)"
        twin = min(near, key=lambda m: abs(m.line - mutant.line))
        lines = mutant.ptx.split("\n")
        lines[twin.line - 1] = twin.ptx.split("\n")[twin.line - 1]
        found = first_detection(case, emu.load_ptx("\n".join(lines)), seeds, variant=variant)
        if found["seed"] is None:
            return "UNEXPLAINED", f"UNEXPLAINED (removing it with its twin at line {twin.line} is not detected either)"
        return "equivalent", (f"{why.replace('{twin}', str(twin.line))} Checked: removing both (lines {mutant.line} and "
                              f"{twin.line}) is detected (seed {found['seed']}: {_short(found['how'])}).")
    try:
        if check[0] == "covered_waits":
            seen = [f"line {a}: {b}" for a, b in checks.covered_waits(case, mutant.ptx, check[1], **runs)]
            what = (f"at every release (arrive, barrier, commit) of a warp, its tcgen05.{check[1]}s are retired by a "
                    f"wait::{check[1]} and published by a later before-fence or commit")
        elif check[0] == "redundant_after_fence":
            needed, checked = checks.cached(checks.redundant_after_fences, case, **runs).get(mutant.line, [0, 0])
            seen = [f"{needed} of the warp's next tcgen05 accesses need it"] if needed else []
            what = (f"in the unmutated kernel, the {checked} tcgen05 accesses that follow the fence at line "
                    f"{mutant.line} (up to its warp's next after-fence) with another warp's records on their cells "
                    f"or operands are all ordered by the warp's view before that fence")
        elif check[0] == "superseded_before_fence":
            seen = [f"line {x}" for x in checks.cached(checks.superseded_before_fences, case, **runs).get(mutant.line, [])]
            what = (f"after the unmutated kernel's fence at line {mutant.line} its warp fences again (or commits) "
                    f"before its next release (arrive, barrier)")
        else:  # init_ordered
            seen = [f"line {x}" for x in checks.init_ordered(case, mutant.ptx, **runs)]
            what = "every mbarrier operation, bulk copy and commit is ordered after the CTA's mbarrier.init (1 CTA)"
    except RuntimeError as exc:  # the instrumented run itself failed: a real race the seeds above missed
        return "UNEXPLAINED", f"UNEXPLAINED (the experiment's run failed: {_short(str(exc))})"
    if not seen:
        return "equivalent", f"{why} Checked by an instrumented run ({done}): {what}."
    if mutant.kind.startswith("tcgen05."):
        # The structural argument does not hold: fall back on the race checks' verdict over more runs.
        try:
            count = checks.race_checked(case, mutant.ptx, **runs)
        except RuntimeError as exc:
            return "UNEXPLAINED", f"UNEXPLAINED (not {what}: {'; '.join(seen[:3])}; and {_short(str(exc))})"
        return "equivalent", (f"equivalent mutant per the race checks: the remaining waits and fences order every "
                              f"access it would have (not structurally: {'; '.join(seen[:2])}). Checked ({done}): "
                              f"{count} tcgen05 accesses over cells another warp had accessed, each ordered by the "
                              f"ISA's rules (docs/emulator.md, Race detection).")
    return "UNEXPLAINED", f"UNEXPLAINED (not {what}: {'; '.join(seen[:3])})"


# -- the study ---------------------------------------------------------------------------------------
_WORK: dict = {}  # the case being studied, for the (forked) workers of --jobs


def _study_one(index: int) -> tuple[int, dict]:
    return index, study(_WORK["case"], _WORK["mutants"][index], _WORK["seeds"], _WORK["mutants"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per mutant, 0..N-1 (default {SEEDS})")
    p.add_argument("--kernels", default=",".join(MAKERS), help="comma-separated subset of " + ", ".join(MAKERS))
    p.add_argument("--kinds", default=None,
                   help="comma-separated subset of: " + ", ".join(KINDS) + "; or 'all' (default: all but the "
                   "fences for sm_90a; for sm_100a also fence.proxy.async, fence.mbarrier_init and tcgen05.fence::*)")
    p.add_argument("--target", choices=("sm_90a", "sm_100a"), default="sm_90a",
                   help="mutate the sm_90a kernels (default) or the sm_100a ones (issue 21; 1-CTA kernels)")
    p.add_argument("--jobs", type=int, default=1, help="mutants studied in parallel (forked processes; default 1)")
    p.add_argument("--markdown", metavar="FILE", help="write the report here")
    p.add_argument("--json", metavar="FILE", help="write every mutant's result here")
    args = p.parse_args(argv)
    global TARGET
    TARGET = args.target
    which = args.kernels.split(",")
    default = SM100_KINDS if TARGET == "sm_100a" else DEFAULT_KINDS
    kinds = set(KINDS) if args.kinds == "all" else set((args.kinds or ",".join(default)).split(","))
    if set(which) - set(MAKERS) or kinds - set(KINDS) or args.seeds < 1:
        p.error("unknown kernel or kind, or --seeds < 1")
    start = time.perf_counter()
    rows, baselines = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for key in which:
            case = MAKERS[key](tmp)
            b = baseline(case, args.seeds)
            baselines[case.key] = {**b, "title": case.title, "tolerance": case.tolerance}
            print(f"{case.key}: {case.title}; unmutated passes {args.seeds} seeds x 2 delays, max error "
                  f"{b['max_error_x_tol']:.3g} x tolerance, bit-identical across seeds: {b['bit_identical']}, "
                  f"{b['seconds_per_run']:.2f} s/run", flush=True)
            all_mutants = mutants(case)
            chosen = [i for i, m in enumerate(all_mutants) if m.kind in kinds]
            _WORK.update(case=case, mutants=all_mutants, seeds=args.seeds)
            if args.jobs > 1:  # forked workers inherit the case (its launches are closures)
                pool = multiprocessing.get_context("fork").Pool(args.jobs)
                results = pool.imap(_study_one, chosen)
            else:
                pool, results = None, map(_study_one, chosen)
            for i, r in results:
                m = all_mutants[i]
                rows.append({"kernel": m.kernel, "kind": m.kind, "line": m.line, "text": m.text,
                             "replacement": m.replacement, "ident": m.ident, **r})
                verdict = f"seed {r['seed']}: {r['how']}" if r["seed"] is not None else f"NOT DETECTED: {r['why']}"
                print(f"  line {m.line:5d} {m.kind:24s} {m.text[:56]:56s} -> {verdict[:150]} ({r['seconds']:.1f} s)",
                      flush=True)
            if pool is not None:
                pool.close()
                pool.join()
    command = "python bench/emu_mutants.py " + " ".join(argv if argv is not None else sys.argv[1:])
    meta = {"command": command.strip(), "date": time.strftime("%Y-%m-%d"), "seeds": args.seeds,
            "baselines": baselines, "machine": machine_words(), "seconds": time.perf_counter() - start, "jobs": args.jobs,
            "default_delay": DEFAULT_DELAY, "long_delay": LONG_DELAY, "target": TARGET}
    text = markdown(rows, meta)
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "mutants": rows}, f, indent=1)
    bad = [r["ident"] for r in rows if r.get("escape") == "UNEXPLAINED" or "CRASH" in r["how"]]
    if bad:
        print("unexplained escapes or emulator crashes: " + ", ".join(bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
