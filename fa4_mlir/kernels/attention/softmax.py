"""The attention kernel's softmax warpgroups (online softmax, P into TMEM, the epilogue) and its
correction warpgroup (rescales O in TMEM when a row maximum grew). Methods return MLIR lines."""

from __future__ import annotations

from fa4_mlir.kernels.attention.dims import BLOCK, ROW_BYTES, WG, Dims

PIPE2 = "(!fa4.pipeline, i32, i32)"
RESCALE_THRESHOLD = -8.0  # log2 units: a row maximum that grew by less keeps the stale one
LN2 = 0.6931471805599453
# 2^f on [0, 1), degree 3 (Horner, highest first): the reference's exp2 emulation
EXP2_POLY = (0.077119089663028717041015625, 0.227564394474029541015625, 0.695146143436431884765625, 1.0)
EX2 = 'llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"'
LG2 = 'llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"'
NEG_INF = "0xFF800000"


def emulated(width: int, count: int) -> set[int]:
    """Columns of a ``width``-column batch whose exp2 uses the polynomial: ``count`` per 32,
    spread evenly."""
    n = count * width // 32
    return {int((k + 0.5) * width / n) for k in range(n)} if n else set()


class Softmax:
    def __init__(self, dims: Dims):
        self.d = dims
        self.c = dims.c

    # -- helpers -------------------------------------------------------------------------------------
    def _masked(self, ind: str, p: str, name: str, src: str, b: int) -> list[str]:
        """``name``: ``src`` with columns at or past the row's key limit set to -inf (only in tiles
        that reach the limit: the others skip the compare)."""
        W = self.d.batch
        v, iv = f"vector<{W}xf32>", f"vector<{W}xi32>"
        return [f"{ind}{name} = scf.if %{p}need -> ({v}) {{",
                f"{ind}  {name}k = arith.cmpi slt, %{p}iota{b}, %{p}relv : {iv}",
                f"{ind}  {name}s = arith.select {name}k, {src}, %{p}ninfv : vector<{W}xi1>, {v}",
                f"{ind}  scf.yield {name}s : {v}",
                f"{ind}}} else {{",
                f"{ind}  scf.yield {src} : {v}",
                f"{ind}}}"]

    def _exp2(self, ind: str, x: str, out: str, poly: bool) -> list[str]:
        if not poly:
            return [f"{ind}{out} = {EX2}({x}) : (f32) -> f32"]
        # clamp, split into integer and fraction, polynomial, add the integer to the exponent
        return [f"{ind}{out}c = arith.maxnumf {x}, %em127 : f32",
                f'{ind}{out}f = llvm.call_intrinsic "llvm.nvvm.floor.f"({out}c) : (f32) -> f32',
                f"{ind}{out}r = arith.subf {out}c, {out}f : f32",
                f"{ind}{out}p1 = llvm.intr.fma(%ep0, {out}r, %ep1) : (f32, f32, f32) -> f32",
                f"{ind}{out}p2 = llvm.intr.fma({out}p1, {out}r, %ep2) : (f32, f32, f32) -> f32",
                f"{ind}{out}p3 = llvm.intr.fma({out}p2, {out}r, %ep3) : (f32, f32, f32) -> f32",
                f"{ind}{out}i = arith.fptosi {out}f : f32 to i32",
                f"{ind}{out}s = arith.shli {out}i, %e23 : i32",
                f"{ind}{out}b = arith.bitcast {out}p3 : f32 to i32",
                f"{ind}{out}e = arith.addi {out}b, {out}s : i32",
                f"{ind}{out} = arith.bitcast {out}e : i32 to f32"]

    def _constants(self, ind: str, p: str) -> list[str]:
        W = self.d.batch
        out = [f"{ind}%{p}ninf = arith.constant {NEG_INF} : f32",
               f"{ind}%{p}zero = arith.constant 0.0 : f32",
               f"{ind}%{p}one = arith.constant 1.0 : f32",
               f"{ind}%{p}thr = arith.constant {RESCALE_THRESHOLD} : f32",
               f"{ind}%{p}all = arith.constant -1 : i32",
               f"{ind}%{p}ninfv = arith.constant dense<{NEG_INF}> : vector<{W}xf32>",
               f"{ind}%{p}scv = vector.broadcast %scale_log2e : f32 to vector<{W}xf32>"]
        for b in range(self.d.bn // W):
            cols = ", ".join(str(b * W + j) for j in range(W))
            out.append(f"{ind}%{p}iota{b} = arith.constant dense<[{cols}]> : vector<{W}xi32>")
        if self.c.exp2_emulation:
            out += [f"{ind}%em127 = arith.constant -127.0 : f32", f"{ind}%e23 = arith.constant 23 : i32"]
            out += [f"{ind}%ep{k} = arith.constant {v!r} : f32" for k, v in enumerate(EXP2_POLY)]
        return out

    def _row(self, ind: str, p: str, wg: int) -> list[str]:
        """%{p}t (TMEM lane = row of the tile), %{p}pos (query position), %{p}head, %{p}lim (first
        key the row may not see)."""
        c = self.c
        start = "%q1_start" if c.num_q == 2 and wg == 1 else "%q_start"
        out = [f"{ind}%{p}tid = nvvm.read.ptx.sreg.tid.x : i32",
               f"{ind}%{p}c128 = arith.constant 128 : i32",
               f"{ind}%{p}t = arith.remui %{p}tid, %{p}c128 : i32",
               f"{ind}%{p}g = arith.constant {c.fused_group} : i32",
               f"{ind}%{p}tp = arith.divui %{p}t, %{p}g : i32",
               f"{ind}%{p}th = arith.remui %{p}t, %{p}g : i32",
               f"{ind}%{p}pos0 = arith.addi {start}, %c0 : i32",
               f"{ind}%{p}pos = arith.addi %{p}pos0, %{p}tp : i32",
               f"{ind}%{p}head = arith.addi %head0, %{p}th : i32"]
        if c.causal:
            out += [f"{ind}%{p}pos1 = arith.addi %{p}pos, %c1 : i32", f"{ind}%{p}lim = arith.minsi %seq_k, %{p}pos1 : i32"]
        else:
            out.append(f"{ind}%{p}lim = arith.addi %seq_k, %c0 : i32")
        return out

    # -- softmax warpgroups --------------------------------------------------------------------------
    def softmax(self, wg: int) -> list[str]:
        d, c = self.d, self.c
        p = f"sm{wg}_"
        ind = "          "
        li = ind + "  "
        W = d.batch
        v, iv = f"vector<{W}xf32>", f"vector<{W}xi32>"
        batches = range(d.bn // W)
        if c.num_q == 2:
            tile = [f"{li}%{p}tile = arith.addi %{p}n, %c0 : i32"]
        else:
            tile = [f"{li}%{p}n2 = arith.muli %{p}n, %c2 : i32", f"{li}%{p}tile = arith.addi %{p}n2, %c{wg} : i32"]
        body = [*tile,
                f"{li}%{p}key0 = arith.muli %{p}tile, %bn : i32",
                f"{li}%{p}rel = arith.subi %{p}lim, %{p}key0 : i32",
                f"{li}%{p}need = arith.cmpi slt, %{p}rel, %bn : i32",
                f"{li}%{p}relv = vector.broadcast %{p}rel : i32 to {iv}",
                f'{li}"fa4.pipeline_consumer_wait"(%s{wg}, %{p}a, %{p}b) : {PIPE2} -> ()']
        running = f"%{p}m"
        for b in batches:  # pass 1: the tile's row maximum
            x = f"%{p}x{b}"
            body += [f'{li}{x} = "fa4.tmem_load"(%S{wg}) {{column_offset = {b * W}}} : (!fa4.tmem) -> {iv}',
                     f"{li}{x}f = arith.bitcast {x} : {iv} to {v}",
                     *self._masked(li, p, f"{x}k", f"{x}f", b),
                     f"{li}{x}m = vector.reduction <maxnumf>, {x}k : {v} into f32",
                     f"{li}{x}r = arith.maxnumf {running}, {x}m : f32"]
            running = f"{x}r"
        body += [  # lazy rescale: adopt the new maximum only when some row of the warp grew by > 8 (log2)
            f"{li}%{p}dm = arith.subf %{p}m, {running} : f32",
            f"{li}%{p}ds = arith.mulf %{p}dm, %scale_log2e : f32",
            f"{li}%{p}fresh = arith.cmpf oeq, %{p}m, %{p}ninf : f32",
            f"{li}%{p}big = arith.cmpf olt, %{p}ds, %{p}thr : f32",
            f"{li}%{p}want = arith.ori %{p}fresh, %{p}big : i1",
            f"{li}%{p}any = nvvm.vote.sync any %{p}all, %{p}want -> i1",
            f"{li}%{p}mu = arith.select %{p}any, {running}, %{p}m : f32",
            f"{li}%{p}ex = {EX2}(%{p}ds) : (f32) -> f32",
            f"{li}%{p}cf0 = arith.select %{p}fresh, %{p}zero, %{p}ex : f32",
            f"{li}%{p}cf = arith.select %{p}any, %{p}cf0, %{p}one : f32",
            f'{li}"fa4.pipeline_producer_acquire"(%cq{wg}, %{p}cc, %{p}cd) : {PIPE2} -> ()',
            f'{li}%{p}ca = "fa4.smem_address"(%corr{wg}) : (!fa4.smem) -> !llvm.ptr<3>',
            f"{li}%{p}cp = llvm.getelementptr %{p}ca[%{p}t] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, f32",
            f"{li}llvm.store %{p}cf, %{p}cp : f32, !llvm.ptr<3>",
            f'{li}"fa4.pipeline_producer_commit"(%cq{wg}, %{p}cc) : (!fa4.pipeline, i32) -> ()',
            f'{li}%{p}cn:2 = "fa4.pipeline_advance"(%cq{wg}, %{p}cc, %{p}cd) : {PIPE2} -> (i32, i32)',
            # logits in one FMA: s * scale_log2e - max * scale_log2e (a row that saw no key yet uses 0)
            f"{li}%{p}mz = arith.cmpf oeq, %{p}mu, %{p}ninf : f32",
            f"{li}%{p}me = arith.select %{p}mz, %{p}zero, %{p}mu : f32",
            f"{li}%{p}nm0 = arith.mulf %{p}me, %scale_log2e : f32",
            f"{li}%{p}nm = arith.negf %{p}nm0 : f32",
            f"{li}%{p}nmv = vector.broadcast %{p}nm : f32 to {v}"]
        total = None
        poly = emulated(W, c.exp2_emulation)
        last_of_stage = {d.p_stage(b * W): b for b in batches}
        for b in batches:  # pass 2: exponentials, P (16-bit pairs) over S's first columns, row sum
            y = f"%{p}y{b}"
            body += [f'{li}{y} = "fa4.tmem_load"(%S{wg}) {{column_offset = {b * W}}} : (!fa4.tmem) -> {iv}',
                     f"{li}{y}f = arith.bitcast {y} : {iv} to {v}",
                     *self._masked(li, p, f"{y}k", f"{y}f", b),
                     f"{li}{y}l = llvm.intr.fma({y}k, %{p}scv, %{p}nmv) : ({v}, {v}, {v}) -> {v}"]
            names = []
            for j in range(W):
                body.append(f"{li}{y}e{j} = vector.extract {y}l[{j}] : f32 from {v}")
                body += self._exp2(li, f"{y}e{j}", f"{y}p{j}", j in poly)
                names.append(f"{y}p{j}")
            body += [f"{li}{y}v = vector.from_elements {', '.join(names)} : {v}",
                     f"{li}{y}t = arith.truncf {y}v : {v} to vector<{W}x{d.elem}>",
                     f"{li}{y}i = vector.bitcast {y}t : vector<{W}x{d.elem}> to vector<{W // 2}xi32>",
                     f'{li}"fa4.tmem_store"(%S{wg}, {y}i) {{column_offset = {b * W // 2}}} : (!fa4.tmem, vector<{W // 2}xi32>) -> ()',
                     f"{li}{y}s = vector.reduction <add>, {y}v : {v} into f32"]
            if total is not None:
                body.append(f"{li}{y}a = arith.addf {total}, {y}s : f32")
                total = f"{y}a"
            else:
                total = f"{y}s"
            stage = d.p_stage(b * W)
            if last_of_stage[stage] == b:  # P stage written: the MMA may start its share of P@V
                body.append(f'{li}"fa4.pipeline_consumer_release"(%s{wg}, %{p}a) {{sub_stage = {stage}}} : (!fa4.pipeline, i32) -> ()')
        body += [f"{li}%{p}ln = llvm.intr.fma(%{p}l, %{p}cf, {total}) : (f32, f32, f32) -> f32",
                 f'{li}%{p}sn:2 = "fa4.pipeline_advance"(%s{wg}, %{p}a, %{p}b) : {PIPE2} -> (i32, i32)',
                 f"{li}%{p}ophn = arith.xori %{p}oph, %c1 : i32",
                 f"{li}scf.yield %{p}mu, %{p}ln, %{p}sn#0, %{p}sn#1, %{p}cn#0, %{p}cn#1, %{p}ophn : "
                 "f32, f32, i32, i32, i32, i32, i32"]
        return ['        "fa4.warp_role"() ({',
                *self._row(ind, p, wg), *self._constants(ind, p),
                f'{ind}%{p}ss:2 = "fa4.pipeline_initial_state"(%s{wg}) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
                f'{ind}%{p}cs:2 = "fa4.pipeline_initial_state"(%cq{wg}) {{side = "producer"}} : (!fa4.pipeline) -> (i32, i32)',
                f"{ind}%{p}r:7 = scf.for %{p}n = %c0 to %n_iter step %c1 iter_args(%{p}m = %{p}ninf, %{p}l = %{p}zero, "
                f"%{p}a = %{p}ss#0, %{p}b = %{p}ss#1, %{p}cc = %{p}cs#0, %{p}cd = %{p}cs#1, %{p}oph = %c1) -> "
                "(f32, f32, i32, i32, i32, i32, i32) : i32 {",
                *body, f"{ind}}}",
                *self._epilogue(ind, p, wg),
                "          gpu.yield",
                f'        }}) {{sym_name = "softmax{wg}", warps = array<i32: {", ".join(str(4 * wg + k) for k in range(4))}>, '
                "registers = 184} : () -> ()"]

    # -- epilogue ------------------------------------------------------------------------------------
    def _epilogue(self, ind: str, p: str, wg: int) -> list[str]:
        """Wait for the last P@V into O_wg, normalise the rows (1Q: merge O0 and O1 first), write the
        tile over the dead Q and TMA-store it; the LSE row by row; then free TMEM."""
        d, c = self.d, self.c
        W = 32
        v, iv = f"vector<{W}xf32>", f"vector<{W}xi32>"
        out = [f'{ind}"fa4.mbarrier_try_wait_parity"(%o{wg}_full, %c0, %{p}r#6) : (!fa4.mbarriers, i32, i32) -> ()',
               f"{ind}%{p}ms = arith.mulf %{p}r#0, %scale_log2e : f32"]
        if c.num_q == 2:
            out += [f"{ind}%{p}inv = arith.divf %{p}one, %{p}r#1 : f32",
                    f"{ind}%{p}lse2 = {LG2}(%{p}r#1) : (f32) -> f32",
                    f"{ind}%{p}lsum = arith.addf %{p}ms, %{p}lse2 : f32"]
            factors = [(wg, f"%{p}inv")]
        else:  # both warpgroups hold the same rows: swap (max, sum) through S's first columns
            other = 1 - wg
            out += [f"{ind}%{p}msi = arith.bitcast %{p}ms : f32 to i32",
                    f"{ind}%{p}li = arith.bitcast %{p}r#1 : f32 to i32",
                    f"{ind}%{p}ml = vector.from_elements %{p}msi, %{p}li : vector<2xi32>",
                    f'{ind}"fa4.tmem_store"(%S{wg}, %{p}ml) : (!fa4.tmem, vector<2xi32>) -> ()',
                    f'{ind}"fa4.named_barrier"() {{sym_name = "softmax", threads = 256}} : () -> ()',
                    f'{ind}%{p}om = "fa4.tmem_load"(%S{other}) : (!fa4.tmem) -> vector<2xi32>',
                    f"{ind}%{p}omf = arith.bitcast %{p}om : vector<2xi32> to vector<2xf32>",
                    f"{ind}%{p}m_{other} = vector.extract %{p}omf[0] : f32 from vector<2xf32>",
                    f"{ind}%{p}l_{other} = vector.extract %{p}omf[1] : f32 from vector<2xf32>",
                    f"{ind}%{p}m_{wg} = arith.addf %{p}ms, %{p}zero : f32",
                    f"{ind}%{p}l_{wg} = arith.addf %{p}r#1, %{p}zero : f32",
                    f"{ind}%{p}gm = arith.maxnumf %{p}m_0, %{p}m_1 : f32"]
            for k in (0, 1):
                out += [f"{ind}%{p}dg{k} = arith.subf %{p}m_{k}, %{p}gm : f32",
                        f"{ind}%{p}sc{k} = {EX2}(%{p}dg{k}) : (f32) -> f32",
                        f"{ind}%{p}ls{k} = arith.mulf %{p}l_{k}, %{p}sc{k} : f32"]
            out += [f"{ind}%{p}L = arith.addf %{p}ls0, %{p}ls1 : f32",
                    f"{ind}%{p}inv = arith.divf %{p}one, %{p}L : f32",
                    f"{ind}%{p}f0 = arith.mulf %{p}sc0, %{p}inv : f32",
                    f"{ind}%{p}f1 = arith.mulf %{p}sc1, %{p}inv : f32",
                    f"{ind}%{p}lse2 = {LG2}(%{p}L) : (f32) -> f32",
                    f"{ind}%{p}lsum = arith.addf %{p}gm, %{p}lse2 : f32"]
            factors = [(0, f"%{p}f0"), (1, f"%{p}f1")]
        blocks = d.out_blocks(wg)
        if blocks:
            out += [f"{ind}%{p}c7 = arith.constant 7 : i32", f"{ind}%{p}c4 = arith.constant 4 : i32",
                    f"{ind}%{p}crow = arith.constant {ROW_BYTES} : i32",
                    f"{ind}%{p}rowb = arith.muli %{p}t, %{p}crow : i32",
                    f"{ind}%{p}sw = arith.andi %{p}t, %{p}c7 : i32",
                    f'{ind}%{p}oa = "fa4.smem_address"(%o{wg}) : (!fa4.smem) -> !llvm.ptr<3>']
            out += [f"{ind}%{p}fv{k} = vector.broadcast {f} : f32 to {v}" for k, f in factors]
            for rb, blk in enumerate(blocks):
                for h in (0, 1):
                    q = f"%{p}o{blk}_{h}"
                    acc = None
                    for k, _ in factors:
                        out += [f'{ind}{q}x{k} = "fa4.tmem_load"(%O{k}) {{column_offset = {blk * BLOCK + h * W}}} : (!fa4.tmem) -> {iv}',
                                f"{ind}{q}f{k} = arith.bitcast {q}x{k} : {iv} to {v}"]
                        if acc is None:
                            out.append(f"{ind}{q}a{k} = arith.mulf {q}f{k}, %{p}fv{k} : {v}")
                        else:
                            out.append(f"{ind}{q}a{k} = llvm.intr.fma({q}f{k}, %{p}fv{k}, {acc}) : ({v}, {v}, {v}) -> {v}")
                        acc = f"{q}a{k}"
                    out.append(f"{ind}{q}t = arith.truncf {acc} : {v} to vector<{W}x{d.elem}>")
                    for k in range(4):  # 16-byte chunks at their 128B-swizzled positions
                        chunk = h * 4 + k
                        out += [f"{ind}{q}s{k} = vector.extract_strided_slice {q}t {{offsets = [{8 * k}], sizes = [8], "
                                f"strides = [1]}} : vector<{W}x{d.elem}> to vector<8x{d.elem}>",
                                f"{ind}{q}k{k} = arith.constant {chunk} : i32",
                                f"{ind}{q}x{k}w = arith.xori %{p}sw, {q}k{k} : i32",
                                f"{ind}{q}b{k} = arith.shli {q}x{k}w, %{p}c4 : i32",
                                f"{ind}{q}r{k} = arith.addi %{p}rowb, {q}b{k} : i32",
                                f"{ind}{q}rb{k} = arith.constant {rb * WG * ROW_BYTES} : i32",
                                f"{ind}{q}o{k} = arith.addi {q}r{k}, {q}rb{k} : i32",
                                f"{ind}{q}p{k} = llvm.getelementptr %{p}oa[{q}o{k}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8",
                                f"{ind}llvm.store {q}s{k}, {q}p{k} {{alignment = 16 : i64}} : vector<8x{d.elem}>, !llvm.ptr<3>"]
            out += [f"{ind}nvvm.fence.proxy {{kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}}",
                    f'{ind}"fa4.named_barrier"() {{sym_name = "softmax{wg}", threads = 128}} : () -> ()',
                    f"{ind}%{p}lead = arith.cmpi eq, %{p}t, %c0 : i32",
                    f"{ind}scf.if %{p}lead {{"]
            for rb, blk in enumerate(blocks):
                out += [f"{ind}  %{p}sd{blk} = arith.constant {blk * BLOCK} : i32",
                        f'{ind}  "fa4.tma_store"(%o_map, %o{wg}, %{p}sd{blk}, %head0, %{p}pos0, %bz) {{bytes = {WG * ROW_BYTES}, '
                        f"src_offset = {rb * WG * ROW_BYTES}}} : (!fa4.tensormap, !fa4.smem, i32, i32, i32, i32) -> ()"]
            out += [f'{ind}  "fa4.tma_store_wait"() {{pending = 0}} : () -> ()', f"{ind}}}"]
        if c.num_q == 2 or wg == 0:
            out += [f"{ind}%{p}lse = arith.mulf %{p}lsum, %{p}ln2 : f32",
                    f"{ind}%{p}inq = arith.cmpi slt, %{p}pos, %seq_q : i32",
                    f"{ind}%{p}wl = arith.cmpi ne, %write_lse, %c0 : i32",
                    f"{ind}%{p}dolse = arith.andi %{p}inq, %{p}wl : i1",
                    f"{ind}scf.if %{p}dolse {{",
                    f"{ind}  %{p}bh = arith.muli %bz, %num_heads : i32",
                    f"{ind}  %{p}bh2 = arith.addi %{p}bh, %{p}head : i32",
                    f"{ind}  %{p}row0 = arith.muli %{p}bh2, %seq_q : i32",
                    f"{ind}  %{p}idx = arith.addi %{p}row0, %{p}pos : i32",
                    f"{ind}  %{p}lp = llvm.getelementptr %lse[%{p}idx] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32",
                    f"{ind}  llvm.store %{p}lse, %{p}lp : f32, !llvm.ptr<1>",
                    f"{ind}}}"]
            out.insert(0, f"{ind}%{p}ln2 = arith.constant {LN2!r} : f32")
        # every TMEM access of the CTA is done once both warpgroups read their last O
        out += [f'{ind}"fa4.named_barrier"() {{sym_name = "softmax", threads = 256}} : () -> ()']
        if wg == 0:  # warp 1 frees TMEM: the warp that allocated it (one warp must do both)
            out += [f"{ind}%{p}c32 = arith.constant 32 : i32",
                    f"{ind}%{p}warp = arith.divui %{p}tid, %{p}c32 : i32",
                    f"{ind}%{p}owner = arith.cmpi eq, %{p}warp, %c1 : i32",
                    f"{ind}scf.if %{p}owner {{",
                    f'{ind}  "fa4.tmem_dealloc"(%slot) : (!fa4.smem) -> ()',
                    f"{ind}}}"]
        return out

    # -- correction warpgroup ------------------------------------------------------------------------
    def correction(self) -> list[str]:
        """Per tile after the first and per O_i: read the softmax's factor, wait for the P@V that
        last wrote O_i, rescale O_i in TMEM only when some row of the warp needs it, and release
        S_i's first P stage (the 'O rescaled' half of its 256 arrivals)."""
        d = self.d
        p = "cr_"
        ind = "          "
        li = ind + "  "
        v, iv = "vector<32xf32>", "vector<32xi32>"
        out = ['        "fa4.warp_role"() ({',
               f"{ind}%{p}tid = nvvm.read.ptx.sreg.tid.x : i32",
               f"{ind}%{p}c128 = arith.constant 128 : i32",
               f"{ind}%{p}t = arith.remui %{p}tid, %{p}c128 : i32",
               f"{ind}%{p}one = arith.constant 1.0 : f32",
               f"{ind}%{p}all = arith.constant -1 : i32"]
        for i in (0, 1):  # tile 0: O_i is written fresh; consume the factor, release at once
            out += [f'{ind}%{p}s{i}:2 = "fa4.pipeline_initial_state"(%cq{i}) {{side = "consumer"}} : (!fa4.pipeline) -> (i32, i32)',
                    f'{ind}"fa4.pipeline_consumer_wait"(%cq{i}, %{p}s{i}#0, %{p}s{i}#1) : {PIPE2} -> ()',
                    f'{ind}"fa4.pipeline_consumer_release"(%cq{i}, %{p}s{i}#0) : (!fa4.pipeline, i32) -> ()',
                    f'{ind}%{p}n{i}:2 = "fa4.pipeline_advance"(%cq{i}, %{p}s{i}#0, %{p}s{i}#1) : {PIPE2} -> (i32, i32)',
                    f'{ind}"fa4.pipeline_consumer_release"(%s{i}, %c0) {{sub_stage = 0}} : (!fa4.pipeline, i32) -> ()']
        body = []
        for i in (0, 1):
            q = f"%{p}{i}"
            body += [f'{li}"fa4.pipeline_consumer_wait"(%cq{i}, {q}a, {q}b) : {PIPE2} -> ()',
                     f'{li}{q}ca = "fa4.smem_address"(%corr{i}) : (!fa4.smem) -> !llvm.ptr<3>',
                     f"{li}{q}cp = llvm.getelementptr {q}ca[%{p}t] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, f32",
                     f"{li}{q}cv = llvm.load {q}cp : !llvm.ptr<3> -> f32",
                     f'{li}"fa4.pipeline_consumer_release"(%cq{i}, {q}a) : (!fa4.pipeline, i32) -> ()',
                     f'{li}{q}n:2 = "fa4.pipeline_advance"(%cq{i}, {q}a, {q}b) : {PIPE2} -> (i32, i32)',
                     f'{li}"fa4.mbarrier_try_wait_parity"(%o{i}_full, %c0, {q}o) : (!fa4.mbarriers, i32, i32) -> ()',
                     f"{li}{q}on = arith.xori {q}o, %c1 : i32",
                     f"{li}{q}lt = arith.cmpf olt, {q}cv, %{p}one : f32",
                     f"{li}{q}any = nvvm.vote.sync any %{p}all, {q}lt -> i1",
                     f"{li}scf.if {q}any {{",
                     f"{li}  {q}cvv = vector.broadcast {q}cv : f32 to {v}"]
            for b in range(d.depth // 32):
                body += [f'{li}  {q}x{b} = "fa4.tmem_load"(%O{i}) {{column_offset = {b * 32}}} : (!fa4.tmem) -> {iv}',
                         f"{li}  {q}f{b} = arith.bitcast {q}x{b} : {iv} to {v}",
                         f"{li}  {q}g{b} = arith.mulf {q}f{b}, {q}cvv : {v}",
                         f"{li}  {q}h{b} = arith.bitcast {q}g{b} : {v} to {iv}",
                         f'{li}  "fa4.tmem_store"(%O{i}, {q}h{b}) {{column_offset = {b * 32}}} : (!fa4.tmem, {iv}) -> ()']
            body += [f"{li}}}",
                     f'{li}"fa4.pipeline_consumer_release"(%s{i}, %c0) {{sub_stage = 0}} : (!fa4.pipeline, i32) -> ()']
        types = "i32, i32, i32, i32, i32, i32"
        out += [f"{ind}%{p}r:6 = scf.for %{p}n = %c1 to %n_iter step %c1 iter_args(%{p}0a = %{p}n0#0, %{p}0b = %{p}n0#1, "
                f"%{p}0o = %c0, %{p}1a = %{p}n1#0, %{p}1b = %{p}n1#1, %{p}1o = %c0) -> ({types}) : i32 {{",
                *body,
                f"{li}scf.yield %{p}0n#0, %{p}0n#1, %{p}0on, %{p}1n#0, %{p}1n#1, %{p}1on : {types}",
                f"{ind}}}",
                "          gpu.yield",
                '        }) {sym_name = "correction", warps = array<i32: 8, 9, 10, 11>, registers = 80} : () -> ()']
        return out
