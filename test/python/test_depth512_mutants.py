"""Mutants of the depth-256/512 pair-CTA attention kernel (issue 23, Must-show 4; docs/depth512-mutants.md).

Each mutant removes (or weakens) one synchronisation of the pair protocol in the kernel's printed
fa4-stage MLIR (``attention.build(AttentionConfig(head_dim=256 or 512)).mlir``): a multicast
``tcgen05.commit``, a thread arrival on one of the leader's cta_group 2 barriers, the peer CTA's
half of a TMA load, a named barrier of the d512 thread-pair max/sum exchange, the softmax's wait for
the previous P@V, the final drains. Ops are picked by op name, the barrier, pipeline or tensor their
first operand names (``sym_name`` of its ``fa4.mbarrier_alloc`` / ``fa4.pipeline_create`` /
``fa4.smem_region``, or the kernel parameter) and the DSL file their location points into, so a
mutant follows the kernel when its lines move; each test prints the DSL line it removes.

Every mutant in ``MUTANTS`` is rejected by fa4-verify-protocol at compile: the test asserts the bug
class the first protocol error names. A few of them (``CROSS_CHECKED``, one per kind) also run,
compiled with ``verify_protocol=False``, in the PTX emulator on one pair of CTAs and two KV tiles,
which catches each (a Deadlock, a race report). ``EQUIVALENT`` lists the mutants that escape both,
each with why it changes nothing; the test pins that the verifier accepts them.
``python test/python/test_depth512_mutants.py [--emulate-all]`` prints the table of
docs/depth512-mutants.md.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import sys
import tempfile

import numpy as np
import pytest

from fa4_mlir.configs.attention import AttentionConfig

DEPTHS = (256, 512)


@functools.cache
def source(depth: int):
    from fa4_mlir.kernels import attention

    return attention.build(AttentionConfig(head_dim=depth))


# -- reading the printed kernel -----------------------------------------------------------------------
_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)$", re.M)
_OP = re.compile(r'"fa4\.(\w+)"\((%[\w#]+)?')


@functools.cache
def _locations(text: str) -> dict[str, str]:
    """#locN -> "file.py:line" of the DSL code that built the op (names and call sites resolved)."""
    raw = {m.group(1): m.group(2) for m in _LOC_DEF.finditer(text)}

    def resolve(body: str, depth: int = 0) -> str:
        m = re.match(r'"([^"]+)":(\d+):\d+', body)
        if m:
            return f"{os.path.basename(m.group(1))}:{m.group(2)}"
        ref = re.search(r"#loc\d*", body)
        if ref and ref.group(0) in raw and depth < 20:
            return resolve(raw[ref.group(0)], depth + 1)
        return "?"

    return {k: resolve(v) for k, v in raw.items()}


@functools.cache
def _names(text: str, depth: int) -> dict[str, str]:
    """SSA value -> what it names: a barrier array, pipeline or smem region (its sym_name), or a kernel
    parameter (its name)."""
    out = {m.group(1): m.group(2) for m in re.finditer(
        r'(%\w+) = "fa4\.(?:mbarrier_alloc|pipeline_create|smem_region)"\([^)]*\) \{[^}]*sym_name = "(\w+)"', text)}
    out.update({f"%arg{i}": p.name for i, p in enumerate(source(depth).params)})
    return out


def where(text: str, line: str) -> str:
    m = re.search(r"loc\((#loc\d*)\)\s*$", line)
    return _locations(text).get(m.group(1), "?") if m else "?"


def find(text: str, depth: int, op: str, operand: str | None = None, file: str | None = None) -> list[int]:
    """Indices of the lines holding ``"fa4.<op>"`` whose first operand names ``operand`` (an op without
    operands, a named barrier: whose ``sym_name`` is ``operand``) and whose location is in DSL file
    ``file`` (in text order)."""
    names = _names(text, depth)
    out = []
    for i, line in enumerate(text.split("\n")):
        m = _OP.search(line)
        if not m or m.group(1) != op:
            continue
        if operand is not None and names.get(m.group(2) or "") != operand \
                and f'sym_name = "{operand}"' not in line:
            continue
        if file is not None and not where(text, line).startswith(file + ":"):
            continue
        out.append(i)
    return out


def _one(text, depth, op, operand=None, file=None, nth=0) -> int:
    found = find(text, depth, op, operand, file)
    assert len(found) > nth, f"d{depth}: no {op}({operand}) #{nth} in {file}: the kernel changed, update the mutant"
    return found[nth]


def drop(op, operand=None, file=None, nth=0):
    """Mutator: the ``nth`` matching op removed."""
    def make(text, depth):
        i = _one(text, depth, op, operand, file, nth)
        lines = text.split("\n")
        return f"{op}({operand}) at {where(text, lines[i])} removed", "\n".join(lines[:i] + lines[i + 1:])
    return make


def only_in_leader(op, operand=None, file=None, nth=0):
    """Mutator: the ``nth`` matching op runs in the leader CTA only (``scf.if %leader``): the peer's
    half of it is gone."""
    def make(text, depth):
        i = _one(text, depth, op, operand, file, nth)
        lines = text.split("\n")
        indent = re.match(r"\s*", lines[i]).group(0)
        new = [f"{indent}scf.if %leader {{", "  " + lines[i], f"{indent}}}"]
        return f"{op}({operand}) at {where(text, lines[i])} in the leader only", "\n".join(lines[:i] + new + lines[i + 1:])
    return make


def multicast_to_self(op, operand, file=None, nth=0):
    """Mutator: the ``nth`` matching commit signals the issuing (leader) CTA only (multicast_mask 1)."""
    def make(text, depth):
        i = _one(text, depth, op, operand, file, nth)
        lines = text.split("\n")
        new = lines[i].replace("multicast_mask = 3 : i64", "multicast_mask = 1 : i64")
        assert new != lines[i]
        return (f"{op}({operand}) at {where(text, lines[i])} multicast to the leader only",
                "\n".join(lines[:i] + [new] + lines[i + 1:]))
    return make


def role_in_leader_only(role_file: str):
    """Mutator: the elected thread of a role (its ``fa4.elect_one`` in ``role_file``) works in the
    leader CTA only."""
    def make(text, depth):
        lines = text.split("\n")
        i = _one(text, depth, "elect_one", None, role_file)
        v = re.match(r"\s*(%\w+) = ", lines[i]).group(1)
        j = next(j for j in range(i + 1, len(lines)) if re.match(rf"\s*scf\.if {v} \{{", lines[j]))
        indent = re.match(r"\s*", lines[j]).group(0)
        new = [f"{indent}%mut_both = arith.andi {v}, %leader : i1", f"{indent}scf.if %mut_both {{"]
        return (f"{role_file} role's elected thread at {where(text, lines[i])} in the leader only",
                "\n".join(lines[:j] + new + lines[j + 1:]))
    return make


# -- the mutants ---------------------------------------------------------------------------------------
# (name, head dims, mutator, the bug classes the verifier's first protocol error may name)
MUTANTS = [
    # (a) multicast commits of the leader's MMA warp (tcgen05.commit ... multicast::cluster, mask 0b11)
    ("s-even-commit-dropped", DEPTHS, drop("mma_commit", "S_even_producer", "mma.py"), {"deadlock"}),
    ("s-even-commit-to-leader-only", DEPTHS, multicast_to_self("mma_commit", "S_even_producer", "mma.py"),
     {"under-arrival", "deadlock"}),
    ("kv-release-dropped", DEPTHS, drop("mma_commit", "kv_consumer", "mma.py"), {"deadlock"}),
    ("kv-release-to-leader-only", DEPTHS, multicast_to_self("mma_commit", "kv_consumer", "mma.py"),
     {"cta-pair", "tx-mismatch"}),
    ("o-lo-commit-dropped", DEPTHS, drop("mma_commit", "O_mma_lo", "mma.py"), {"deadlock"}),
    # (b) thread arrivals of the softmax and correction warpgroups on the leader's cta_group 2 barriers
    ("softmax-s-release-dropped", DEPTHS, drop("pipeline_consumer_release", "s_even", "softmax.py"), {"deadlock"}),
    ("softmax-s-release-in-leader-only", DEPTHS, only_in_leader("pipeline_consumer_release", "s_even", "softmax.py"),
     {"deadlock", "under-arrival"}),
    ("softmax-p-arrive-dropped", DEPTHS, drop("mbarrier_arrive", "PO_lo", "softmax.py"), {"under-arrival"}),
    ("softmax-p-arrive-in-leader-only", DEPTHS, only_in_leader("mbarrier_arrive", "PO_lo", "softmax.py"),
     {"under-arrival"}),
    ("correction-first-po-lo-arrive-dropped", DEPTHS, drop("pipeline_consumer_release", "o_lo", "correction.py"),
     {"under-arrival"}),
    ("correction-po-lo-arrive-dropped", DEPTHS, drop("pipeline_consumer_release", "o_lo", "correction.py", nth=1),
     {"under-arrival"}),
    ("correction-po-hi-arrive-dropped", (512,), drop("pipeline_consumer_release", "o_hi", "correction.py", nth=1),
     {"deadlock", "under-arrival"}),
    # (c) the peer CTA's half of the pair's TMA loads (its K rows, V columns, Q rows)
    ("peer-k-half-dropped", DEPTHS, only_in_leader("tma_load", "k", "load.py"), {"tx-mismatch"}),
    ("peer-v-half-dropped", DEPTHS, only_in_leader("tma_load", "v", "load.py"), {"tx-mismatch"}),
    ("peer-q-half-dropped", DEPTHS, only_in_leader("tma_load", "q", "load.py"), {"tx-mismatch"}),
    ("load-warp-in-leader-only", DEPTHS, role_in_leader_only("load.py"), {"tx-mismatch"}),
    # (d) the d512 thread-pair exchange of the row max and sum through correction_smem (named barriers
    # exchange_a / _c / _d; the max exchange of the first tile, the sum exchange of a loop tile)
    ("exchange-a-dropped", (512,), drop("named_barrier", "exchange_a", "softmax.py"), {"race"}),
    ("exchange-c-dropped", (512,), drop("named_barrier", "exchange_c", "softmax.py"), {"race"}),
    ("exchange-d-of-a-sum-dropped", (512,), drop("named_barrier", "exchange_d", "softmax.py", nth=3), {"race"}),
    # (e) the softmax's wait for P_{t-1} @ V before it overwrites P, the epilogue's wait for the last
    # P @ V, the load warp's drain of the KV ring
    ("softmax-pv-wait-dropped", DEPTHS, drop("mbarrier_try_wait_parity", None, "softmax.py"),
     {"parity", "over-arrival", "race"}),
    ("epilogue-o-lo-wait-dropped", DEPTHS, drop("mbarrier_try_wait_parity", "O_mma_lo", "softmax.py", nth=-1),
     {"cta-pair", "race", "tmem", "parity"}),
    ("load-drain-dropped", DEPTHS, drop("pipeline_producer_acquire", "kv", "load.py", nth=-1), {"cta-pair"}),
]
# Equivalent mutants: the verifier accepts them and the emulator computes the unmutated kernel's
# output bit for bit (docs/depth512-mutants.md, "Escapes"). (name, depths, mutator, why)
EQUIVALENT = [
    ("exchange-d-of-a-max-dropped", (512,), drop("named_barrier", "exchange_d", "softmax.py", nth=0),
     "the upper thread's read of the combined max precedes its own exchange_a of the sum exchange, which "
     "the lower thread passes before it writes the slot again"),
    ("exchange-d-of-the-first-sum-dropped", (512,), drop("named_barrier", "exchange_d", "softmax.py", nth=1),
     "tile 0 stores no factor: the slot's next write is the lower thread's in tile 1's max exchange, after exchange_a"),
    ("mma-s-drain-dropped", DEPTHS, drop("pipeline_producer_acquire", "s_even", "mma.py", nth=-1),
     "each peer softmax thread arrives on PO_lo after its last S release, and the leader's softmax waits for the "
     "last P @ V, which the MMA issues only after PO_lo completed: the leader outlives every peer arrival"),
]
CASES = [(name, depth) for name, depths, _, _ in MUTANTS for depth in depths]
EQUIVALENT_CASES = [(name, depth) for name, depths, _, _ in EQUIVALENT for depth in depths]
# Verifier-rejected mutants also run in the emulator (compiled with verify_protocol=False): one of each
# kind, and what catches it there.
CROSS_CHECKED = {("s-even-commit-to-leader-only", 256): "deadlock", ("softmax-p-arrive-dropped", 512): "deadlock",
                 ("peer-k-half-dropped", 256): "deadlock", ("exchange-c-dropped", 512): "race",
                 ("softmax-pv-wait-dropped", 512): "race"}


def mutant(name: str, depth: int) -> tuple[str, str, object]:
    """(what changed, mutated fa4 MLIR, expected classes or, for an equivalent mutant, why) of mutant
    ``name`` of the d``depth`` kernel."""
    _, _, make, expected = next(m for m in MUTANTS + EQUIVALENT if m[0] == name)
    text = source(depth).mlir
    what, new = make(text, depth)
    assert new != text
    return what, new, expected


def protocol_errors(text: str) -> tuple[list[str], str]:
    """(bug classes of the protocol errors, first error line) of compiling ``text`` to stage fa4;
    ([], "") when it compiles."""
    from fa4_mlir.core.compiler import CompileError, compile_kernel

    try:
        compile_kernel(text, stop="fa4")
    except CompileError as exc:
        message = "\n".join([str(exc), *exc.diagnostics])
        classes = re.findall(r"protocol error \[([a-z-]+)\]", message)
        first = next((line.strip() for line in message.split("\n") if "protocol error [" in line), str(exc))
        return classes, first
    return [], ""


def emulate(depth: int, text: str, seq_q: int, seq_k: int, seed: int = 0) -> tuple[str, str]:
    """Run the mutant (compiled without the protocol verifier) in the emulator on one pair of CTAs:
    ("deadlock" | "protocol" | "race" | "fault" | "wrong" | "ok", first message line)."""
    from fa4_mlir import emu, reference, runtime
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels.source import KernelSource
    from fa4_mlir.tools.fa4_emu import launch_attention

    src = source(depth)
    config = AttentionConfig(head_dim=depth)
    mutated = KernelSource(src.name, src.target, src.params, src.grid, src.config, mlir=text)
    with tempfile.TemporaryDirectory() as tmp:
        compile_kernel(mutated, stop="cubin", verify_protocol=False).write(tmp)
        kernel = runtime.load_artifact(tmp, device="emulator")
        rng = np.random.default_rng(1)
        q, k, v = (reference.random_bits(rng, (1, s, 1, depth), "bf16", 1.0) for s in (seq_q, seq_k, seq_k))
        o = np.full((1, seq_q, 1, depth), reference.POISON["bf16"], np.uint16)
        lse = np.full((1, 1, seq_q), np.nan, np.float32)
        scale = 1 / math.sqrt(depth)
        try:
            launch_attention(kernel, config, q, k, v, o, lse, scale, seed=seed)
        except emu.Deadlock as exc:
            return "deadlock", str(exc).split("\n")[0]
        except emu.ProtocolError as exc:
            kind = "race" if "race" in str(exc).lower() else "protocol"
            return kind, str(exc).split("\n")[0]
        except emu.EmulationError as exc:
            return "fault", f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    qf, kf, vf = (reference.to_f64(t, "bf16") for t in (q, k, v))
    ref, _ = reference.attention(qf, kf, vf, False, scale)
    check = reference.compare(o, ref, reference.attention_yardstick(qf, kf, vf, False, scale, "bf16"), "bf16")
    digest = hashlib.sha1(o.tobytes() + lse.tobytes()).hexdigest()[:10]
    return ("ok" if check.ok else "wrong"), f"{check.summary()}; O and LSE sha1 {digest}"


def test_the_unmutated_kernels_pass_the_verifier():
    for depth in DEPTHS:
        assert protocol_errors(source(depth).mlir) == ([], "")


def _shape(depth: int) -> tuple[int, int]:
    """One pair of CTAs (2 BM query rows), two KV tiles."""
    f = AttentionConfig(head_dim=depth).depth512
    return 2 * f.bm, 2 * f.bn


@pytest.mark.parametrize("name, depth", CASES, ids=[f"{n}-d{d}" for n, d in CASES])
def test_the_verifier_rejects_the_mutant(name, depth):
    what, text, classes = mutant(name, depth)
    found, first = protocol_errors(text)
    assert found, f"{name} d{depth}: {what}: the protocol verifier accepts it"
    assert found[0] in classes, f"{name} d{depth}: {what}: expected {sorted(classes)}, got {found}: {first}"


@pytest.mark.parametrize("name, depth", EQUIVALENT_CASES, ids=[f"{n}-d{d}" for n, d in EQUIVALENT_CASES])
def test_the_equivalent_mutants_pass_the_verifier(name, depth):
    # an equivalent mutant removes a synchronisation that another one already implies; if the verifier
    # starts rejecting it, the reason in EQUIVALENT is wrong (or the kernel changed): look
    what, text, _ = mutant(name, depth)
    assert protocol_errors(text) == ([], ""), f"{name} d{depth}: {what}"


@pytest.mark.parametrize("name, depth", sorted(CROSS_CHECKED), ids=[f"{n}-d{d}" for n, d in sorted(CROSS_CHECKED)])
def test_the_emulator_catches_the_mutant_too(name, depth):
    what, text, _ = mutant(name, depth)
    got, first = emulate(depth, text, *_shape(depth))
    assert got == CROSS_CHECKED[name, depth], f"{name} d{depth}: {what}: got {got}: {first}"


def table(emulate_all: bool = False) -> str:
    """The markdown table of docs/depth512-mutants.md (``emulate_all``: run every mutant in the emulator)."""
    rows = ["| mutant | d | what changed (DSL line) | verifier | emulator (1 pair, 2 KV tiles, seed 0) | first line |",
            "|---|---|---|---|---|---|"]
    for depth in DEPTHS:
        kind, first = emulate(depth, source(depth).mlir, *_shape(depth))
        rows.append(f"| (unmutated) | {depth} | | accepts | {kind} | {first} |")
    for name, depth in CASES + EQUIVALENT_CASES:
        what, text, _ = mutant(name, depth)
        found, first = protocol_errors(text)
        emu_kind = ""
        if emulate_all or not found or (name, depth) in CROSS_CHECKED:
            emu_kind, emu_first = emulate(depth, text, *_shape(depth))
            first = first or emu_first
        first = re.sub(r"/\S*/(\w+\.(?:py|mlir))", r"\1", first).replace("|", "\\|")
        verdict = f"[{found[0]}]" if found else "accepts"
        rows.append(f"| {name} | {depth} | {what} | {verdict} | {emu_kind} | {first[:160]} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(emulate_all="--emulate-all" in sys.argv))
    sys.exit(0)
