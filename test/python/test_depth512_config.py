"""Depth512Config reproduces spec section 1.5 and the Depth512MBars barrier count (3.4)."""

from __future__ import annotations

import pytest

from fa4_mlir.configs import Depth512Config
from fa4_mlir.errors import ConfigError

# case -> (split_o, MMA_M, BM, BN, BK0, BK1, v_cols, TMEM starts, nkv, smem, barriers)
WORKED = {
    "bf16 d512": (dict(qk_depth=512), (True, 128, 64, 256, 128, 128, 128,
                                       {"O_lo": 0, "O_hi": 128, "S_even": 256, "S_odd": 384}, 4, 229780, 18)),
    "bf16 d256": (dict(qk_depth=256), (False, 256, 128, 128, 128, 64, 128,
                                       {"O": 0, "S_even": 256, "S_odd": 384}, 8, 230084, 24)),
    "fp8 d512": (dict(dtype="fp8_e4m3", qk_depth=512), (True, 128, 64, 256, 128, 128, 128,
                                                        {"O_lo": 0, "O_hi": 128, "S_even": 256, "S_odd": 384},
                                                        11, 229892, 32)),
}


@pytest.mark.parametrize("case", WORKED)
def test_worked_configurations(case):
    kwargs, (split_o, mma_m, bm, bn, bk0, bk1, v_cols, tmem, nkv, smem, bars) = WORKED[case]
    c = Depth512Config(**kwargs).validate()
    assert (c.split_o, c.mma_m, c.bm, c.bn, c.bk0, c.bk1, c.v_cols_per_cta) == (split_o, mma_m, bm, bn, bk0, bk1,
                                                                               v_cols)
    assert {k: v[0] for k, v in c.tmem_columns.items()} == tmem
    assert (c.num_kv_stages, c.smem_used, c.num_mbarriers) == (nkv, smem, bars)
    assert c.tmem_used == 512 and c.cta_group == 2
    # A K slot (BN/2 x BK0) and a V sub-tile (BK1 x v_cols) hold the same number of elements.
    assert c.bn // 2 * c.bk0 == c.bk1 * c.v_cols_per_cta


@pytest.mark.parametrize("kwargs, message", [
    (dict(qk_depth=128), r"Depth512Config.qk_depth must be 256 or 512, got 128; other depths use FA4Config"),
    (dict(qk_depth=256, ov_depth=512), r"Depth512Config.ov_depth must be 256 or 512 and <= qk_depth \(256\), got 512"),
    (dict(dtype="fp32"), r"Depth512Config.dtype must be one of bf16, fp16, fp8_e4m3, got 'fp32'"),
    (dict(group=0), r"Depth512Config.group must be >= 1, got 0"),
    (dict(page_size=-4), r"Depth512Config.page_size must be >= 0 \(0: not paged\), got -4"),
])
def test_field_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Depth512Config(**kwargs)


def test_paging_keeps_power_of_two_bn():
    # BN is 256 or 128 for these depths: already powers of two, so the paging fix never changes it.
    assert Depth512Config(qk_depth=512, page_size=48).bn == 256
    assert Depth512Config(qk_depth=256, page_size=48).bn == 128


def test_unsupported_reason_is_reported():
    class TightBudget(Depth512Config):  # valid fields always fit; simulate a tighter carveout
        @property
        def num_kv_stages(self):
            return 3

    c = TightBudget(qk_depth=512)
    assert not c.supported()
    with pytest.raises(ConfigError, match=r"Depth512Config bf16 d512: num_kv_stages = 3 must be >= "
                                          r"max\(2, num_qk_stages = 4\)"):
        c.validate()
