"""The compacted tile schedule of the sm_90a packed kernels (``kernels.attention.varlen_schedule``), host side:
the grid's bound covers every sequence's query tiles whatever the lengths, and is reached; ``varlen_geometry``
and its errors; ``launch_geometry`` refuses the compacted kernels; the kernel source states its grid. The
device side (the warp scan) runs in the emulator: test_attention_varlen_hopper.py, test_torch_varlen.py."""

from __future__ import annotations

import numpy as np
import pytest

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.errors import LaunchError
from fa4_mlir.kernels import attention
from fa4_mlir.kernels.attention import varlen_slots as slots


def test_the_slots_cover_every_sequences_tiles_and_the_bound_is_reached():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        b, bm = int(rng.integers(1, 300)), int(rng.choice([64, 128, 192]))
        lengths = rng.integers(0, 3 * bm, b) * (rng.random(b) < 0.8)  # a fifth of them empty
        tiles = sum(-(-int(n) // bm) for n in lengths)
        assert tiles <= slots(int(lengths.sum()), b, bm)
    assert slots(40, 40, 128) == 40  # 40 sequences of one row: 40 tiles, the bound exactly
    assert slots(5 * 128, 5, 128) == 9  # whole tiles: 5 tiles, the bound 4 more
    assert slots(0, 1, 128) == 1  # no rows: one slot (a grid of none cannot launch), which finds no tile


def test_varlen_geometry_is_the_slots_by_heads_on_sm90_and_launch_geometry_elsewhere():
    packed = AttentionConfig(target="sm_90a", varlen=True)
    assert attention.varlen_geometry(packed, 7, 16384, 3981, 16, 3981) == (128 + 6, 16, 1)
    wide = AttentionConfig(target="sm_90a", varlen=True, head_dim=64, num_q=3)  # CTAs of 192 rows
    assert attention.varlen_geometry(wide, 3, 385, 300, 2, 9) == (3 + 2, 2, 1)
    paged = AttentionConfig(target="sm_90a", varlen=True, page_size=64, group=4)
    assert attention.varlen_geometry(paged, 2, 129, 128, 8, 64) == (2, 8, 1)  # 2 x ceil(128 / 128) < 2 + 1
    equal = AttentionConfig(target="sm_90a", varlen=True, head_dim=64)  # 16 x 1024 rows: 128 tiles, not 128 + 15
    assert attention.varlen_geometry(equal, 16, 16384, 1024, 32, 1024) == (128, 32, 1)
    sm100 = AttentionConfig(target="sm_100a", varlen=True, group=4)  # 2 x 128 rows of 4 fused heads: 64 positions
    assert attention.varlen_geometry(sm100, 7, 16384, 3981, 16, 3981) == (256 + 6, 4, 1)
    assert attention.varlen_geometry(AttentionConfig(target="sm_100a", varlen=True, num_q=1), 2, 129, 128, 3, 1) == (
        2, 3, 1)
    for other in (AttentionConfig(target="sm_100a", page_size=64), AttentionConfig(target="sm_90a")):
        assert attention.varlen_geometry(other, 7, 16384, 3981, 16, 3981) == attention.launch_geometry(
            other, 7, 3981, 16, 3981)


@pytest.mark.parametrize("args, message", [
    ((0, 10, 10, 4, 10), r"attention: batch must be an int >= 1, got 0"),
    ((2, -1, 10, 4, 10), r"attention: total_q must be an int >= 0, got -1"),
    ((2, 10, 10, 0, 10), r"attention: heads must be an int >= 1, got 0"),
    ((2, 10.0, 10, 4, 10), r"attention: total_q must be an int >= 0, got 10.0"),
    ((2, 10, -1, 4, 10), r"attention: max_seqlen_q must be an int >= 0, got -1"),
    ((2, 10, 10, 70000, 10), r"attention: heads / fused group must be <= 65535 and tile slots \(varlen_slots, "
                             r"tiles of 128 rows\) x heads / fused group < 2\^31 for the packed kernel, got 70000 "
                             r"and 2 slots"),
    ((1, 2 ** 31 - 1, 2 ** 31 - 1, 128, 4096), r"got 128 and 16777216 slots"),
])
def test_varlen_geometry_errors(args, message):
    with pytest.raises(LaunchError, match=message):
        attention.varlen_geometry(AttentionConfig(target="sm_90a", varlen=True), *args)
    with pytest.raises(LaunchError, match=r"attention: heads \(6\) must be a multiple of group \(4\)"):
        attention.varlen_geometry(AttentionConfig(target="sm_90a", varlen=True, group=4), 1, 1, 1, 6, 1)


def test_varlen_geometry_on_sm100_counts_the_fused_head_groups():
    """sm_100a fuses a group's heads into a CTA's rows where the group divides them (group 4: y = heads / 4);
    a group of 3 is not fused (y = heads)."""
    config = AttentionConfig(target="sm_100a", varlen=True, group=3)
    assert config.fused_group == 1 and attention.varlen_geometry(config, 1, 1, 1, 6, 1) == (1, 6, 1)
    with pytest.raises(LaunchError, match=r"attention: heads \(6\) must be a multiple of group \(4\)"):
        attention.varlen_geometry(AttentionConfig(target="sm_100a", varlen=True, group=4), 1, 1, 1, 6, 1)


def test_launch_geometry_refuses_the_compacted_kernels():
    """Its (ceil(Sq / BM), H, B) grid would give the compacted kernel too few slots (and B copies of each)."""
    for config in (AttentionConfig(target="sm_90a", varlen=True), AttentionConfig(target="sm_90a", varlen=True,
                                                                                  page_size=64),
                   AttentionConfig(target="sm_100a", varlen=True)):
        with pytest.raises(LaunchError, match=r"attention: the packed kernel's grid counts the tiles of all "
                                              r"sequences, which launch_geometry cannot: call varlen_geometry\("
                                              r"config, batch, total_q, max_seqlen_q, heads, max_seqlen_k\)"):
            attention.launch_geometry(config, 2, 100, 4, 100)


@pytest.mark.parametrize("kwargs, rows", [(dict(), 128), (dict(head_dim=64, num_q=3), 192),
                                          (dict(page_size=64, causal=True), 128)])
def test_the_kernel_source_states_the_grid_the_host_computes(kwargs, rows):
    config = AttentionConfig(target="sm_90a", varlen=True, **kwargs)
    assert config.hopper.bm == rows
    source = attention.build(config)
    bound = f"min(ceil(total_q / {rows}) + B - 1, B * ceil(max_seqlen_q / {rows}))"
    assert source.grid == f"({bound}, H, 1) (varlen_geometry)"
    names = [p.name for p in source.params]
    assert names[names.index("total_q") + 1] == "batch"  # the scan's B: the grid no longer says it


@pytest.mark.parametrize("kwargs", [dict(target="sm_90a", causal=True), dict(target="sm_90a", page_size=64),
                                    dict(target="sm_100a", causal=True)])
def test_the_verifier_holds_the_schedule_as_one_value_for_every_role(monkeypatch, kwargs):
    """``protocol.uniformity``: each role's copy of the schedule (sm_90a: the load warp's and both consumer
    warpgroups'; sm_100a: the prologue's) gives results the same in every thread, as leaves that are equal
    across the copies (one value per quantity, which a scenario binds once), and the kernel verifies. The
    copy is the scan's ``scf.while``, or the ``scf.if`` that holds it beside the equal-length tile (head dims
    up to 128 on sm_90a, sm_100a): the verifier holds the whole branch as one region."""
    import importlib

    from fa4_mlir._mlir import ir
    from fa4_mlir.core.context import make_context
    from fa4_mlir.protocol import verify_kernel

    extract = importlib.import_module("fa4_mlir.protocol.extract")
    terms: dict[str, list] = {}
    real = extract.region_results

    def holds_scan(node) -> bool:
        return node.name == "scf.while" or any(holds_scan(op) for region in node.regions for block in region
                                               for op in block.ops)

    def spy(run, node):
        out = real(run, node)
        if node.name in ("scf.while", "scf.if") and holds_scan(node):
            terms.setdefault(run.name, []).append(tuple(v.term for v in out))
        return out

    monkeypatch.setattr(extract, "region_results", spy)
    config = AttentionConfig(varlen=True, **kwargs)
    with make_context():
        module = ir.Module.parse(attention.build(config).mlir)
        func = next(op for op in module.body.operations[0].regions[0].blocks[0].operations
                    if op.operation.name == "gpu.func")
        report = verify_kernel(func.operation, 90 if config.target == "sm_90a" else 100)
    assert report is not None and report.violations == []
    roles = {"sm_90a": {"consumer0", "consumer1", "load"}, "sm_100a": {"kernel"}}[config.target]
    assert set(terms) == roles
    runs = list(zip(*terms.values()))  # per scenario, each role's copy
    assert runs and all(len(set(copies)) == 1 for copies in runs)  # one set of leaves for every role
    assert all(term[0] == "fn" for copies in runs for term in copies[0])
