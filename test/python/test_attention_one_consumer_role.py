"""The sm_90a attention with one consumer role (``AttentionConfig.one_consumer_role``): every consumer warpgroup
runs one copy of the code, its warpgroup index read from the thread index at run time (its rows, its Q and O
buffers, the turn barriers ``sched`` and ``epilogue`` as families of named barriers indexed by it).

The IR has one ``consumers`` role over the consumers' warps and its named barriers take a run-time id; the PTX
holds one copy of the K/V loop (a half or a third of the separate roles' wgmmas), assembles without spills and
the protocol verifier proves it per warpgroup; in the emulator its numbers match float64 at the bf16 tests'
bounds.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import ConfigError
from fa4_mlir.kernels import attention

from hopper_emulated import check_in_emulator


@pytest.mark.parametrize("kwargs", [dict(head_dim=64, num_q=3, causal=True), dict(head_dim=128),
                                    dict(head_dim=256, causal=True), dict(head_dim=64, dtype="fp8_e4m3",
                                                                          exp2_emulation=4, exp2_f16x2=True)])
def test_one_role_runs_every_consumer_warpgroup(kwargs):
    from fa4_mlir.core.compiler import compile_kernel

    shared = AttentionConfig(target="sm_90a", one_consumer_role=True, **kwargs)
    separate = AttentionConfig(target="sm_90a", **kwargs)
    n = shared.hopper.consumers
    mlir = attention.build(shared).mlir
    roles = re.findall(r'sym_name = "(\w+)"[^}]*warps = array<i32: ([\d, ]+)>', mlir)
    assert ("consumers", ", ".join(str(w) for w in range(4 * n))) in roles
    assert not any(re.fullmatch(r"consumer\d", role) for role, _ in roles)
    assert re.search(rf'"fa4.named_barrier"\(%wg\) {{count = {n} : i64, kind = "sync", sym_name = "sched"', mlir)
    result = compile_kernel(attention.build(shared), stop="cubin")  # the protocol verifier runs at stage fa4
    m = result.manifest
    assert (m["spill_stores"], m["spill_loads"], m.get("stack_frame", 0)) == (0, 0, 0), m
    ptx = result.ptx
    assert re.search(r"bar\.sync\s+%r\d+, 256;", ptx)  # the turn barrier's id, a register
    alone = compile_kernel(attention.build(separate), stop="ptx").ptx
    assert n * ptx.count("wgmma.mma_async") == alone.count("wgmma.mma_async")


@pytest.mark.parametrize("kwargs, message", [
    (dict(target="sm_100a"), "one_consumer_role must be False unless target is sm_90a"),
    (dict(target="sm_90a", persistent=True), "without persistent, varlen or a paged K/V cache"),
    (dict(target="sm_90a", head_dim=512), "below head dim 512"),
    (dict(target="sm_90a", varlen=True), "without persistent, varlen or a paged K/V cache"),
    (dict(target="sm_90a", one_consumer_role=1), "False unless target is sm_90a"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        AttentionConfig(**{"one_consumer_role": True, **kwargs}).validate()


# (dtype, head dim, num_q, causal, batch, seq_q, seq_k, heads, kv heads): three warpgroups' turns over several K/V
# tiles with a partial CTA; two warpgroups, GQA, ragged keys through both K/V loops; head dim 256 causal
EMULATED = [("bf16", 64, 3, True, 1, 250, 260, 1, 1), ("fp16", 128, 2, False, 1, 200, 300, 2, 1),
            ("bf16", 256, 2, True, 1, 130, 150, 1, 1)]


@pytest.mark.parametrize("dtype, d, num_q, causal, b, sq, sk, h, hk", EMULATED)
def test_one_consumer_role_matches_f64_reference_in_the_emulator(dtype, d, num_q, causal, b, sq, sk, h, hk):
    from fa4_mlir import reference

    config = AttentionConfig(target="sm_90a", head_dim=d, num_q=num_q, causal=causal, dtype=dtype, group=h // hk,
                             one_consumer_role=True)
    rng = np.random.default_rng(sq * sk + d + 5)
    q = reference.random_bits(rng, (b, sq, h, d), dtype, 1.0)
    k, v = (reference.random_bits(rng, (b, sk, hk, d), dtype, 1.0) for _ in range(2))
    check_in_emulator(config, q, k, v, 1 / math.sqrt(d))


def test_the_op_takes_one_role_at_head_dims_128_and_256_and_matches_float64(monkeypatch):
    """The torch op runs its one-tile kernel with one consumer role at head dims 128 and 256 from
    ``SM90_ONE_CONSUMER_ROLE_KEYS`` keys on (``default_one_role``: not at 64, 96, 192, nor in the persistent walk,
    nor on sm_100a); through the op in the emulator at head dim 256 (the table lowered to the test's keys; GQA,
    ragged rows, causal and not) against float64."""
    torch = pytest.importorskip("torch")
    from fa4_mlir import reference
    from fa4_mlir.configs import attention as attention_configs
    from fa4_mlir.configs.attention_op import op_fields
    from fa4_mlir.torch import attention as op, flash_attention
    from fa4_mlir.torch.emulated import emulator

    for d in (64, 96, 128, 192, 256):
        for causal in (False, True):
            assert op_fields("sm_90a", "bf16", d, causal, 1 << 20)["one_consumer_role"] is (d in (128, 256))
    for d, causal, keys, one in ((128, False, 16384, True), (128, False, 16383, False), (128, True, 8192, False),
                                 (256, True, 4096, True), (256, True, 4095, False), (256, False, 8192, False),
                                 (128, False, 1024, False)):  # 1024: the persistent walk
        assert op_fields("sm_90a", "fp8_e4m3" if d == 256 else "bf16", d, causal, keys)["one_consumer_role"] is one
    assert not op_fields("sm_100a", "bf16", 128, False, 1 << 20)["one_consumer_role"]
    for causal in (False, True):
        monkeypatch.setitem(attention_configs.SM90_ONE_CONSUMER_ROLE_KEYS, (256, causal), 1)
    real, loaded = op.launch, []
    monkeypatch.setattr(op, "launch", lambda config, *a, **kw: (loaded.append(config), real(config, *a, **kw))[1])
    rng = np.random.default_rng(17)
    q, k, v = (torch.from_numpy(reference.random_bits(rng, shape, "bf16", 1.0).view(np.int16)).view(torch.bfloat16)
               for shape in ((1, 90, 2, 256), (1, 150, 1, 256), (1, 150, 1, 256)))
    qf, kf, vf = (reference.to_f64(t.view(torch.int16).numpy().view(np.uint16), "bf16") for t in (q, k, v))
    kf, vf = (np.repeat(t, 2, axis=2) for t in (kf, vf))
    for causal in (False, True):
        with emulator(target="sm_90a", seed=4):
            out = flash_attention(q, k, v, causal=causal, softmax_scale=0.0625)
        assert loaded[-1].one_consumer_role and loaded[-1].causal == causal
        ref, _ = reference.attention(qf, kf, vf, causal, 0.0625)
        yardstick = reference.attention_yardstick(qf, kf, vf, causal, 0.0625, "bf16")
        result = reference.compare(out.view(torch.int16).numpy().view(np.uint16), ref, yardstick, "bf16")
        assert result.ok and result.unwritten == 0, result.summary()
