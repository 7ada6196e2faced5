"""Self-consistency of the Triton PTX fixtures (no Triton, no emulator, no GPU needed).

Checks that kernels.json agrees with the .ptx files (entry name, parameter list, hash), that
every reference case builds an argument list of the right arity and types, and that each
``check`` rejects untouched outputs and accepts the NumPy-expected ones.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import reference  # noqa: E402

ENTRY_RE = re.compile(r"\.visible\s+\.entry\s+(\w+)\s*\((.*?)\)", re.S)


@pytest.mark.parametrize("name", reference.FIXTURES)
def test_manifest_matches_ptx(name):
    m = reference.manifest()[name]
    text = reference.ptx_text(name)
    assert hashlib.sha256(text.encode()).hexdigest() == m["ptx_sha256"]
    assert re.search(r"^\.target\s+sm_90a\b", text, re.M)
    assert re.search(r"^\.version\s+" + re.escape(m["ptx_version"]) + r"\b", text, re.M)
    em = ENTRY_RE.search(text)
    assert em.group(1) == m["entry"]
    decls = [d.strip() for d in em.group(2).split(",") if d.strip()]
    assert decls == [p["ptx_decl"] for p in m["params"]]
    assert m["block"] == [32 * m["num_warps"], 1, 1]
    assert m["entry_directives"].get("reqntid") == [32 * m["num_warps"]]
    kinds = [p["kind"] for p in m["params"]]
    assert kinds[-2:] == ["global_scratch", "profile_scratch"]
    assert len(text.splitlines()) < 3000


@pytest.mark.parametrize("name", list(json.loads((HERE / "kernels_sm100a.json").read_text())))
def test_sm100a_manifest_matches_ptx(name):
    m = json.loads((HERE / "kernels_sm100a.json").read_text())[name]
    text = (HERE / m["file"]).read_text()
    assert hashlib.sha256(text.encode()).hexdigest() == m["ptx_sha256"]
    assert re.search(r"^\.target\s+sm_100a\b", text, re.M) and m["target"] == "sm_100a"
    assert ENTRY_RE.search(text).group(1) == m["entry"]
    assert not re.search(r'^\s*\.file\s+\d+\s+"/', text, re.M)  # no machine paths (generate.portable)


@pytest.mark.parametrize("name", reference.FIXTURES + reference.SM100A_ONLY)
def test_reference_case(name):
    grid, block, smem, args, check = reference.case(name, np.random.default_rng(1234))
    m = reference.manifest()[name]
    assert list(grid) == m["grid"] and list(block) == m["block"] and smem == m["smem_bytes"]
    # Outputs still hold the sentinel: check must fail.
    with pytest.raises(AssertionError):
        check(args)
    # Outputs set to the float64 reference rounded to the output dtype: check must pass.
    for i, want in check.expected(args).items():
        dst = args[i].base if isinstance(args[i], reference.TensorMap) else args[i]
        dst[...] = want
    check(args)


def test_bf16_rounding():
    x = np.array([1.0, 1.00390625, 1.005859375, -2.5, 3.0e38, np.inf, np.nan], np.float32)
    b = reference.f32_to_bf16_bits(x)
    assert b[0] == 0x3F80 and b[1] == 0x3F80  # tie -> even
    assert b[2] == 0x3F81
    back = reference.bf16_bits_to_f32(b)
    assert back[3] == -2.5 and np.isinf(back[5]) and np.isnan(back[6])
