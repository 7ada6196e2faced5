"""The attention kernel's declarations and its two single-thread roles: the TMA load warp and the
MMA warp. Every method returns MLIR lines (fa4 dialect text)."""

from __future__ import annotations

from fa4_mlir.kernels.attention.dims import BLOCK, MMA_K, ROW_BYTES, WG, Dims
from fa4_mlir.layouts import fa4_barriers

I32x4 = "(!fa4.tensormap, !fa4.smem, !fa4.mbarriers, i32, i32, i32, i32, i32) -> ()"
PIPE2 = "(!fa4.pipeline, i32, i32)"
SYMBOL = {"S0_consumer": "s0_cons", "S1_consumer": "s1_cons", "C0_producer": "c0_full", "C0_consumer": "c0_empty",
          "C1_producer": "c1_full", "C1_consumer": "c1_empty", "S0_producer": "s0_full", "S1_producer": "s1_full",
          "Q1_sync": "q1sync", "kv_producer": "k_full", "kv_consumer": "k_empty", "k_producer": "k_full",
          "k_consumer": "k_empty", "v_producer": "v_full", "v_consumer": "v_empty", "O0_producer": "o0_full",
          "O1_producer": "o1_full"}


class Producers:
    """Prologue (regions, barriers, TMEM, pipelines, the CTA's tile), load warp and MMA warp."""

    def __init__(self, dims: Dims):
        self.d = dims
        self.c = dims.c

    # -- prologue ------------------------------------------------------------------------------------
    def prologue(self) -> list[str]:
        d = self.d
        i = "      "
        smem = '"fa4.smem_region"() {{sym_name = "{}", bytes = {}, align = {}{}}} : () -> !fa4.smem'
        sw = ', swizzle = "128B"'
        out = [f"{i}%c0 = arith.constant 0 : i32", f"{i}%c1 = arith.constant 1 : i32",
               f"{i}%c2 = arith.constant 2 : i32", f"{i}%true = arith.constant true",
               f"{i}%false = arith.constant false",
               f"{i}%q = {smem.format('q', d.q_bytes, 1024, sw)}",
               f'{i}%o = "fa4.smem_alias"(%q) {{sym_name = "o", bytes = {d.q_bytes}}} : (!fa4.smem) -> !fa4.smem']
        if d.fused:
            out.append(f"{i}%kring = {smem.format('kv', d.nkv * d.kv_stage, 1024, sw)}")
        else:
            out += [f"{i}%kring = {smem.format('k', d.nkv * d.kv_stage, 1024, sw)}",
                    f"{i}%vring = {smem.format('v', d.nkv * d.kv_stage, 1024, sw)}"]
        out.append(f"{i}%corr = {smem.format('correction', d.f.correction_bytes, 4, '')}")
        for b in fa4_barriers(d.f):
            counts = (f"arrive_count = {b.counts[0]}" if len(set(b.counts)) == 1
                      else f"arrive_counts = array<i32: {', '.join(map(str, b.counts))}>")
            out.append(f'{i}%{SYMBOL[b.name]} = "fa4.mbarrier_alloc"() {{sym_name = "{b.name}", num_barriers = '
                       f'{len(b.counts)}, {counts}, arrival = "{b.arrival}"}} : () -> !fa4.mbarriers')
        out.append(f"{i}%slot = {smem.format('tmem_addr', 4, 4, '')}")
        for name, cols in (("S0", d.bn), ("S1", d.bn), ("O0", d.depth), ("O1", d.depth)):
            out.append(f'{i}%{name} = "fa4.tmem_region"() {{sym_name = "{name}", columns = {cols}}} : () -> !fa4.tmem')
        out += [f"{i}%tid0 = nvvm.read.ptx.sreg.tid.x : i32",
                f"{i}%c32 = arith.constant 32 : i32",
                f"{i}%warp0 = arith.divui %tid0, %c32 : i32",
                f"{i}%alloc_warp = arith.cmpi eq, %warp0, %c1 : i32",
                f"{i}scf.if %alloc_warp {{",
                f'{i}  "fa4.tmem_alloc"(%slot) : (!fa4.smem) -> ()',
                f"{i}}}"]
        pipes = [("s0", "s0_full", "s0_cons", 1, 1, d.f.num_pv_stages), ("s1", "s1_full", "s1_cons", 1, 1, 2),
                 ("cq0", "c0_full", "c0_empty", 1, 1, 1), ("cq1", "c1_full", "c1_empty", 1, 1, 1),
                 ("k", "k_full", "k_empty", d.nkv, d.nqk, d.nqk)]
        if not d.fused:
            pipes.append(("v", "v_full", "v_empty", d.nkv, 1, 1))
        for name, full, empty, n, ps, cs in pipes:
            subs = (f", producer_sub_stages = {ps}" if ps > 1 else "") + (f", consumer_sub_stages = {cs}" if cs > 1 else "")
            out.append(f'{i}%{name} = "fa4.pipeline_create"(%{full}, %{empty}) {{sym_name = "{name}", '
                       f"num_stages = {n}{subs}}} : (!fa4.mbarriers, !fa4.mbarriers) -> !fa4.pipeline")
        out += [f'{i}"fa4.mbarrier_init"(%{SYMBOL[b.name]}) : (!fa4.mbarriers) -> ()' for b in fa4_barriers(d.f)]
        out += [f"{i}%nqk = arith.constant {d.nqk} : i32"] + [f"{i}%sub{q} = arith.constant {q} : i32" for q in range(d.nqk)]
        out += self._views(i) + self._tile(i)
        return out

    def _views(self, i: str) -> list[str]:
        """Named views: each Q half's depth sub-stages (the MMA reads one while TMA may still fill the
        next), each softmax warpgroup's output tile over the dead Q and its correction slots."""
        d, c = self.d, self.c
        alias = '{i}%{name} = "fa4.smem_alias"(%{base}) {{sym_name = "{name}", bytes = {size}, offset = {off}}} : (!fa4.smem) -> !fa4.smem'
        out = []
        for half in range(c.num_q):
            for s in range(d.nqk):
                out.append(alias.format(i=i, name=f"q{half}_{s}", base="q", size=d.q_chunk, off=d.q_offset(half, s)))
        for wg in (0, 1):
            out.append(alias.format(i=i, name=f"corr{wg}", base="corr", size=WG * 4, off=wg * WG * 4))
            blocks = d.out_blocks(wg)
            if blocks:
                off = wg * d.o_half if c.num_q == 2 else blocks.start * WG * ROW_BYTES
                out.append(alias.format(i=i, name=f"o{wg}", base="o", size=len(blocks) * WG * ROW_BYTES, off=off))
        return out

    def _tile(self, i: str) -> list[str]:
        """The CTA's tile: %q_start (first query position), %n_iter (loop trips of every role: K/V
        tiles in 2Q, pairs of them in 1Q), %kvh / %head0 (K/V head, first query head)."""
        c, d = self.c, self.d
        g = c.fused_group
        out = [f"{i}%qt = nvvm.read.ptx.sreg.ctaid.x : i32",
               f"{i}%hy = nvvm.read.ptx.sreg.ctaid.y : i32",
               f"{i}%bz = nvvm.read.ptx.sreg.ctaid.z : i32",
               f"{i}%cta_pos = arith.constant {c.cta_positions} : i32",
               f"{i}%half_pos = arith.constant {c.positions} : i32",
               f"{i}%q_start = arith.muli %qt, %cta_pos : i32",
               f"{i}%q1_start = arith.addi %q_start, %half_pos : i32",
               f"{i}%bn = arith.constant {d.bn} : i32",
               f"{i}%bn_m1 = arith.constant {d.bn - 1} : i32",
               f"{i}%grp = arith.constant {c.group} : i32"]
        if c.causal:  # tiles past the CTA's last row are skipped by every role alike
            out += [f"{i}%q_end = arith.addi %q_start, %cta_pos : i32",
                    f"{i}%kv_end = arith.minsi %seq_k, %q_end : i32"]
        else:
            out.append(f"{i}%kv_end = arith.addi %seq_k, %c0 : i32")
        out += [f"{i}%kv_up = arith.addi %kv_end, %bn_m1 : i32",
                f"{i}%tiles = arith.divsi %kv_up, %bn : i32"]
        if c.num_q == 2:
            out.append(f"{i}%n_iter = arith.addi %tiles, %c0 : i32")
        else:
            out += [f"{i}%tiles1 = arith.addi %tiles, %c1 : i32", f"{i}%n_iter = arith.divsi %tiles1, %c2 : i32"]
        if g > 1:
            out += [f"{i}%kvh = arith.addi %hy, %c0 : i32", f"{i}%head0 = arith.muli %hy, %grp : i32"]
        else:
            out += [f"{i}%kvh = arith.divsi %hy, %grp : i32", f"{i}%head0 = arith.addi %hy, %c0 : i32"]
        return out

    # -- shared by both roles ------------------------------------------------------------------------
    def _ring(self, kind: str) -> tuple[str, str, str, str]:
        """(pipeline, ring region, full barriers, state key) of K or V items; fused mode has one ring."""
        if kind == "k" or self.d.fused:
            return "%k", "%kring", "%k_full", "k"
        return "%v", "%vring", "%v_full", "v"

    def _k_buffers(self, ind: str, tag: str, stage: str) -> list[str]:
        """%{tag}_i{q}: the barrier / buffer index of depth sub-stage q of K ``stage`` (stage * nqk + q);
        %{tag}_b{q}: its buffer."""
        d = self.d
        _, ring, _, _ = self._ring("k")
        out = [f"{ind}%{tag}_m = arith.muli {stage}, %nqk : i32"]
        for q in range(d.nqk):
            out += [f"{ind}%{tag}_i{q} = arith.addi %{tag}_m, %sub{q} : i32",
                    f'{ind}%{tag}_b{q} = "fa4.smem_stage"({ring}, %{tag}_i{q}) {{bytes = {d.k_chunk}}} : (!fa4.smem, i32) -> !fa4.smem']
        return out

    @staticmethod
    def advance(ind: str, tag: str, pipe: str, states: dict, key: str) -> list[str]:
        stage, phase = states[key]
        states[key] = (f"%{tag}_n#0", f"%{tag}_n#1")
        return [f'{ind}%{tag}_n:2 = "fa4.pipeline_advance"({pipe}, {stage}, {phase}) : {PIPE2} -> (i32, i32)']

    # -- load warp -----------------------------------------------------------------------------------
    def _load_k(self, ind: str, tag: str, states: dict, tile: str, with_q: bool) -> list[str]:
        d = self.d
        pipe, _, full, key = self._ring("k")
        stage, phase = states[key]
        out = [f"{ind}%{tag}_key = arith.muli {tile}, %bn : i32"] + self._k_buffers(ind, tag, stage)
        for q in range(d.nqk):
            tx = d.k_chunk + (d.q_chunk if with_q else 0)
            out += [f'{ind}"fa4.pipeline_producer_acquire"({pipe}, {stage}, {phase}) {{sub_stage = {q}}} : {PIPE2} -> ()',
                    f'{ind}"fa4.pipeline_producer_commit"({pipe}, {stage}) {{sub_stage = {q}, tx_bytes = {tx}}} : (!fa4.pipeline, i32) -> ()']
            for blk in range(d.sub_blocks):
                out.append(f"{ind}%{tag}_d{q}_{blk} = arith.constant {q * d.bk0 + blk * BLOCK} : i32")
                if with_q:  # Q rides on the first K tile's barriers (the reference's Q0 + K0 load)
                    out.append(f'{ind}"fa4.tma_load"(%q_map, %q0_{q}, {full}, %{tag}_i{q}, %{tag}_d{q}_{blk}, %head0, '
                               f"%q_start, %bz) {{bytes = {WG * ROW_BYTES}, dst_offset = {blk * WG * ROW_BYTES}}} : {I32x4}")
                out.append(f'{ind}"fa4.tma_load"(%k_map, %{tag}_b{q}, {full}, %{tag}_i{q}, %{tag}_d{q}_{blk}, %kvh, '
                           f"%{tag}_key, %bz) {{bytes = {d.bn * ROW_BYTES}, dst_offset = {blk * d.bn * ROW_BYTES}}} : {I32x4}")
        return out + self.advance(ind, tag, pipe, states, key)

    def _load_q1(self, ind: str) -> list[str]:
        d = self.d
        out = []
        for q in range(d.nqk):
            out.append(f'{ind}"fa4.mbarrier_arrive_expect_tx"(%q1sync, %sub{q}) {{tx_bytes = {d.q_chunk}}} : (!fa4.mbarriers, i32) -> ()')
            for blk in range(d.sub_blocks):
                out += [f"{ind}%ld_q1d{q}_{blk} = arith.constant {q * d.bk0 + blk * BLOCK} : i32",
                        f'{ind}"fa4.tma_load"(%q_map, %q1_{q}, %q1sync, %sub{q}, %ld_q1d{q}_{blk}, %head0, %q1_start, %bz) '
                        f"{{bytes = {WG * ROW_BYTES}, dst_offset = {blk * WG * ROW_BYTES}}} : {I32x4}"]
        return out

    def _load_v(self, ind: str, tag: str, states: dict, tile: str) -> list[str]:
        d = self.d
        pipe, ring, full, key = self._ring("v")
        stage, phase = states[key]
        out = [f"{ind}%{tag}_key = arith.muli {tile}, %bn : i32",
               f'{ind}"fa4.pipeline_producer_acquire"({pipe}, {stage}, {phase}) : {PIPE2} -> ()',
               f'{ind}"fa4.pipeline_producer_commit"({pipe}, {stage}) {{tx_bytes = {d.kv_stage}}} : (!fa4.pipeline, i32) -> ()',
               f'{ind}%{tag}_b = "fa4.smem_stage"({ring}, {stage}) {{bytes = {d.kv_stage}}} : (!fa4.smem, i32) -> !fa4.smem']
        for blk in range(d.blocks):
            out += [f"{ind}%{tag}_d{blk} = arith.constant {blk * BLOCK} : i32",
                    f'{ind}"fa4.tma_load"(%v_map, %{tag}_b, {full}, {stage}, %{tag}_d{blk}, %kvh, %{tag}_key, %bz) '
                    f"{{bytes = {d.bn * ROW_BYTES}, dst_offset = {blk * d.bn * ROW_BYTES}}} : {I32x4}"]
        return out + self.advance(ind, tag, pipe, states, key)

    def _ring_keys(self) -> list[str]:
        return ["k"] if self.d.fused else ["k", "v"]

    def _initial(self, ind: str, p: str, side: str) -> tuple[list[str], dict]:
        out, states = [], {}
        for key in self._ring_keys():
            out.append(f'{ind}%{p}{key}i:2 = "fa4.pipeline_initial_state"(%{key}) {{side = "{side}"}} : (!fa4.pipeline) -> (i32, i32)')
            states[key] = (f"%{p}{key}i#0", f"%{p}{key}i#1")
        return out, states

    def _loop(self, ind: str, p: str, carried: list[tuple[str, str, str]], body, close) -> list[str]:
        """``scf.for %{p}n = 1 to %n_iter`` carrying ``(name, initial value, type)``; ``body(ind)``
        returns lines and the yielded values; ``close`` receives the result names."""
        names = ", ".join(f"%{p}{n} = {v}" for n, v, _ in carried)
        types = ", ".join(t for _, _, t in carried)
        lines, yields = body(ind + "  ")
        out = [f"{ind}%{p}r:{len(carried)} = scf.for %{p}n = %c1 to %n_iter step %c1 iter_args({names}) -> ({types}) : i32 {{",
               *lines, f"{ind}  scf.yield {', '.join(yields)} : {types}", f"{ind}}}"]
        close([f"%{p}r#{j}" for j in range(len(carried))])
        return out

    def load(self) -> list[str]:
        """The TMA warp: Q with the first K tile (Q1 on its own barriers in 2Q), then per iteration
        the K and V tiles in the order the MMA warp consumes them."""
        ind = "            "
        init, states = self._initial(ind, "ld_", "producer")

        def iteration(i2: str, n: str, first: bool, tag: str) -> list[str]:
            if self.c.num_q == 2:
                out = self._load_k(i2, f"{tag}k", states, n, with_q=first)
                if first:
                    out += self._load_q1(i2)
                return out + self._load_v(i2, f"{tag}v", states, n)
            out = [f"{i2}%{tag}e = arith.muli {n}, %c2 : i32", f"{i2}%{tag}o = arith.addi %{tag}e, %c1 : i32"]
            out += self._load_k(i2, f"{tag}ke", states, f"%{tag}e", with_q=first)
            out += self._load_k(i2, f"{tag}ko", states, f"%{tag}o", with_q=False)
            out += self._load_v(i2, f"{tag}ve", states, f"%{tag}e")
            return out + self._load_v(i2, f"{tag}vo", states, f"%{tag}o")

        peel = iteration(ind, "%c0", True, "ld0")
        keys = self._ring_keys()
        carried = [(f"{k}{j}", states[k][j], "i32") for k in keys for j in (0, 1)]

        def body(i2):
            for k in keys:
                states[k] = (f"%ld_{k}0", f"%ld_{k}1")
            lines = iteration(i2, "%ld_n", False, "ldl")
            return lines, [states[k][j] for k in keys for j in (0, 1)]

        loop = self._loop(ind, "ld_", carried, body, lambda results: None)
        return ['        "fa4.warp_role"() ({',
                '          %ld_e = "fa4.elect_one"() : () -> i1',
                "          scf.if %ld_e {", *init, *peel, *loop, "          }",
                "          gpu.yield",
                '        }) {sym_name = "load", warps = array<i32: 13>, registers = 64} : () -> ()']

    # -- MMA warp ------------------------------------------------------------------------------------
    def _qk(self, ind: str, half: int, q_half: int, kb: str, q: int) -> list[str]:
        """S_half (+)= Q_{q_half} sub-stage q x K sub-stage q (buffer ``kb``)."""
        d = self.d
        out = []
        for kk in range(d.bk0 // MMA_K):
            blk, inner = divmod(kk, 4)
            acc = "%true" if q or kk else "%false"
            out.append(f'{ind}"fa4.tcgen05_mma"(%S{half}, %q{q_half}_{q}, {kb}, {acc}) {{m = 128, n = {d.bn}, ab_type = '
                       f'"{d.elem}", a_offset = {blk * WG * ROW_BYTES + inner * 32}, b_offset = '
                       f"{blk * d.bn * ROW_BYTES + inner * 32}}} : (!fa4.tmem, !fa4.smem, !fa4.smem, i1) -> ()")
        return out

    def _pv(self, ind: str, half: int, vb: str, first_acc: str, s_state) -> list[str]:
        """O_half (+)= P_half x V in the two P stages; stage j waits until softmax wrote P stage j
        (stage 0 also: correction rescaled O_half) and covers its share of the BN keys."""
        d = self.d
        steps = d.bn // MMA_K
        out = []
        for j, (lo, hi) in enumerate(((0, d.pv_split), (d.pv_split, steps))):
            out.append(f'{ind}"fa4.pipeline_producer_acquire"(%s{half}, {s_state[0]}, {s_state[1]}) {{sub_stage = {j}}} : {PIPE2} -> ()')
            for kk in range(lo, hi):
                acc = first_acc if kk == 0 else "%true"
                out.append(f'{ind}"fa4.tcgen05_mma"(%O{half}, %S{half}, {vb}, {acc}) {{m = 128, n = {d.depth}, ab_type = '
                           f'"{d.elem}", a_offset = {kk * 32}, b_offset = {kk * MMA_K * ROW_BYTES}, b_major = "mn", '
                           f"b_block_stride = {d.bn * ROW_BYTES}}} : (!fa4.tmem, !fa4.tmem, !fa4.smem, i1) -> ()")
        out.append(f'{ind}"fa4.mma_commit"(%o{half}_full, %c0) : (!fa4.mbarriers, i32) -> ()')
        return out

    def _wait_k(self, ind: str, tag: str, states: dict) -> list[str]:
        pipe, _, _, key = self._ring("k")
        stage, phase = states[key]
        out = self._k_buffers(ind, tag, stage)
        out += [f'{ind}"fa4.pipeline_consumer_wait"({pipe}, {stage}, {phase}) {{sub_stage = {q}}} : {PIPE2} -> ()'
                for q in range(self.d.nqk)]
        return out

    def _release_k(self, ind: str, tag: str, states: dict) -> list[str]:
        pipe, _, _, key = self._ring("k")
        stage = states[key][0]
        out = [f'{ind}"fa4.pipeline_consumer_release"({pipe}, {stage}) {{sub_stage = {q}}} : (!fa4.pipeline, i32) -> ()'
               for q in range(self.d.nqk)]
        return out + self.advance(ind, tag, pipe, states, key)

    def _s_commit(self, ind: str, tag: str, half: int, states: dict) -> list[str]:
        stage = states[f"s{half}"][0]
        return ([f'{ind}"fa4.pipeline_producer_commit"(%s{half}, {stage}) : (!fa4.pipeline, i32) -> ()']
                + self.advance(ind, tag, f"%s{half}", states, f"s{half}"))

    def mma(self) -> list[str]:
        """One elected thread: S0 <- Q0 Kn', O1 += P1 V(n-1), S1 <- Q1 Kn', O0 += P0 Vn (2Q; in 1Q
        S0/O0 take the even tiles and S1/O1 the odd ones of one Q). S_i is overwritten only by a
        Q@K' issued after the P_i@V that read it: MMAs of one thread run in order."""
        d, two_q = self.d, self.c.num_q == 2
        ind = "            "
        init, states = self._initial(ind, "mm_", "consumer")
        for half in (0, 1):
            init.append(f'{ind}%mm_s{half}i:2 = "fa4.pipeline_initial_state"(%s{half}) {{side = "producer"}} : (!fa4.pipeline) -> (i32, i32)')
            states[f"s{half}"] = (f"%mm_s{half}i#0", f"%mm_s{half}i#1")
        vpipe, _, _, vkey = self._ring("v")

        def iteration(i2: str, first: bool, tag: str, vprev: str, o1_acc: str) -> tuple[list[str], str]:
            """One iteration's MMAs; ``vprev`` is the held V stage of the previous one (O1's)."""
            out = self._wait_k(i2, f"{tag}ka", states)
            for q in range(d.nqk):
                out += self._qk(i2, 0, 0, f"%{tag}ka_b{q}", q)
            out += self._s_commit(i2, f"{tag}s0", 0, states)
            if not first:
                out += self._pv(i2, 1, f"%{tag}_vp_b", o1_acc, states["s1"])
                out.append(f'{i2}"fa4.pipeline_consumer_release"({vpipe}, {vprev}) : (!fa4.pipeline, i32) -> ()')
            if two_q:
                for q in range(d.nqk):
                    if first:
                        out.append(f'{i2}"fa4.mbarrier_try_wait_parity"(%q1sync, %sub{q}, %c0) : (!fa4.mbarriers, i32, i32) -> ()')
                    out += self._qk(i2, 1, 1, f"%{tag}ka_b{q}", q)
                out += self._release_k(i2, f"{tag}kr", states)
            else:
                out += self._release_k(i2, f"{tag}kr", states)
                out += self._wait_k(i2, f"{tag}kb", states)
                for q in range(d.nqk):
                    out += self._qk(i2, 1, 0, f"%{tag}kb_b{q}", q)
                out += self._release_k(i2, f"{tag}kq", states)
            out += self._s_commit(i2, f"{tag}s1", 1, states)
            out += self._wait_v(i2, f"{tag}va", states)
            out += self._pv(i2, 0, f"%{tag}va_b", "%false" if first else "%true", states["s0"])
            held = states[vkey][0]
            out += self.advance(i2, f"{tag}vn", vpipe, states, vkey)
            if not two_q:  # V_even is done; V_odd is held for O1 in the next iteration
                out.append(f'{i2}"fa4.pipeline_consumer_release"({vpipe}, {held}) : (!fa4.pipeline, i32) -> ()')
                out += self._wait_v(i2, f"{tag}vb", states)
                held = states[vkey][0]
                out += self.advance(i2, f"{tag}vm", vpipe, states, vkey)
            return out, held

        peel, held = iteration(ind, True, "mm0", "", "")
        keys = self._ring_keys() + ["s0", "s1"]
        carried = [(f"{k}{j}", states[k][j], "i32") for k in keys for j in (0, 1)]
        carried += [("vp", held, "i32"), ("acc", "%false", "i1")]
        final = {}

        def body(i2):
            for k in keys:
                states[k] = (f"%mm_{k}0", f"%mm_{k}1")
            lines = [f'{i2}%mml_vp_b = "fa4.smem_stage"({self._ring("v")[1]}, %mm_vp) {{bytes = {d.kv_stage}}} : (!fa4.smem, i32) -> !fa4.smem']
            more, held2 = iteration(i2, False, "mml", "%mm_vp", "%mm_acc")
            return lines + more, [states[k][j] for k in keys for j in (0, 1)] + [held2, "%true"]

        def close(results):
            final["s1"] = (results[2 * keys.index("s1")], results[2 * keys.index("s1") + 1])
            final["vp"], final["acc"] = results[-2], results[-1]

        loop = self._loop(ind, "mm_", carried, body, close)
        tail = [f'{ind}%mme_vp_b = "fa4.smem_stage"({self._ring("v")[1]}, {final["vp"]}) {{bytes = {d.kv_stage}}} : (!fa4.smem, i32) -> !fa4.smem',
                *self._pv(ind, 1, "%mme_vp_b", final["acc"], final["s1"]),
                f'{ind}"fa4.pipeline_consumer_release"({vpipe}, {final["vp"]}) : (!fa4.pipeline, i32) -> ()']
        return ['        "fa4.warp_role"() ({',
                '          %mm_e = "fa4.elect_one"() : () -> i1',
                "          scf.if %mm_e {", *init, *peel, *loop, *tail, "          }",
                "          gpu.yield",
                '        }) {sym_name = "mma", warps = array<i32: 12>, registers = 64} : () -> ()']

    def _wait_v(self, ind: str, tag: str, states: dict) -> list[str]:
        pipe, ring, _, key = self._ring("v")
        stage, phase = states[key]
        return [f'{ind}"fa4.pipeline_consumer_wait"({pipe}, {stage}, {phase}) : {PIPE2} -> ()',
                f'{ind}%{tag}_b = "fa4.smem_stage"({ring}, {stage}) {{bytes = {self.d.kv_stage}}} : (!fa4.smem, i32) -> !fa4.smem']
