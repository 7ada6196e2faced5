"""Run MLIR work in a forked child so that an abort inside MLIR becomes an error message.

Some inputs make MLIR 22 abort the process (assertions, ``LLVM ERROR``). Guards catch the known
ones with a precise message; this is the net under the rest: the parent survives, reports what the
child was doing, and exits 1.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import traceback
from collections.abc import Callable

from fa4_mlir import knobs


class Progress:
    """What the child is doing, written to a pipe the parent reads if the child dies."""

    def __init__(self, fd: int | None):
        self.fd = fd

    def __call__(self, what: str) -> None:
        if self.fd is not None:
            os.write(self.fd, (what.replace("\n", " ") + "\n").encode())


def report_internal_error(tool: str, exc: BaseException) -> None:
    """One error line for a bug in fa4-mlir (the traceback with FA4_TRACEBACK=1)."""
    if knobs.show_traceback():
        traceback.print_exception(exc)
    print(f"{tool}: error: internal error: {type(exc).__name__}: {exc} "
          f"(rerun with FA4_TRACEBACK=1 for the traceback)", file=sys.stderr)


def run_isolated(work: Callable[[Progress], int], *, tool: str, place: str) -> int:
    """Exit code of ``work(progress)`` run in a child process (in-process if fork is unavailable or
    FA4_ISOLATE=0). ``place`` names the input in the error line printed if the child aborts."""
    if not knobs.isolate() or not hasattr(os, "fork"):
        return work(Progress(None))
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        # The parent reports an abort; a faulthandler dump (pytest, PYTHONFAULTHANDLER) would add a
        # Python stack to stderr that reads like a traceback.
        faulthandler.disable()
        code = 1
        try:
            code = work(Progress(write_fd))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - the child must report, never die silently
            report_internal_error(tool, exc)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write_fd)
    chunks = []
    while data := os.read(read_fd, 65536):
        chunks.append(data)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        lines = b"".join(chunks).decode(errors="replace").strip().splitlines()
        doing = lines[-1] if lines else "starting"
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        print(f"{place}: error: MLIR aborted ({name}) while {doing}; the message above is MLIR's. "
              f"This input hits a crash in MLIR 22 that {tool} does not guard yet: please report it "
              f"with the input", file=sys.stderr)
        return 1
    return os.WEXITSTATUS(status)
