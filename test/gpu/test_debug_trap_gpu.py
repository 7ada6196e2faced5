"""Debug builds turn a barrier protocol bug into an error within a second instead of a GPU hang."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from fa4_mlir import knobs

KERNEL = pathlib.Path(__file__).parent / "kernels" / "broken_barrier.mlir"
# Runs in a child: a trap leaves the CUDA context unusable for the rest of the process.
CHILD = """
import json, sys, time
from fa4_mlir import runtime
kernel = runtime.load_file(sys.argv[1])
start = time.perf_counter()
try:
    kernel.launch((2,), {})
    outcome = "no error"
except runtime.KernelTrap as exc:
    outcome = str(exc)
print(json.dumps({"seconds": time.perf_counter() - start, "outcome": outcome,
                  "timeout_ms": kernel.debug_timeout_ms}), flush=True)
"""


def test_broken_barrier_traps_with_a_message_within_a_second(gpu):
    env = {**os.environ, "FA4_DEBUG": "1"}
    env.pop("FA4_DEBUG_TIMEOUT_MS", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(KERNEL)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    limit = knobs.DEFAULT_DEBUG_TIMEOUT_MS
    assert report["timeout_ms"] == limit
    assert report["outcome"].startswith("kernel broken_barrier trapped"), report
    assert report["seconds"] < 1.0, report
    # The device's own message: kernel, barrier array and index, phase, block, thread.
    assert f"fa4 debug: barrier wait timed out after {limit} ms: kernel broken_barrier, barrier handoff[0] phase 0, " \
        "block (" in done.stdout, done.stdout
    print(f"trap reported {report['seconds']:.3f} s after the launch (limit {limit} ms)")
