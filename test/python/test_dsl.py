"""fa4_mlir.dsl, the kernel-authoring API (issue 22): IR built through the bindings with the author's
source locations, loop- and branch-carried state, the parameter ABI declared once, and its errors."""

from __future__ import annotations

import re
import textwrap

import pytest

from fa4_mlir import dsl
from fa4_mlir._mlir import ir
from fa4_mlir.core.compiler import CompileError, compile_kernel


def _ring_kernel(full_count: int = 4, target: str = "sm_100a") -> dsl.Kernel:
    """A producer warp filling a 4-stage ring that a consumer warpgroup drains, counting the tiles it saw
    in a Var carried through the loop and a branch; the count is stored to out[0] by thread 0."""
    k = dsl.Kernel("ring", target, num_warps=8)
    src = k.tensormap("src", "bf16", box=(64, 32), doc="in[M, 64]")
    out = k.ptr("out", doc="out[1] i32")
    k.i32("tiles", doc="tiles to stream")
    with k.body() as arg:
        ring = k.smem_region("ring", bytes=4 * 4096, align=1024)
        full = k.mbarriers("full", full_count, arrive_count=1, arrival="tx")
        empty = k.mbarriers("empty", 4, arrive_count=128, arrival="threads")
        pipe = k.pipeline("ring", 4, full, empty)
        dsl.fa4.mbarrier_init(full)
        dsl.fa4.mbarrier_init(empty)
        with k.role("producer", warps=[4], registers=40), k.elect_one():
            state = pipe.producer()
            with k.range(0, arg.tiles, carry=[state]) as t:
                state.producer_acquire()
                state.producer_commit(tx_bytes=4096)
                stage = dsl.fa4.smem_stage(ring, state.stage, bytes=4096)
                dsl.fa4.tma_load(src.value, stage, full, state.stage, [dsl.Value(0).value, (t * 32).value], bytes=4096)
                state.step()
        with k.role("consumer", warps=[0, 1, 2, 3], registers=232):
            state, seen = pipe.consumer(), dsl.Var(dsl.Value(0))
            with k.range(0, arg.tiles, carry=[state, seen]):
                state.consumer_wait()
                with k.if_(state.index == 0, carry=[seen]):
                    seen.value = seen.value + 1
                state.consumer_release()
                state.step()
            with k.if_(dsl.tid_x() == 0):
                dsl.llvm.store(seen.value.value, arg.out)
    return k


def test_a_kernel_builds_with_carried_state_and_compiles_through_ptxas():
    k = _ring_kernel()
    source = k.source(grid="(1, 1, 1)")
    assert [(p.name, p.kind) for p in source.params] == [("src", "tensormap"), ("out", "ptr"), ("tiles", "i32")]
    assert source.params[0].tensor_map.box == (64, 32) and source.params[1].doc == "out[1] i32"
    text = source.mlir
    # The loops carry (stage, phase) and the Var; the branch yields the Var (and passes it on unchanged).
    assert re.search(r"scf\.for .* iter_args\(%\w+ = %\w+#0, %\w+ = %\w+#1\) -> \(i32, i32\)", text)
    assert re.search(r"scf\.for .* iter_args\(%\w+ = %\w+#0, %\w+ = %\w+#1, %\w+ = %\w+\) -> \(i32, i32, i32\)", text)
    assert re.search(r"= scf\.if %\w+ -> \(i32\) \{", text) and "} else {" in text
    assert '"fa4.pipeline_advance"' in text and '"fa4.elect_one"' in text
    assert __file__ in text  # every op located at this file
    result = compile_kernel(source)  # fa4-verify, the protocol verifier, lowering, ptxas
    assert result.cubin and result.manifest["params"][2]["name"] == "tiles"
    assert result.manifest["params"][0]["tensor_map"] == {"dtype": "bf16", "box": [64, 32], "swizzle": "none"}


def test_a_verifier_error_names_the_authors_file_and_line():
    k = _ring_kernel(full_count=3)
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if 'pipe = k.pipeline("ring", 4, full, empty)' in text)
    with pytest.raises(CompileError) as caught:
        compile_kernel(k.source(grid="(1, 1, 1)"), stop="ptx")
    assert any(d.startswith(f"{__file__}:{line}:") and "full must hold num_stages * producer_sub_stages = 4"
               in d for d in caught.value.diagnostics), caught.value.diagnostics


def test_every_op_of_a_user_kernel_carries_its_line(tmp_path):
    path = tmp_path / "my_kernel.py"
    path.write_text(textwrap.dedent("""\
        from fa4_mlir import dsl

        def make():
            k = dsl.Kernel("mine", "sm_90a", num_warps=4)
            k.i32("n")
            with k.body() as arg:
                x = arg.n * 3 + 1
                with k.role("all", warps=[0, 1, 2, 3]):
                    dsl.fa4.named_barrier(sym_name="sync", threads=128)
            return k
    """))
    import importlib.util
    spec = importlib.util.spec_from_file_location("my_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = module.make()
    located = {}

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    located.setdefault(inner.operation.name, set()).add(str(inner.operation.location))
                    visit(inner.operation)
    visit(kernel.module.operation)
    for line, name in ((7, "arith.muli"), (7, "arith.addi"), (8, "fa4.warp_role"), (9, "fa4.named_barrier")):
        assert any(f'"{path}":{line}:' in loc for loc in located[name]), (name, located[name])
    assert f'loc("{path}":9:' in kernel.source(grid="(1, 1, 1)").mlir


def test_bad_kernel_definitions_are_clear_errors():
    with pytest.raises(ValueError, match="kernel name must be an identifier, got 'a b'"):
        dsl.Kernel("a b", "sm_100a", 4)
    with pytest.raises(ValueError, match="target must be one of sm_90a, sm_100a, got 'sm_80'"):
        dsl.Kernel("k", "sm_80", 4)
    with pytest.raises(ValueError, match=r"num_warps must be an int in \[1, 32\], got 0"):
        dsl.Kernel("k", "sm_100a", 0)
    k = dsl.Kernel("k", "sm_100a", 4)
    k.i32("n")
    with pytest.raises(ValueError, match="parameter name must be a new identifier, got 'n'"):
        k.f32("n")
    with pytest.raises(RuntimeError, match="kernel 'k' has no body: build it inside `with kernel.body\\(\\):` first"):
        k.source(grid="(1, 1, 1)")
    with k.body() as arg:
        with pytest.raises(RuntimeError, match="parameter 'm' must be declared before kernel.body\\(\\), got it inside"):
            k.i32("m")
        with pytest.raises(TypeError, match="a Value is known only when the kernel runs: branch with kernel.if_"):
            if arg.n == 1:
                pass
        with pytest.raises(TypeError, match="an index must be an int or a Value, got the bool True"):
            arg.n + True
        var = dsl.Var(arg.n)
        with pytest.raises(TypeError, match="a Var keeps its type: must be i32, got f32"):
            var.value = dsl.arith.constant(ir.F32Type.get(), 1.0)
        with pytest.raises(ValueError, match="a value name must be an identifier, got 'lead 0'"):
            (arg.n == 0).named("lead 0")
        with pytest.raises(ValueError, match=r"only a value an op defines can be named, got a block argument \('n'\)"):
            arg.n.named("n")
        with pytest.raises(TypeError, match="an index must be an int, a Value or an ir.Value, got str"):
            arg.n * "2"
        wide = dsl.Value(dsl.arith.constant(ir.IntegerType.get_signless(64), 5))
        assert str((wide + 1).value.type) == "i64"  # an int constant takes the other operand's type
        with pytest.raises(TypeError, match="operands must have one type, got i32 and i64"):
            wide + arg.n
        with pytest.raises(ValueError, match="axis must be 'x', 'y' or 'z', got 'w'"):
            dsl.ctaid("w")
        with k.role("all", warps=[0, 1, 2, 3]):
            pass
    bad = dsl.Kernel("bad", "sm_90a", 4)
    bad.i32("n")
    with pytest.raises(ValueError, match=r"kernel 'bad' must be valid MLIR, got: loc\(\".*test_dsl.py\":\d+:\d+\): "
                                         r"'scf.if' op operand #0 must be 1-bit signless integer"):
        with bad.body() as arg:
            with bad.if_(arg.n):  # an i32 condition
                pass
    with pytest.raises(RuntimeError, match="kernel 'k' has a body already"):
        with k.body():
            pass


def test_a_kernel_source_has_exactly_one_body():
    from fa4_mlir.kernels.source import KernelSource

    with pytest.raises(ValueError, match="kernel source 'k' must have exactly one of mlir text and a built module"):
        KernelSource("k", "sm_100a", (), "(1, 1, 1)")
    with pytest.raises(ValueError, match="kernel source 'k' must have exactly one of mlir text and a built module"):
        KernelSource("k", "sm_100a", (), "(1, 1, 1)", mlir="module {}", module=object())
