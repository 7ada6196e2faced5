"""The fa4_mlir.dsl tutorial kernel (examples/row_center.py, docs/authoring.md), a user's kernel file
loaded with runtime.load_file, on a real GPU (sm_90a) and in the emulator: y = x - mean(x) per row."""

from __future__ import annotations

import pathlib

import numpy as np

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "row_center.py"


def _float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def test_the_tutorial_kernel_centres_rows(backend):
    kernel = backend.load_file(EXAMPLE)
    rng = np.random.default_rng()
    for rows, ctas in backend.pick([(1, 1), (300, 2), (128 * 40 + 9, 132), (5000, 7)], [(300, 2), (129, 1)]):
        values = (rng.standard_normal((rows, 64)) * 4 + rng.standard_normal((rows, 1)) * 8).astype(np.float32)
        x = (values.view(np.uint32) >> 16).astype(np.uint16)  # bf16 bits (truncated)
        x_dev, y_dev = backend.array(x), backend.array(np.full((rows, 64), 0xFFFF, np.uint16))
        tiles = -(-rows // 128)
        backend.launch(kernel, (min(ctas, tiles),), {"x": backend.tensor(x_dev, "bf16"),
                                                     "y": backend.tensor(y_dev, "bf16"), "tiles": tiles})
        xf = _float(x)
        want = xf - xf.mean(axis=1, keepdims=True)
        bound = 2.0 ** -8 * np.abs(want) + 2.0 ** -22 * np.abs(xf).sum(axis=1, keepdims=True)
        err = np.abs(_float(backend.host(y_dev)) - want)
        assert not np.isnan(err).any() and (err <= bound).all(), f"{backend}: {rows} rows: {np.max(err / bound):.3g} x"
