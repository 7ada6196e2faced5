"""Input fuzzer of fa4-mlir's tools (issue 19): bad input must end in a located error, never in a
Python traceback, an MLIR abort (guarded or not) or a hang.

    python test/fuzz/fuzz_inputs.py --seed 1 --count 2000 --jobs 1       # the full on-demand run
    python test/fuzz/fuzz_inputs.py --seed 7 --count 40                  # a quick look
    python test/fuzz/fuzz_inputs.py --seed 1 --case 1234                 # rerun one case, verbosely
    python test/fuzz/fuzz_inputs.py --seed 1 --count 300 --pipelines compile-options,layout-options

Each input is either an IR mutant (a shipped kernel or a lit input, see ``fuzz_corpus``, changed by
one to four operators of ``fuzz_mutators``) or a command line (``fuzz_options``). IR mutants go
through, cheapest first:

  verify     fa4-opt IN -p fa4-verify
  protocol   fa4-opt IN -p fa4-verify-protocol                    (only if fa4-verify accepted IN)
  compile    fa4-compile IN --emit ptx --no-verify-protocol -o D  (only if fa4-verify accepted IN)

The compile runs without the protocol verifier so that the lowering sees every input fa4-verify
accepts: the protocol check is optional (``--no-verify-protocol``) and has its own pipeline here.
Command lines go through ``compile-options`` (fa4-compile KERNEL ...) or ``layout-options``
(fa4-layout ...). Every run is classified by ``fuzz_runner.classify``; a traceback, abort, hang or
an error exit without an error line is a failure: its input is kept under OUT/failures/ with the
exact command, and the exit status is 1.

Case ``i`` of seed ``s`` is drawn from ``random.Random(f"{s}:{i}")`` alone, so ``--case i`` rebuilds
it without the cases before it, and the same seed gives the same inputs (on the same checkout: the
corpus is the repository's kernels and lit files).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_corpus  # noqa: E402
import fuzz_mutators  # noqa: E402
import fuzz_options  # noqa: E402
import fuzz_runner  # noqa: E402

IR_PIPELINES = ("verify", "protocol", "compile")
PIPELINES = (*IR_PIPELINES, "compile-options", "layout-options")
# Share of each kind of input when every pipeline is on: IR mutants are the point (the verifier's
# gaps); command lines reach the config checks and the kernel builders.
KIND_WEIGHTS = {"ir": 85, "compile-options": 10, "layout-options": 5}


@dataclasses.dataclass
class Case:
    """One fuzz input: an IR mutant (``text``) or a command line (``argv``, with OUT_DIR for -o)."""

    id: int
    kind: str
    origin: str
    mutations: list[str]
    text: str | None = None
    argv: list[str] | None = None

    def digest(self) -> str:
        body = self.text if self.text is not None else "\0".join(self.argv or [])
        return hashlib.sha256(f"{self.kind}\0{body}".encode("utf-8", "surrogateescape")).hexdigest()[:16]


OUT_DIR = "@OUT@"  # placeholder in a command line for the run's scratch directory


def make_case(seed: int, index: int, pipelines=PIPELINES) -> Case:
    """Case ``index`` of ``seed``: a function of the two (and the corpus) only."""
    rng = random.Random(f"{seed}:{index}")
    kinds = [k for k in KIND_WEIGHTS if (k == "ir" and set(pipelines) & set(IR_PIPELINES)) or k in pipelines]
    kind = rng.choices(kinds, [KIND_WEIGHTS[k] for k in kinds])[0]
    if kind == "compile-options":
        return Case(index, kind, "fa4-compile", [], argv=fuzz_options.compile_case(rng, OUT_DIR))
    if kind == "layout-options":
        return Case(index, kind, "fa4-layout", [], argv=fuzz_options.layout_case(rng))
    shipped, lit = fuzz_corpus.corpus()
    # Half shipped kernels (whole kernels: what reaches the lowering), half lit inputs (every op and
    # every negative case, many fragments), a file first and then one of its chunks, so that the 95
    # negative cases of invalid.mlir do not outweigh the rest.
    if rng.random() < 0.5:
        origin = rng.choice(shipped)
    else:
        files = sorted({seed.name.split("#")[0] for seed in lit})
        file = rng.choice(files)
        origin = rng.choice([seed for seed in lit if seed.name.split("#")[0] == file])
    mutations, text = fuzz_mutators.mutate(rng, origin.text)
    return Case(index, "ir", origin.name, mutations, text=text)


# -- running --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Settings:
    seed: int
    pipelines: tuple[str, ...]
    out: Path
    mode: str
    timeout_opt: float
    timeout_compile: float


def run_case(case: Case, s: Settings) -> list[fuzz_runner.Run]:
    """Run ``case`` through its pipelines, cheapest first; inputs of failures go to OUT/failures/."""
    scratch = Path(tempfile.mkdtemp(prefix=f"case-{case.id}-", dir=s.out / "work"))
    try:
        runs = _run_pipelines(case, s, scratch)
        if any(r.failed for r in runs):
            _keep_failure(case, s, scratch, runs)
        return runs
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_pipelines(case: Case, s: Settings, scratch: Path) -> list[fuzz_runner.Run]:
    def go(pipeline, tool, argv, timeout):
        return fuzz_runner.run(pipeline, tool, argv, timeout=timeout, scratch=str(scratch), mode=s.mode)

    if case.kind == "compile-options":
        argv = [str(scratch / "out") if a == OUT_DIR else a for a in case.argv]
        return [go("compile-options", "fa4-compile", argv, s.timeout_compile)]
    if case.kind == "layout-options":
        return [go("layout-options", "fa4-layout", case.argv, s.timeout_opt)]
    path = scratch / "input.mlir"
    path.write_bytes(case.text.encode("utf-8", "surrogateescape"))
    runs = [go("verify", "fa4-opt", [str(path), "-p", "fa4-verify"], s.timeout_opt)]
    if runs[0].outcome != "ok":
        return runs
    if "protocol" in s.pipelines:
        runs.append(go("protocol", "fa4-opt", [str(path), "-p", "fa4-verify-protocol"], s.timeout_opt))
    if "compile" in s.pipelines:
        runs.append(go("compile", "fa4-compile", [str(path), "--emit", "ptx", "--no-verify-protocol", "-o",
                                                  str(scratch / "out")], s.timeout_compile))
    return runs


def _keep_failure(case: Case, s: Settings, scratch: Path, runs: list[fuzz_runner.Run]) -> None:
    """Keep the input as OUT/failures/seed<S>-case<I>.mlir and point the failing commands at it."""
    failures = s.out / "failures"
    failures.mkdir(parents=True, exist_ok=True)
    kept = failures / f"seed{s.seed}-case{case.id}.mlir"
    if case.text is not None:
        kept.write_bytes(case.text.encode("utf-8", "surrogateescape"))
    for r in runs:
        r.argv = [str(kept) if a == str(scratch / "input.mlir") else
                  "out" if a.startswith(str(scratch)) else a for a in r.argv]


def _worker(args):
    case_id, s = args
    case = make_case(s.seed, case_id, s.pipelines)
    return case, run_case(case, s)


def run_all(s: Settings, ids, jobs: int, progress=None):
    """Yield (case, runs) for each case id of ``ids``, in order."""
    fuzz_runner.preload()
    fuzz_corpus.corpus()  # built once in the parent, inherited by forked workers
    (s.out / "work").mkdir(parents=True, exist_ok=True)
    work = [(i, s) for i in ids]
    if jobs <= 1:
        results = map(_worker, work)
    else:
        import multiprocessing

        pool = multiprocessing.get_context("fork").Pool(jobs)
        results = pool.imap(_worker, work, chunksize=1)
    try:
        for n, item in enumerate(results, start=1):
            if progress:
                progress(n)
            yield item
    finally:
        if jobs > 1:
            pool.terminate()


# -- reporting ------------------------------------------------------------------------------------------

def summarise(results, count: int, seconds: float, s: Settings, jobs: int) -> dict:
    table = {p: collections.Counter() for p in s.pipelines}
    kinds = collections.Counter()
    accepted = 0
    failures = []
    for case, runs in results:
        kinds[case.kind] += 1
        for r in runs:
            table.setdefault(r.pipeline, collections.Counter())[r.outcome] += 1
            if r.failed:
                failures.append({"case": case.id, "origin": case.origin, "mutations": case.mutations,
                                 "pipeline": r.pipeline, "outcome": r.outcome, "command": r.command(),
                                 "stderr": r.stderr.strip().splitlines()[-6:]})
        accepted += case.kind == "ir" and runs[0].outcome == "ok"
    return {"seed": s.seed, "inputs": count, "kinds": dict(kinds), "verify_accepted": accepted,
            "seconds": round(seconds, 1), "jobs": jobs, "mode": s.mode,
            "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.node()} ({os.cpu_count()} CPUs, "
                                                         f"{platform.system()} {platform.machine()})",
            "pipelines": {p: dict(c) for p, c in table.items()}, "failures": failures}


def print_summary(summary: dict) -> None:
    k = summary["kinds"]
    print(f"\nseed {summary['seed']}: {summary['inputs']} inputs ({k.get('ir', 0)} IR mutants, "
          f"{k.get('compile-options', 0)} fa4-compile and {k.get('layout-options', 0)} fa4-layout command "
          f"lines) in {summary['seconds']} s; {summary['verify_accepted']} IR mutants passed fa4-verify")
    cols = fuzz_runner.OUTCOMES
    print(f"{'pipeline':<16}{'runs':>7}" + "".join(f"{c:>11}" for c in cols))
    total = collections.Counter()
    for p, counts in summary["pipelines"].items():
        total.update(counts)
        print(f"{p:<16}{sum(counts.values()):>7}" + "".join(f"{counts.get(c, 0):>11}" for c in cols))
    print(f"{'total':<16}{sum(total.values()):>7}" + "".join(f"{total.get(c, 0):>11}" for c in cols))
    for f in summary["failures"]:
        print(f"\nFAILURE seed {summary['seed']} case {f['case']}: {f['pipeline']} -> {f['outcome']} "
              f"({f['origin']}; {'; '.join(f['mutations']) or 'command line'})")
        print(f"  reproduce: {f['command']}")
        print(f"  or: python test/fuzz/fuzz_inputs.py --seed {summary['seed']} --case {f['case']}")
        for line in f["stderr"]:
            print(f"  | {line}")


def _explain(case: Case, runs: list[fuzz_runner.Run], s: Settings) -> None:
    """--case: what the case is, where its input is, and each run's output."""
    print(f"seed {s.seed} case {case.id}: {case.kind} from {case.origin} (digest {case.digest()})")
    for m in case.mutations:
        print(f"  mutation {m}")
    if case.text is not None:
        path = s.out / f"seed{s.seed}-case{case.id}.mlir"
        path.write_bytes(case.text.encode("utf-8", "surrogateescape"))
        print(f"  input: {path}")
    for r in runs:
        argv = [str(s.out / f"seed{s.seed}-case{case.id}.mlir") if a.endswith("input.mlir") else a for a in r.argv]
        print(f"\n$ {fuzz_runner.Run(r.pipeline, r.tool, argv).command()}\n  -> {r.outcome} "
              f"(exit {r.returncode}, signal {r.signal}, {r.seconds} s)")
        for line in r.stderr.rstrip().splitlines()[-20:]:
            print(f"  | {line}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fuzz_inputs.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=100, help="inputs to generate (default 100)")
    p.add_argument("--first", type=int, default=0, help="index of the first case (default 0)")
    p.add_argument("--case", type=int, action="append", default=None, help="rerun this case verbosely")
    p.add_argument("--pipelines", default=",".join(PIPELINES), help=f"comma list of {', '.join(PIPELINES)}")
    p.add_argument("--out", default=None, help="where failures are kept (default: $TMPDIR/fa4-fuzz)")
    p.add_argument("--jobs", type=int, default=1, help="cases run in parallel (default 1)")
    p.add_argument("--mode", choices=("fork", "subprocess"), default="fork",
                   help="fork (default): forked children of one warm process; subprocess: the real commands")
    p.add_argument("--timeout-opt", type=float, default=30.0, help="seconds before an fa4-opt/-layout run is a hang")
    p.add_argument("--timeout-compile", type=float, default=60.0, help="seconds before an fa4-compile run is a hang")
    p.add_argument("--json", default=None, help="also write the summary to this file")
    p.add_argument("--digests", action="store_true", help="print each case's digest and exit (nothing runs)")
    args = p.parse_args(argv)
    pipelines = tuple(x.strip() for x in args.pipelines.split(",") if x.strip())
    unknown = [x for x in pipelines if x not in PIPELINES]
    if unknown or not pipelines:
        p.error(f"--pipelines must be a comma list of {', '.join(PIPELINES)}, got '{args.pipelines}'")
    if args.count < 0 or args.jobs < 1:
        p.error("--count must be >= 0 and --jobs >= 1")
    out = Path(args.out or Path(tempfile.gettempdir()) / "fa4-fuzz").resolve()
    out.mkdir(parents=True, exist_ok=True)
    s = Settings(args.seed, pipelines, out, args.mode, args.timeout_opt, args.timeout_compile)
    ids = args.case if args.case is not None else range(args.first, args.first + args.count)

    if args.digests:
        for i in ids:
            c = make_case(s.seed, i, pipelines)
            print(f"{i} {c.kind} {c.digest()} {c.origin}")
        return 0
    if args.case is not None:
        fuzz_runner.preload()
        (out / "work").mkdir(exist_ok=True)
        failed = False
        for i in ids:
            case = make_case(s.seed, i, pipelines)
            runs = run_case(case, s)
            _explain(case, runs, s)
            failed |= any(r.failed for r in runs)
        return 1 if failed else 0

    start = time.monotonic()

    def progress(n):
        if n % 100 == 0:
            print(f"  {n}/{len(ids)} inputs, {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)

    results = list(run_all(s, ids, args.jobs, progress))
    summary = summarise(results, len(ids), time.monotonic() - start, s, args.jobs)
    summary["command"] = "python test/fuzz/fuzz_inputs.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print_summary(summary)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
