"""GPU tests: they run kernels on an sm_90 / sm_100 GPU from cached artifacts, and (the tests that
take the ``backend`` fixture) in the PTX emulator on the CPU.

Without a GPU (or without PyTorch, for the torch tests) the GPU cases skip; FA4_REQUIRE_GPU=1 turns
each skip into a failure, so a GPU run cannot pass by skipping. Build the artifacts where the compiler
is (``python test/gpu/build_artifacts.py``), then run ``python -m pytest test/gpu`` on the GPU
machine with the same FA4_CACHE_DIR (see the README).

The ``backend`` fixture runs a test once per backend: ``gpu`` (the GPU, as above) and ``emulator``
(``runtime.load(..., device="emulator")`` on NumPy arrays; sm_90a; artifacts compiled on first use
where the compiler is). The emulator cases run everywhere, CI included, on small shapes; pytest
options pick more:

    --backend gpu|emulator|all   which backends run (default: all)
    --emulator-full              give the emulator the GPU-size shape grids (``backend.pick``):
                                 tens of minutes on one core, not seconds
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from fa4_mlir import knobs


def pytest_addoption(parser):
    group = parser.getgroup("fa4 GPU tests")
    group.addoption("--backend", choices=("all", "gpu", "emulator"), default="all",
                    help="run the backend-parametrised GPU tests on the GPU, the emulator or both (default)")
    group.addoption("--emulator-full", action="store_true",
                    help="run the GPU-size shape grids in the emulator too (slow)")


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--backend", "all")
        names = ["gpu", "emulator"] if chosen == "all" else [chosen]
        metafunc.parametrize("backend", names, indirect=True)


def _unavailable(reason: str):
    if knobs.require_gpu():
        pytest.fail(f"FA4_REQUIRE_GPU=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def gpu() -> int:
    """The device ordinal of the first GPU fa4 has a target for."""
    from fa4_mlir import runtime
    from fa4_mlir.runtime import driver

    if driver.device_count() == 0:
        _unavailable("no CUDA GPU here (or no driver / cuda-python)")
    try:
        runtime.device_target(0)
    except runtime.LaunchError as exc:
        _unavailable(str(exc))
    return 0


def _torch():
    if importlib.util.find_spec("torch") is None:
        _unavailable("PyTorch is not installed")
    import torch

    if not torch.cuda.is_available():
        _unavailable("PyTorch sees no CUDA device")
    import fa4_mlir.torch  # noqa: F401  (registers torch.ops.fa4)

    return torch


@pytest.fixture(scope="session")
def torch_gpu(gpu):
    return _torch()


@pytest.fixture
def backend(request):
    """A ``backends.GpuBackend`` or ``backends.EmulatorBackend`` (parametrised by pytest_generate_tests)."""
    from backends import EmulatorBackend, GpuBackend

    full = request.config.getoption("--emulator-full", False)
    if request.param == "gpu":
        chosen = GpuBackend(request.getfixturevalue("gpu"), _torch)
    else:
        chosen = EmulatorBackend(full, int(np.random.default_rng().integers(1 << 31)))
    yield chosen
    chosen.close()
