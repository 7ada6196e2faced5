"""PTX written by another compiler runs in the emulator and computes the right numbers.

The fixtures in emu_ptx/ were compiled by Triton 3.9 for sm_90a (and run on an H100 with the same
launch facts, see emu_ptx/README.md); reference.py builds random inputs and float64 checks. Triton
is not needed here. Each kernel runs under two scheduler seeds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fa4_mlir import emu

sys.path.insert(0, str(Path(__file__).resolve().parent / "emu_ptx"))
import reference as R  # noqa: E402

_SWIZZLE = {0: "none", 1: "32B", 2: "64B", 3: "128B"}
_FORMAT = {9: "bf16", 6: "f16", 7: "f32"}  # CUtensorMapDataType values the fixtures use


def as_emulator_map(tmap) -> emu.TensorMap:
    """The fixture's cuTensorMapEncodeTiled arguments (innermost first) as an emu.TensorMap."""
    rank = len(tmap.global_dim)
    strides = [tmap.elem_bytes] + list(tmap.global_strides[: rank - 1])
    view = np.lib.stride_tricks.as_strided(tmap.base, shape=tuple(reversed(tmap.global_dim)),
                                           strides=tuple(reversed(strides)))
    return emu.TensorMap(view, box=tuple(reversed(tmap.box_dim)), swizzle=_SWIZZLE[tmap.swizzle],
                         elem_strides=tuple(reversed(tmap.element_strides)), dtype=_FORMAT[tmap.data_type])


RUNNABLE = [n for n in R.FIXTURES if n != "triton_matmul_tma_device"]


@pytest.mark.parametrize("name", RUNNABLE)
@pytest.mark.parametrize("seed", [0, 7])
def test_triton_kernel_matches_numpy(name, seed):
    grid, block, smem, args, check = R.case(name, np.random.default_rng(100 + seed))
    launch_args = [as_emulator_map(a) if isinstance(a, R.TensorMap) else a for a in args]
    prog = emu.load_ptx(R.ptx_text(name))
    stats = prog.launch(R.entry(name), grid=grid, block=block, smem_bytes=smem, args=launch_args, seed=seed)
    check(args)  # the maps view the fixture's arrays, so the results are in them
    assert stats.warp_instructions > 0 and stats.ctas == grid[0] * grid[1] * grid[2]


def test_device_side_tensor_maps_are_reported_unsupported():
    # Triton's tl.make_tensor_descriptor builds a CUtensorMap in shared memory with tensormap.replace:
    # the field layout of a tensor map is not documented, so the emulator refuses it by name.
    with pytest.raises(emu.Unsupported, match=r"line \d+: opcode 'tensormap' is not supported"):
        grid, block, smem, args, _ = R.case("triton_matmul_tma_device", np.random.default_rng(0))
        emu.load_ptx(R.ptx_text("triton_matmul_tma_device")).launch(
            R.entry("triton_matmul_tma_device"), grid=grid, block=block, smem_bytes=smem, args=args)
