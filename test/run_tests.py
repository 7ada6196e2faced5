"""Run the whole test suite: lit (FileCheck tests on IR, PTX and tools) then pytest (Python API,
and the GPU tests, which skip without a GPU unless FA4_REQUIRE_GPU=1).

    python test/run_tests.py            # what CI and the README run
    python test/run_tests.py -k name    # extra arguments go to pytest

pytest runs one worker per CPU core (pytest-xdist, whole files per worker: a file's kernels compile once in
its worker); FA4_TEST_WORKERS sets the count (1: in this process, no workers). The emulator suites of the
kernels dominate the time, and they are independent processes' work.

Prints one closing line 'N passed, M failed' over both runners and exits non-zero if anything
failed or if either runner found no tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(cmd: list[str]) -> tuple[int, str]:
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=os.path.dirname(HERE))
    out = []
    for line in proc.stdout:
        sys.stdout.write(line)
        out.append(line)
    return proc.wait(), "".join(out)


def _lit_counts(output: str) -> tuple[int, int]:
    passed = sum(int(n) for n in re.findall(r"^\s*(?:Passed|Expectedly Failed)\s*:\s*(\d+)", output, re.M))
    failed = sum(int(n) for n in re.findall(r"^\s*(?:Failed|Unexpectedly Passed|Unresolved|Timed Out)\s*:\s*(\d+)",
                                            output, re.M))
    return passed, failed


def _pytest_counts(output: str) -> tuple[int, int]:
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    passed = sum(int(n) for n in re.findall(r"(\d+) passed", tail))
    failed = sum(int(n) for n in re.findall(r"(\d+) (?:failed|error|errors)\b", tail))
    return passed, failed


def main() -> int:
    os.environ.setdefault("FA4_LIT_OUT", os.path.join(tempfile.gettempdir(), "fa4-lit-out"))
    # lit 23 has no __main__ module, so `python -m lit` fails; call its entry point.
    lit_rc, lit_out = _run([sys.executable, "-c", "import lit.main; lit.main.main()", "-sv", HERE])
    lit_passed, lit_failed = _lit_counts(lit_out)
    workers = os.environ.get("FA4_TEST_WORKERS") or str(len(os.sched_getaffinity(0)))
    parallel = ["-n", workers, "--dist", "loadfile"] if workers != "1" else []
    # the slowest tests in every log: where the next CI minute is (CI must stay well inside 30 minutes)
    py_rc, py_out = _run([sys.executable, "-m", "pytest", os.path.join(HERE, "python"), os.path.join(HERE, "gpu"),
                          *parallel, "--durations=25", *sys.argv[1:]])
    py_passed, py_failed = _pytest_counts(py_out)
    if lit_rc and not lit_failed:
        lit_failed = 1  # lit failed before counting (e.g. a config error)
    if py_rc and not py_failed:
        py_failed = 1  # includes pytest's exit 5: no tests collected
    print(f"lit: {lit_passed} passed, {lit_failed} failed; pytest: {py_passed} passed, {py_failed} failed")
    print(f"{lit_passed + py_passed} passed, {lit_failed + py_failed} failed")
    return 0 if not (lit_failed or py_failed) and lit_passed and py_passed else 1


if __name__ == "__main__":
    sys.exit(main())
