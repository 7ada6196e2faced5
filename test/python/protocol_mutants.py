"""The mutation corpus of fa4-verify-protocol: the shipped kernels and, per bug class, text mutants.

A mutant is a copy of a kernel's fa4 MLIR with one protocol bug planted (a count, a phase, a
missing or moved op). ``MUTATIONS`` maps each operator to the bug classes that diagnose it and a
function returning every mutant it makes of a source (none where it does not apply). Shared by the
tests and ``bench/verify_protocol.py``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_FILES = ("examples/producer_consumer.mlir", "examples/pair_mma.mlir",
                 "test/Conversion/ptx-sm100a.mlir", "test/Conversion/ptx-sm90a.mlir")


# The GEMM as shipped (both targets, both B layouts, the CTA pair), and small variants (2 stages,
# narrow tiles: every protocol the large ones have, with short unrolls) that the mutants start from.
GEMM_CONFIGS = {
    "sm_90a": dict(target="sm_90a"), "sm_90a-mn": dict(target="sm_90a", b_major="mn"),
    "sm_100a": dict(target="sm_100a"), "sm_100a-pair": dict(target="sm_100a", cta_group=2, tile_m=256),
    "sm_90a-small": dict(target="sm_90a", tile_n=64, epi_tile_n=32, num_stages=2, epi_load_stages=1),
    "sm_100a-small": dict(target="sm_100a", tile_n=64, epi_tile_n=32, num_stages=2),
    "sm_100a-pair-small": dict(target="sm_100a", tile_n=64, epi_tile_n=32, num_stages=2, cta_group=2, tile_m=256),
    "sm_90a-pingpong": dict(target="sm_90a", pingpong=True, tile_n=192, epi_tile_n=32),
    "sm_90a-pingpong-small": dict(target="sm_90a", pingpong=True, tile_n=64, epi_tile_n=32, num_stages=2,
                                  epi_load_stages=1),
    # 2x1 clusters multicasting B (a config option the op does not take): both CTAs' releases on each stage
    "sm_90a-cluster-pingpong-small": dict(target="sm_90a", pingpong=True, tile_n=64, epi_tile_n=32, num_stages=2,
                                          epi_load_stages=1, cluster_m=2),
}
MUTATED_GEMMS = ("gemm-sm_90a-small", "gemm-sm_100a-small", "gemm-sm_100a-pair-small", "gemm-sm_90a-pingpong-small")
# The attention kernel: fused and split rings, 1Q and 2Q, causal, GQA; mutants start from 1Q d128
# (a split K ring with two depth sub-stages, 3 stages: the shortest unrolls), a few per operator.
ATTENTION_CONFIGS = {
    "default": dict(), "causal-d64": dict(head_dim=64, causal=True), "1q": dict(num_q=1),
    "1q-d96-causal-gqa4": dict(num_q=1, head_dim=96, causal=True, group=4, dtype="fp16"),
    "gqa3-emu": dict(group=3, exp2_emulation=8),
    "sm90": dict(target="sm_90a"), "sm90-d64-causal-gqa4": dict(target="sm_90a", head_dim=64, causal=True, group=4),
    "sm90-d256-fp16": dict(target="sm_90a", head_dim=256, dtype="fp16"),
    "sm90-small": dict(target="sm_90a", head_dim=64, block_n=64),
}
# The MLA kernel (sm_90a): accepted, not mutated (its consumers are the sm_90a attention's, mutated
# there; test_mla_config.py has the mutant of its own rule, the shared K/V stage released after S = Q K').
MLA_CONFIGS = {"default": dict(), "causal-16heads-fp16": dict(causal=True, tile_heads=16, dtype="fp16"),
               "bn16-8stages": dict(block_n=16, stages=8), "split-kv": dict(split_kv=True), "prefill": dict(form="prefill"),
               "prefill-causal-gqa4-bn64": dict(form="prefill", causal=True, group=4, block_n=64)}
# sm_100a: 1Q; sm_90a: d64 with 64-key tiles (one wgmma chain per MMA, the shortest unrolls)
MUTATED_ATTENTION = ("attention-1q", "attention-sm90-small")
ATTENTION_MUTANTS_PER_OPERATOR = 3
# Equivalent mutants of the attention kernel, left out: the load warp's acquires in its first
# iteration (the first pass over fresh rings, phase 1: they pass at once, and the reference omits
# them) and a correction factor
# released before it is read (S_i's consumer barrier 0, which the correction warpgroup signals after
# the read, already orders the read before the softmax's next factor).
# On sm_90a, consumer warpgroup 1's K and V waits: it issues its MMAs only after warpgroup 0 handed
# over the turn (named barrier sched1), which warpgroup 0 does after its own wait on the same stage.
ATTENTION_EQUIVALENT = (re.compile(r'producer_acquire"\(%\w+, %ld(_\w*i|0\w*)#0'), re.compile(r'consumer_release"\(%cq\d'),
                        re.compile(r'consumer_wait"\(%[kv]p, %c1_'))
# A release missing in the MMA or correction warps stops the pipeline; the verifier reports where it
# leaves the other roles (the final O waits: parity; TMEM never freed: tmem) next to the deadlock.
# On sm_90a the two consumer warpgroups take turns: warpgroup 1 starting a ring from the wrong phase
# waits, after warpgroup 0 consumed the phase it needed, for one that never comes (deadlock), and
# a renamed turn barrier leaves both waiting for their turn (deadlock).
ATTENTION_EXTRA_CLASSES = {"missing-release": frozenset({"parity", "tmem"}), "consumer-phase": frozenset({"deadlock"}),
                           "named-barrier-renamed": frozenset({"deadlock"})}


@functools.lru_cache(maxsize=1)
def shipped_kernels() -> dict[str, str]:
    """name -> fa4 MLIR of every kernel the project ships: each built-in kernel in several
    configurations, the examples and the end-to-end conversion kernels. Built once per process (each
    acceptance test reads one of them; building all took 4-5 s, most of each test's time)."""
    from fa4_mlir.kernels import KERNELS

    out = {}
    cls, build = KERNELS["copy-pipeline"]
    for target in ("sm_100a", "sm_90a"):
        for consumers in (1, 2, 3):
            for stages in (1, 2, 4):
                extra = {"tile_rows": 96, "consumer_registers": 152} if consumers == 3 else {}
                config = cls(target=target, consumers=consumers, stages=stages, **extra)
                out[f"copy-pipeline-{target}-c{consumers}-s{stages}"] = build(config).mlir
    cls, build = KERNELS["gemm"]
    for name, extra in GEMM_CONFIGS.items():
        out[f"gemm-{name}"] = build(cls(**extra)).mlir
    cls, build = KERNELS["attention"]
    for name, extra in ATTENTION_CONFIGS.items():
        out[f"attention-{name}"] = build(cls(**extra)).mlir
    cls, build = KERNELS["mla-attention"]
    for name, extra in MLA_CONFIGS.items():
        out[f"mla-attention-{name}"] = build(cls(**extra)).mlir
    cls, build = KERNELS["attention-combine"]  # no barriers: accepted as it is, no mutants (see corpus)
    for target, head_dim in (("sm_100a", 128), ("sm_90a", 512), ("sm_90a", 96)):
        out[f"attention-combine-{target}-d{head_dim}"] = build(cls(target=target, head_dim=head_dim)).mlir
    assert set(KERNELS) == {"attention", "attention-combine", "copy-pipeline", "gemm", "mla-attention"}, \
        "add the new built-in kernel to the mutation corpus"
    for path in SHIPPED_FILES:
        out[path] = (ROOT / path).read_text()
    return out


Mutant = tuple[str, str]  # (what changed, mutated source)


def _each(source: str, pattern: str, replace: Callable[[re.Match], str]) -> Iterator[Mutant]:
    """One mutant per match of ``pattern``, that match replaced."""
    for m in re.finditer(pattern, source):
        new = replace(m)
        if new != m.group(0):
            yield f"{m.group(0).strip()} -> {new.strip()}", source[:m.start()] + new + source[m.end():]


def _lines(source: str, needle: str) -> list[int]:
    return [i for i, line in enumerate(source.split("\n")) if needle in line]


def _drop_line(source: str, needle: str) -> Iterator[Mutant]:
    lines = source.split("\n")
    for i in _lines(source, needle):
        yield f"line {i + 1} removed: {lines[i].strip()[:60]}", "\n".join(lines[:i] + lines[i + 1:])


# Kernels come as hand-written MLIR text (the examples, the conversion kernels) or as the MLIR printer's
# generic form (kernels built with fa4_mlir.dsl: attributes sorted, integers typed `: i64`, values
# named by their NameLoc); the patterns below accept both.
_INT = r"(\d+)(?: : i64)?"
_KIND = r'(?:kind = "\w+", )?'  # a named barrier's kind, printed first in the generic form


def _attrs(src: str, value: str, op: str) -> re.Match | None:
    """The attribute dictionary of the ``op`` that defines ``value`` (group 1: its inside)."""
    return re.search(rf'(?<![\w#]){re.escape(value)} = "fa4\.{op}"\(\) \{{([^}}]*)\}}', src)


def arrive_count_up(src):
    yield from _each(src, r"arrive_count = (\d+)", lambda m: f"arrive_count = {int(m.group(1)) + 1}")


def arrive_count_down(src):
    for pattern in (r"arrive_count = (\d+)(?=, arrival = \"threads\")",
                    r"(?<=arrival = \"threads\", )arrive_count = (\d+)"):
        yield from _each(src, pattern,
                         lambda m: f"arrive_count = {int(m.group(1)) // 2}" if int(m.group(1)) >= 2 else m.group(0))


def tx_bytes(src):
    yield from _each(src, r"tx_bytes = (\d+)", lambda m: f"tx_bytes = {int(m.group(1)) // 2}")
    yield from _each(src, r"tx_bytes = (\d+)", lambda m: f"tx_bytes = {int(m.group(1)) * 2}")


def consumer_starts_at_phase_one(src):
    yield from _each(src, r'side = "consumer"', lambda m: 'side = "producer"')


def producer_starts_at_phase_zero(src):
    yield from _each(src, r'side = "producer"', lambda m: 'side = "consumer"')


def missing_release(src):
    yield from _drop_line(src, '"fa4.pipeline_consumer_release"')


def missing_acquire(src):
    yield from _drop_line(src, '"fa4.pipeline_producer_acquire"')


def missing_consumer_wait(src):
    yield from _drop_line(src, '"fa4.pipeline_consumer_wait"')


def release_before_read(src):
    """The stage is released right after the wait, before the consumer reads it."""
    lines = src.split("\n")
    for i in _lines(src, '"fa4.pipeline_consumer_release"'):
        wait = max((j for j in _lines(src, '"fa4.pipeline_consumer_wait"') if j < i), default=None)
        if wait is None or wait == i - 1:
            continue
        moved = lines[:wait + 1] + [lines[i]] + lines[wait + 1:i] + lines[i + 1:]
        if any("llvm.load" in line for line in lines[wait + 1:i]):
            yield f"release on line {i + 1} moved after the wait on line {wait + 1}", "\n".join(moved)


def one_warp_releases(src):
    """Only thread 0 of the first consumer warpgroup releases (the count adjusted): its partners'
    reads are no longer ordered before the producer's next load."""
    m = (re.search(r'(arrive_count = )(\d+)(, arrival = "threads")', src)
         or re.search(r'(arrival = "threads", arrive_count = )(\d+)()', src))
    lines = src.split("\n")
    releases = _lines(src, '"fa4.pipeline_consumer_release"')
    if not m or int(m.group(2)) < 128 or not releases or not re.search(r"%lead0\b", src):
        return
    i = releases[0]
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    guarded = [f"{indent}scf.if %lead0 {{", "  " + lines[i], f"{indent}}}"]
    text = "\n".join(lines[:i] + guarded + lines[i + 1:])
    count = int(m.group(2)) - 127
    yield "consumer0's release by thread 0 only", text.replace(m.group(0), f"{m.group(1)}{count}{m.group(3)}", 1)


def named_barrier_renamed(src):
    names = sorted(set(re.findall(r'"fa4.named_barrier"\(\) \{' + _KIND + r'sym_name = "(\w+)"', src)))
    for a, b in zip(names, names[1:]):
        yield from _each(src, rf'"fa4.named_barrier"\(\) \{{{_KIND}sym_name = "{b}"',
                         lambda m: m.group(0).replace(b, a))


def named_barrier_count(src):
    yield from _each(src, r'("fa4.named_barrier"\(\) \{' + _KIND + r'sym_name = "\w+", threads = )(\d+)',
                     lambda m: f"{m.group(1)}{int(m.group(2)) + 32}")


def missing_store_wait(src):
    yield from _drop_line(src, '"fa4.tma_store_wait"')


def missing_dealloc(src):
    yield from _drop_line(src, '"fa4.tmem_dealloc"')


def missing_mma_wait(src):
    """The epilogue reads the accumulator without waiting for the MMA's commit."""
    for i in _lines(src, '"fa4.mbarrier_try_wait_parity"(%done'):
        lines = src.split("\n")
        yield f"line {i + 1} removed: wait for the MMA commit", "\n".join(lines[:i] + lines[i + 1:])


def pair_without_leader_guard(src):
    yield from _each(src, r"%leader = arith.cmpi eq, %rank, %c0 : i32",
                     lambda m: "%leader = arith.cmpi sge, %rank, %c0 : i32")


def pair_barrier_not_shared(src):
    """The pair's load barrier becomes per-CTA: each CTA's expect_tx covers only its own bytes."""
    yield from _each(src, r'(sym_name = "loaded", [^}]*), cta_group = 2', lambda m: m.group(1))


_FOR = re.compile(r"^(\s*)(.*scf\.for %\w+ = (%[\w#]+) to )(%[\w#]+)( step .*: (i32|index) \{)$")


def _constants(src: str) -> set[str]:
    return set(re.findall(r"(%[\w#]+) = arith\.constant", src))


def _loops(src: str) -> Iterator[tuple[int, re.Match]]:
    """Every scf.for whose upper bound is known only at run time: (line index, match)."""
    constants = _constants(src)
    for i, line in enumerate(src.split("\n")):
        m = _FOR.match(line)
        if m and m.group(4) not in constants:
            yield i, m


def loop_bound_minus_one(src):
    """One role's loop runs n - 1 times against its partners' n (issue 19, blind spot a)."""
    lines = src.split("\n")
    for i, m in _loops(src):
        indent, ty = m.group(1), m.group(6)
        new = [f"{indent}%mut_one = arith.constant 1 : {ty}", f"{indent}%mut_ub = arith.subi {m.group(4)}, %mut_one : {ty}",
               f"{indent}{m.group(2)}%mut_ub{m.group(5)}"]
        yield f"line {i + 1}: loop bound {m.group(4)} - 1", "\n".join(lines[:i] + new + lines[i + 1:])


def loop_over_other_argument(src):
    """One role's loop runs to another integer kernel argument than its partners' (blind spot a)."""
    head = re.search(r"(?:gpu\.func|func\.func) @\w+\((.*?)\)(?: kernel| attributes| \{|$)", src, re.M)
    if not head:
        return
    args = re.findall(r"(%\w+): i32", head.group(1))
    lines = src.split("\n")
    for i, m in _loops(src):
        other = next((a for a in args if a != m.group(4) and a != m.group(3)), None)
        if other is not None and m.group(6) == "i32":
            new = f"{m.group(1)}{m.group(2)}{other}{m.group(5)}"
            yield f"line {i + 1}: loop bound {m.group(4)} -> {other}", "\n".join(lines[:i] + [new] + lines[i + 1:])


def tmem_alloc_in_every_warp(src):
    """The warp test around fa4.tmem_alloc removed: every warp of the prologue allocates (blind spot b)."""
    lines = src.split("\n")
    for i in _lines(src, '"fa4.tmem_alloc"'):
        m = re.match(r"(\s*)scf\.if (%\w+) \{", lines[i - 1])
        if m:
            new = [f"{m.group(1)}%mut_all = arith.constant true", f"{m.group(1)}scf.if %mut_all {{"]
            yield f"line {i}: fa4.tmem_alloc unguarded", "\n".join(lines[:i - 1] + new + lines[i:])


def tmem_dealloc_by_other_warp(src):
    """fa4.tmem_dealloc moved to the next warp of its role (blind spot b)."""
    lines = src.split("\n")
    for i in _lines(src, '"fa4.tmem_dealloc"'):
        m = re.match(r"(\s*)scf\.if (%\w+) \{", lines[i - 1])
        if not m:
            continue
        cond = m.group(2)
        for j in range(i - 2, -1, -1):
            d = re.match(rf"(\s*){cond} = arith\.cmpi eq, (%\w+), (%\w+) : i32", lines[j])
            if d:
                new = [f"{d.group(1)}%mut_next = arith.constant 1 : i32",
                       f"{d.group(1)}%mut_sel = arith.addi {d.group(3)}, %mut_next : i32",
                       f"{d.group(1)}{cond} = arith.cmpi eq, {d.group(2)}, %mut_sel : i32"]
                yield f"line {i + 1}: fa4.tmem_dealloc by another warp", "\n".join(lines[:j] + new + lines[j + 1:])
                break


def tmem_alloc_too_small(src):
    """fa4.tmem_alloc asks for 32 columns, fewer than the regions span (blind spot b)."""
    spans = [int(m.group(1) or m.group(2)) for m in re.finditer(
        r'"fa4\.tmem_region"\(\) \{(?:sym_name = "\w+", columns = (\d+)|columns = ' + _INT + r', sym_name = "\w+")', src)]
    if sum(spans) > 32:
        yield from _each(src, r'"fa4\.tmem_alloc"\(%\w+\)( \{cta_group = \d(?: : i64)?\})?',
                         lambda m: (m.group(0).replace("{", "{columns = 32, ") if m.group(1)
                                    else m.group(0) + " {columns = 32}"))


def stage_count_up(src):
    """A TMA ring walks one stage more than its shared-memory region holds: num_stages and its
    barrier arrays grow, the region does not (blind spot c). Rings that only signal (no TMA, no
    stage buffers) are left out: more stages there is more slack, not a bug."""
    for m in re.finditer(r'"fa4\.pipeline_create"\((%\w+), (%\w+)\) \{[^}]*\bnum_stages = (\d+)[^}]*\}', src):
        full, empty, n = m.group(1), m.group(2), int(m.group(3))
        alloc = _attrs(src, full, "mbarrier_alloc")
        if not alloc or 'arrival = "tx"' not in alloc.group(1) or re.search(r"_sub_stages = [2-9]", m.group(0)):
            continue
        text = src[:m.start()] + m.group(0).replace(f"num_stages = {n}", f"num_stages = {n + 1}") + src[m.end():]
        ok = True
        for bars in (full, empty):
            a = _attrs(text, bars, "mbarrier_alloc")
            if not a or not re.search(rf"\bnum_barriers = {n}\b", a.group(0)):
                ok = False
                break
            text = text[:a.start()] + re.sub(rf"\bnum_barriers = {n}\b", f"num_barriers = {n + 1}", a.group(0)) + \
                text[a.end():]
        if ok:
            yield f"{m.group(0)} -> {n + 1} stages", text


def stage_bytes_up(src):
    """A ring's stages grow to twice their bytes while the ring does not (blind spot c)."""
    for m in re.finditer(r'"fa4\.smem_stage"\((%\w+), %\w+\) \{bytes = ' + _INT + r'\}', src):
        size = int(m.group(2))
        region = _attrs(src, m.group(1), "smem_region")
        ring = region and re.search(r"\bbytes = (\d+)", region.group(1))
        if ring and int(ring.group(1)) % (2 * size) == 0 and int(ring.group(1)) > 2 * size:
            yield (f"{m.group(0)} -> {2 * size} bytes",
                   src[:m.start()] + m.group(0).replace(f"bytes = {size}", f"bytes = {2 * size}") + src[m.end():])


def missing_proxy_fence(src):
    """The fence.proxy.async between generic smem stores and a TMA store removed (blind spot f)."""
    yield from _drop_line(src, "nvvm.fence.proxy")


def loop_bound_unclamped(src):
    """One role's loop runs to one operand of the ``min`` its partners' loops run to: a persistent
    split ``min(first + per, total)`` that a trailing CTA overruns (issue 19, blind spot d)."""
    mins = {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(r"(%\w+) = arith\.min[su]i (%\w+), (%\w+)", src)}
    constants = _constants(src)
    lines = src.split("\n")
    for i, m in _loops(src):
        for operand in mins.get(m.group(4), ()):
            if operand not in constants:
                new = f"{m.group(1)}{m.group(2)}{operand}{m.group(5)}"
                yield f"line {i + 1}: loop bound {m.group(4)} -> {operand}", "\n".join(lines[:i] + [new] + lines[i + 1:])


def missing_named_barrier(src):
    """A named-barrier sync removed: the accesses it ordered, within a role or across, race (e)."""
    lines = src.split("\n")
    for i in _lines(src, '"fa4.named_barrier"'):
        if 'kind = "arrive"' not in lines[i]:
            yield f"line {i + 1} removed: {lines[i].strip()[:70]}", "\n".join(lines[:i] + lines[i + 1:])


MUTATIONS: dict[str, tuple[frozenset[str], Callable[[str], Iterator[Mutant]]]] = {
    "arrive-count-up": (frozenset({"under-arrival"}), arrive_count_up),
    "arrive-count-down": (frozenset({"over-arrival"}), arrive_count_down),
    "tx-bytes": (frozenset({"tx-mismatch"}), tx_bytes),
    "consumer-phase": (frozenset({"parity"}), consumer_starts_at_phase_one),
    # a producer that acquires after its commit (the attention MMA's S rings: P written) skips the
    # wait instead of blocking: race
    "producer-phase": (frozenset({"deadlock", "race"}), producer_starts_at_phase_zero),
    "missing-release": (frozenset({"deadlock", "under-arrival"}), missing_release),
    # an acquire also guards signal-only rings (the GEMM's load order: over-arrival, parity) and a
    # pair's drain (the peer exits while commits still reach it: cta-pair)
    "missing-acquire": (frozenset({"race", "over-arrival", "parity", "cta-pair"}), missing_acquire),
    "missing-consumer-wait": (frozenset({"race", "over-arrival", "parity"}), missing_consumer_wait),
    # a release duplicated on both sides of a branch (the GEMM's C / no-C epilogue), moved on one
    # side, also arrives twice in one phase there (over-arrival)
    "release-before-read": (frozenset({"race", "over-arrival"}), release_before_read),
    "one-warp-releases": (frozenset({"race"}), one_warp_releases),
    "named-barrier-renamed": (frozenset({"named-barrier"}), named_barrier_renamed),
    "named-barrier-count": (frozenset({"named-barrier"}), named_barrier_count),
    "missing-store-wait": (frozenset({"race"}), missing_store_wait),
    "missing-dealloc": (frozenset({"tmem"}), missing_dealloc),
    "missing-mma-wait": (frozenset({"race", "tmem"}), missing_mma_wait),
    "pair-without-leader-guard": (frozenset({"cta-pair"}), pair_without_leader_guard),
    "pair-barrier-not-shared": (frozenset({"race"}), pair_barrier_not_shared),
    # issue 19: a role whose loop runs once less strands its partner (deadlock, a turn-taking named
    # barrier left half met), leaves a load in flight or a phase half arrived at exit (race,
    # under-arrival), or a ring in a wrong phase (parity); TMEM then outlives it
    "loop-bound-minus-one": (frozenset({"deadlock", "race", "parity", "under-arrival", "named-barrier", "tmem"}),
                             loop_bound_minus_one),
    "loop-over-other-argument": (frozenset({"deadlock", "race", "parity", "under-arrival", "over-arrival",
                                            "named-barrier", "tmem"}), loop_over_other_argument),
    # a trailing CTA whose clamped range is short or empty: the unclamped role runs on (deadlock,
    # a load in flight at exit: race, a phase half arrived: under-arrival)
    "loop-bound-unclamped": (frozenset({"deadlock", "race", "under-arrival", "over-arrival", "parity"}),
                             loop_bound_unclamped),
    "tmem-alloc-in-every-warp": (frozenset({"tmem"}), tmem_alloc_in_every_warp),
    "tmem-dealloc-by-other-warp": (frozenset({"tmem"}), tmem_dealloc_by_other_warp),
    "tmem-alloc-too-small": (frozenset({"tmem"}), tmem_alloc_too_small),
    # a stage past its ring (bounds); stages grown into their neighbours race first; a pair's drain
    # that counts the old stages lets the peer exit while commits still reach it (cta-pair)
    "stage-count-up": (frozenset({"bounds", "cta-pair"}), stage_count_up),
    "stage-bytes-up": (frozenset({"bounds", "race"}), stage_bytes_up),
    "missing-proxy-fence": (frozenset({"fence"}), missing_proxy_fence),
    # a barrier that ordered accesses (race; TMEM read while freed: tmem) or that other roles still
    # meet at (named-barrier)
    "missing-named-barrier": (frozenset({"race", "named-barrier", "fence", "tmem"}), missing_named_barrier),
}


# Equivalent mutants of other kernels (kernel prefix, operator, what changed), left out:
# - the GEMM's named barrier before its TMEM deallocation: the epilogue's last in-loop barrier
#   (before the last TMA store) already orders every warp's TMEM reads before warp 0 frees it;
# - the 1Q attention MMA's first K view grown to two sub-stages: it waited for both sub-stages
#   before its first MMA, so the larger view reads nothing unordered;
# - the pingpong GEMM's two epilogue barriers made one: the epilogue turn already orders every use of
#   one warpgroup's before every use of the other's, so one id serves both.
def _before_dealloc(source: str, what: str) -> bool:
    m = re.match(r"line (\d+) removed", what)
    return bool(m) and '"fa4.tmem_dealloc"' in "\n".join(source.split("\n")[int(m.group(1)):int(m.group(1)) + 6])


EQUIVALENT = (("gemm-sm_100a", "missing-named-barrier", _before_dealloc),
              ("gemm-sm_90a-pingpong", "named-barrier-renamed", lambda source, what: "epilogue" in what),
              ("attention-1q", "stage-bytes-up", lambda source, what: "%mm0ka_i0" in what))


def _equivalent(source: str, what: str) -> bool:
    """Whether the attention mutant ``what`` changes a line ATTENTION_EQUIVALENT names."""
    m = re.search(r"line (\d+)", what)
    line = source.split("\n")[int(m.group(1)) - 1] if m else what
    return any(p.search(line) for p in ATTENTION_EQUIVALENT)


def corpus() -> Iterator[tuple[str, str, str, frozenset[str], str]]:
    """(kernel, operator, what changed, expected classes, mutant source) for every mutant."""
    for kernel, source in shipped_kernels().items():
        if kernel.startswith("gemm-") and kernel not in MUTATED_GEMMS:
            continue  # the shipped GEMMs are accepted; their small variants carry the mutants
        if kernel.startswith(("attention-", "mla-attention-")) and kernel not in MUTATED_ATTENTION:
            continue
        for op, (classes, make) in MUTATIONS.items():
            mutants = list(make(source))
            mutants = [(what, text) for what, text in mutants
                       if not any(kernel.startswith(k) and op == o and same(source, what) for k, o, same in EQUIVALENT)]
            if kernel in MUTATED_ATTENTION:
                mutants = [(what, text) for what, text in mutants if not _equivalent(source, what)]
                if len(mutants) > ATTENTION_MUTANTS_PER_OPERATOR:
                    step = len(mutants) / ATTENTION_MUTANTS_PER_OPERATOR  # spread over the kernel's roles
                    mutants = [mutants[int(i * step)] for i in range(ATTENTION_MUTANTS_PER_OPERATOR)]
                classes = classes | ATTENTION_EXTRA_CLASSES.get(op, frozenset())
            for what, text in mutants:
                yield kernel, op, what, classes, text
