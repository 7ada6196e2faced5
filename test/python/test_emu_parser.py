"""The emulator's PTX front end (fa4_mlir.emu.ptx): real kernels, every construct, every error message."""

from __future__ import annotations

import functools
import glob
import os
import random
import re
import time

import pytest

from fa4_mlir.emu.errors import PtxSyntaxError
from fa4_mlir.emu.ptx import parse
from fa4_mlir.emu.ptx.ast import (
    Address,
    Block,
    Immediate,
    Instruction,
    Label,
    Loc,
    Negated,
    Register,
    RegisterDecl,
    Symbol,
    TensorAddress,
    Variable,
    Vector,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "emu_ptx")
KERNELS = [(k, t) for k in ("gemm", "attention", "copy_pipeline") for t in ("sm_90a", "sm_100a")]


@functools.cache
def kernel_ptx(kernel: str, target: str) -> str:
    from fa4_mlir.configs.attention import AttentionConfig
    from fa4_mlir.configs.copy_pipeline import CopyPipelineConfig
    from fa4_mlir.configs.gemm import GemmConfig
    from fa4_mlir.core.compiler import compile_kernel
    from fa4_mlir.kernels import attention, copy_pipeline, gemm
    build, config = {"gemm": (gemm.build, GemmConfig), "attention": (attention.build, AttentionConfig),
                     "copy_pipeline": (copy_pipeline.build, CopyPipelineConfig)}[kernel]
    return compile_kernel(build(config(target=target)), stop="ptx").ptx


@functools.cache
def kernel_module(kernel: str, target: str):
    return parse(kernel_ptx(kernel, target), f"{kernel}.ptx")


def walk(body):
    """Every statement of a body, entering nested Blocks (the Block itself too)."""
    for s in body:
        yield s
        if isinstance(s, Block):
            yield from walk(s.body)


def instructions(module):
    return [s for f in module.functions for s in walk(f.body or ()) if isinstance(s, Instruction)]


def source_instruction_lines(text: str) -> dict[int, tuple[str, str | None]]:
    """line -> (first word, guard as written) of every line of ``text`` that holds an instruction."""
    out, in_section = {}, False
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("//")[0].strip()
        if code.startswith(".section"):
            in_section = True
        if in_section:
            in_section = not code.endswith("}")
            continue
        if not code or code[0] in ".{}()" or code.endswith(":"):
            continue
        words = code.split()
        guard = words.pop(0)[1:] if words[0].startswith("@") else None
        out[n] = (words[0].rstrip(";"), guard)
    return out


def check_round_trip(text: str, source: str):
    module = parse(text, source)
    by_line = {}
    for ins in instructions(module):
        assert ins.loc.line not in by_line, f"two instructions on line {ins.loc.line}"
        by_line[ins.loc.line] = ins
        assert ins.text and not ins.text.endswith(";") and "  " not in ins.text
    expected = source_instruction_lines(text)
    assert expected and set(by_line) == set(expected)
    for line, (word, guard) in expected.items():
        ins = by_line[line]
        assert ins.full_opcode == word, (source, line)
        written = None if ins.guard is None else ("!" if ins.guard_negated else "") + ins.guard
        assert written == guard, (source, line)
        assert ins.text == " ".join(text.splitlines()[line - 1].split("//")[0].strip().rstrip(";").split())
    return module


# ---- real PTX ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel,target", KERNELS)
def test_every_instruction_line_of_our_kernels_parses(kernel, target):
    module = check_round_trip(kernel_ptx(kernel, target), f"{kernel}.ptx")
    assert module.target == (target,) and module.address_size == 64 and module.version >= (8, 0)
    (fn,) = module.functions
    assert fn.is_entry and fn.visible and fn.name == kernel and module.function(kernel) is fn
    assert fn.directives["reqntid"][1:] == (1, 1) and fn.directives["reqntid"][0] % 128 == 0
    smem = module.variables[0]
    assert (smem.space, smem.type, smem.name, smem.dims, smem.extern, smem.align) == \
        ("shared", "b8", "fa4_smem", (None,), True, 1024)


def test_gemm_sm90_params_directives_and_register_declarations():
    fn = kernel_module("gemm", "sm_90a").function("gemm")
    assert [(p.name, p.type, p.align, p.dims) for p in fn.params[:4]] == \
        [(f"gemm_param_{i}", "b8", 64, (128,)) for i in range(4)]
    assert [p.type for p in fn.params[4:]] == ["u32", "u32", "u32", "f32", "f32", "u32"]
    assert all(p.ptr_space is None for p in fn.params)
    assert fn.directives == {"reqntid": (384, 1, 1), "minnctapersm": (1,)}
    decls = {d.prefix: d for d in fn.body if isinstance(d, RegisterDecl)}
    assert decls["%r"].type == "b32" and decls["%r"].count > 1000 and decls["%p"].type == "pred"
    assert decls["%rd"].expanded()[:2] == ("%rd0", "%rd1")


def test_gemm_sm90_wgmma_in_an_inline_asm_block():
    fn = kernel_module("gemm", "sm_90a").function("gemm")
    blocks = [s for s in walk(fn.body) if isinstance(s, Block) and any(
        isinstance(i, Instruction) and i.opcode == "wgmma" and "mma_async" in i.modifiers for i in s.body)]
    assert blocks
    decl, setp, mma = blocks[0].body
    assert decl == RegisterDecl("pred", ("p",), loc=decl.loc) and decl.loc.line > blocks[0].loc.line
    assert setp.full_opcode == "setp.ne.b32" and setp.operands[0] == Register("p")
    assert mma.modifiers == ("mma_async", "sync", "aligned", "m64n256k16", "f32", "bf16", "bf16")
    acc = mma.operands[0]
    assert isinstance(acc, Vector) and len(acc.elements) == 128
    assert all(isinstance(r, Register) and r.name.startswith("%r") for r in acc.elements)
    assert mma.operands[3] == Register("p")
    assert mma.operands[4:] == (Immediate(1), Immediate(1), Immediate(0), Immediate(0))


def test_gemm_sm90_guards_symbols_and_elect_pair():
    text = kernel_ptx("gemm", "sm_90a")
    ins = instructions(kernel_module("gemm", "sm_90a"))
    first_guarded = next(i for i in ins if i.guard)
    g = first_guarded
    assert (g.guard, g.guard_negated, g.full_opcode) == ("%p1", False, "bra")
    assert isinstance(g.operands[0], Symbol) and g.operands[0].name.startswith("$L__BB0_")
    line = text.splitlines()[first_guarded.loc.line - 1]
    assert first_guarded.loc == Loc(first_guarded.loc.line, line.index("@") + 1)
    mov = next(i for i in ins if i.text == "mov.b64 %rd38, gemm_param_0")
    assert mov.operands == (Register("%rd38"), Symbol("gemm_param_0"))
    assert any(i.operands == (Register("%r1"), Register("%tid.x")) for i in ins)
    inits = [i.operands for i in ins if i.full_opcode == "mbarrier.init.shared.b64"]
    assert any(a.base == Symbol("fa4_smem") and a.offset > 0 and isinstance(n, Register) for a, n in inits)
    assert any(isinstance(a.base, Register) and a.offset == 0 for a, n in inits)
    elect = next(i for i in ins if i.full_opcode == "elect.sync")
    pair, mask = elect.operands
    assert isinstance(pair, Vector) and [type(r) for r in pair.elements] == [Register, Register]
    assert pair.elements[1].name.startswith("%p") and mask == Immediate(-1)


def test_attention_sm90_tensor_addresses_and_wait_loops():
    ins = instructions(kernel_module("attention", "sm_90a"))
    stores = [i for i in ins if i.full_opcode.startswith("cp.async.bulk.tensor.4d.global.shared::cta")]
    assert stores
    tmap, smem = stores[0].operands
    assert isinstance(tmap, TensorAddress) and isinstance(tmap.tensor_map, Register) and len(tmap.coords) == 4
    assert smem == Address(Symbol("fa4_smem"), 0)
    fn = kernel_module("attention", "sm_90a").function("attention")
    wait = next(s for s in walk(fn.body) if isinstance(s, Block) and any(
        isinstance(x, Label) and x.name == "LAB_WAIT" for x in s.body))
    decl, label, try_wait, branch, back, done = wait.body
    assert decl.names == ("P1",) and label.name == "LAB_WAIT" and done == Label("DONE", done.loc)
    assert try_wait.operands[0] == Register("P1") and isinstance(try_wait.operands[1], Address)
    assert (branch.guard, branch.full_opcode, branch.operands) == ("P1", "bra.uni", (Symbol("DONE"),))
    assert back.operands == (Symbol("LAB_WAIT"),)


def test_sm100_kernels_have_tcgen05():
    ins = instructions(kernel_module("gemm", "sm_100a"))
    assert any(i.opcode == "tcgen05" and i.modifiers[0] == "mma" for i in ins)


def test_attention_parses_fast():
    text = kernel_ptx("attention", "sm_90a")
    assert len(text.splitlines()) > 3000
    best = min(_timed(parse, text) for _ in range(3))
    assert best < 0.5, f"parsing {len(text.splitlines())} lines took {best:.3f} s"


def _timed(fn, *args):
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


# ---- foreign (Triton) PTX ------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(FIXTURES, "triton_*.ptx"))) or [None])
def test_triton_fixtures_parse(path):
    if path is None:
        pytest.skip(f"no triton_*.ptx fixtures in {FIXTURES}")
    with open(path) as f:
        module = check_round_trip(f.read(), os.path.basename(path))
    assert module.version >= (8, 0) and module.target and module.target[0].startswith("sm_")
    assert module.functions and all(f.is_entry for f in module.functions if f.body is not None)
    for fn in module.functions:
        assert not fn.is_entry or fn.directives.get("reqntid") or fn.directives.get("maxntid")
        assert all(p.ptr_space == "global" and p.type == "u64" for p in fn.params if p.ptr_align is not None)
    for var in module.variables:
        assert var.space in ("shared", "global", "const")
        if var.name == "global_smem":   # Triton's dynamic shared memory
            assert (var.space, var.type, var.dims, var.extern) == ("shared", "b8", (None,), True)


def test_triton_generated_ptx_parses():
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def add(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)

    signature = {"x_ptr": "*fp32", "o_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    source = ASTSource(fn=add, signature=signature, constexprs={"BLOCK": 256})
    text = triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    fn = check_round_trip(text, "add.ptx").function("add")
    assert fn.params[0].ptr_space == "global" and fn.params[0].type == "u64" and fn.params[2].type == "u32"
    assert any(i.guard for i in instructions(parse(text)))


# ---- every construct ------------------------------------------------------------------------------
SYNTHETIC = r"""//
// hand-written: one of everything
//
.version 8.7
.target sm_90a, texmode_independent
.address_size 64

	// .globl	k
.extern .shared .align 1024 .b8 fa4_smem[];
.global .align 4 .b32 counter;
.global .align 1 .b8 str[6] = {104, 101, 0, 0, 0, 0};
.const .align 8 .f32 table[2][3] = {{1.5, -2, 0f3F800000}, {0d3FF0000000000000, 0x10, 017}};
.visible .global .v2 .b32 pair;
.weak .global .b64 ptr = counter;
.file 1 "x.py", 1, 2
.pragma "nounroll";
/* a block
   comment */
.extern .func (.param .b32 func_retval0) ext(.param .b64 p);
.weak .func wf() .noreturn;
.func (.param .b32 func_retval0) helper(
	.param .b64 helper_param_0
)
{
	.reg .b32 %r<3>;
	ld.param.b32 %r1, [helper_param_0];
	st.param.b32 [func_retval0], %r1;
	ret;
}

.visible .entry k(
	.param .u64 .ptr .global .align 16 k_param_0,
	.param .align 64 .b8 k_param_1[128],
	.param .f32 k_param_2
)
.maxntid 128, 1, 1
.maxnreg 168
.explicitcluster
.reqnctapercluster 2, 1, 1
.maxclusterrank 8
.blocksareclusters
{
	.reg .pred 	%p<4>;
	.reg .pred p, q;
	.reg .v4 .f32 %v<2>;
	.reg .b32 	%r<20>;
	.local .align 8 .b8 __local_depot0[32];
	.shared .align 8 .b8 bars[64];
	.loc	1 13 0, function_name $L__info_string0, inlined_at 1 2 3
$L__func_begin0:
	mov.u32 %r1, %tid.x;  mov.u32 %r2, %ctaid.y; mov.u32 %r3, %laneid;
	mov.u32 %r4, %cluster_ctarank; mov.u32 %r5, %clusterid.x; mov.u32 %r6, %envreg3;
	mov.u64 %rd1, %clock64; mov.u64 %rd2, %globaltimer;
	mov.b32 %r7, -5; mov.b32 %r8, 0x1FU; mov.b32 %r9, 017; mov.b32 %r10, 0b101;
	mov.f32 %r11, 0f3F800000; mov.f64 %rd3, 0d3FF0000000000000; mov.f32 %r12, 1.5; mov.f32 %r13, -2.5e-1;
	mov.b64 %rd4, k_param_1;
	ld.global.nc.L1::evict_last.v4.b32 {%r1, %r2, _, %r4}, [%rd1+16];
	ld.shared.b32 %r1, [%rd1+-16];
	ld.param.b32 %r1, [k_param_1+8];
	ld.shared.b32 %r1, [fa4_smem+1024];
	ld.global.b32 %r1, [0x100];
	ld.shared.b32 %r1, [ %r5 - 4 ];
	st.shared.v2.b32 [bars], {%r1, 7};
	cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1],
		[%rd1, {%r2, %r3}], [%r4];
	setp.lt.s32 %p1|%p2, %r1, %r2;
	selp.b32 %r1, %r2, %r3, !%p2;
	@%p1 bra.uni $L__BB0_2;
	@!%p1 bra $L__BB0_2;
	tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r3, %p1;
	fence.proxy.async.shared::cta;
	{
	.reg .pred p;
	setp.ne.b32 p, 1, 0;
	@p bra.uni $L__BB0_2;
	@!q bra.uni $L__BB0_2;
	}
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 [param0], %rd1;
	.param .b32 retval0;
	call.uni (retval0), helper, (param0, %rd1);
	call.uni wf, ();
	prototype_0 : .callprototype (.param .b32 _) _ (.param .b64 _);
	call (retval0), %rd1, (param0), prototype_0;
	ld.param.b32 %r1, [retval0];
	}
	.pragma "nounroll";
LBB0_1:
$L__BB0_2:
	bar.sync 	1, 256;
	trap;
	exit;
}
	.section	.debug_str
	{
$L__info_string0:
.b8 107
.b8 0
	}
	.section	.debug_macinfo	{	}
"""


@functools.cache
def synthetic():
    return parse(SYNTHETIC, "syn.ptx")


def at(snippet: str) -> Loc:
    """Where ``snippet`` first occurs in SYNTHETIC (1-based line and column)."""
    before = SYNTHETIC[:SYNTHETIC.index(snippet)]
    return Loc(before.count("\n") + 1, len(before) - before.rfind("\n"))


def op(text: str) -> Instruction:
    (found,) = [i for i in instructions(synthetic()) if i.text == text]
    return found


def test_synthetic_module_header_and_variables():
    m = synthetic()
    assert (m.version, m.target, m.address_size) == ((8, 7), ("sm_90a", "texmode_independent"), 64)
    v = {x.name: x for x in m.variables}
    assert v["fa4_smem"] == Variable("shared", "b8", "fa4_smem", 1024, (None,), True, loc=Loc(9, 1))
    counter = v["counter"]
    assert (counter.space, counter.type, counter.align, counter.dims) == ("global", "b32", 4, ())
    assert v["str"].init == (104, 101, 0, 0, 0, 0) and v["str"].dims == (6,)
    assert v["table"].dims == (2, 3) and v["table"].space == "const"
    f32_one, f64_one = Immediate(0x3F800000, "f32"), Immediate(0x3FF0000000000000, "f64")
    assert v["table"].init == (1.5, -2, f32_one, f64_one, 16, 15)
    assert v["pair"].visible and v["pair"].vector == 2
    assert v["ptr"].init == (Symbol("counter"),)


def test_synthetic_functions_params_and_directives():
    m = synthetic()
    ext, wf, helper, k = m.functions
    assert ext.extern and ext.body is None and [p.name for p in ext.returns] == ["func_retval0"]
    assert wf.body is None and wf.directives == {"noreturn": ()} and wf.params == ()
    assert m.function("ext") is None and m.function("helper") is helper and not helper.is_entry
    assert helper.returns[0].type == "b32" and helper.params[0].name == "helper_param_0"
    assert k.is_entry and k.visible and k.loc == at(".visible .entry k(")
    p0, p1, p2 = k.params
    assert (p0.type, p0.ptr_space, p0.ptr_align, p0.align) == ("u64", "global", 16, None)
    assert (p1.type, p1.align, p1.dims) == ("b8", 64, (128,))
    assert (p2.name, p2.type) == ("k_param_2", "f32")
    assert k.directives == {"maxntid": (128, 1, 1), "maxnreg": (168,), "explicitcluster": (),
                            "reqnctapercluster": (2, 1, 1), "maxclusterrank": (8,), "blocksareclusters": ()}


def test_synthetic_body_declarations_labels_and_blocks():
    body = synthetic().function("k").body
    decls = [s for s in body if isinstance(s, RegisterDecl)]
    assert decls[0] == RegisterDecl("pred", prefix="%p", count=4, loc=at(".reg .pred \t%p<4>"))
    assert decls[1].names == ("p", "q") and decls[1].expanded() == ("p", "q")
    assert (decls[2].vector, decls[2].type, decls[2].expanded()) == (4, "f32", ("%v0", "%v1"))
    local, shared = [s for s in body if isinstance(s, Variable)]
    assert (local.space, local.align, local.dims, shared.space) == ("local", 8, (32,), "shared")
    labels = [s.name for s in body if isinstance(s, Label)]
    assert labels == ["$L__func_begin0", "LBB0_1", "$L__BB0_2"]
    scoped, call_seq = [s for s in body if isinstance(s, Block)]
    assert scoped.body[0] == RegisterDecl("pred", ("p",), loc=at(".reg .pred p;"))
    assert scoped.loc.line == scoped.body[0].loc.line - 1
    assert [s.space for s in call_seq.body if isinstance(s, Variable)] == ["param", "param"]
    assert body[-1].full_opcode == "exit" and body[-2].full_opcode == "trap"


def test_synthetic_operands():
    assert op("mov.u32 %r2, %ctaid.y").operands[1] == Register("%ctaid.y")
    assert op("mov.u32 %r2, %ctaid.y").loc == at("mov.u32 %r2, %ctaid.y") and at("mov.u32 %r2").column == 24
    for special in ("%laneid", "%cluster_ctarank", "%clusterid.x", "%envreg3", "%clock64", "%globaltimer"):
        assert any(i.operands[1:] == (Register(special),) for i in instructions(synthetic()))
    imms = {i.operands[0].name: i.operands[1] for i in instructions(synthetic())
            if i.opcode == "mov" and isinstance(i.operands[1], Immediate)}
    assert imms == {"%r7": Immediate(-5), "%r8": Immediate(31), "%r9": Immediate(15), "%r10": Immediate(5),
                    "%r11": Immediate(0x3F800000, "f32"), "%rd3": Immediate(0x3FF0000000000000, "f64"),
                    "%r12": Immediate(1.5, "float"), "%r13": Immediate(-0.25, "float")}
    assert op("mov.b64 %rd4, k_param_1").operands[1] == Symbol("k_param_1")
    ld = op("ld.global.nc.L1::evict_last.v4.b32 {%r1, %r2, _, %r4}, [%rd1+16]")
    assert ld.modifiers == ("global", "nc", "L1::evict_last", "v4", "b32")
    assert ld.operands == (Vector((Register("%r1"), Register("%r2"), Register("_"), Register("%r4"))),
                           Address(Register("%rd1"), 16))
    assert op("ld.shared.b32 %r1, [%rd1+-16]").operands[1] == Address(Register("%rd1"), -16)
    assert op("ld.param.b32 %r1, [k_param_1+8]").operands[1] == Address(Symbol("k_param_1"), 8)
    assert op("ld.shared.b32 %r1, [fa4_smem+1024]").operands[1] == Address(Symbol("fa4_smem"), 1024)
    assert op("ld.global.b32 %r1, [0x100]").operands[1] == Address(None, 256)
    assert op("ld.shared.b32 %r1, [ %r5 - 4 ]").operands[1] == Address(Register("%r5"), -4)
    assert op("st.shared.v2.b32 [bars], {%r1, 7}").operands[1] == Vector((Register("%r1"), Immediate(7)))
    cp = next(i for i in instructions(synthetic()) if i.opcode == "cp")
    assert cp.modifiers[-1] == "mbarrier::complete_tx::bytes" and cp.modifiers[4] == "shared::cluster"
    assert cp.operands[1] == TensorAddress(Register("%rd1"), (Register("%r2"), Register("%r3")))
    assert op("setp.lt.s32 %p1|%p2, %r1, %r2").operands[0] == Vector((Register("%p1"), Register("%p2")))
    assert op("selp.b32 %r1, %r2, %r3, !%p2").operands[3] == Negated(Register("%p2"))
    assert op("fence.proxy.async.shared::cta").modifiers == ("proxy", "async", "shared::cta")
    assert op("tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r3, %p1").modifiers == \
        ("mma", "cta_group::1", "kind::f16")


def test_synthetic_guards_scoped_names_and_calls():
    g = op("@!%p1 bra $L__BB0_2")
    assert (g.guard, g.guard_negated, g.opcode, g.modifiers) == ("%p1", True, "bra", ())
    assert op("@%p1 bra.uni $L__BB0_2").guard_negated is False
    assert op("setp.ne.b32 p, 1, 0").operands[0] == Register("p")   # declared by the block's .reg
    assert op("@p bra.uni $L__BB0_2").guard == "p"
    assert op("@!q bra.uni $L__BB0_2").guard == "q"
    call = op("call.uni (retval0), helper, (param0, %rd1)")
    assert call.operands == (Vector((Symbol("retval0"),)), Symbol("helper"),
                             Vector((Symbol("param0"), Register("%rd1"))))
    assert op("call.uni wf, ()").operands == (Symbol("wf"), Vector(()))
    indirect = op("call (retval0), %rd1, (param0), prototype_0")
    assert indirect.operands[1:] == (Register("%rd1"), Vector((Symbol("param0"),)), Symbol("prototype_0"))
    assert op("bar.sync 1, 256").operands == (Immediate(1), Immediate(256))


def test_minimal_module_defaults_and_declaration_only_function():
    m = parse(".entry k() { ret; }")
    assert (m.version, m.target, m.address_size) == ((0, 0), (), 64)
    assert m.function("k").body[0].full_opcode == "ret"
    assert parse("").functions == ()


# ---- errors ---------------------------------------------------------------------------------------
H = ".version 8.6\n.target sm_90a\n.address_size 64\n"        # 3 lines
E = H + ".visible .entry k()\n{\n"                              # body statements start on line 6


@pytest.mark.parametrize("text,line,col,message", [
    (H + "/* never closed", 4, 1, "comment '/*' must be closed by '*/', got end of input"),
    (H + '.pragma "nounroll;\n', 4, 9, "string literal must be closed by '\"' on its line"),
    (E + "mov.b32 %r1, 0x;\n}", 6, 14,
     "number literal must be decimal, 0x hex, 0 octal, 0b binary, 0f<8 hex> or 0d<16 hex>, got '0x'"),
    (E + "mov.f32 %r1, 0f3F80;\n}", 6, 14, "got '0f3F80'"),
    (E + "mov.b32 %r1, 12ab;\n}", 6, 14, "got '12ab'"),
    (E + "mov.b32 %r1, #1;\n}", 6, 14, "expected a PTX token, got unexpected character '#'"),
    (E + "mov.b32 %r1, 99999999999999999999999;\n}", 6, 14,
     "integer literal must fit in 64 bits, got '99999999999999999999999'"),
    (E + "mov.b32 %r1, 0x10000000000000000;\n}", 6, 14, "integer literal must fit in 64 bits"),
    (E + "mov.b32 %r1, -0x8000000000000001;\n}", 6, 15, "integer literal must fit in 64 bits, got '-0x8"),
    (E + "mov.b32 %r1, 019;\n}", 6, 14, "octal literal must use digits 0-7, got '019'"),
    (E + "mov.b32 %r1, -%r2;\n}", 6, 15, "expected a number after '-', got '%r2'"),
    (E + "mov.f32 %r1, -0f3F800000;\n}", 6, 15,
     "a negated literal must be an integer or decimal float, got '-0f3F800000'"),
    (H + ".global .align 1.5 .b8 x;", 4, 16, "alignment must be an integer, got '1.5'"),
    (H + ".global .align 0 .b8 x;", 4, 16, "alignment must be >= 1, got 0"),
    (H + ".global .b8 x[-2];", 4, 15, "array size must be >= 0, got -2"),
    (H + ".global .b8 ;", 4, 13, "expected a .global variable name, got ';'"),
    (H + ".global .b8 x.y;", 4, 13, "a .global variable name must be a plain identifier, got 'x.y'"),
    (".version 8;", 1, 10, "version must be MAJOR.MINOR, got '8'"),
    (".version 8.6\n.target ;", 2, 9, "expected a target name after '.target', got ';'"),
    (".address_size 48", 1, 15, "address size must be 32 or 64, got 48"),
    (H + ".reqntid 128;", 4, 1,
     ("expected a module-level directive (.version, .target, .address_size, a variable, .entry or .func), "
      "got '.reqntid'")),
    (H + "}", 4, 1, "expected a module-level directive"),
    (H + ".visible .b32 x;", 4, 10,
     "expected a state space (.global, .shared, .const, .local) or .entry/.func after '.visible', got '.b32'"),
    (H + ".global .b32 .u32 x;", 4, 14,
     "expected .align, .v2/.v4 or a type in a .global variable, got '.u32'"),
    (H + ".global .align 4 x;", 4, 18, "a .global variable must have a type (.b8, .b32, .f32, ...), got 'x'"),
    (H + ".global .b8 x[2] = " + "{" * 9 + "1" + "}" * 9 + ";", 4, 28,
     "initializer braces must nest at most 8 deep, got more"),
    (H + ".global .b8 x = ;", 4, 17, "expected an initializer value (number, symbol or '{'), got ';'"),
    (H + ".global .b8 x[2] = {1, 2;", 4, 25,
     "expected '}' or ',' in the initializer opened at 4:20, got ';'"),
    (H + ".global .b8 x[2] = {1, 2}", 4, 26, "expected ';' after the declaration of 'x', got end of input"),
    (H + ".global .b8 x[2;", 4, 16, "expected ']' to close the '[' at 4:14, got ';'"),
    (H + ".entry k() .reqntd 128 { }", 4, 12,
     ("expected a performance directive (.reqntid, .maxntid, .maxnreg, .minnctapersm, ...), '{' or ';' "
      "after function 'k', got '.reqntd'")),
    (H + ".entry k() .maxnreg 8 .maxnreg 9 { }", 4, 23,
     "directive '.maxnreg' must appear once per function, got a second one"),
    (H + ".entry k() .maxnreg x { }", 4, 21, "expected .maxnreg value (an integer), got 'x'"),
    (H + ".entry k() ret;", 4, 12, "expected '{' or ';' after the header of function 'k', got 'ret'"),
    (H + ".entry k(.u32 a) { }", 4, 10, "expected '.param' to start a parameter, got '.u32'"),
    (H + ".entry k(.param .u32 .global a) { }", 4, 22,
     "expected .align, a type or .ptr attributes in a parameter, got '.global'"),
    (H + ".entry k(.param a) { }", 4, 17, "a parameter must have a type (.b32, .u64, ...), got 'a'"),
    (H + ".entry k(.param .u32 a { }", 4, 24,
     "expected ')' or ',' in the parameter list opened at 4:9, got '{'"),
    (H + ".entry (.param .u32 a) { }", 4, 8, "expected a function name, got '('"),
    (E + "ret;\n", 7, 1, "expected '}' to close the block opened at 5:1, got end of input"),
    (E + "{" * 70, 6, 64, "blocks must nest at most 64 deep, got deeper"),
    (E + ".maxnreg 8;\n}", 6, 1,
     "expected a statement (instruction, label, .reg or a variable) in a function body, got '.maxnreg'"),
    (E + "ret;;\n}", 6, 5,
     "expected a statement (instruction, label, .reg or a variable) in a function body, got ';'"),
    (E + ".reg .b32 .u32 %r;\n}", 6, 11, "expected .v2/.v4 or a type in a .reg declaration, got '.u32'"),
    (E + ".reg %r<4>;\n}", 6, 6, "a .reg declaration must have a type (.b32, .pred, ...), got '%r'"),
    (E + ".reg .b32 %r<x>;\n}", 6, 14, "register count in '%r<N>' must be an integer, got 'x'"),
    (E + ".reg .b32 %r<0>;\n}", 6, 14, "register count must be in [1, 1048576], got 0"),
    (E + ".reg .b32 %r<4;\n}", 6, 15, "expected '>' to close '%r<4', got ';'"),
    (E + ".reg .b32 %r<4>\nret;\n}", 7, 1, "expected ';' after the .reg declaration, got 'ret'"),
    (E + ".reg .b32 ;\n}", 6, 11, "expected a register name, got ';'"),
    (E + "@ 1 bra L;\n}", 6, 3, "expected a predicate register after '@', got '1'"),
    (E + "%r1 bra L;\n}", 6, 1, "expected an opcode, got '%r1'"),
    (E + "add.s32 %r1, %r2, %r3\nmov.b32 %r4, 1;\n}", 7, 1,
     "expected ',' or ';' after 'add.s32', got 'mov.b32'"),
    (E + "ret\n}", 7, 1, "expected an operand or ';' after 'ret', got '}'"),
    (E + "mov.b32 %, 1;\n}", 6, 9, "a register name must follow '%', got '%'"),
    (E + "mov.b32 %r1, a.b;\n}", 6, 14, "a symbol must be a plain identifier, got 'a.b'"),
    (E + "setp.lt.s32 %p1|, %r1, %r2;\n}", 6, 17, "expected a register after '|', got ','"),
    (E + "selp.b32 %r1, %r2, %r3, !1;\n}", 6, 26, "expected a predicate register after '!', got '1'"),
    (E + "mov.b32 %r1, ];\n}", 6, 14, "expected an operand, got ']'"),
    (E + "mov.v2.b32 {%r1, [%rd1]}, 1;\n}", 6, 18,
     "expected a register, symbol or number in a list, got '['"),
    (E + "mov.v2.b32 {%r1, %r2, 1;\n}", 6, 24, "expected ',' or '}' to close the '{' at 6:12, got ';'"),
    (E + "call.uni f, (p0;\n}", 6, 16, "expected ',' or ')' to close the '(' at 6:13, got ';'"),
    (E + "cp.async.bulk.tensor.1d.global.shared::cta [%rd1, %r1], [%r2];\n}", 6, 51,
     "expected '{' (the coordinates) after the tensor map in '[', got '%r1'"),
    (E + "cp.async.bulk.tensor.1d.global.shared::cta [%rd1, {%r1}, [%r2];\n}", 6, 56,
     "expected ']' to close the '[' at 6:44, got ','"),
    (E + "ld.shared.b32 %r1, [%rd1;\n}", 6, 25, "expected ']' to close the '[' at 6:20, got ';'"),
    (E + "ld.shared.b32 %r1, [%rd1+];\n}", 6, 26, "expected address offset (an integer), got ']'"),
    (E + "ld.shared.b32 %r1, [(%rd1)];\n}", 6, 21,
     "expected a register, symbol or integer inside '[', got '('"),
    (E + "LAB.x:\n}", 6, 1, "a label name must be a plain identifier, got 'LAB.x'"),
    (E + ".pragma \"nounroll\"\n}", 7, 2, "expected ';' to end the .pragma statement, got end of input"),
    (H + ".section .debug_str { .b8 0", 4, 28,
     "expected '}' to close the '{' of section '.debug_str' at 4:21, got end of input"),
    (H + ".section { }", 4, 10, "expected a directive (a section name) after '.section', got '{'"),
])
def test_errors_name_the_token_and_position(text, line, col, message):
    with pytest.raises(PtxSyntaxError, match=re.escape(message)) as info:
        parse(text, "bad.ptx")
    assert str(info.value).startswith(f"bad.ptx:{line}:{col}: "), str(info.value)
    assert (info.value.line, info.value.column, info.value.source) == (line, col, "bad.ptx")


def test_non_string_input_is_a_syntax_error():
    with pytest.raises(PtxSyntaxError, match="PTX text must be a str, got bytes"):
        parse(b".version 8.6")


def test_random_truncations_and_mutations_only_raise_syntax_errors():
    texts = [kernel_ptx("copy_pipeline", "sm_90a"), SYNTHETIC]
    pieces = list("{}[]()<>;:,.+-!@|%_$\"/*=\n 0123456789xfdU") + [
        ".reg", ".entry", ".section", ".loc", "%r<", "[%r1, {", "@!", "09", "0x", "0f", "/*", "//", "9" * 40]
    rng = random.Random(1234)
    outcomes = {"module": 0, "error": 0}
    for _ in range(400):
        text = rng.choice(texts)
        if rng.random() < 0.3:
            text = text[:rng.randrange(len(text))]
        else:
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(text) + 1)
                kind = rng.random()
                if kind < 0.4:
                    text = text[:at] + rng.choice(pieces) + text[at:]
                elif kind < 0.8:
                    text = text[:at] + text[at + rng.randint(1, 12):]
                else:
                    other = rng.randrange(len(text) + 1)
                    text = text[:at] + text[min(at, other):max(at, other)][:300] + text[at:]
        try:
            parse(text)
            outcomes["module"] += 1
        except PtxSyntaxError:
            outcomes["error"] += 1
    assert outcomes["module"] > 0 and outcomes["error"] > 0
    # random token sequences reach the parser's corners the text mutations miss
    vocab = [".version", "8.6", ".target", "sm_90a", ",", ".address_size", "64", ".entry", ".func",
             ".visible", ".extern", "k", "(", ")", ".param", ".u64", ".ptr", ".global", ".align", "16", ".b8",
             "[", "]", "{", "}", ";", ".reg", ".pred", "%p", "<", ">", "%r1", "@", "!", "bra", "L", ":",
             "mov.b32", "-", "1.5", "0f3F800000", "|", "_", "p", "=", "+", ".loc", ".section", ".debug_x",
             ".pragma", '"s"', ".reqntid", ".noreturn", ".v4", "call", ".callprototype", "%tid.x", "0x10",
             ".const", ".local", "\n"]
    for _ in range(3000):
        text = rng.choice(["", H, H + ".entry k() { "]) + " ".join(rng.choices(vocab, k=rng.randint(1, 30)))
        try:
            parse(text)
        except PtxSyntaxError:
            pass
    for text in ("{" * 5000, ".entry k() " + "{" * 5000, E + "mov.b32 %r1, " + "{" * 3000,
                 H + ".global .b8 x[2] = " + "{" * 3000, ".entry k() { .reg .b32 %r<" + "9" * 5000 + ">; }",
                 E + "mov.b32 %r1, 0x" + "f" * 5000 + ";", "\x00", "\ufeff"):
        with pytest.raises(PtxSyntaxError):
            parse(text)
