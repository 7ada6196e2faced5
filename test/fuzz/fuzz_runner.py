"""Run one tool invocation of the fuzzer with a time limit, and classify how it ended.

Two ways to run, same classification:
  * ``fork`` (default): the fuzzer process has imported the tools and MLIR once; each run is a
    forked child that calls the tool's ``main(argv)`` with stdin, stdout and stderr redirected, in
    its own process group (the tool's own isolation child included), killed whole on timeout. This
    saves the ~0.2 s interpreter and MLIR start of every run, most of a fa4-verify run's cost.
  * ``subprocess``: the real console command (``python -m fa4_mlir.tools.fa4_opt ...``), as a user
    runs it; slower, and the check that fork mode sees what users see.

FA4_ISOLATE stays on in both: the tools run their MLIR work in a child of their own, and an abort
there is reported by the guard's "MLIR aborted" line, which counts as an abort here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

TOOLS = {"fa4-opt": "fa4_mlir.tools.fa4_opt", "fa4-compile": "fa4_mlir.tools.fa4_compile",
         "fa4-layout": "fa4_mlir.tools.fa4_layout"}
OUTCOMES = ("ok", "error", "traceback", "abort", "hang", "unclean")
FAILURES = ("traceback", "abort", "hang", "unclean")

# A bug in fa4-mlir that a tool reported as a message rather than a traceback is still a bug.
_TRACEBACK = ("Traceback (most recent call last)", "internal error:", "this is a bug in fa4-mlir")
# MLIR/LLVM died, or would have without the guard (its message, then the guard's line).
_ABORT = ("MLIR aborted", "LLVM ERROR", "Assertion `", "UNREACHABLE executed", "Fatal Python error",
          "Critical nanobind error", "PLEASE submit a bug report", "Stack dump:", "Segmentation fault")
# A clean diagnostic: `place: error: message` (file:line:col, a tool name, <pass-pipeline>) or argparse's
# usage error, which prints `prog: error: ...` too.
_ERROR_LINE = re.compile(r"^(?:\S.*?)?\berror: \S", re.M)


@dataclasses.dataclass
class Run:
    """One tool invocation and how it ended."""

    pipeline: str
    tool: str
    argv: list[str]
    outcome: str = "ok"
    returncode: int | None = None
    signal: int | None = None
    seconds: float = 0.0
    stderr: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

    def command(self) -> str:
        import shlex

        return shlex.join([self.tool, *self.argv])


def classify(returncode: int | None, sig: int | None, timed_out: bool, stderr: str) -> str:
    """ok | error | traceback | abort | hang | unclean (a failure exit without an error line)."""
    if timed_out:
        return "hang"
    if sig is not None or any(a in stderr for a in _ABORT):
        return "abort"
    if any(t in stderr for t in _TRACEBACK):
        return "traceback"
    if returncode == 0:
        return "ok"
    if returncode in (1, 2) and _ERROR_LINE.search(stderr):
        return "error"
    return "unclean"


def preload() -> None:
    """Import what every run needs once, before forking (fork mode's whole point)."""
    import importlib

    for module in TOOLS.values():
        importlib.import_module(module)
    from fa4_mlir.passes import PASSES

    for load in PASSES.values():
        load()
    import fa4_mlir.core.compiler  # noqa: F401
    import fa4_mlir.dialects.fa4  # noqa: F401


def _environment(scratch: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FA4_TRACEBACK", None)  # internal errors must show as the one-line report we classify
    env["FA4_ISOLATE"] = "1"
    env["FA4_CACHE_DIR"] = os.path.join(scratch, "cache")  # --cache writes here, never the user's cache
    env["FA4_DEBUG"] = "0"
    return env


def run(pipeline: str, tool: str, argv: list[str], *, timeout: float, scratch: str, mode: str = "fork") -> Run:
    """Run ``tool argv`` (stdin empty, stdout discarded) and classify it."""
    result = Run(pipeline, tool, list(argv))
    start = time.monotonic()
    runner = _run_forked if mode == "fork" else _run_subprocess
    returncode, sig, timed_out, stderr = runner(tool, argv, timeout, _environment(scratch))
    result.seconds = round(time.monotonic() - start, 3)
    result.returncode, result.signal, result.stderr = returncode, sig, stderr
    result.outcome = classify(returncode, sig, timed_out, stderr)
    return result


HEAD, TAIL = 8000, 16000  # bytes of stderr kept: the first error line may precede a long op dump


def _head_and_tail(data: bytes) -> str:
    if len(data) > HEAD + TAIL:
        data = data[:HEAD] + b"\n[...]\n" + data[-TAIL:]
    return data.decode("utf-8", errors="replace")


def _run_forked(tool, argv, timeout, env):
    import importlib

    main = importlib.import_module(TOOLS[tool]).main
    with tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child: never returns
            code = 70
            try:
                os.setpgid(0, 0)
                os.environ.clear()
                os.environ.update(env)
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 1)
                os.dup2(err.fileno(), 2)
                # The parent's sys.std* may be pytest's in-memory captures: bind them to the new fds.
                sys.stdin = open(0, closefd=False)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
                sys.argv = [tool, *argv]
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, (int, type(None))):
                    print(exc.code, file=sys.stderr)
            except BaseException:  # noqa: BLE001 - what escaped main() is the bug we look for
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code if isinstance(code, int) and 0 <= code < 256 else 70)
        status, timed_out = _wait(pid, timeout)
        err.seek(0)
        return (*_decode(status), timed_out, _head_and_tail(err.read()))


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.monotonic() > deadline:
            _kill_group(pid)
            _, status = os.waitpid(pid, 0)
            return status, True
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _decode(status: int) -> tuple[int | None, int | None]:
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), None


def _run_subprocess(tool, argv, timeout, env):
    proc = subprocess.Popen([sys.executable, "-m", TOOLS[tool], *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        _, err = proc.communicate()
        timed_out = True
    rc = proc.returncode
    sig = -rc if rc is not None and rc < 0 else None
    return (None if sig else rc), sig, timed_out, _head_and_tail(err)
