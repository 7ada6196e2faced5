"""The split-KV combine kernel ("attention-combine", issue 26): fp32 partials O_s / LSE_s per key range
merged into O (bf16 / fp16) and its LSE. Run in the PTX emulator (race checks on) on both targets against
the float64 ``reference.combine_partials``: LSEs spread over e^+-90, a third of the ranges -inf (their O_s
NaN: a range of weight 0 is never read), rows whose ranges are all -inf (O 0, LSE +inf), 1 to 40 ranges (a
chunk of 32 and more), head dims 32 to 512 (32, 96 and 192 leave lanes of the last step idle), 3 or 4 warps
a CTA, B * Sq * H not a multiple of a CTA's rows, lse not written; ptxas for both targets with zero spills;
every config and launch error; fa4-emu and fa4-compile on it."""

from __future__ import annotations

import re
import subprocess
import sys
import zlib

import numpy as np
import pytest

from fa4_mlir import reference
from fa4_mlir.configs.combine import CombineConfig
from fa4_mlir.errors import ConfigError, LaunchError
from fa4_mlir.kernels.attention import combine

# (target, head_dim, dtype, warps, B, Sq, H, S): rows B * Sq * H never a multiple of a CTA's rows (warps)
CASES = [("sm_100a", 64, "bf16", 4, 2, 1, 5, 1), ("sm_90a", 96, "fp16", 4, 1, 3, 2, 2),
         ("sm_100a", 128, "fp16", 4, 2, 3, 5, 3), ("sm_90a", 256, "bf16", 4, 1, 1, 5, 7),
         ("sm_100a", 512, "bf16", 4, 1, 1, 3, 16), ("sm_90a", 128, "bf16", 4, 1, 1, 3, 40),
         ("sm_100a", 192, "fp16", 4, 1, 1, 5, 7), ("sm_90a", 32, "bf16", 3, 2, 2, 5, 5)]


def _partials(rng, b, sq, h, s, d):
    """Random partials: O_s normal, LSE_s normal x 30, a third -inf (with O_s NaN, as a kernel that never
    wrote them might leave it), and the (0, 0, 0) row's every range -inf."""
    o_part = rng.standard_normal((b, sq, h, s, d), dtype=np.float32)
    lse_part = (rng.standard_normal((b, h, sq, s)) * 30).astype(np.float32)
    lse_part[rng.random(lse_part.shape) < 1 / 3] = -np.inf
    lse_part[0, 0, 0, :] = -np.inf
    o_part[np.isneginf(lse_part).transpose(0, 2, 1, 3)] = np.nan
    return o_part, lse_part


def _run(config, o_part, lse_part, write_lse=True, seed=0):
    from fa4_mlir import runtime
    from fa4_mlir.tools.fa4_emu import launch_attention_combine

    b, sq, h, _, d = o_part.shape
    o = np.full((b, sq, h, d), reference.POISON[config.dtype], np.uint16)
    lse = np.full((b, h, sq), np.nan, np.float32) if write_lse else None
    kernel = runtime.load("attention-combine", config, device="emulator")
    launch_attention_combine(kernel, config, o_part, lse_part, o, lse, seed=seed)
    return o, lse


@pytest.mark.parametrize("target, head_dim, dtype, warps, b, sq, h, s", CASES, ids=lambda v: str(v))
def test_combine_matches_float64_in_the_emulator(target, head_dim, dtype, warps, b, sq, h, s):
    seed = zlib.crc32(repr((target, head_dim, dtype, warps, b, sq, h, s)).encode())
    rng = np.random.default_rng(seed)
    o_part, lse_part = _partials(rng, b, sq, h, s, head_dim)
    config = CombineConfig(target=target, head_dim=head_dim, dtype=dtype, warps=warps)
    o, lse = _run(config, o_part, lse_part, seed=seed % 1000)
    ref, ref_lse = reference.combine_partials(o_part, lse_part)
    check = reference.compare(o, ref, reference.round_to(ref, dtype), dtype)  # within 2x one rounding
    assert check.ok and check.unwritten == 0, check.summary()
    keyless = np.isposinf(ref_lse)
    assert keyless[0, 0, 0] and (np.isposinf(lse) == keyless).all()
    assert (o[keyless.transpose(0, 2, 1)] == 0).all()  # +0 in both dtypes
    assert np.abs(lse[~keyless] - ref_lse[~keyless]).max() <= reference.lse_tolerance(ref_lse[~keyless])


def test_combine_leaves_lse_alone_without_write_lse():
    config = CombineConfig(target="sm_90a", head_dim=64)
    o_part, lse_part = _partials(np.random.default_rng(5), 1, 2, 3, 4, 64)
    o, _ = _run(config, o_part, lse_part, write_lse=False)  # a null lse pointer: a write would fault
    ref = reference.combine_partials(o_part, lse_part)[0]
    check = reference.compare(o, ref, reference.round_to(ref, "bf16"), "bf16")
    assert check.ok and check.unwritten == 0, check.summary()


def test_the_reference_weights_each_range_by_its_lse():
    o_part = np.array([1.0, 3.0, np.nan]).reshape(1, 1, 1, 3, 1)
    lse_part = np.array([np.log(1.0), np.log(3.0), -np.inf]).reshape(1, 1, 1, 3)
    o, lse = reference.combine_partials(o_part, lse_part)
    assert np.allclose(o, 0.25 * 1 + 0.75 * 3) and np.allclose(lse, np.log(4.0))
    o, lse = reference.combine_partials(np.zeros((1, 1, 1, 2, 1)), np.full((1, 1, 1, 2), -np.inf))
    assert o[0, 0, 0, 0] == 0 and lse[0, 0, 0] == np.inf


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
@pytest.mark.parametrize("head_dim", [64, 96, 128, 256, 384, 512])
def test_combine_assembles_without_spills(target, head_dim):
    from fa4_mlir.core.compiler import compile_kernel

    config = CombineConfig(target=target, head_dim=head_dim, dtype="fp16" if head_dim == 96 else "bf16")
    result = compile_kernel(combine.build(config), stop="cubin")
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"]) == (0, 0), m
    assert m["threads"][0] == config.threads and [p["name"] for p in m["params"]] == [
        "o_partial", "lse_partial", "o", "lse", "batch", "seq_q", "num_heads", "num_splits", "write_lse"]
    assert re.search(r"ld\.global\.nc\.v(4\.b32|2\.b64)", result.ptx)  # 16 bytes a lane (v2.b64: sm_100a's f32x2)
    assert f".minnctapersm {config.min_ctas}" in result.ptx


@pytest.mark.parametrize("kwargs, message", [
    (dict(target="sm_80"), "CombineConfig.target must be sm_100a or sm_90a, got 'sm_80'"),
    (dict(head_dim=100), r"CombineConfig.head_dim must be a multiple of 16 in \[32, 512\], got 100"),
    (dict(head_dim=16), r"CombineConfig.head_dim must be a multiple of 16 in \[32, 512\], got 16"),
    (dict(head_dim=528), r"CombineConfig.head_dim must be a multiple of 16 in \[32, 512\], got 528"),
    (dict(warps=0), r"CombineConfig.warps must be an int in \[1, 32\], got 0"),
    (dict(warps=33), r"CombineConfig.warps must be an int in \[1, 32\], got 33"),
    (dict(dtype="fp32"), "CombineConfig.dtype must be one of bf16, fp16, got 'fp32'"),
])
def test_config_rules(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        CombineConfig(**kwargs)


def test_config_derived_values():
    c = CombineConfig(head_dim=192, warps=8)
    assert (c.vectors, c.steps, c.splits_per_step, c.threads, c.min_ctas) == (48, 2, 4, 256, 4)
    assert c.describe() == "CombineConfig bf16 d192 8 warps sm_100a" and c.supported()
    assert combine.launch_geometry(c, 3, 1, 5) == (2, 1, 1)


def test_launch_checks():
    from fa4_mlir.tools.fa4_emu import launch_attention_combine

    c = CombineConfig(head_dim=64)
    with pytest.raises(LaunchError, match=r"B \* Sq \* H must be in \[1, 2147483647\] \(32-bit row indices\), "
                                          r"got 2147483648 \(65536 x 1 x 32768\)"):
        combine.launch_geometry(c, 65536, 1, 32768)
    with pytest.raises(LaunchError, match=r"o_partial must be \(B, Sq, H, S, 64\) with every dimension >= 1 "
                                          r"\(the config's head_dim last\), got \(1, 1, 2, 3, 128\)"):
        combine.check_shapes(c, (1, 1, 2, 3, 128), (1, 2, 1, 3), (1, 1, 2, 64))
    with pytest.raises(LaunchError, match=r"o_partial must be .*, got \(1, 1, 2, 0, 64\)"):
        combine.check_shapes(c, (1, 1, 2, 0, 64), (1, 2, 1, 0), (1, 1, 2, 64))
    with pytest.raises(LaunchError, match=r"lse_partial must be \(1, 2, 1, 3\) for o_partial \(1, 1, 2, 3, 64\), "
                                          r"got \(1, 1, 2, 3\)"):
        combine.check_shapes(c, (1, 1, 2, 3, 64), (1, 1, 2, 3), (1, 1, 2, 64))
    with pytest.raises(LaunchError, match=r"o must be \(1, 1, 2, 64\) .*, got \(1, 2, 1, 64\)"):
        combine.check_shapes(c, (1, 1, 2, 3, 64), (1, 2, 1, 3), (1, 2, 1, 64))
    with pytest.raises(LaunchError, match=r"lse must be \(1, 2, 1\) .*, got \(1, 1, 2\)"):
        combine.check_shapes(c, (1, 1, 2, 3, 64), (1, 2, 1, 3), (1, 1, 2, 64), (1, 1, 2))
    assert combine.check_shapes(c, (1, 1, 2, 3, 64), (1, 2, 1, 3), (1, 1, 2, 64), (1, 2, 1)) == (1, 1, 2, 3)
    o_part, lse_part = np.zeros((1, 1, 2, 3, 64), np.float32), np.zeros((1, 2, 1, 3), np.float32)
    o, lse = np.zeros((1, 1, 2, 64), np.uint16), np.zeros((1, 2, 1), np.float32)
    with pytest.raises(LaunchError, match="o_part must be a C-contiguous float32 array, got float64"):
        launch_attention_combine(None, c, o_part.astype(np.float64), lse_part, o, lse)
    with pytest.raises(LaunchError, match=r"lse must be a C-contiguous float32 array, got float32 \(not C-"):
        launch_attention_combine(None, c, o_part, lse_part, o, np.zeros((1, 2, 2), np.float32)[:, :, :1])


def test_fa4_emu_and_fa4_compile_run_the_combine(tmp_path):
    from fa4_mlir.tools import fa4_emu

    assert fa4_emu.main(["attention-combine", "--target", "sm_100a", "--head-dim", "96", "--shape", "1x1x3x5"]) == 0
    assert fa4_emu.main(["attention-combine", "--shape", "1x1x3"]) == fa4_emu.USAGE
    run = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_compile", "attention-combine", "--target",
                          "sm_90a", "--head-dim", "512", "-o", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("attention_combine sm_90a: 128 threads") and "0+0 spill bytes" in run.stdout
    assert (tmp_path / "attention_combine.cubin").is_file()


def test_the_mla_split_launch_combines_into_strided_outputs():
    """The serving ops' split-KV combine (``fa4_mlir.torch.split_decode.combine``, which the MLA op's split
    launch calls) on the emulator: into a strided out (through a dense temporary) with a strided lse, and with
    no lse."""
    torch = pytest.importorskip("torch")
    from fa4_mlir.torch import emulator
    from fa4_mlir.torch.split_decode import combine

    o_part, lse_part = _partials(np.random.default_rng(7), 1, 1, 6, 3, 512)
    ref, ref_lse = reference.combine_partials(o_part, lse_part)
    wide = torch.full((1, 1, 6, 1024), float("nan"), dtype=torch.bfloat16)
    out, lse = wide[..., :512], torch.full((1, 6, 2), float("nan"))[..., :1]
    with emulator(target="sm_90a") as emu:
        combine(emu, "sm_90a", torch.from_numpy(o_part), torch.from_numpy(lse_part), out, lse)
        combine(emu, "sm_90a", torch.from_numpy(o_part), torch.from_numpy(lse_part), wide[..., 512:], None)
    assert [name for name, _ in emu.launches] == ["attention_combine"] * 2
    for half in (out, wide[..., 512:]):
        bits = half.contiguous().view(torch.int16).numpy().view(np.uint16)
        check = reference.compare(bits, ref, reference.round_to(ref, "bf16"), "bf16")
        assert check.ok and check.unwritten == 0, check.summary()
    keyless = np.isposinf(ref_lse)
    assert (np.isposinf(lse.numpy()) == keyless).all()
    assert np.abs(lse.numpy()[~keyless] - ref_lse[~keyless]).max() <= reference.lse_tolerance(ref_lse[~keyless])
