"""The resource checks that valid fields cannot reach today (the derivations keep BN, TMEM and
shared memory in range) still report a precise reason if a derivation changes: each message is
exercised here by overriding one derived value."""

from __future__ import annotations

import pytest

from fa4_mlir.configs import Depth512Config, FA4Config, GemmConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.target import Target


def _with(cls, **overrides):
    return type(f"Tweaked{cls.__name__}", (cls,), {k: property(lambda self, v=v: v) for k, v in overrides.items()})


@pytest.mark.parametrize("cls, overrides, reason", [
    (FA4Config, dict(tmem_used=640), r"FA4Config bf16 d128 2Q: TMEM needs 640 columns, sm_100a has 512"),
    (Depth512Config, dict(bn=16), r"Depth512Config bf16 d512: BN = 16 must be >= 32"),
    (Depth512Config, dict(tmem_used=640), r"Depth512Config bf16 d512: TMEM needs 640 columns, sm_100a has 512"),
    (Depth512Config, dict(smem_used=240000), r"Depth512Config bf16 d512: smem needs 240000 B, sm_100a has 232448 B"),
    (GemmConfig, dict(tmem_used=1024), r"TMEM needs accum_stages x tile_n = 1024 columns, sm_100a has 512: "
                                       r"lower accum_stages or tile_n"),
    (GemmConfig, dict(smem_used=300000), r"smem needs 300000 B, sm_100a has 232448 B: use a smaller tile"),
])
def test_defensive_reasons(cls, overrides, reason):
    with pytest.raises(ConfigError, match=reason):
        _with(cls, **overrides)().validate()


def test_target_parse_and_construction():
    t = Target.parse("sm_100a")
    assert (t.name, t.ptx_isa, t.tmem_columns, t.smem_capacity) == ("sm_100a", 86, 512, 232448)
    assert Target.parse("sm_90a").tmem_columns == 0
    with pytest.raises(ConfigError, match=r"target must be sm_90a or sm_100a, got 'sm_100'"):
        Target.parse("sm_100")
    with pytest.raises(ConfigError, match=r"Target.sm must be one of 90, 100, got 80"):
        Target(sm=80, ptx_isa=80)
