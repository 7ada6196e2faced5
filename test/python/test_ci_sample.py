"""ci_sample.covering: the subset of an emulator matrix CI runs covers every value and pair of values."""

from __future__ import annotations

import itertools

import numpy as np

import ci_sample


def _pairs(features, axes):
    return {((a, f[a]), (b, f[b])) for f in features for a, b in itertools.combinations(sorted(axes), 2)}


def test_the_subset_covers_every_value_and_pair_of_random_matrices():
    rng = np.random.default_rng(5)
    for trial in range(20):
        axes = {f"a{i}": int(rng.integers(2, 4)) for i in range(int(rng.integers(2, 6)))}
        features = [{a: int(rng.integers(n)) for a, n in axes.items()} for _ in range(int(rng.integers(1, 40)))]
        chosen = ci_sample.covering(features)
        assert chosen == sorted(set(chosen)) and all(0 <= i < len(features) for i in chosen)
        picked = [features[i] for i in chosen]
        assert _pairs(picked, axes) == _pairs(features, axes), trial
        assert {(a, f[a]) for f in picked for a in axes} == {(a, f[a]) for f in features for a in axes}


def test_pairs_limits_which_axes_are_paired():
    # four cases of two lengths: every length must run, but only dtype x causal pairs matter
    features = [dict(dtype=d, causal=c, length=n) for d, c, n in
                [("bf16", False, 1), ("bf16", True, 2), ("fp16", False, 3), ("fp16", True, 4), ("bf16", False, 5)]]
    assert ci_sample.covering(features, pairs=("dtype", "causal")) == [0, 1, 2, 3, 4]  # five lengths
    no_length = [{k: v for k, v in f.items() if k != "length"} for f in features]
    assert ci_sample.covering(no_length, pairs=("dtype", "causal")) == [0, 1, 2, 3]  # case 4 repeats case 0
    assert ci_sample.covering(no_length, pairs=()) == [0, 3]  # each value once


def test_in_ci_skips_the_rest_unless_the_full_matrix_runs():
    cases = [("a", 1), ("b", 2), ("c", 3)]
    marked = ci_sample.in_ci(cases, [0, 2])
    assert marked[0] == ("a", 1) and marked[2] == ("c", 3)
    assert marked[1].values == ("b", 2)
    skip = marked[1].marks[0]
    assert skip.name == "skipif" and skip.args == (not ci_sample.FULL,)
    assert ci_sample.in_ci(["x", "y"], [1], one_arg=True)[0].values == ("x",)


def test_covered_keeps_a_params_marks_and_takes_its_features():
    import pytest

    known = pytest.mark.xfail(strict=True, reason="known")
    configs = [dict(d=64, causal=False), dict(d=128, causal=True), pytest.param(dict(d=64, causal=True), marks=known),
               dict(d=128, causal=False)]
    once = ci_sample.covered(configs, pairs=())
    assert once[:2] == configs[:2]  # each value once: the first two cases
    assert [m.name for m in once[2].marks] == ["xfail", "skipif"] and once[2].values == (configs[2].values[0],)
    assert once[3].values == (configs[3],) and once[3].marks[0].name == "skipif"
    paired = ci_sample.covered(configs)  # every pair of d and causal: all four run, the param as it was
    assert paired[2] is configs[2] and paired[3] == configs[3]
