"""The words of bench/emu_mutants.py: the written reasons for escaped mutants and the markdown report.

``EXPLAINED`` holds the reasons read off the PTX for mutants that no seed detects; emu_mutants.py runs
the experiment each names before it accepts one. ``markdown(rows, meta)`` renders the JSON rows the
study writes (``--json``), so a report can be rebuilt without rerunning the study.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
from collections import Counter

import numpy as np

NOOP_KINDS = {"wgmma.fence": (
    "emulator blind spot: wgmma.fence is not checked; the ISA requires it before the first wgmma.mma_async and "
    "between register or shared-memory writes and a wgmma that reads them, but the emulator reads operands in order")}
# Reasons that hold for every escaped mutant of a kind, each with the experiment (bench/emu_mutants_checks.py)
# the study runs on it before it counts; {n} becomes the number of runs, {twin} the twin's PTX line.
GENERIC: dict[str, dict] = {
    "tcgen05.wait::st": dict(check=("covered_waits", "st"), why=(
        "equivalent mutant: a later tcgen05.wait::st of the same warp retires the stores this one did (wait::st "
        "waits for all prior tcgen05.st of the thread), and a before-fence publishes them, before the warp's next "
        "release.")),
    "tcgen05.wait::ld": dict(check=("covered_waits", "ld"), why=(
        "equivalent mutant: a later tcgen05.wait::ld of the same warp retires the loads this one did (wait::ld "
        "waits for all prior tcgen05.ld of the thread), and a before-fence publishes them, before the warp's next "
        "release.")),
    "tcgen05.fence::after_thread_sync": dict(check=("redundant_after_fence",), why=(
        "equivalent mutant: the lowering fences every tcgen05 access; an earlier after-fence of the same warp already "
        "orders each access that follows this one (what the warp acquired since is about cells it does not touch).")),
    "tcgen05.fence::before_thread_sync": dict(check=("superseded_before_fence",), why=(
        "equivalent mutant: the warp fences again (a later tcgen05.fence::before_thread_sync or a commit, which "
        "performs one) before its next release, and that publishes everything this one would have.")),
    "fence.proxy.async": dict(check=("twin_near", "fence.proxy.async", 12), why=(
        "equivalent mutant: the epilogue fences the staging tile twice, in every writing thread before the named "
        "barrier and in the storing thread after it (line {twin}); either fence on the path from the st.shared to "
        "the TMA store orders the writes for the async proxy.")),
    "fence.mbarrier_init": dict(check=("init_ordered",), why=(
        "equivalent mutant in a 1-CTA launch: fence.mbarrier_init releases the inits at cluster scope, for other "
        "CTAs of the cluster; here bar.sync 0 orders every mbarrier.init before each use in the CTA (the TMA unit "
        "accesses the mbarrier through the generic proxy), and there is no other CTA.")),
}
# Escapes that long delays do not explain, written after reading their PTX. Keyed by kernel:kind#ordinal
# and checked against the instruction text, so a changed kernel makes the entry "UNEXPLAINED" instead of
# silently wrong. ``check`` names the experiment the study runs to confirm the reason:
#   ("twin", kind, ordinal): another site makes this one redundant; removing both must be detected
#     ({twin} in the reason becomes that site's PTX line);
#   ("hold", kind, ordinal, n): the warp reaching that site first is held there n warp-instructions; the
#     mutant must then be detected and the unmutated kernel pass;
#   ("nan_fill",): with shared memory filled with NaN bits and long delays, likewise;
#   ("never_blocks",): the unmutated kernel's wait at this line never blocks, under every seed and delay;
#   ("never_awaited",): no warp waits on the mbarriers the unmutated kernel's commit at this line arrives on;
#   ("ordered_next", text): the race checks find the next access named ``text`` ordered through another path;
#   "gap_" + a check: the same, confirming a shape gap (the study then moves on to the next launch).
_MBAR = "mbarrier.try_wait.parity.shared.b64 P1, "
_GEMM_C_TWIN = ("equivalent mutant: LLVM duplicated this wait for a C sub-tile into the path of thread 0 (which "
                "also drains the TMA stores) and the path of the other 127 threads of the warpgroup; the paths meet "
                "at the next bar.sync, so every thread still waits for the C buffer through the copy at line {twin}.")
_WG1_TWIN = ("equivalent mutant: warpgroup 1 issues its MMAs only after warpgroup 0's bar.arrive on named barrier 2 "
             "(FA3's ping-pong), and warpgroup 0 arrives only after waiting for the same phase of the same K/V "
             "barrier (line {twin}) and issuing its own MMAs on that stage.")
_PRODUCER_FIRST = ("equivalent mutant: the load warp's first acquire of K stage 0 waits for parity 1 of a freshly "
                   "initialised mbarrier, which the ISA reports complete at once: this wait never blocks.")
_FIRST_ACQUIRE = ("equivalent mutant: the load warp's first acquire of a K or V stage waits for parity 1 of a freshly "
                  "initialised mbarrier, which the ISA reports complete at once: this wait never blocks.")
_Q_WG0 = ("equivalent mutant: warpgroup 0 next waits at named barrier 1 for warpgroup 1's bar.arrive, which "
          "warpgroup 1 does only after its own wait for Q (line {twin}).")
_Q_WG1 = ("equivalent mutant: warpgroup 1 next waits at named barrier 2 for warpgroup 0's first MMAs, which follow "
          "warpgroup 0's own wait for Q (line {twin}).")
_W = "mbarrier wait"
EXPLAINED: dict[str, dict] = {
    "gemm:mbarrier wait#2": dict(text=_MBAR + "[%r58], %r1508, 10000000;", check=("hold", _W, 4, 20_000), why=(
        "a real race the scheduler does not reach: the main-load thread waits here for the epilogue-load warp's "
        "acknowledgement of the previous tile's load-order signal (line {held}); without it the next tile's signal "
        "can land before that warp consumed the last one, and its try_wait on parity 0 then never succeeds. That "
        "needs the epilogue-load warp starved from its start until the main-load thread has issued a whole tile's "
        "K loop (the GEMM has two tiles: one chance per launch); the seeds' holds and stragglers (docs/emulator.md, "
        "Tempo per seed) did not produce that schedule in 20 seeds.")),
    **{f"gemm:mbarrier wait#{a}": dict(text=_MBAR + t, why=_GEMM_C_TWIN, check=("twin", _W, b))
       for a, b, t in [(12, 13, "[%r254], %r255, 10000000;"), (13, 12, "[%r256], %r257, 10000000;"),
                       (14, 15, "[%r139], %r370, 10000000;"), (15, 14, "[%r139], %r371, 10000000;"),
                       (16, 17, "[%r485], %r486, 10000000;"), (17, 16, "[%r487], %r488, 10000000;"),
                       (21, 22, "[%r837], %r838, 10000000;"), (22, 21, "[%r839], %r840, 10000000;"),
                       (23, 24, "[%r722], %r953, 10000000;"), (24, 23, "[%r722], %r954, 10000000;"),
                       (25, 26, "[%r1068], %r1069, 10000000;"), (26, 25, "[%r1070], %r1071, 10000000;")]},
    "attention:mbarrier wait#1": dict(text=_MBAR + "[%r111], 0, 10000000;", why=_Q_WG0, check=("twin", _W, 6)),
    "attention:mbarrier wait#6": dict(text=_MBAR + "[%r488], 0, 10000000;", why=_Q_WG1, check=("twin", _W, 1)),
    **{f"attention:mbarrier wait#{a}": dict(text=_MBAR + t, why=_WG1_TWIN, check=("twin", _W, b))
       for a, b, t in [(7, 2, "[%r489], 0, 10000000;"), (8, 3, "[%r623], %r1030, 10000000;"),
                       (9, 4, "[%r656], %r1071, 10000000;"), (10, 5, "[%r773], %r1071, 10000000;")]},
    "attention:mbarrier wait#11": dict(text=_MBAR + "[%r865], 1, 10000000;", why=_PRODUCER_FIRST,
                                       check=("never_blocks",)),
    "attention-causal:mbarrier wait#1": dict(text=_MBAR + "[%r122], 0, 10000000;", why=_Q_WG0, check=("twin", _W, 6)),
    "attention-causal:mbarrier wait#6": dict(text=_MBAR + "[%r513], 0, 10000000;", why=_Q_WG1, check=("twin", _W, 1)),
    **{f"attention-causal:mbarrier wait#{a}": dict(text=_MBAR + t, why=_WG1_TWIN, check=("twin", _W, b))
       for a, b, t in [(7, 2, "[%r514], 0, 10000000;"), (8, 3, "[%r662], %r1069, 10000000;"),
                       (9, 4, "[%r695], %r1110, 10000000;"), (10, 5, "[%r812], %r1110, 10000000;")]},
    "attention-causal:mbarrier wait#11": dict(text=_MBAR + "[%r904], 1, 10000000;", why=_PRODUCER_FIRST,
                                              check=("never_blocks",)),
    # sm_100a (keys prefixed by the target: the kernels share names with the sm_90a ones).
    "sm_100a:gemm:bar.sync#18": dict(text="bar.sync \t1, 128;", check=("twin", "bar.sync", 9), why=(
        "equivalent mutant: the epilogue's last named barrier, before warp 0's tcgen05.dealloc. The last barrier of "
        "the epilogue with C (line {twin}; #17 on the path without C) already orders every epilogue warp's last "
        "tcgen05.ld (retired by its wait::ld) before the dealloc; this one orders only warp 0's "
        "cp.async.bulk.wait_group.read before the others exit.")),
    **{f"sm_100a:{k}:mbarrier wait#{a}": dict(text=_MBAR + t, check=("ordered_next", "st.shared"), why=(
        f"equivalent mutant: softmax warpgroup {g} waits here for the correction warpgroup to have read the previous "
        f"row correction factor (C{g}_consumer) before writing the next one; but it writes it only after waiting for "
        f"S{g} of the next tile (S{g}_producer), which the MMA warp commits after P{g}@V, which it issues after the "
        f"correction warpgroup's arrival on S{g}_consumer, which follows that read."))
       for k, a, g, t in [("attention", 2, 0, "[%r1089], %r5846, 10000000;"),
                          ("attention", 5, 1, "[%r3981], %r5853, 10000000;"),
                          ("attention-causal", 2, 0, "[%r1094], %r5853, 10000000;"),
                          ("attention-causal", 5, 1, "[%r3988], %r5860, 10000000;")]},
    **{f"sm_100a:{k}:mbarrier wait#{a}": dict(text=_MBAR + t, check=("ordered_next", "tcgen05.ld"), why=(
        f"equivalent mutant: the correction warpgroup waits here for P{g}@V to complete (O{g}_producer) before "
        f"rescaling O{g}; but it reached this point through C{g}_producer, which softmax warpgroup {g} arrives on "
        f"after waiting for S{g}_producer, a tcgen05.commit the MMA warp issues after that P{g}@V: a commit tracks "
        f"every earlier MMA of its thread, so O{g} is complete and ordered (with the after-fence) already."))
       for k, a, g, t in [("attention", 10, 0, "[%r2739], %r5861, 10000000;"),
                          ("attention", 12, 1, "[%r2876], %r5859, 10000000;"),
                          ("attention-causal", 10, 0, "[%r2744], %r5868, 10000000;"),
                          ("attention-causal", 12, 1, "[%r2881], %r5866, 10000000;")]},
    **{f"sm_100a:{k}:mbarrier wait#{a}": dict(text=_MBAR + t, why=_FIRST_ACQUIRE, check=("never_blocks",))
       for k, a, t in [("attention", 26, "[%r5622], 1, 10000000;"), ("attention", 27, "[%r5623], 1, 10000000;"),
                       ("attention-causal", 26, "[%r5629], 1, 10000000;"),
                       ("attention-causal", 27, "[%r5630], 1, 10000000;")]},
    # The causal case's 2 K/V tiles (192 keys each at head dim 64) use each stage of the 4-stage K and V rings
    # once: a stage's release (the MMA warp's commit) and the load warp's wait for it matter only on reuse.
    **{f"sm_100a:attention-causal:mbarrier wait#{a}": dict(text=_MBAR + t, check=("gap_never_blocks",), why=(
        f"shape gap: the load warp's wait for a free {kv} stage (its release by the MMA warp's commit) before "
        f"reloading it; with 2 tiles no stage is reloaded, so it never blocks here. The non-causal case (6 tiles) "
        f"runs the same wait of the same code on reused stages."))
       for a, kv, t in [(28, "K", "[%r5637], %r5883, 10000000;"), (29, "V", "[%r5638], %r5881, 10000000;")]},
    **{f"sm_100a:attention-causal:tcgen05.commit#{a}": dict(
        text=f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 \t{t}", check=("gap_never_awaited",),
        why=("shape gap: the MMA warp's release of a K or V stage (k_consumer / v_consumer); with 2 tiles no stage "
             "is reloaded, so no warp waits on it. The non-causal case (6 tiles) runs the same release of the same "
             "code on reused stages."))
       for a, t in [(2, "[fa4_smem+230520];"), (7, "[%rd1153];"), (8, "[%rd1109+32];")]},
    "sm_100a:attention-causal:tcgen05.commit#12": dict(
        text="tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 \t[%rd1247];",
        check=("never_awaited",), why=(
            "equivalent mutant: the MMA warp's last commit, after its last P1@V, releases that tile's V stage "
            "(v_consumer) for a reload that never comes: the load warp has issued its last V load, and nobody else "
            "waits on the stage's release.")),
    "sm_100a:attention:tcgen05.commit#12": dict(
        text="tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 \t[%rd1247];",
        check=("never_awaited",), why=(
            "equivalent mutant: the MMA warp's last commit, after its last P1@V, releases that tile's V stage "
            "(v_consumer) for a reload that never comes: the load warp has issued its last V load, and nobody else "
            "waits on the stage's release.")),
    "attention-causal:mbarrier wait#5": dict(text=_MBAR + "[%r421], %r1017, 10000000;", check=("nan_fill",), why=(
        "a real race hidden by the emulator's fill of unwritten shared memory: warpgroup 0's last K/V tile lies "
        "wholly above its causal diagonal (its 64 rows = block_n), so P = 0 there and the PV wgmma multiplies "
        "whatever it reads from the V stage by 0. The stale bytes are the fill 0xA5A5 (a finite bf16) or an older "
        "V tile, so O is unchanged; on a GPU stale NaN bits would poison O.")),
}


def machine_words() -> str:
    """The CPU this ran on: ``uname -m``, its model, cores; Python and NumPy; the emulator's commit."""
    model = ""
    with contextlib.suppress(OSError):
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "fa4_mlir/emu"], capture_output=True,
                           text=True).stdout.strip()
    return (f"`uname -m` {platform.machine()}{f' ({model})' if model else ''}, {os.cpu_count()} cores, CPU only; "
            f"Python {platform.python_version()}, NumPy {np.__version__}; fa4_mlir.emu at {git or '?'}"
            f"{' with uncommitted changes' if dirty else ''}")


# -- the report --------------------------------------------------------------------------------------
INTRO = """Each mutant is one of our sm_90a kernels with exactly one synchronisation removed from its PTX
(`fa4-compile --target sm_90a`, then a text edit that keeps the line numbers): an `mbarrier.try_wait`
made true at once, a `wgmma.wait_group` deleted or its N raised by one, a TMA-store drain
(`cp.async.bulk.wait_group.read`) deleted, a named barrier (`bar.sync`/`bar.arrive`) deleted. The
mutant runs in the PTX emulator (`fa4_mlir.emu`) under scheduler seeds 0, 1, ... until one
*detects* it: the emulator reports an error (Deadlock, ProtocolError, MemoryFault, a hang) or an
output is outside the tolerance against a float64 NumPy reference ("wrong result", with the worst
error as a multiple of the tolerance). A mutant no seed detects is an *escape*; the study then runs
the experiment behind its written reason (`bench/emu_mutants_report.py`, `EXPLAINED`) and only a
confirmed reason counts. The unmutated kernels pass every seed with both completion delays.

ProtocolErrors that say "writes shared bytes ... that ... may still read" or "reads shared bytes ...
that ... has not written yet" come from the emulator's in-flight shared-memory check (docs/emulator.md,
"In-flight shared memory"): a write to shared bytes that an asynchronous operation still owns (a TMA
store's source before a `cp.async.bulk.wait_group.read` of the issuing warp retires it, a wgmma's
operands before a `wgmma.wait_group` retires it, a TMA load's destination before it lands), or a
read of bytes a load has not landed in, is a data race in the PTX memory model, reported whatever
values it would have seen. Each seed also draws a tempo (docs/emulator.md, "Tempo per seed"): slow
or fast completions, stragglers, warps held back after their waits."""

INTRO_SM100 = """Each mutant is one of our sm_100a kernels with exactly one synchronisation removed from its PTX
(`fa4-compile --target sm_100a`, then a text edit that keeps the line numbers): an `mbarrier.try_wait`
made true at once, a TMA-store drain (`cp.async.bulk.wait_group.read`), a named barrier, a
`tcgen05.commit`, a `tcgen05.wait::ld`/`wait::st`, or a fence (`fence.proxy.async`,
`fence.mbarrier_init`, `tcgen05.fence::before_thread_sync`/`after_thread_sync`) deleted. The mutant runs
in the PTX emulator (`fa4_mlir.emu`, race checks on) under scheduler seeds 0, 1, ... until one
*detects* it: the emulator reports an error (Deadlock, ProtocolError, MemoryFault, a hang) or an output
is outside the tolerance against a float64 NumPy reference ("wrong result"). A mutant no seed detects
is an *escape*; only a reason the study confirms by experiment counts: a written one
(`bench/emu_mutants_report.py`, `EXPLAINED`), or the reason of its kind (`GENERIC`, with the
instrumented runs of `bench/emu_mutants_checks.py`). A deleted wait or fence whose kind's experiment
shows it orders nothing at seed 0 (a redundant fence: the lowering fences every tcgen05 access) is not
run under the other seeds: "none of 0 (experiment)". The unmutated kernels pass every seed with both
completion delays.

ProtocolErrors that say "a data race" come from the in-flight checks (an asynchronous operation still
owns the bytes or cells) or from the race checks (docs/emulator.md, "Race detection": an access that
no barrier or fence orders after a conflicting one, by the PTX ISA's rules for proxies and for
tcgen05 operations; the message names the missing link: a wait, a `fence.proxy.async`, a
`tcgen05.fence::before_thread_sync` or `after_thread_sync`). Each seed also draws a tempo
(docs/emulator.md, "Tempo per seed")."""


def _jobs(meta: dict) -> str:
    jobs = meta.get("jobs", 1)
    return "one process" if jobs == 1 else f"{jobs} processes (--jobs {jobs})"


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).replace("|", "\\|")


def _how(how: str) -> str:
    """The detection class: the error's name, "wrong result" or "hang"."""
    return how.split(":")[0] if not how.startswith(("wrong result", "hang")) else how.split(":")[0].split(" (")[0]


def _seeds(rows: list[dict]) -> str:
    return ", ".join(f"seed {s}: {n}" for s, n in sorted(Counter(r["seed"] for r in rows).items()))


def summary(rows: list[dict], meta: dict) -> list[str]:
    seeds, found = meta["seeds"], [r for r in rows if r["seed"] is not None]
    escapes = [r for r in rows if r["seed"] is None]
    kernels = sorted({r["kernel"] for r in rows})
    out = [f"- **{len(rows)} mutants** of {len(kernels)} kernels ({', '.join(kernels)}).",
           f"- **{len(found)} detected** under a seed in 0-{seeds - 1} with the emulator's default settings "
           f"(max_delay={meta['default_delay']}); first detecting seed: {_seeds(found)}. How: "
           + ", ".join(f"{k} {n}" for k, n in Counter(_how(r["how"]) for r in found).most_common()) + "."]
    if escapes:
        cats = Counter(r["escape"] for r in escapes)
        words = {"equivalent": "equivalent (a twin wait or fence still orders every access, the wait never "
                               "blocks, or an instrumented run shows the deleted wait or fence redundant)",
                 "long delays": f"real races detected only with max_delay={meta['long_delay']}",
                 "scheduler": "a real race detected only with one warp held back",
                 "masked by fill": "a real race masked by the fill of unwritten shared memory (detected with a "
                                   "NaN fill)",
                 "unexecuted": "never executed by the study's launches", "fence no-op": "fences (no-ops)",
                 "shape gap": "synchronisations this launch's shape does not exercise (a ring stage used once), "
                              "confirmed by experiment and covered by another case",
                 "UNEXPLAINED": "UNEXPLAINED"}
        out.append(f"- **{len(escapes)} escapes**, each with a reason the study confirmed by experiment: "
                   + "; ".join(f"{n} {words.get(c, c)}" for c, n in cats.most_common()) + ".")
    groups = (("missing mbarrier wait", ("mbarrier wait",)),
              ("missing wgmma.wait_group", ("wgmma.wait_group deleted", "wgmma.wait_group N+1")))
    if meta.get("target") == "sm_100a":
        groups = (("missing mbarrier wait", ("mbarrier wait",)), ("missing tcgen05.commit", ("tcgen05.commit",)),
                  ("missing tcgen05.wait::ld / wait::st", ("tcgen05.wait::ld", "tcgen05.wait::st")),
                  ("missing fence.proxy.async", ("fence.proxy.async",)),
                  ("missing tcgen05.fence::before_thread_sync / after_thread_sync",
                   ("tcgen05.fence::before_thread_sync", "tcgen05.fence::after_thread_sync")),
                  ("missing fence.mbarrier_init", ("fence.mbarrier_init",)))
    for label, kinds in groups:
        mine = [r for r in rows if r["kind"] in kinds]
        hit = [r for r in mine if r["seed"] is not None]
        esc = Counter(r["escape"] for r in mine if r["seed"] is None)
        out.append(f"- {label}: {len(mine)} mutants, {len(hit)} detected ({_seeds(hit) or 'none'})"
                   + ("; escapes: " + ", ".join(f"{n} {c}" for c, n in esc.most_common()) if esc else "") + ".")
    return out


def markdown(rows: list[dict], meta: dict) -> str:
    seeds = meta["seeds"]
    out = ["# Emulator mutation study: does `fa4_mlir.emu` catch a missing synchronisation?", "",
           "Generated by `bench/emu_mutants.py`; rerun it rather than editing this file.", "",
           INTRO_SM100 if meta.get("target") == "sm_100a" else INTRO, "",
           "## Run", "", "| | |", "|---|---|", f"| command | `{meta['command']}` |", f"| date | {meta['date']} |",
           f"| kernels | {meta.get('target', 'sm_90a')} (`fa4-compile --target {meta.get('target', 'sm_90a')}`) |",
           f"| machine | {_cell(meta['machine'])} |", f"| wall time | {meta['seconds']:.0f} s, {_jobs(meta)} |",
           f"| seeds | 0-{seeds - 1} per mutant, max_delay={meta['default_delay']} (the emulator's default); escapes "
           f"again with max_delay={meta['long_delay']} |", "", "## Summary", "", *summary(rows, meta), "",
           "## Unmutated kernels", "",
           "| kernel | shape | max error / tolerance (every launch, seed and delay) | tolerance | outputs identical "
           "across seeds | s per run |", "|---|---|---|---|---|---|"]
    for key, b in meta["baselines"].items():
        out.append(f"| {key} | {_cell(b['title'])} | {b['max_error_x_tol']:.3g} | {_cell(b['tolerance'])} | "
                   f"{'yes' if b['bit_identical'] else 'no'} | {b['seconds_per_run']:.2f} |")
    out += ["", "## By kind", "", f"| kernel | synchronisation removed | mutants | detected (seeds 0-{seeds - 1}) | "
            "escapes: equivalent | escapes: other (see the table) |", "|---|---|---|---|---|---|"]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["kernel"], r["kind"]), []).append(r)
    for (kernel, kind), rs in groups.items():
        esc = [r for r in rs if r["seed"] is None]
        eq = sum(r["escape"] == "equivalent" for r in esc)
        other = ", ".join(f"{n} {c}" for c, n in Counter(r["escape"] for r in esc
                                                           if r["escape"] != "equivalent").most_common())
        out.append(f"| {kernel} | {kind} | {len(rs)} | {len(rs) - len(esc)} | {eq} | {other or 0} |")
    out += ["", "## Every mutant", "", "Launch: the kernel's first launch unless named (the GEMM's epilogue "
            "without C runs with has_c=0; the sm_100a causal attention's second launch, 1024 x 1024 on 4 CTAs, runs "
            "the mutants its first launch leaves unexecuted or as shape gaps).", "",
            "| # | kernel | launch | PTX line | removed | instruction | detected by seed | how, or why not |",
            "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        if r["seed"] is not None:
            seed, how = str(r["seed"]), r["how"]
        else:
            seed = f"none of 0-{seeds - 1}" if r.get("seeds_run", seeds) == seeds else "none of 0 (experiment)"
            how = r["why"] if not r["reached"] else (
                f"{r['why'].rstrip('.')}. Outputs {'bit-identical to' if r['bit_identical'] else 'within tolerance of'}"
                f" the unmutated kernel's ({r['how']}).")
        out.append(f"| {i} | {r['kernel']} | {r.get('launch') or '-'} | {r['line']} | {r['kind']} | "
                   f"`{_cell(r['text'])}` | {seed} | {_cell(how)} |")
    return "\n".join(out) + "\n"
