"""FA4Config reproduces the reference system's derivation (spec sections 1.2, 1.3, 2.1, 2.3)."""

from __future__ import annotations

import pytest

from fa4_mlir.configs import FA4Config
from fa4_mlir.errors import ConfigError

# Spec 1.3: case -> (MMA_M, BM, BN, nqk, BK0, fused, nkv, TMEM S0,S1,O0,O1, smem_used)
WORKED = {
    "bf16 d64 2Q": (dict(qk_depth=64), (128, 256, 192, 1, 64, False, 4, (0, 192, 384, 448), 230636)),
    "bf16 d128 2Q": (dict(qk_depth=128), (128, 256, 128, 1, 128, True, 5, (0, 128, 256, 384), 230596)),
    "bf16 d128 2Q pair-CTA": (dict(qk_depth=128, pair_cta=True),
                              (256, 256, 128, 2, 64, False, 5, (0, 128, 256, 384), 230756)),
    "bf16 d128 1Q": (dict(qk_depth=128, num_q=1), (128, 128, 128, 2, 64, False, 3, (0, 128, 256, 384), 230644)),
    "fp8 d128 2Q": (dict(dtype="fp8_e4m3", qk_depth=128),
                    (128, 256, 128, 2, 64, False, 6, (0, 128, 256, 384), 230804)),
}


@pytest.mark.parametrize("case", WORKED)
def test_worked_configurations(case):
    kwargs, (mma_m, bm, bn, nqk, bk0, fused, nkv, tmem, smem) = WORKED[case]
    c = FA4Config(**kwargs).validate()
    assert (c.mma_m, c.bm, c.bn, c.qk_stages, c.bk0, c.fused_kv, c.num_kv_stages) == (mma_m, bm, bn, nqk, bk0,
                                                                                      fused, nkv)
    assert tuple(c.tmem_columns[k][0] for k in ("S0", "S1", "O0", "O1")) == tmem
    assert c.smem_used == smem
    assert c.bk1 == c.bn and c.num_pv_stages == 2


def test_fp8_forces_64b_swizzle_and_k32():
    c = FA4Config(dtype="fp8_e4m3", qk_depth=128, swizzle=128)
    assert (c.swizzle_bytes, c.swizzle_elems, c.mma_k) == (64, 64, 32)


def test_d256_does_not_fit_fa4():
    c = FA4Config(qk_depth=256)
    assert c.bn == 0 and not c.supported()
    with pytest.raises(ConfigError, match=r"FA4Config bf16 d256 2Q: BN = 0 must be >= 64: .*depth-512 kernel"):
        c.validate()


def test_paged_bn_falls_to_a_power_of_two():
    assert FA4Config(qk_depth=64, page_size=128).bn == 128  # 192 neither divides nor is divided by 128
    assert FA4Config(qk_depth=64, page_size=64).bn == 192  # 192 % 64 == 0: kept


def test_gqa_fusion():
    c = FA4Config(group=8)
    assert c.fuse_gqa and c.bm_eff == 32
    assert not FA4Config(group=3).fuse_gqa  # 128 % 3 != 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(qk_depth=7), r"FA4Config.qk_depth must be a multiple of 8 in \[8, 576\] for bf16 \(16-byte TMA rows\), got 7"),
    (dict(dtype="fp8_e4m3", qk_depth=72), r"FA4Config.qk_depth must be a multiple of 16 in \[16, 576\] for fp8_e4m3"),
    (dict(ov_depth=130), r"FA4Config.ov_depth must be a multiple of 8 .* got 130"),
    (dict(qk_depth=128, ov_depth=192), r"FA4Config.ov_depth must be <= qk_depth \(128\): .* got 192"),
    (dict(dtype="fp32"), r"FA4Config.dtype must be one of bf16, fp16, fp8_e4m3, got 'fp32'"),
    (dict(dtype="int8"), r"FA4Config.dtype must be one of bf16, fp16, fp8_e4m3, got 'int8'"),
    (dict(rope_dtype="f16"), r"FA4Config.rope_dtype must be one of bf16, fp16, fp8_e4m3, got 'f16'"),
    (dict(scale_dtype="fp8_e4m3"), r"FA4Config.scale_dtype must be one of bf16, fp16, fp32, got 'fp8_e4m3'"),
    (dict(num_q=3), r"FA4Config.num_q must be 1 or 2, got 3"),
    (dict(group=0), r"FA4Config.group must be >= 1, got 0"),
    (dict(page_size=-1), r"FA4Config.page_size must be >= 0 \(0: not paged\), got -1"),
    (dict(swizzle=16), r"FA4Config.swizzle must be 32, 64 or 128 \(bytes\), got 16"),
    (dict(num_qk_stages=-1), r"FA4Config.num_qk_stages must be >= 0 \(0: derive\), got -1"),
    (dict(page_gather=1), r"FA4Config.page_gather must be True or False, and False with is_mla or pair_cta \(the "
                          r"gathered load warp is the one-CTA paged attention kernel's\), got 1"),
    (dict(page_gather=True, pair_cta=True), r"FA4Config.page_gather must be True or False, and False with is_mla or "
                                            r"pair_cta .*, got True"),
    (dict(page_gather=True, is_mla=True, qk_depth=192, ov_depth=128, rope_dtype="bf16"),
     r"FA4Config.page_gather must be True or False, and False with is_mla or pair_cta .*, got True"),
])
def test_field_errors_name_field_value_and_rule(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        FA4Config(**kwargs)


@pytest.mark.parametrize("kwargs, reason", [
    (dict(qk_depth=64, pair_cta=True), r"qk_depth 64 must be in \(64, 128\] for pair_cta"),
    (dict(qk_depth=128, num_q=1, pair_cta=True), r"pair_cta needs num_q = 2"),
    (dict(qk_depth=32, num_q=1), r"qk_depth 32 must be in \[64, 256\] for num_q = 1"),
    (dict(qk_depth=48), r"qk_depth 48 must be >= 64 for num_q = 2"),
    (dict(qk_depth=128, page_size=64), r"page_size 64 must be >= BN \(128\) and a multiple of 16"),
    (dict(qk_depth=576, ov_depth=64, is_mla=True), r"smem needs 296044 B, sm_100a has 232448 B: Q takes 294912 B; lower qk_depth or use num_q = 1"),
    (dict(qk_depth=256, ov_depth=64, num_q=1, rope_dtype="bf16", is_mla=True, scale_dtype="fp32"),
     r"num_kv_stages = \d must be >= 2"),
])
def test_unsupported_configs_say_why(kwargs, reason):
    c = FA4Config(**kwargs)
    assert not c.supported()
    with pytest.raises(ConfigError, match=reason):
        c.validate()


def test_configs_are_frozen_and_keyword_only():
    c = FA4Config()
    with pytest.raises(dataclasses_frozen_error()):
        c.qk_depth = 64
    with pytest.raises(TypeError):
        FA4Config("bf16")


def dataclasses_frozen_error():
    import dataclasses

    return dataclasses.FrozenInstanceError
