"""``torch.ops.fa4.*`` on CPU tensors through the PTX emulator (``fa4_mlir.torch.emulated``): only
when asked (``fa4_mlir.torch.emulator()`` or FA4_DEVICE=emulator), the sm_100a kernels by default,
numerics against float64 NumPy, and every error message of the opt-in.

Needs PyTorch (CI installs the CPU build); kernels come from the runtime's cache, compiled on first use.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fa4_mlir.torch as fa4_torch  # noqa: E402
from fa4_mlir import reference  # noqa: E402
from fa4_mlir.errors import ConfigError, LaunchError  # noqa: E402
from fa4_mlir.torch.emulated import emulator, placement, requested  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("FA4_DEVICE", "FA4_EMU_TARGET", "FA4_EMU_SEED"):
        monkeypatch.delenv(name, raising=False)


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def _random(rng, shape, dtype: str, scale: float = 1.0) -> torch.Tensor:
    bits = reference.random_bits(rng, shape, dtype, scale)
    return torch.from_numpy(bits.view(np.int16)).view(DTYPES[dtype])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attention_sm100a_in_the_emulator_matches_float64(seed):
    # 2Q d64 causal GQA 2, odd lengths, Sq != Sk, a strided q (a slice of a packed tensor), LSE.
    rng = np.random.default_rng(seed)
    packed = _random(rng, (1, 131, 4, 2 * 64), "bf16")
    q = packed[..., :64]
    k, v = (_random(rng, (1, 177, 2, 64), "bf16") for _ in range(2))
    with emulator(target="sm_100a", seed=seed) as emu:
        out, lse = fa4_torch.flash_attention(q, k, v, causal=True, softmax_scale=0.125, return_lse=True)
    assert [name for name, _ in emu.launches] == ["attention"]
    assert out.device.type == "cpu" and out.shape == q.shape and lse.shape == (1, 4, 131)
    qf, kf, vf = (reference.to_f64(_bits(t), "bf16") for t in (q, k, v))
    kf, vf = (np.repeat(t, 2, axis=2) for t in (kf, vf))  # query head h reads K/V head h // 2
    ref, ref_lse = reference.attention(qf, kf, vf, True, 0.125)
    result = reference.compare(_bits(out), ref, reference.attention_yardstick(qf, kf, vf, True, 0.125, "bf16"),
                               "bf16")
    assert result.ok and result.unwritten == 0, result.summary()
    assert float(np.abs(lse.numpy() - ref_lse).max()) <= reference.lse_tolerance(ref_lse)


def _launched_configs(monkeypatch) -> list:
    """The configs the attention op launches from now on, in order (``attention.launch`` spied on)."""
    from fa4_mlir.torch import attention

    real, loaded = attention.launch, []

    def spy(config, *args, **kwargs):
        loaded.append(config)
        return real(config, *args, **kwargs)
    monkeypatch.setattr(attention, "launch", spy)
    return loaded


def test_sm90a_attention_takes_the_short_tile_and_matches_float64(monkeypatch):
    """sm_90a head dim 64 causal, at most SM90_SHORT_KEYS keys: the op runs 128 keys a tile (its short tile,
    ``default_tile``; in the persistent walk, ``SM90_PERSISTENT_KEYS``, 64 keys up to 512: the walk's own step,
    ``SM90_WALK_SHORT_TILE``, and one K/V loop), from 4k keys 192 rows of 128 keys (three consumer warpgroups);
    both walk tiles' numbers against float64."""
    from fa4_mlir.configs.attention import SM90_SHORT_KEYS
    from fa4_mlir.configs.attention_op import default_tile

    assert default_tile("sm_90a", "bf16", 64, True, SM90_SHORT_KEYS) == (2, 128)
    assert default_tile("sm_90a", "bf16", 64, True, SM90_SHORT_KEYS + 1) == (3, 0)  # num_q 3's 128 keys
    assert default_tile("sm_90a", "bf16", 64, False, 1000) == (3, 0)  # non-causal: 192 rows at every length
    assert default_tile("sm_100a", "bf16", 64, True, 1000) == (2, 0)
    loaded = _launched_configs(monkeypatch)
    rng = np.random.default_rng(11)
    for keys, heads, block_n in ((300, 2, 64), (600, 1, 128)):
        q, k, v = (_random(rng, (1, keys, heads, 64), "bf16") for _ in range(3))
        with emulator(target="sm_90a", seed=1):
            out = fa4_torch.flash_attention(q, k, v, causal=True, softmax_scale=0.125)
        got = loaded[-1]
        assert (got.num_q, got.hopper.bn, got.persistent, got.single_kv_loop) == (2, block_n, True, True)  # the walk
        qf, kf, vf = (reference.to_f64(_bits(t), "bf16") for t in (q, k, v))
        ref, _ = reference.attention(qf, kf, vf, True, 0.125)
        result = reference.compare(_bits(out), ref, reference.attention_yardstick(qf, kf, vf, True, 0.125, "bf16"),
                                   "bf16")
        assert result.ok and result.unwritten == 0, result.summary()


def test_sm90a_attention_takes_the_persistent_walk_for_short_sequences_and_matches_float64(monkeypatch):
    """sm_90a 16-bit at head dim 128 and non-causal 64, up to ``SM90_PERSISTENT_KEYS`` keys: the op runs the
    persistent tile walk (a CTA's start and end overlap the next tile's loads), the grid of tiles above it; the
    walk's numbers through the op (GQA, ragged rows: several tiles a CTA) against float64, both masks."""
    from fa4_mlir.configs.attention import SM90_PERSISTENT_KEYS
    from fa4_mlir.configs.attention_op import default_persistent, default_tile, op_fields, paged_config
    from fa4_mlir.torch import attention

    assert sorted({(d, c) for _, d, c in SM90_PERSISTENT_KEYS}) == [(64, False), (64, True), (128, False),
                                                                     (128, True)]
    for (dtype, d, causal), keys in SM90_PERSISTENT_KEYS.items():
        assert default_persistent("sm_90a", dtype, d, causal, keys) and attention._config(
            "sm_90a", dtype, d, causal, 4, False, keys).persistent
        assert not default_persistent("sm_90a", dtype, d, causal, keys + 1)
        assert not default_persistent("sm_100a", dtype, d, causal, keys)
    for d, causal in ((96, False), (96, True), (256, False)):  # slower (96); 256: O would not fit
        assert not default_persistent("sm_90a", "bf16", d, causal, 512)
    # the walk's tiles by length are its own: the serving kernels' configs keep the dense tile (128 keys)
    assert default_tile("sm_90a", "bf16", 128, True, 512, persistent=True) == (2, 64)
    assert default_tile("sm_90a", "bf16", 128, True, 1024, persistent=True) == (2, 128)
    assert default_tile("sm_90a", "bf16", 128, True, 1025, persistent=True) == default_tile(
        "sm_90a", "bf16", 128, True, 512) == (2, 0)
    assert default_tile("sm_90a", "fp16", 64, True, 512, persistent=True) == (2, 64)
    assert default_tile("sm_90a", "fp16", 64, True, 513, persistent=True) == (2, 128)
    # the causal walks take one K/V loop (SM90_WALK_SINGLE_LOOP); the grid and the non-causal walks two
    for causal, keys, single in ((True, 2048, True), (True, 2049, False), (False, 2048, False)):
        assert op_fields("sm_90a", "bf16", 128, causal, keys)["single_kv_loop"] is single
    assert paged_config("sm_90a", "bf16", 128, True, 1, 64, 512, 1).block_n == 0
    loaded = _launched_configs(monkeypatch)
    rng = np.random.default_rng(13)
    q = _random(rng, (2, 150, 4, 128), "bf16")
    k, v = (_random(rng, (2, 210, 2, 128), "bf16") for _ in range(2))
    qf, kf, vf = (reference.to_f64(_bits(t), "bf16") for t in (q, k, v))
    kf, vf = (np.repeat(t, 2, axis=2) for t in (kf, vf))  # query head h reads K/V head h // 2
    for causal in (False, True):
        with emulator(target="sm_90a", seed=2):
            out = fa4_torch.flash_attention(q, k, v, causal=causal, softmax_scale=0.125)
        # causal at 210 keys: the walk's short tile, 64 keys (SM90_WALK_SHORT_TILE), and one K/V loop
        assert (loaded[-1].persistent, loaded[-1].num_q, loaded[-1].causal, loaded[-1].hopper.bn,
                loaded[-1].single_kv_loop) == (True, 2, causal, 64 if causal else 128, causal)
        ref, _ = reference.attention(qf, kf, vf, causal, 0.125)
        yardstick = reference.attention_yardstick(qf, kf, vf, causal, 0.125, "bf16")
        result = reference.compare(_bits(out), ref, yardstick, "bf16")
        assert result.ok and result.unwritten == 0, result.summary()


def test_gemm_residual_sm100a_in_the_emulator_matches_float64():
    rng = np.random.default_rng(7)
    a, c = _random(rng, (130, 72), "fp16"), _random(rng, (130, 40), "fp16")
    w = _random(rng, (40, 72), "fp16")  # an nn.Linear weight: b = w.t() is read K-major
    with emulator() as emu:
        d = fa4_torch.gemm_residual(a, w.t(), c, alpha=0.5, beta=2.0)
    assert emu.target == "sm_100a" and len(emu.launches) == 1
    af, wf, cf = (reference.to_f64(_bits(t), "fp16") for t in (a, w, c))
    ref = reference.gemm_residual(af, wf.T, cf, 0.5, 2.0)
    result = reference.compare(_bits(d), ref, reference.gemm_yardstick(ref, "fp16"), "fp16")
    assert result.ok and result.unwritten == 0, result.summary()


def test_fa4_device_environment_runs_sm90a_kernels(monkeypatch):
    monkeypatch.setenv("FA4_DEVICE", "emulator")
    monkeypatch.setenv("FA4_EMU_TARGET", "sm_90a")
    monkeypatch.setenv("FA4_EMU_SEED", "3")
    found = requested()
    assert (found.target, found.seed) == ("sm_90a", 3)
    rng = np.random.default_rng(5)
    x = _random(rng, (70, 64), "bf16", 4.0)
    y = torch.ops.fa4.copy_pipeline(x, -1.5)
    assert np.array_equal(_bits(y), reference.scaled(_bits(x), -1.5, "bf16"))
    a, b, c = _random(rng, (64, 48), "bf16"), _random(rng, (48, 24), "bf16"), _random(rng, (64, 24), "bf16")
    d = fa4_torch.gemm_residual(a, b, c, alpha=1.0, beta=0.0)  # beta 0: c is not read
    af, bf = (reference.to_f64(_bits(t), "bf16") for t in (a, b))
    ref = reference.gemm_residual(af, bf, np.zeros((64, 24)), 1.0, 0.0)
    assert reference.compare(_bits(d), ref, reference.gemm_yardstick(ref, "bf16"), "bf16").ok


def test_the_context_overrides_the_environment_and_nests(monkeypatch):
    monkeypatch.setenv("FA4_DEVICE", "emulator")
    with emulator(target="sm_90a", seed=4) as outer:
        assert requested() is outer
        with emulator(seed=9) as inner:
            assert requested() is inner
        assert requested() is outer
    assert requested().target == "sm_100a"
    monkeypatch.delenv("FA4_DEVICE")
    assert requested() is None


def test_cpu_tensors_without_the_emulator_are_an_error_naming_how_to_ask():
    x = torch.zeros(64, 64, dtype=torch.bfloat16)
    with pytest.raises(LaunchError, match=r"copy_pipeline: x must be a CUDA tensor, got device 'cpu'; move it with "
                                          r"\.cuda\(\), or run the kernel in the PTX emulator \(FA4_DEVICE=emulator"):
        torch.ops.fa4.copy_pipeline(x, 1.0)
    q = torch.zeros(1, 8, 1, 64, dtype=torch.bfloat16)
    with pytest.raises(LaunchError, match="flash_attention: q must be a CUDA tensor"):
        fa4_torch.flash_attention(q, q, q)


def test_under_the_emulator_every_tensor_must_be_on_the_cpu():
    cpu, meta = torch.zeros(8, 8), torch.zeros(8, 8, device="meta")
    with emulator():
        with pytest.raises(LaunchError, match=r"gemm_residual: c must be a CPU tensor under the PTX emulator "
                                              r"\(emulator\(target='sm_100a', seed=0\)\), got device 'meta'; "
                                              r"move it with \.cpu\(\)"):
            placement("gemm_residual", {"a": cpu, "b": cpu, "c": meta})


def test_head_dims_follow_the_emulated_target():
    q = torch.zeros(1, 8, 1, 192, dtype=torch.bfloat16)
    with emulator(target="sm_100a"), pytest.raises(
            LaunchError, match="head_dim must be one of 64, 96, 128, 256, 512 on sm_100a in the emulator, got 192"):
        fa4_torch.flash_attention(q, q, q)
    q = torch.zeros(1, 8, 1, 80, dtype=torch.bfloat16)
    with emulator(target="sm_90a"), pytest.raises(
            LaunchError, match="head_dim must be one of 64, 96, 128, 192, 256, 512 on sm_90a in the emulator, got 80"):
        fa4_torch.flash_attention(q, q, q)


def test_head_dim_256_dispatches_the_pair_kernel_in_the_emulator():
    # issue 23: head dims 256/512 on sm_100a run the depth-256/512 CTA-pair kernel (one launch, 2 CTAs)
    rng = np.random.default_rng(3)
    q = _random(rng, (1, 70, 2, 256), "bf16")
    k, v = (_random(rng, (1, 130, 2, 256), "bf16") for _ in range(2))
    with emulator(target="sm_100a", seed=3) as emu:
        out = fa4_torch.flash_attention(q, k, v, causal=False, softmax_scale=0.0625)
    assert [name for name, _ in emu.launches] == ["attention"]
    qf, kf, vf = (reference.to_f64(_bits(t), "bf16") for t in (q, k, v))
    ref, _ = reference.attention(qf, kf, vf, False, 0.0625)
    result = reference.compare(_bits(out), ref, reference.attention_yardstick(qf, kf, vf, False, 0.0625, "bf16"),
                               "bf16")
    assert result.ok and result.unwritten == 0, result.summary()


@pytest.mark.parametrize("env, value, message", [
    ("FA4_DEVICE", "tpu", "FA4_DEVICE must be one of cuda, emulator, got 'tpu'"),
    ("FA4_EMU_TARGET", "sm_80", "FA4_EMU_TARGET must be one of sm_100a, sm_90a, got 'sm_80'"),
    ("FA4_EMU_SEED", "-1", "FA4_EMU_SEED must be a non-negative whole number, got '-1'"),
])
def test_bad_environment_is_a_config_error(monkeypatch, env, value, message):
    monkeypatch.setenv("FA4_DEVICE", "emulator")
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=message):
        requested()


@pytest.mark.parametrize("kwargs, message", [
    ({"target": "sm_90"}, "emulator target must be one of sm_100a, sm_90a, got 'sm_90'"),
    ({"seed": -2}, "emulator seed must be an int >= 0, got -2"),
    ({"seed": 1.5}, "emulator seed must be an int >= 0, got 1.5"),
])
def test_bad_emulator_arguments(kwargs, message):
    with pytest.raises(LaunchError, match=message):
        emulator(**kwargs)


def test_emulation_failures_surface_as_the_emulators_errors():
    # A kernel bug would be an EmulationError (Deadlock, race report...); here a bad tensor never
    # reaches the kernel: the op's own checks run first, as on a GPU.
    a = torch.zeros(64, 60, dtype=torch.bfloat16)  # rows 120 B apart: not a multiple of 16 bytes
    with emulator(), pytest.raises(LaunchError, match="16"):
        fa4_torch.gemm_residual(a, torch.zeros(60, 64, dtype=torch.bfloat16), torch.zeros(64, 64, dtype=torch.bfloat16))
