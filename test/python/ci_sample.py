"""Which cases of an emulator matrix CI runs. The matrices list every case the issues asked for; CI runs a
covering subset of them, and ``FA4_EMU_FULL_MATRIX=1`` runs them all (the cases CI leaves out are skipped,
not dropped: their ids stay, and the skip says how to run them).

``covering`` picks the subset: every value of every axis, and every pair of values of two axes (of those named
in ``pairs``) that some case has, is in some case CI runs. A bug that needs one value (fp16) or two together
(fp16 with a 1Q tile) still meets a case in CI; one that needs three particular values may not, which is what
the full run is for. Cases are chosen greedily (the one covering the most uncovered pairs first, the lower
index on ties): not the smallest such subset, but a deterministic one.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence

import pytest
from _pytest.mark import ParameterSet

FULL = os.environ.get("FA4_EMU_FULL_MATRIX", "0") == "1"


def _facts(features: Mapping, pairs: Sequence[str] | None) -> set:
    items = sorted(features.items())
    paired = [kv for kv in items if pairs is None or kv[0] in pairs]
    return {(kv,) for kv in items} | set(itertools.combinations(paired, 2))


def covering(features: Sequence[Mapping], pairs: Sequence[str] | None = None) -> list[int]:
    """Indices (ascending) of cases whose ``features`` (one mapping of axis to value per case) cover every
    (axis, value) and every pair of them over the axes in ``pairs`` (None: all axes) that the whole list
    covers."""
    facts = [_facts(f, pairs) for f in features]
    wanted = set().union(*facts) if facts else set()
    chosen: list[int] = []
    while wanted:
        best = max(range(len(facts)), key=lambda i: (len(facts[i] & wanted), -i))
        chosen.append(best)
        wanted -= facts[best]
    return sorted(chosen)


def in_ci(cases: Sequence, chosen: Sequence[int], one_arg: bool = False) -> list:
    """``cases`` for ``pytest.mark.parametrize``: those at the ``chosen`` indices run; the others only with
    FA4_EMU_FULL_MATRIX=1. ``one_arg``: each case is one argument, not a tuple of them. A case that is a
    ``pytest.param`` keeps its marks and id."""
    skip = pytest.mark.skipif(not FULL, reason="FA4_EMU_FULL_MATRIX=1 runs every case (CI: a covering subset)")
    keep = set(chosen)

    def skipped(c):
        if isinstance(c, ParameterSet):
            return pytest.param(*c.values, marks=[*c.marks, skip], id=c.id)
        return pytest.param(*((c,) if one_arg else c), marks=skip)
    return [c if i in keep else skipped(c) for i, c in enumerate(cases)]


def covered(configs: Sequence, pairs: Sequence[str] | None = None) -> list:
    """``configs`` (one mapping of keyword arguments each, e.g. a compile sweep's, or a ``pytest.param`` of one)
    for ``pytest.mark.parametrize``: CI runs the ``covering`` subset over their keys (``pairs`` as there; ``()``:
    each value once), FA4_EMU_FULL_MATRIX=1 every one."""
    features = [c.values[0] if isinstance(c, ParameterSet) else c for c in configs]
    return in_ci(configs, covering(features, pairs), one_arg=True)
