"""Kernels ported to fa4_mlir.dsl (issue 22) ship the same PTX as their MLIR-text versions did: each
shipped configuration's PTX sha256 and launch facts against the baseline written before the port
(test/python/data/ptx_fingerprints.json, bench/ptx_fingerprint.py). Every kernel is ported: all 262
configurations are checked with FA4_FULL_FINGERPRINTS=1 (added after the port, against their first PTX:
the 19 of sm_90a head dim 512 and the 32 of head dims 96 and 192; the sm_90a head dims 256 and 512 again
for the lazy rescale; all 123 sm_90a attention configurations again for the GQA group as a launch
argument, ``bench/ptx_fingerprint.py --update``); by default every sixth, so that CI stays inside its
time (the kernels' own tests build every configuration anyway). The eight sm_90a configurations of three
consumer warpgroups (num_q 3), the two of 96 keys at head dim 64, the two persistent ones and the two sm_100a
ones over gathered pages (``page_gather``) were added with their first PTX, and so were the eight sm_90a
GEMMs with pingpong warpgroups (replacing four cooperative bench variants; the manifest's config names
``pingpong`` in every GEMM's, the PTX of the others unchanged). The seven sm_90a GEMMs in 2x1 clusters
(``cluster_m``) were added with their first PTX, replacing four pingpong bench variants; every GEMM's
manifest config names ``cluster_m``, and the five sm_100a CTA-pair GEMMs were fingerprinted again for
their remote arrivals' CTA-scope release and the MMA warp's wait for the last accumulator releases. The 47
causal sm_90a one-tile attention configurations of head dim 96 and up were fingerprinted again for their tiles
in sections (``AttentionConfig.causal_order``, ``hopper.section_order``); every other PTX is unchanged. The
five sm_90a causal walks of one K/V loop (``AttentionConfig.single_kv_loop``, the op's) and two of more K/V
stages (``kv_stages``) were added with their first PTX."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import ptx_fingerprint  # noqa: E402

PORTED = ("copy-pipeline", "gemm", "attention")
BASELINE = json.loads((ROOT / "test" / "python" / "data" / "ptx_fingerprints.json").read_text())
ALL_CASES = [(kind, kw) for kind, kw in ptx_fingerprint.configs() if kind in PORTED]
CASES = ALL_CASES if os.environ.get("FA4_FULL_FINGERPRINTS", "0") == "1" else ALL_CASES[::6]


@pytest.mark.parametrize("kind, kw", CASES, ids=[ptx_fingerprint.key(k, kw) for k, kw in CASES])
def test_the_ported_kernel_ships_the_same_ptx(kind, kw):
    name = ptx_fingerprint.key(kind, kw)
    assert ptx_fingerprint.fingerprint(kind, kw) == BASELINE[name], name


def test_the_baseline_covers_every_shipped_configuration():
    assert len(BASELINE) == len(ptx_fingerprint.configs()) >= 190
    assert len(ALL_CASES) == len(BASELINE)  # copy-pipeline 38, gemm 30, attention 59 (sm_100a) + 144 (sm_90a)
