"""fa4-verify-protocol on the mutation corpus: every shipped kernel accepted, every mutant rejected
with a diagnosis of its bug class that names the barrier or memory and the op locations."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import ci_sample
from protocol_mutants import MUTATIONS, corpus, shipped_kernels


def _verify(ctx, text: str):
    from fa4_mlir._mlir import ir
    from fa4_mlir.core.verify import verify_fa4
    from fa4_mlir.passes.verify_protocol import VerifyProtocolPass

    module = ir.Module.parse(text)
    structural = verify_fa4(module.operation)
    return structural, VerifyProtocolPass(witness=0, max_errors=20).run(module.operation)


@pytest.mark.parametrize("name", sorted(shipped_kernels()))
def test_every_shipped_kernel_is_accepted(ctx, name):
    structural, errors = _verify(ctx, shipped_kernels()[name])
    assert not structural and not errors, "\n".join(str(d) for d in structural + errors)


CORPUS = list(corpus())


def test_the_corpus_plants_every_bug_class_in_the_shipped_kernels():
    per_operator = Counter(op for _, op, _, _, _ in CORPUS)
    assert set(per_operator) == set(MUTATIONS), set(MUTATIONS) - set(per_operator)
    planted = {c for classes, _ in MUTATIONS.values() for c in classes}
    assert {"deadlock", "under-arrival", "over-arrival", "tx-mismatch", "parity", "named-barrier", "race",
            "tmem", "cta-pair", "bounds", "fence"} <= planted
    assert len(CORPUS) >= 300, len(CORPUS)


# CI: the first mutant of each (kernel, mutation operator) pair, so every operator meets every kernel it applies to;
# FA4_EMU_FULL_MATRIX=1 runs the whole corpus
FIRSTS = sorted({(k, op): i for i, (k, op, _, _, _) in reversed(list(enumerate(CORPUS)))}.values())


@pytest.mark.parametrize("kernel,op,what,classes,text", ci_sample.in_ci(CORPUS, FIRSTS),
                         ids=[f"{k}:{op}:{i}" for i, (k, op, _, _, _) in enumerate(CORPUS)])
def test_every_mutant_is_rejected_with_its_bug_class(ctx, kernel, op, what, classes, text):
    structural, errors = _verify(ctx, text)
    assert not structural, f"{what}: not a protocol mutant: {structural[0]}"
    found = [d for d in errors if re.search(r"protocol error \[([a-z-]+)\]", d.message)
             and re.search(r"protocol error \[([a-z-]+)\]", d.message).group(1) in classes]
    assert found, f"{kernel}: {what}: expected {sorted(classes)}, got:\n" + "\n".join(str(d) for d in errors)
    d = found[0]
    assert d.file and d.line and d.col, f"{what}: the error is not located at an op: {d}"
    names = set(re.findall(r'sym_name = "(\w+)"', text))
    assert any(re.search(rf"\b{re.escape(n)}\b", d.message) for n in names), f"{what}: names no barrier/memory: {d}"


@pytest.mark.parametrize("mask, classes", [("", {"under-arrival", "deadlock"}), ("multicast_mask = 1 : i64, ",
                                                                                 {"under-arrival", "deadlock"})])
def test_the_cluster_gemm_needs_the_releases_of_both_ctas(ctx, mask, classes):
    """The 2x1-cluster GEMM (B multicast) counts each stage's releases from both CTAs: with the arrivals sent to
    this CTA's barrier only (no mask, or a mask of this CTA alone) no stage is released again."""
    text = shipped_kernels()["gemm-sm_90a-cluster-pingpong-small"]
    mutant, n = re.subn(r'(arrive_count = 8 : i64, )multicast_mask = 3 : i64, (num_barriers = 2 : i64, '
                        r'sym_name = "ab_consumer")', rf"\g<1>{mask}\g<2>", text)
    assert n == 1
    _, errors = _verify(ctx, mutant)
    found = {m.group(1) for d in errors for m in [re.search(r"protocol error \[([a-z-]+)\]", d.message)] if m}
    assert found & classes and any("ab_consumer" in d.message for d in errors), "\n".join(map(str, errors))
