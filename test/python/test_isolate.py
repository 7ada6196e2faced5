"""An MLIR abort in the work of a tool becomes an error line, not a dead process."""

from __future__ import annotations

import os

from fa4_mlir.core.isolate import run_isolated


def test_exit_code_passes_through(capfd):
    assert run_isolated(lambda progress: 3, tool="t", place="in.mlir") == 3


def test_abort_becomes_an_error_naming_the_place_and_the_step(capfd):
    def work(progress):
        progress("running the pass pipeline 'gpu-module-to-binary'")
        os.abort()

    assert run_isolated(work, tool="fa4-opt", place="in.mlir") == 1
    err = capfd.readouterr().err
    assert "in.mlir: error: MLIR aborted (SIGABRT) while running the pass pipeline 'gpu-module-to-binary'" in err
    assert "Traceback" not in err and "Fatal Python error" not in err


def test_in_process_when_isolation_is_off(monkeypatch):
    monkeypatch.setenv("FA4_ISOLATE", "0")
    pid = os.getpid()
    assert run_isolated(lambda progress: 0 if os.getpid() == pid else 9, tool="t", place="x") == 0


def test_an_exception_in_the_child_is_reported(capfd):
    def work(progress):
        raise ValueError("bad state")

    assert run_isolated(work, tool="fa4-opt", place="in.mlir") == 1
    err = capfd.readouterr().err
    assert "fa4-opt: error: internal error: ValueError: bad state (rerun with FA4_TRACEBACK=1" in err
    assert "Traceback" not in err


def test_traceback_on_request(capfd, monkeypatch):
    monkeypatch.setenv("FA4_TRACEBACK", "1")

    def work(progress):
        raise ValueError("bad state")

    assert run_isolated(work, tool="fa4-opt", place="in.mlir") == 1
    assert "Traceback" in capfd.readouterr().err
