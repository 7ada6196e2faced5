"""GPU tests: they run kernels on an sm_90 / sm_100 GPU from cached artifacts.

Without a GPU (or without PyTorch, for the torch tests) they skip; FA4_REQUIRE_GPU=1 turns each
skip into a failure, so a GPU run cannot pass by skipping. Build the artifacts where the compiler
is (``python test/gpu/build_artifacts.py``), then run ``python -m pytest test/gpu`` on the GPU
machine with the same FA4_CACHE_DIR (see the README).
"""

from __future__ import annotations

import importlib.util

import pytest

from fa4_mlir import knobs


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


@pytest.fixture(scope="session")
def torch_gpu(gpu):
    if importlib.util.find_spec("torch") is None:
        _unavailable("PyTorch is not installed")
    import torch

    if not torch.cuda.is_available():
        _unavailable("PyTorch sees no CUDA device")
    import fa4_mlir.torch  # noqa: F401  (registers torch.ops.fa4)

    return torch
