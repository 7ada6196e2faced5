"""The attention forward for sm_90a: FA3's structure as an fa4 program.

One CTA of 12 warps owns 128 query rows of one head (``AttentionConfig.hopper``):

* warps 0-3 / 4-7, consumer warpgroups 0 and 1 (240 registers), 64 rows each. Per K/V tile ``j``
  a warpgroup issues ``S = Q K_j'`` (SS wgmma into registers) and ``O += P_{j-1} V_{j-1}`` (RS
  wgmma: P is the previous tile's probabilities, still in the registers where softmax left them),
  then, while the P@V runs, takes S's row maximum (a quad shuffle), the rescale factor and
  ``P = exp2(S * scale_log2e - max * scale_log2e)`` (one FMA and ``ex2.approx`` per element),
  waits for the P@V, rescales O and packs P to 16 bits (FA3's intra-warpgroup overlap);
* the two warpgroups take turns issuing their MMAs (FA3's ping-pong): warpgroup w waits at named
  barrier ``sched{w}`` before issuing and arrives at the other's after, so one warpgroup's softmax
  runs under the other's MMAs;
* warp 8, TMA load (one elected thread, 24 registers with the idle warps 9-11): Q once, then K_0,
  and per tile K_{j+1} ahead of V_j, through two-stage K and V rings whose consumer barriers count
  the 8 consumer warps (lane 0 of each, once its wgmma group retired).

Keys at or past a row's limit (``seq_k``; causal: the row's own position + 1, FA's top-left
diagonal) are masked to -inf, only in tiles that reach the limit. Causal CTAs stop at their last
row's tile. The epilogue divides by the row sum, writes O as 16-bit pairs over the warpgroup's dead
Q rows (128B swizzle) and TMA-stores them (the store clips rows past ``seq_q``); the LSE is written
per row when asked. GQA: the CTA of head ``h`` reads K/V head ``h / group``.
"""

from __future__ import annotations

from fa4_mlir.configs.attention import AttentionConfig
from fa4_mlir.kernels.attention.abi import ARGS, CONFIG_FIELDS, params
from fa4_mlir.kernels.attention.dims import BLOCK
from fa4_mlir.kernels.attention.dims import ROW_BYTES as ROW
from fa4_mlir.kernels.attention.softmax import EX2, LG2, LN2, NEG_INF, PIPE2
from fa4_mlir.kernels.source import KernelSource, TensorMapSpec, kernel_module
from fa4_mlir.layouts import hopper_attention_barriers

NAME = "attention"
NUM_WARPS = 12
LOAD_WARP = 8
WG_ROWS = 64  # query rows of a consumer warpgroup: the M of one wgmma
CONSUMER_REGISTERS = 240  # 2 x 128 x 240 + 128 x 24 = 64512 <= 65536
PRODUCER_REGISTERS = 24
TMA4 = "(!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32, i32, i32) -> ()"


_SSA = {"q_full": "qbar", "k_full": "k_full", "k_empty": "k_empty", "v_full": "v_full", "v_empty": "v_empty"}


def build(config: AttentionConfig) -> KernelSource:
    config.validate()
    k = _Kernel(config)
    preamble = [f"!sacc = !llvm.struct<({', '.join(['f32'] * (k.bn // 2))})>"]
    if k.d != k.bn:
        preamble.append(f"!oacc = !llvm.struct<({', '.join(['f32'] * (k.d // 2))})>")
    roles = [*k.consumer(0), *k.consumer(1), *k.load()]
    mlir = kernel_module(NAME, config.target, ARGS, k.prologue(), roles, NUM_WARPS, preamble=tuple(preamble))
    q_box = o_box = TensorMapSpec(config.dtype, (BLOCK, 1, WG_ROWS, 1), "128B")
    kv_box = TensorMapSpec(config.dtype, (BLOCK, 1, k.bn, 1), "128B")
    return KernelSource(
        name=NAME, target=config.target, mlir=mlir,
        params=params(q_box, kv_box, o_box),
        grid=f"(ceil(Sq / {k.t.bm}), H, B) (launch_geometry)",
        config={**{f: getattr(config, f) for f in CONFIG_FIELDS},
                "block_n": k.bn},
    )


class _Kernel:
    """Emits the kernel's MLIR text; every method returns lines. ``consumer(w)`` sets ``self.p``, the
    warpgroup's name prefix, whose constants (shuffle operands, -inf, row limits) the softmax helpers
    read while it emits."""

    def __init__(self, c: AttentionConfig):
        self.c = c
        self.t = c.hopper
        self.d = c.head_dim
        self.bn = self.t.bn
        self.blocks = self.d // BLOCK
        self.elem = "bf16" if c.dtype == "bf16" else "f16"
        self.oacc = "!sacc" if self.d == self.bn else "!oacc"

    # -- prologue ------------------------------------------------------------------------------------
    def prologue(self) -> list[str]:
        t, i = self.t, "      "
        half = t.q_bytes // 2  # a warpgroup's 64 rows: its Q, then its O
        smem = '"fa4.smem_region"() {{sym_name = "{}", bytes = {}, align = 1024, swizzle = "128B"}} : () -> !fa4.smem'
        out = [f"{i}%c0 = arith.constant 0 : i32", f"{i}%c1 = arith.constant 1 : i32",
               f"{i}%q = {smem.format('q', t.q_bytes)}",
               *[f'{i}%q{w} = "fa4.smem_alias"(%q) {{sym_name = "q{w}", bytes = {half}, offset = {w * half}}} : '
                 "(!fa4.smem) -> !fa4.smem" for w in (0, 1)],
               *[f'{i}%o{w} = "fa4.smem_alias"(%q{w}) {{sym_name = "o{w}", bytes = {half}}} : (!fa4.smem) -> !fa4.smem'
                 for w in (0, 1)],
               f"{i}%kring = {smem.format('k', t.stages * t.kv_stage_bytes)}",
               f"{i}%vring = {smem.format('v', t.stages * t.kv_stage_bytes)}"]
        barriers = hopper_attention_barriers(self.c)
        for b in barriers:
            out.append(f'{i}%{_SSA[b.name]} = "fa4.mbarrier_alloc"() {{sym_name = "{b.name}", num_barriers = '
                       f'{len(b.counts)}, arrive_count = {b.counts[0]}, arrival = "{b.arrival}"}} : () -> !fa4.mbarriers')
        for name, full, empty in (("kp", "k_full", "k_empty"), ("vp", "v_full", "v_empty")):
            out.append(f'{i}%{name} = "fa4.pipeline_create"(%{full}, %{empty}) {{sym_name = "{name}", '
                       f"num_stages = {t.stages}}} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline")
        out += [f'{i}"fa4.mbarrier_init"(%{_SSA[b.name]}) : (!fa4.mbarriers) -> ()' for b in barriers]
        if self.c.causal:  # the longest rows first: the last wave holds the short ones
            out += [f"{i}%qx = nvvm.read.ptx.sreg.ctaid.x : i32", f"{i}%nqx = nvvm.read.ptx.sreg.nctaid.x : i32",
                    f"{i}%qlast = arith.subi %nqx, %c1 : i32", f"{i}%qt = arith.subi %qlast, %qx : i32"]
        else:
            out.append(f"{i}%qt = nvvm.read.ptx.sreg.ctaid.x : i32")
        out += [
                f"{i}%head = nvvm.read.ptx.sreg.ctaid.y : i32",
                f"{i}%bz = nvvm.read.ptx.sreg.ctaid.z : i32",
                f"{i}%bm = arith.constant {t.bm} : i32",
                f"{i}%bn = arith.constant {self.bn} : i32",
                f"{i}%bn_m1 = arith.constant {self.bn - 1} : i32",
                f"{i}%grp = arith.constant {self.c.group} : i32",
                f"{i}%kvh = arith.divui %head, %grp : i32",
                f"{i}%q_start = arith.muli %qt, %bm : i32"]
        if self.c.causal:  # tiles past the CTA's last row are skipped by every role alike
            out += [f"{i}%q_end = arith.addi %q_start, %bm : i32", f"{i}%kv_end = arith.minsi %seq_k, %q_end : i32"]
        else:
            out.append(f"{i}%kv_end = arith.addi %seq_k, %c0 : i32")
        out += [f"{i}%kv_up = arith.addi %kv_end, %bn_m1 : i32", f"{i}%n_tiles = arith.divsi %kv_up, %bn : i32"]
        return out

    # -- load warp -----------------------------------------------------------------------------------
    def _load_tile(self, ind: str, tag: str, which: str, tile: str, stage: str, phase: str) -> list[str]:
        """Acquire ``stage`` of the K or V ring and load tile ``tile``'s blocks into it."""
        pipe, ring, full, tmap = {"k": ("%kp", "%kring", "%k_full", "%k_map"),
                                  "v": ("%vp", "%vring", "%v_full", "%v_map")}[which]
        nbytes = self.t.kv_stage_bytes
        out = [f"{ind}%{tag}_key = arith.muli {tile}, %bn : i32",
               f'{ind}"fa4.pipeline_producer_acquire"({pipe}, {stage}, {phase}) : {PIPE2} -> ()',
               f'{ind}"fa4.pipeline_producer_commit"({pipe}, {stage}) {{tx_bytes = {nbytes}}} : (!fa4.pipeline, i32) -> ()',
               f'{ind}%{tag}_b = "fa4.smem_stage"({ring}, {stage}) {{bytes = {nbytes}}} : (!fa4.smem, i32) -> !fa4.smem']
        for blk in range(self.blocks):
            out += [f"{ind}%{tag}_d{blk} = arith.constant {blk * BLOCK} : i32",
                    f'{ind}"fa4.tma_load"({tmap}, %{tag}_b, {full}, {stage}, %{tag}_d{blk}, %kvh, %{tag}_key, %bz) '
                    f"{{bytes = {self.bn * ROW}, dst_offset = {blk * self.bn * ROW}}} : {TMA4}"]
        return out + [f'{ind}%{tag}_n:2 = "fa4.pipeline_advance"({pipe}, {stage}, {phase}) : {PIPE2} -> (i32, i32)']

    def load(self) -> list[str]:
        t = self.t
        i = "            "
        li = i + "  "
        out = ['        "fa4.warp_role"() ({',
               '          %ld_e = "fa4.elect_one"() : () -> i1',
               "          scf.if %ld_e {",
               f'{i}"fa4.mbarrier_arrive_expect_tx"(%qbar, %c0) {{tx_bytes = {t.q_bytes}}} : (!fa4.mbarriers, i32) -> ()']
        out += [f"{i}%ld_q1 = arith.constant {WG_ROWS} : i32", f"{i}%ld_qs1 = arith.addi %q_start, %ld_q1 : i32"]
        for blk in range(self.blocks):
            out.append(f"{i}%ld_qd{blk} = arith.constant {blk * BLOCK} : i32")
            for w, start in ((0, "%q_start"), (1, "%ld_qs1")):
                out.append(f'{i}"fa4.tma_load"(%q_map, %q{w}, %qbar, %c0, %ld_qd{blk}, %head, {start}, %bz) '
                           f"{{bytes = {WG_ROWS * ROW}, dst_offset = {blk * WG_ROWS * ROW}}} : {TMA4}")
        out += [f'{i}%ld_ki:2 = "fa4.pipeline_initial_state"(%kp) {{side = "producer"}} : (!fa4.pipeline) -> (i32, i32)',
                f'{i}%ld_vi:2 = "fa4.pipeline_initial_state"(%vp) {{side = "producer"}} : (!fa4.pipeline) -> (i32, i32)',
                *self._load_tile(i, "ld_k0", "k", "%c0", "%ld_ki#0", "%ld_ki#1"),
                # K of the next tile ahead of V of this one: S = Q K' of tile j + 1 is issued first
                f"{i}%ld_loop:4 = scf.for %ld_j = %c1 to %n_tiles step %c1 iter_args(%ld_ks = %ld_k0_n#0, "
                "%ld_kph = %ld_k0_n#1, %ld_vs = %ld_vi#0, %ld_vph = %ld_vi#1) -> (i32, i32, i32, i32) : i32 {",
                *self._load_tile(li, "ld_kj", "k", "%ld_j", "%ld_ks", "%ld_kph"),
                f"{li}%ld_jm = arith.subi %ld_j, %c1 : i32",
                *self._load_tile(li, "ld_vj", "v", "%ld_jm", "%ld_vs", "%ld_vph"),
                f"{li}scf.yield %ld_kj_n#0, %ld_kj_n#1, %ld_vj_n#0, %ld_vj_n#1 : i32, i32, i32, i32",
                f"{i}}}",
                f"{i}%ld_last = arith.subi %n_tiles, %c1 : i32",
                *self._load_tile(i, "ld_vl", "v", "%ld_last", "%ld_loop#2", "%ld_loop#3"),
                "          }",
                "          gpu.yield",
                f'        }}) {{sym_name = "load", warps = array<i32: {LOAD_WARP}>, registers = {PRODUCER_REGISTERS}}} '
                ": () -> ()"]
        return out

    # -- consumer warpgroups -------------------------------------------------------------------------
    def _qk(self, ind: str, p: str, w: int, stage: str) -> tuple[list[str], str]:
        """S = Q K' for warpgroup ``w`` from K ``stage``, one committed wgmma group; returns the
        lines and the accumulator."""
        t = self.t
        out = [f'{ind}%{p}kb = "fa4.smem_stage"(%kring, {stage}) {{bytes = {t.kv_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem',
               f"{ind}%{p}s_in = llvm.mlir.undef : !sacc"]
        acc = f"%{p}s_in"
        for kk in range(self.d // 16):
            blk, sub = divmod(kk, 4)
            a_off = blk * WG_ROWS * ROW + sub * 32
            b_off = blk * self.bn * ROW + sub * 32
            out.append(f'{ind}%{p}sq{kk} = "fa4.wgmma"(%q{w}, %{p}kb, {acc}) {{n = {self.bn}, ab_type = "{self.elem}", '
                       f"accumulate = {int(kk > 0)}, a_offset = {a_off}, b_offset = {b_off}}} : "
                       "(!fa4.smem, !fa4.smem, !sacc) -> !sacc")
            acc = f"%{p}sq{kk}"
        out.append(f'{ind}"fa4.wgmma_commit"() : () -> ()')
        return out, acc

    def _pv(self, ind: str, p: str, stage: str, o_in: str, frags: list[str]) -> tuple[list[str], str]:
        """O += P V from V ``stage`` with P's fragments ``frags`` (one vector<4xi32> per 16 keys)."""
        t = self.t
        out = [f'{ind}%{p}vb = "fa4.smem_stage"(%vring, {stage}) {{bytes = {t.kv_stage_bytes}}} : (!fa4.smem, i32) -> !fa4.smem']
        acc = o_in
        for j, frag in enumerate(frags):
            out.append(f'{ind}%{p}o{j} = "fa4.wgmma"({frag}, %{p}vb, {acc}) {{n = {self.d}, ab_type = "{self.elem}", '
                       f'accumulate = 1, b_offset = {j * 16 * ROW}, b_major = "mn", b_block_stride = {self.bn * ROW}}} : '
                       f"(vector<4xi32>, !fa4.smem, {self.oacc}) -> {self.oacc}")
            acc = f"%{p}o{j}"
        out.append(f'{ind}"fa4.wgmma_commit"() : () -> ()')
        return out, acc

    def _sched(self, ind: str, w: int, kind: str) -> str:
        """Warpgroup ``w`` waits for its turn to issue MMAs (sync) or hands the turn over (arrive)."""
        name = f"sched{w}" if kind == "sync" else f"sched{1 - w}"
        return f'{ind}"fa4.named_barrier"() {{sym_name = "{name}", threads = 256, kind = "{kind}"}} : () -> ()'

    def _release(self, ind: str, p: str, pipe: str, stage: str) -> list[str]:
        """Lane 0 of each warp frees ``stage`` (its wgmma group retired)."""
        return [f"{ind}scf.if %{p}lane0 {{",
                f'{ind}  "fa4.pipeline_consumer_release"({pipe}, {stage}) : (!fa4.pipeline, i32) -> ()',
                f"{ind}}}"]

    def _values(self, ind: str, p: str, struct: str, typ: str, n: int) -> tuple[list[str], list[str]]:
        names = [f"%{p}v{k}" for k in range(n)]
        return [f"{ind}{names[k]} = llvm.extractvalue {struct}[{k}] : {typ}" for k in range(n)], names

    def _mask(self, ind: str, p: str, vals: list[str], tile: str) -> tuple[list[str], list[str]]:
        """``vals`` with keys at or past each row's limit set to -inf, inside an scf.if on whether
        tile ``tile`` reaches the first row's limit (rows r and r + 8: r's limit is the lower)."""
        n = len(vals)
        res = [f"%{p}mk#{k}" for k in range(n)]
        out = [f"{ind}%{p}key0 = arith.muli {tile}, %bn : i32",
               f"{ind}%{p}kend = arith.addi %{p}key0, %bn : i32",
               f"{ind}%{p}need = arith.cmpi sgt, %{p}kend, %{self.p}lim0 : i32",
               f"{ind}%{p}mk:{n} = scf.if %{p}need -> ({', '.join(['f32'] * n)}) {{",
               f"{ind}  %{p}k0q = arith.addi %{p}key0, %{self.p}q2 : i32",
               f"{ind}  %{p}rel0 = arith.subi %{self.p}lim0, %{p}k0q : i32",
               f"{ind}  %{p}rel1 = arith.subi %{self.p}lim1, %{p}k0q : i32"]
        masked = []
        for k, v in enumerate(vals):
            chunk, r = divmod(k, 4)
            col = 8 * chunk + (r & 1)  # key of value k relative to key0 + 2q
            row = r >> 1
            out += [f"{ind}  %{p}mc{k} = arith.constant {col} : i32",
                    f"{ind}  %{p}ok{k} = arith.cmpi sgt, %{p}rel{row}, %{p}mc{k} : i32",
                    f"{ind}  %{p}ms{k} = arith.select %{p}ok{k}, {v}, %{self.p}ninf : f32"]
            masked.append(f"%{p}ms{k}")
        out += [f"{ind}  scf.yield {', '.join(masked)} : {', '.join(['f32'] * n)}",
                f"{ind}}} else {{",
                f"{ind}  scf.yield {', '.join(vals)} : {', '.join(['f32'] * n)}",
                f"{ind}}}"]
        return out, res

    @staticmethod
    def _tree(ind: str, name: str, op: str, vals: list[str]) -> tuple[list[str], str]:
        out, level, depth = [], list(vals), 0
        while len(level) > 1:
            nxt = []
            for k in range(0, len(level) - 1, 2):
                r = f"{name}_{depth}_{k // 2}"
                out.append(f"{ind}{r} = arith.{op} {level[k]}, {level[k + 1]} : f32")
                nxt.append(r)
            if len(level) % 2:
                nxt.append(level[-1])
            level, depth = nxt, depth + 1
        return out, level[0]

    def _quad(self, ind: str, name: str, op: str, x: str) -> tuple[list[str], str]:
        """``x`` combined over the 4 threads of a quad (which hold one row)."""
        out, cur = [], x
        for k, off in enumerate((1, 2)):
            out += [f"{ind}{name}_s{k} = nvvm.shfl.sync bfly %{self.p}full, {cur}, %{self.p}off{off}, %{self.p}clamp "
                    ": f32 -> f32",
                    f"{ind}{name}_r{k} = arith.{op} {cur}, {name}_s{k} : f32"]
            cur = f"{name}_r{k}"
        return out, cur

    def _softmax(self, ind: str, p: str, vals: list[str], m_old: list[str] | None):
        """Row maxima (new), rescale factors (None on the first tile), probabilities and row sums
        of this thread's values. Returns (lines, m_new, factors, probs, sums)."""
        out, m_new, factors, sums = [], [], [], []
        probs = [None] * len(vals)
        for row in (0, 1):
            idx = [k for k in range(len(vals)) if (k % 4) >> 1 == row]
            lines, local = self._tree(ind, f"%{p}mx{row}", "maximumf", [vals[k] for k in idx])
            out += lines
            lines, tile_max = self._quad(ind, f"%{p}mq{row}", "maximumf", local)
            out += lines
            if m_old is None:
                m = tile_max
            else:
                m = f"%{p}m{row}"
                out.append(f"{ind}{m} = arith.maximumf {m_old[row]}, {tile_max} : f32")
            m_new.append(m)
            out += [f"{ind}%{p}nms{row} = arith.mulf {m}, %{self.p}neg_scale : f32"]
            if m_old is not None:
                out += [f"{ind}%{p}dm{row} = arith.subf {m_old[row]}, {m} : f32",
                        f"{ind}%{p}dms{row} = arith.mulf %{p}dm{row}, %scale_log2e : f32",
                        f"{ind}%{p}f{row} = {EX2}(%{p}dms{row}) : (f32) -> f32"]
                factors.append(f"%{p}f{row}")
            for k in idx:
                out += [f"{ind}%{p}x{k} = llvm.intr.fma({vals[k]}, %scale_log2e, %{p}nms{row}) : (f32, f32, f32) -> f32",
                        f"{ind}%{p}p{k} = {EX2}(%{p}x{k}) : (f32) -> f32"]
                probs[k] = f"%{p}p{k}"
            lines, s = self._tree(ind, f"%{p}sum{row}", "addf", [probs[k] for k in idx])
            out += lines
            sums.append(s)
        return out, m_new, (factors or None), probs, sums

    def _pack(self, ind: str, p: str, probs: list[str]) -> tuple[list[str], list[str]]:
        """P as RS fragments: per 16 keys, (row r, keys 2q..), (r + 8, 2q..), (r, 8 + 2q..), (r + 8, 8 + 2q..)."""
        out, frags = [], []
        for j in range(len(probs) // 8):
            words = []
            for h in range(4):
                a, b = probs[8 * j + 2 * h], probs[8 * j + 2 * h + 1]
                x = f"%{p}pk{j}_{h}"
                out += [f"{ind}{x}v = vector.from_elements {a}, {b} : vector<2xf32>",
                        f"{ind}{x}t = arith.truncf {x}v : vector<2xf32> to vector<2x{self.elem}>",
                        f"{ind}{x} = llvm.bitcast {x}t : vector<2x{self.elem}> to i32"]
                words.append(x)
            out.append(f"{ind}%{p}frag{j} = vector.from_elements {', '.join(words)} : vector<4xi32>")
            frags.append(f"%{p}frag{j}")
        return out, frags

    def _rescale(self, ind: str, p: str, o: str, factors: list[str]) -> tuple[list[str], str]:
        """O's rows (values 4i, 4i+1: row r; 4i+2, 4i+3: row r + 8) times their factors."""
        out, cur = [], o
        for k in range(self.d // 2):
            out += [f"{ind}%{p}oe{k} = llvm.extractvalue {o}[{k}] : {self.oacc}",
                    f"{ind}%{p}os{k} = arith.mulf %{p}oe{k}, {factors[(k % 4) >> 1]} : f32",
                    f"{ind}%{p}oi{k} = llvm.insertvalue %{p}os{k}, {cur}[{k}] : {self.oacc}"]
            cur = f"%{p}oi{k}"
        return out, cur

    def consumer(self, w: int) -> list[str]:
        p = self.p = f"c{w}_"
        ind = "          "
        li = ind + "  "
        nv, fr = self.bn // 2, self.bn // 16
        setup = [f"{ind}%{p}{name} = arith.constant {value} : i32"
                 for name, value in (("c128", 128), ("c32", 32), ("c16", 16), ("c8", 8), ("c4", 4), ("c2", 2),
                                     ("full", -1), ("off1", 1), ("off2", 2), ("clamp", 31), ("wrow", w * WG_ROWS))]
        setup += [
            f"{ind}%{p}tid = nvvm.read.ptx.sreg.tid.x : i32",
            f"{ind}%{p}t = arith.remui %{p}tid, %{p}c128 : i32",
            f"{ind}%{p}lane = arith.remui %{p}tid, %{p}c32 : i32",
            f"{ind}%{p}lane0 = arith.cmpi eq, %{p}lane, %c0 : i32",
            f"{ind}%{p}wi = arith.divui %{p}t, %{p}c32 : i32",
            f"{ind}%{p}lq = arith.divui %{p}lane, %{p}c4 : i32",
            f"{ind}%{p}qq = arith.remui %{p}lane, %{p}c4 : i32",
            f"{ind}%{p}q2 = arith.muli %{p}qq, %{p}c2 : i32",
            f"{ind}%{p}w16 = arith.muli %{p}wi, %{p}c16 : i32",
            f"{ind}%{p}r0 = arith.addi %{p}w16, %{p}lq : i32",  # the thread's rows in the warpgroup: r0, r0 + 8
            f"{ind}%{p}row0 = arith.addi %q_start, %{p}wrow : i32",
            f"{ind}%{p}pos0 = arith.addi %{p}row0, %{p}r0 : i32",
            f"{ind}%{p}pos1 = arith.addi %{p}pos0, %{p}c8 : i32",
            f"{ind}%{p}ninf = arith.constant {NEG_INF} : f32",
            f"{ind}%{p}neg_scale = arith.negf %scale_log2e : f32",
        ]
        for r in (0, 1):
            if self.c.causal:
                setup += [f"{ind}%{p}pp{r} = arith.addi %{p}pos{r}, %c1 : i32",
                          f"{ind}%{p}lim{r} = arith.minsi %seq_k, %{p}pp{r} : i32"]
            else:
                setup.append(f"{ind}%{p}lim{r} = arith.addi %seq_k, %c0 : i32")
        setup += [f'{ind}"fa4.mbarrier_try_wait_parity"(%qbar, %c0, %c0) : (!fa4.mbarriers, i32, i32) -> ()',
                  f'{ind}%{p}ki:2 = "fa4.pipeline_initial_state"(%kp) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
                  f'{ind}%{p}vi:2 = "fa4.pipeline_initial_state"(%vp) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
                  f"{ind}%{p}o_zero = llvm.mlir.zero : {self.oacc}"]
        if w == 1:  # warpgroup 0 takes the first turn
            setup.append(self._sched(ind, 1, "arrive"))

        # tile 0: S = Q K_0', softmax, P
        a = f"{p}a"
        qk, s_acc = self._qk(ind, a, w, f"%{p}ki#0")
        first = [self._sched(ind, w, "sync"),
                 f'{ind}"fa4.pipeline_consumer_wait"(%kp, %{p}ki#0, %{p}ki#1) : {PIPE2} -> ()',
                 *qk,
                 self._sched(ind, w, "arrive"),
                 f'{ind}"fa4.wgmma_wait"() {{pending = 0}} : () -> ()',
                 f'{ind}%{a}s = "fa4.wgmma_fence_acc"({s_acc}) : (!sacc) -> !sacc',
                 *self._release(ind, p, "%kp", f"%{p}ki#0"),
                 f'{ind}%{a}kn:2 = "fa4.pipeline_advance"(%kp, %{p}ki#0, %{p}ki#1) : {PIPE2} -> (i32, i32)']
        lines, vals = self._values(ind, a, f"%{a}s", "!sacc", nv)
        first += lines
        lines, vals = self._mask(ind, a, vals, "%c0")
        first += lines
        lines, m0, _, probs, sums = self._softmax(ind, a, vals, None)
        first += lines
        lines, frags = self._pack(ind, a, probs)
        first += lines

        # tiles 1 .. n-1: S_j = Q K_j' and O += P_{j-1} V_{j-1} in flight, then the softmax of S_j
        b = f"{p}b"
        carried = [("m0", m0[0], "f32"), ("m1", m0[1], "f32"), ("l0", sums[0], "f32"), ("l1", sums[1], "f32"),
                   ("o", f"%{p}o_zero", self.oacc), ("ks", f"%{a}kn#0", "i32"), ("kph", f"%{a}kn#1", "i32"),
                   ("vs", f"%{p}vi#0", "i32"), ("vph", f"%{p}vi#1", "i32")]
        carried += [(f"fr{j}", frags[j], "vector<4xi32>") for j in range(fr)]
        types = ", ".join(typ for _, _, typ in carried)
        it = {name: f"%{p}i_{name}" for name, _, _ in carried}
        qk, s_acc = self._qk(li, b, w, it["ks"])
        pv, o_acc = self._pv(li, b, it["vs"], it["o"], [it[f"fr{j}"] for j in range(fr)])
        loop = [f"{ind}%{p}lp:{len(carried)} = scf.for %{p}j = %c1 to %n_tiles step %c1 iter_args("
                + ", ".join(f"{it[name]} = {init}" for name, init, _ in carried) + f") -> ({types}) : i32 {{",
                self._sched(li, w, "sync"),
                f'{li}"fa4.pipeline_consumer_wait"(%kp, {it["ks"]}, {it["kph"]}) : {PIPE2} -> ()',
                *qk,
                f'{li}"fa4.pipeline_consumer_wait"(%vp, {it["vs"]}, {it["vph"]}) : {PIPE2} -> ()',
                *pv,
                self._sched(li, w, "arrive"),
                f'{li}"fa4.wgmma_wait"() {{pending = 1}} : () -> ()',
                f'{li}%{b}s = "fa4.wgmma_fence_acc"({s_acc}) : (!sacc) -> !sacc',
                *self._release(li, p, "%kp", it["ks"]),
                f'{li}%{b}kn:2 = "fa4.pipeline_advance"(%kp, {it["ks"]}, {it["kph"]}) : {PIPE2} -> (i32, i32)']
        lines, vals = self._values(li, b, f"%{b}s", "!sacc", nv)
        loop += lines
        lines, vals = self._mask(li, b, vals, f"%{p}j")
        loop += lines
        lines, m_new, factors, probs, sums = self._softmax(li, b, vals, [it["m0"], it["m1"]])
        loop += lines
        loop += [f'{li}"fa4.wgmma_wait"() {{pending = 0}} : () -> ()',
                 f'{li}%{b}of = "fa4.wgmma_fence_acc"({o_acc}) : ({self.oacc}) -> {self.oacc}',
                 *self._release(li, p, "%vp", it["vs"]),
                 f'{li}%{b}vn:2 = "fa4.pipeline_advance"(%vp, {it["vs"]}, {it["vph"]}) : {PIPE2} -> (i32, i32)']
        lines, o_new = self._rescale(li, b, f"%{b}of", factors)
        loop += lines
        loop += [f"{li}%{b}ls{r} = llvm.intr.fma({it[f'l{r}']}, {factors[r]}, {sums[r]}) : (f32, f32, f32) -> f32"
                 for r in (0, 1)]
        lines, frags = self._pack(li, b, probs)
        loop += lines
        yields = [m_new[0], m_new[1], f"%{b}ls0", f"%{b}ls1", o_new, f"%{b}kn#0", f"%{b}kn#1", f"%{b}vn#0",
                  f"%{b}vn#1", *frags]
        loop += [f"{li}scf.yield {', '.join(yields)} : {types}", f"{ind}}}"]
        res = {name: f"%{p}lp#{k}" for k, (name, _, _) in enumerate(carried)}

        # the last P@V, then the epilogue
        z = f"{p}z"
        pv, o_acc = self._pv(ind, z, res["vs"], res["o"], [res[f"fr{j}"] for j in range(fr)])
        last = [self._sched(ind, w, "sync"),
                f'{ind}"fa4.pipeline_consumer_wait"(%vp, {res["vs"]}, {res["vph"]}) : {PIPE2} -> ()',
                *pv]
        if w == 0:  # warpgroup 1's last turn hands nothing over: each sched0 sync has its arrival
            last.append(self._sched(ind, w, "arrive"))
        last += [f'{ind}"fa4.wgmma_wait"() {{pending = 0}} : () -> ()',
                 f'{ind}%{z}of = "fa4.wgmma_fence_acc"({o_acc}) : ({self.oacc}) -> {self.oacc}',
                 *self._release(ind, p, "%vp", res["vs"])]
        warps = ", ".join(str(4 * w + k) for k in range(4))
        return ['        "fa4.warp_role"() ({', *setup, *first, *loop, *last,
                *self._epilogue(ind, p, w, f"%{z}of", res),
                "          gpu.yield",
                f'        }}) {{sym_name = "consumer{w}", warps = array<i32: {warps}>, registers = {CONSUMER_REGISTERS}}} '
                ": () -> ()"]

    # -- epilogue ------------------------------------------------------------------------------------
    def _epilogue(self, ind: str, p: str, w: int, o: str, res: dict) -> list[str]:
        """1 / row sum, O over the warpgroup's dead Q rows (128B swizzle), TMA store, LSE."""
        out = []
        inv = []
        for r in (0, 1):
            lines, total = self._quad(ind, f"%{p}L{r}", "addf", res[f"l{r}"])
            out += lines
            out += [f"{ind}%{p}inv{r} = arith.divf %{p}one, {total} : f32"]
            inv.append(f"%{p}inv{r}")
            out += [f"{ind}%{p}ms{r} = arith.mulf {res[f'm{r}']}, %scale_log2e : f32",
                    f"{ind}%{p}lg{r} = {LG2}({total}) : (f32) -> f32",
                    f"{ind}%{p}lse2_{r} = arith.addf %{p}ms{r}, %{p}lg{r} : f32",
                    f"{ind}%{p}lse{r} = arith.mulf %{p}lse2_{r}, %{p}ln2 : f32"]
        out.insert(0, f"{ind}%{p}one = arith.constant 1.0 : f32")
        out.insert(1, f"{ind}%{p}ln2 = arith.constant {LN2!r} : f32")
        # row r0 (and r0 + 8, same swizzle phase) of block b: b * 64 * 128 + r * 128 bytes of the
        # warpgroup's O; the 16-byte chunk c of a row sits at chunk c ^ (r % 8)
        out += [f"{ind}%{p}c7 = arith.constant 7 : i32",
                f"{ind}%{p}crow = arith.constant {ROW} : i32",
                f"{ind}%{p}sw = arith.andi %{p}r0, %{p}c7 : i32",
                f"{ind}%{p}rb0 = arith.muli %{p}r0, %{p}crow : i32",
                f"{ind}%{p}eight = arith.constant {8 * ROW} : i32",
                f"{ind}%{p}rb1 = arith.addi %{p}rb0, %{p}eight : i32",
                f"{ind}%{p}q4 = arith.muli %{p}qq, %{p}c4 : i32",
                f'{ind}%{p}oa = "fa4.smem_address"(%o{w}) : (!fa4.smem) -> !llvm.ptr<3>']
        for i in range(self.d // 8):
            blk, ch = divmod(i, 8)
            out += [f"{ind}%{p}ch{i} = arith.constant {ch} : i32",
                    f"{ind}%{p}cx{i} = arith.xori %{p}sw, %{p}ch{i} : i32",
                    f"{ind}%{p}cb{i} = arith.shli %{p}cx{i}, %{p}c4 : i32",
                    f"{ind}%{p}cq{i} = arith.addi %{p}cb{i}, %{p}q4 : i32",
                    f"{ind}%{p}bb{i} = arith.constant {blk * WG_ROWS * ROW} : i32",
                    f"{ind}%{p}cc{i} = arith.addi %{p}cq{i}, %{p}bb{i} : i32"]
            for r in (0, 1):
                x = f"%{p}w{i}_{r}"
                out += [f"{ind}{x}a = llvm.extractvalue {o}[{4 * i + 2 * r}] : {self.oacc}",
                        f"{ind}{x}b = llvm.extractvalue {o}[{4 * i + 2 * r + 1}] : {self.oacc}",
                        f"{ind}{x}as = arith.mulf {x}a, {inv[r]} : f32",
                        f"{ind}{x}bs = arith.mulf {x}b, {inv[r]} : f32",
                        f"{ind}{x}v = vector.from_elements {x}as, {x}bs : vector<2xf32>",
                        f"{ind}{x}t = arith.truncf {x}v : vector<2xf32> to vector<2x{self.elem}>",
                        f"{ind}{x}off = arith.addi %{p}rb{r}, %{p}cc{i} : i32",
                        f"{ind}{x}p = llvm.getelementptr %{p}oa[{x}off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
                        f"{ind}llvm.store {x}t, {x}p {{alignment = 4 : i64}} : vector<2x{self.elem}>, !llvm.ptr<3>"]
        out += [f"{ind}nvvm.fence.proxy {{kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}}",
                f'{ind}"fa4.named_barrier"() {{sym_name = "epilogue{w}", threads = 128}} : () -> ()',
                f"{ind}%{p}lead = arith.cmpi eq, %{p}t, %c0 : i32",
                f"{ind}scf.if %{p}lead {{"]
        for blk in range(self.blocks):
            out += [f"{ind}  %{p}sd{blk} = arith.constant {blk * BLOCK} : i32",
                    f'{ind}  "fa4.tma_store"(%o_map, %o{w}, %{p}sd{blk}, %head, %{p}row0, %bz) {{bytes = {WG_ROWS * ROW}, '
                    f"src_offset = {blk * WG_ROWS * ROW}}} : "
                    "(!fa4.tensormap, !fa4.smem, i32, i32, i32, i32) -> ()"]
        out += [f'{ind}  "fa4.tma_store_wait"() {{pending = 0}} : () -> ()', f"{ind}}}"]
        # the LSE: lane q = 0 of each quad writes its two rows
        out += [f"{ind}%{p}q0 = arith.cmpi eq, %{p}qq, %c0 : i32",
                f"{ind}%{p}wl = arith.cmpi ne, %write_lse, %c0 : i32",
                f"{ind}%{p}bh = arith.muli %bz, %num_heads : i32",
                f"{ind}%{p}bh2 = arith.addi %{p}bh, %head : i32",
                f"{ind}%{p}lrow = arith.muli %{p}bh2, %seq_q : i32"]
        for r in (0, 1):
            out += [f"{ind}%{p}in{r} = arith.cmpi slt, %{p}pos{r}, %seq_q : i32",
                    f"{ind}%{p}dl{r}a = arith.andi %{p}in{r}, %{p}wl : i1",
                    f"{ind}%{p}dl{r} = arith.andi %{p}dl{r}a, %{p}q0 : i1",
                    f"{ind}scf.if %{p}dl{r} {{",
                    f"{ind}  %{p}li{r} = arith.addi %{p}lrow, %{p}pos{r} : i32",
                    f"{ind}  %{p}lp{r} = llvm.getelementptr %lse[%{p}li{r}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32",
                    f"{ind}  llvm.store %{p}lse{r}, %{p}lp{r} : f32, !llvm.ptr<1>",
                    f"{ind}}}"]
        return out
