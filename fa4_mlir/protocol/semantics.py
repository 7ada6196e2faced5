"""What each op means to the protocol: its value, and the events it emits (mirrors the lowerings).

The events follow what the fa4 lowering passes emit, so the verifier checks the code that runs:
an ``fa4.mbarrier_init`` run is warp 0 initialising then a CTA (or cluster) barrier; a thread arrive
on a pair's array goes to the leader CTA, on an array with ``multicast_mask`` to every CTA of the
mask; a pair's expect_tx is the leader's, for twice the bytes; a TMA load on a pair's array completes
on the leader's barrier; an sm_90a commit waits for the warpgroup's wgmmas and arrives once per
warpgroup.
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.protocol.model import WARP, Access, Barrier, Resource, Unverifiable
from fa4_mlir.protocol.solve import evaluable
from fa4_mlir.protocol.values import (Bars, Pipe, Ptr, SmemRef, Sym, TmemRef, binary, compare, is_int, opaque,
                                      simplify, uniform, wrap)

WARPGROUP = 128
_ARITH = ("addi", "subi", "muli", "divui", "divsi", "remui", "remsi", "andi", "ori", "xori", "shli", "shrui",
          "shrsi", "minui", "maxui", "minsi", "maxsi", "ceildivui", "ceildivsi", "floordivsi")


def _constant(r, n, mask):
    v = n.attrs.get("value")
    r.set(n, [int(v) if isinstance(v, (bool, int)) else opaque()])


def _binary(op):
    def handle(r, n, mask):
        a, b = r.get(n.operands[0]), r.get(n.operands[1])  # terms stay terms: resolved where used
        width = n.widths[0]
        if is_int(a) and is_int(b):
            v = binary(op, a, b, width)
            r.set(n, [v if v is not None else opaque(a, b)])
            return
        s = simplify(op, a, b)
        r.set(n, [s if s is not None else _term(r, a, b, lambda x, y: binary(op, x, y, width),
                                               lambda x, y: ("bin", op, width, x, y))])
    return handle


def _term(r, a, b, compute, build):
    """``build(a, b)`` as a term when an operand is one. Next to a per-thread operand, a term must
    already have a value (its arguments bound); binding them here, before the loops that need them,
    would fix the trip counts of every scenario. A per-thread operand the same in every thread of the
    process (a role's warpgroup index, in one warpgroup's run) is that int."""
    a, b = uniform(a), uniform(b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = (r.resolve(x) for x in (a, b))
        if is_int(a) and is_int(b):
            v = compute(a, b)
            return v if v is not None else opaque(a, b)
        return opaque(a, b)
    if isinstance(a, (Sym, int)) and isinstance(b, (Sym, int)):
        varying = any(isinstance(x, Sym) and x.varying for x in (a, b))
        return Sym(build(_key(a), _key(b)), varying)
    return opaque(a, b)


def _key(v):
    return v.term if isinstance(v, Sym) else v


def _cmpi(r, n, mask):
    a, b = r.get(n.operands[0]), r.get(n.operands[1])
    pred, width = n.attrs["predicate"], _operand_width(n)
    if is_int(a) and is_int(b):
        r.set(n, [compare(pred, a, b, width)])
    else:
        r.set(n, [_term(r, a, b, lambda x, y: compare(pred, x, y, width), lambda x, y: ("cmp", pred, width, x, y))])


def _operand_width(n):
    return 64 if n.attrs.get("_width") is None else n.attrs["_width"]


def _select(r, n, mask):
    c, a, b = (r.get(v) for v in n.operands)
    c = uniform(c)
    if isinstance(c, int):
        r.set(n, [a if c else b])
    elif isinstance(c, np.ndarray) and is_int(a) and is_int(b):
        r.set(n, [np.where(c != 0, a, b)])
    elif isinstance(c, Sym) and not c.varying and a == b:
        r.set(n, [a])
    elif isinstance(c, Sym) and not c.varying and all(isinstance(x, (Sym, int)) and not isinstance(x, bool)
                                                       for x in (a, b)):
        r.set(n, [Sym(("select", c.term, _key(a), _key(b)), any(isinstance(x, Sym) and x.varying for x in (a, b)))])
    else:
        r.set(n, [opaque(c, a, b)])


def _cast(r, n, mask):
    v = r.get(n.operands[0])
    width = n.widths[0]
    if is_int(v):
        r.set(n, [wrap(v, width)])
    elif isinstance(v, Sym):
        r.set(n, [Sym(("cast", width, v.term), v.varying)])
    else:
        r.set(n, [v])


def _sreg(kind):
    def handle(r, n, mask):
        sc = r.c.scenario
        value = {"tid": r.tids, "lane": r.tids % WARP, "warp": r.tids // WARP, "rank": r.c.cta,
                 "ctaid.y": 0, "ctaid.z": 0, "nctaid.y": 1, "nctaid.z": 1, "tid.y": 0, "tid.z": 0}.get(kind)
        if kind in ("ctaid.x", "nctaid.x"):
            sc.uses_cta = True
            value = Sym(sc.block(r.c.cta) if kind == "ctaid.x" else ("sreg", kind))
        r.set(n, [Sym(("sreg", kind)) if value is None else value])
    return handle


def _gpu_index(kind):
    def handle(r, n, mask):
        dim = n.attrs.get("dimension")
        dim = "xyz"[dim] if isinstance(dim, int) else "x"
        if dim != "x":
            r.set(n, [1 if kind.startswith("n") else 0])
        else:
            _sreg(kind)(r, n, mask)
    return handle


# ---- shared and tensor memory --------------------------------------------------------------------

def _smem_region(r, n, mask):
    root = r.c.s.root_of[id(n)]
    r.set(n, [SmemRef(root, 0, n.attrs["bytes"], f"smem '{n.attrs['sym_name']}'")])


def _smem_alias(r, n, mask):
    base = r.get(n.operands[0])
    if not isinstance(base, SmemRef):
        r.set(n, [opaque()])
        return
    lo = base.lo + n.attrs.get("offset", 0)
    r.set(n, [SmemRef(base.root, lo, lo + n.attrs["bytes"], f"smem '{n.attrs['sym_name']}'")])


def _stage(ref_type, size_attr: str, unit: str):
    """``fa4.smem_stage`` / ``fa4.tmem_stage``: stage ``i`` of a ring is ``[lo + i * size, + size)``,
    which must lie inside the ring for every stage the run reaches; an unknown stage stands for the
    whole ring."""
    def handle(r, n, mask):
        base, stage = r.get(n.operands[0]), uniform(r.value(n.operands[1]))
        size = n.attrs[size_attr]
        if not isinstance(base, ref_type):
            r.set(n, [opaque()])
            return
        if isinstance(stage, Sym) and not stage.varying and evaluable(stage.term):
            stage = r.known(n, stage, "stage")
        if isinstance(stage, int):
            lo = base.lo + stage * size
            if mask.any() and (stage < 0 or lo + size > base.hi):
                raise Unverifiable(n.site, (
                    f"stage {stage} of {base.what} is {unit} [{stage * size}, {stage * size + size}) of a ring "
                    f"of {base.hi - base.lo} {unit}: every stage the kernel reaches must lie inside its ring "
                    f"(stage index * {size} + {size} <= {base.hi - base.lo}); make the ring hold "
                    f"num_stages stages or the stage smaller"), cls="bounds")
            r.set(n, [ref_type(base.root, lo, lo + size, f"stage {stage} of {base.what}")])
        else:
            r.set(n, [base])
    return handle


def _smem_address(r, n, mask):
    ref = r.get(n.operands[0])
    r.set(n, [Ptr(ref) if isinstance(ref, SmemRef) else opaque()])


def _pointer_passthrough(r, n, mask):
    base = r.get(n.operands[0])
    if isinstance(base, Ptr):
        r.set(n, [base])
        return
    offsets = [uniform(r.get(v)) for v in n.operands[1:]]
    if (n.name == "llvm.getelementptr" and _argument(base) and len(offsets) == 1
            and all(isinstance(o, (int, Sym)) and not (isinstance(o, Sym) and o.varying) for o in offsets)):
        r.set(n, [Sym(("gep", base.term, _key(offsets[0])))])  # an argument's element, one for all threads
        return
    r.set(n, [opaque(*[r.get(v) for v in n.operands])])


def _argument(v) -> bool:
    """Whether ``v`` is a kernel argument (a pointer one, where a GEP takes it)."""
    return isinstance(v, Sym) and not v.varying and v.term[0] == "arg"


def _smem(r, ref: SmemRef, cta=None, lo=None, hi=None) -> Resource:
    return Resource("smem", r.c.cta if cta is None else cta, ref.root,
                    ref.lo if lo is None else lo, ref.hi if hi is None else hi)


def _load(r, n, mask):
    ptr = r.get(n.operands[0])
    if isinstance(ptr, Ptr) and mask.any():
        _access(r, n, mask, Access(False, _smem(r, ptr.ref), what=ptr.ref.what))
    invariant = "invariant" in n.attrs and isinstance(ptr, Sym) and not ptr.varying
    if invariant and ptr.term[0] == "gep" and len(n.results) == 1:
        # memory the kernel never writes (``invariant``: ld.global.nc) at one address off a kernel argument
        # (the packed and paged kernels' cu_seqlens, seqused_k): one unknown value for all threads, a leaf
        # a scenario binds like an argument, so that trip counts computed from it are verifiable
        r.set(n, [Sym(("mem", ptr.term, n.result_types[0]))])
        return
    # other invariant memory at one address is still the same in every thread (branches on it are
    # uniform); any other load may differ per thread
    r.set(n, [opaque(ptr) if invariant else opaque(ptr, r.tids)] * len(n.results))


def _store(r, n, mask):
    ptr = r.get(n.operands[1])
    if isinstance(ptr, Ptr) and mask.any():
        _access(r, n, mask, Access(True, _smem(r, ptr.ref), what=ptr.ref.what))


def _cp_async(r, n, mask):
    """``cp.async`` (shared <- global, 16 bytes a thread): a generic-proxy write of its destination, taken at its
    issue. The thread waits for it (``cp.async.wait_group``) before the proxy fence and the arrive that publish
    it, which this model cannot see; the emulator checks the landing against the reads."""
    ptr = r.get(n.operands[0])
    if isinstance(ptr, Ptr) and mask.any():
        _access(r, n, mask, Access(True, _smem(r, ptr.ref), what=ptr.ref.what))


def _access(r, n, mask, acc: Access):
    """A plain access; repeats of the previous event's access by the same threads (a loop's
    iterations, an unrolled run of stores into one buffer) merge: they are in order among themselves."""
    if r.events:
        last = r.events[-1]
        if last.kind == "access" and last.accesses == [acc] and last.threads == r.threads(mask):
            return
    r.emit("access", n, mask, accesses=[acc])


def _tmem_region(r, n, mask):
    root = r.c.s.root_of[id(n)]
    r.set(n, [TmemRef(root, 0, n.attrs["columns"], f"TMEM '{n.attrs['sym_name']}'")])


def _has_tmem(r) -> bool:
    """TMEM exists from sm_100a on; elsewhere the lowering rejects TMEM ops with a clearer message."""
    return r.c.s.target_sm >= 100


def _lanes(r, mask) -> int:
    bits = 0
    for w in r.threads(mask).warps:
        bits |= 1 << (w % 4)
    return bits


def _tmem_access(write):
    def handle(r, n, mask):
        ref = r.get(n.operands[0])
        width = _vector_len(n, write)
        if isinstance(ref, TmemRef) and mask.any() and _has_tmem(r):
            lo = ref.lo + n.attrs.get("column_offset", 0)
            res = Resource("tmem", r.c.cta, ref.root, lo, lo + width, _lanes(r, mask))
            r.emit("access", n, mask, accesses=[Access(write, res, what=ref.what)])
        if n.results:
            r.set(n, [opaque(r.tids)])
    return handle


def _vector_len(n, write=False) -> int:
    text = n.attrs.get("_value_type") if write else (n.result_types[0] if n.result_types else "")
    text = text or ""
    if text.startswith("vector<"):
        return int(text[len("vector<"):].split("x", 1)[0])
    return 1


def _tmem_alloc(r, n, mask):
    if not _has_tmem(r):
        return
    if mask.any():
        # an explicit count, else the function's (fa4-allocate-tmem); absent both, the allocation
        # is sized from the regions when lowered
        columns = n.attrs.get("columns") or r.c.s.mirror.attrs.get("fa4.tmem_columns")
        r.emit("tmem_alloc", n, mask, detail={"columns": columns})


def _tmem_dealloc(r, n, mask):
    if not _has_tmem(r):
        return
    if mask.any():
        res = Resource("tmem", r.c.cta, -1, 0, 512)
        r.emit("tmem_dealloc", n, mask, accesses=[Access(True, res, mode="dealloc", what="all of TMEM")])


# ---- barriers ----------------------------------------------------------------------------------

def _array(r, n, vid) -> tuple[int, object]:
    bars = r.get(vid)
    if not isinstance(bars, Bars):
        raise Unverifiable(n.site, f"{n.name} must take an mbarrier array from fa4.mbarrier_alloc")
    return bars.array, r.c.s.arrays[bars.array]


def _barrier(r, n, array: int, index, cta=None) -> Barrier:
    idx = r.known(n, index, "barrier index")
    count = len(r.c.s.arrays[array].counts)
    if not 0 <= idx < count:
        raise Unverifiable(n.site, f"barrier index {idx} is out of range for "
                                   f"'{r.c.s.arrays[array].name}' ({count} barriers): every index the "
                                   f"kernel reaches must be in [0, {count})", cls="bounds")
    return Barrier(r.c.cta if cta is None else cta, array, idx)


def _mbarrier_alloc(r, n, mask):
    r.set(n, [Bars(r.c.s.array_of[id(n)])])


def _mbarrier_init(r, n, mask):
    array, arr = _array(r, n, n.operands[0])
    if not r.prologue:
        raise Unverifiable(n.site, (
            "fa4.mbarrier_init must come before fa4.warp_specialize: its lowering ends with a CTA-wide "
            "barrier that the other roles never reach"), cls="init")
    warp0 = r.tids < WARP
    r.emit("init", n, warp0, array=array)
    if n.next_name != "fa4.mbarrier_init":  # one barrier after a run of inits
        scope = "cluster" if r.c.s.cluster > 1 else "cta"
        r.emit("cta_barrier", n, mask, scope=scope)


def _leader(cta: int) -> int:
    return cta & ~1


def _arrive_threads(r, n, mask, array, index, count=1):
    arr = r.c.s.arrays[array]
    t = r.threads(mask)
    if arr.multicast_mask:  # the barrier at this index in each CTA of the mask (the lowering's mapa arrivals)
        targets = _mask_ctas(r, n, arr)
    else:
        targets = [_leader(r.c.cta) if arr.cta_group == 2 else r.c.cta]
    r.emit("arrive", n, mask, arrivals=[(_barrier(r, n, array, index, c), t.count * count) for c in targets])


def _mask_ctas(r, n, arr) -> list[int]:
    size = r.c.s.cluster
    if arr.multicast_mask >> size:
        raise Unverifiable(n.site, f"multicast_mask {arr.multicast_mask:#x} of '{arr.name}' names CTAs outside the "
                                   f"kernel's cluster of {size}: declare the cluster or narrow the mask", cls="bounds")
    return [c for c in range(size) if arr.multicast_mask >> c & 1]


def _arrive_expect(r, n, mask, array, index, tx_bytes):
    arr = r.c.s.arrays[array]
    t = r.threads(mask)
    if arr.cta_group == 2:
        if r.c.cta % 2:
            return  # the lowering arrives from the leader only
        tx_bytes *= 2
    b = _barrier(r, n, array, index)
    r.emit("arrive", n, mask, arrivals=[(b, t.count)], tx=[(b, t.count * tx_bytes)])


def _commit_on(r, n, mask, array, index, multicast):
    t = r.threads(mask)
    if r.c.s.target_sm < 100:
        count = len(t.first_tids)
        targets = [r.c.cta] if count else []
    else:
        count = t.count
        targets = [c for c in range(r.c.s.cluster) if multicast >> c & 1] if multicast else [r.c.cta]
    arrivals = [(_barrier(r, n, array, index, c), count) for c in targets]
    r.emit("commit", n, mask, arrivals=arrivals)


def _mbarrier_arrive(r, n, mask):
    if mask.any():
        array, _ = _array(r, n, n.operands[0])
        _arrive_threads(r, n, mask, array, r.get(n.operands[1]), n.attrs.get("count", 1))


def _mbarrier_arrive_expect_tx(r, n, mask):
    if mask.any():
        array, _ = _array(r, n, n.operands[0])
        _arrive_expect(r, n, mask, array, r.get(n.operands[1]), n.attrs["tx_bytes"])


def _wait_on(r, n, mask, array, index, phase):
    if mask.any():
        parity = r.known(n, phase, "phase") & 1
        r.emit("wait", n, mask, barrier=_barrier(r, n, array, index), parity=parity)


def _mbarrier_try_wait_parity(r, n, mask):
    array, _ = _array(r, n, n.operands[0])
    _wait_on(r, n, mask, array, r.get(n.operands[1]), r.get(n.operands[2]))


def _mma_commit(r, n, mask):
    if mask.any():
        array, _ = _array(r, n, n.operands[0])
        _commit_on(r, n, mask, array, r.get(n.operands[1]), n.attrs.get("multicast_mask"))


# ---- pipelines -----------------------------------------------------------------------------------

def _pipeline_create(r, n, mask):
    full, empty = r.get(n.operands[0]), r.get(n.operands[1])
    a = n.attrs
    r.set(n, [Pipe(full, empty, a["num_stages"], a.get("producer_sub_stages", 1), a.get("consumer_sub_stages", 1))])


def _pipe(r, n) -> Pipe:
    p = r.get(n.operands[0])
    if not isinstance(p, Pipe):
        raise Unverifiable(n.site, f"{n.name} must take a pipeline from fa4.pipeline_create")
    return p


def _initial_state(r, n, mask):
    r.set(n, [0, 1 if n.attrs["side"] == "producer" else 0])


def _advance(r, n, mask):
    p = _pipe(r, n)
    stage, phase = r.get(n.operands[1]), r.get(n.operands[2])
    if is_int(stage) and is_int(phase):
        nxt = stage + 1
        wrapped = nxt == p.stages
        r.set(n, [np.where(wrapped, 0, nxt) if isinstance(nxt, np.ndarray) else (0 if wrapped else nxt),
                  np.where(wrapped, phase ^ 1, phase) if isinstance(wrapped, np.ndarray) else (phase ^ 1 if wrapped else phase)])
    else:
        r.set(n, [opaque(stage), opaque(phase)])


def _slot(r, n, stage, sub_stages):
    stage = r.known(n, stage, "stage")
    return stage * sub_stages + n.attrs.get("sub_stage", 0)


def _producer_acquire(r, n, mask):
    p = _pipe(r, n)
    if mask.any():
        _wait_on(r, n, mask, p.empty.array, _slot(r, n, r.get(n.operands[1]), p.consumer_sub_stages),
                 r.get(n.operands[2]))


def _consumer_wait(r, n, mask):
    p = _pipe(r, n)
    if mask.any():
        _wait_on(r, n, mask, p.full.array, _slot(r, n, r.get(n.operands[1]), p.producer_sub_stages),
                 r.get(n.operands[2]))


def _signal(r, n, mask, bars: Bars, index, tx_bytes=None):
    arr = r.c.s.arrays[bars.array]
    if arr.arrival == "tx":
        _arrive_expect(r, n, mask, bars.array, index, tx_bytes or 0)
    elif arr.arrival == "commit":
        _commit_on(r, n, mask, bars.array, index, None)
    else:
        _arrive_threads(r, n, mask, bars.array, index)


def _producer_commit(r, n, mask):
    p = _pipe(r, n)
    if mask.any():
        _signal(r, n, mask, p.full, _slot(r, n, r.get(n.operands[1]), p.producer_sub_stages), n.attrs.get("tx_bytes"))


def _consumer_release(r, n, mask):
    p = _pipe(r, n)
    if mask.any():
        _signal(r, n, mask, p.empty, _slot(r, n, r.get(n.operands[1]), p.consumer_sub_stages))


# ---- roles, TMA, MMA ---------------------------------------------------------------------------

def _named_barrier(r, n, mask):
    if mask.any():
        a = n.attrs
        name = a["sym_name"]
        if a.get("count") is not None and n.operands:  # a family's member: its own hardware id
            index = r.known(n, r.get(n.operands[0]), "barrier index")
            if not 0 <= index < a["count"]:
                raise Unverifiable(n.site, f"named barrier index {index} is out of range for the family '{name}' "
                                           f"({a['count']} barriers): every index the kernel reaches must be in "
                                           f"[0, {a['count']})", cls="bounds")
            name = f"{name}[{index}]"
        r.emit("named", n, mask, name=name, expected=a["threads"], sync=a.get("kind", "sync") == "sync")


def _elect_one(r, n, mask):
    lanes = r.tids % WARP
    elected = np.zeros(len(r.tids), dtype=np.int64)
    for w in set((r.tids[mask] // WARP).tolist()):
        in_warp = mask & (r.tids // WARP == w)
        first = int(lanes[in_warp].min())
        elected |= (in_warp & (lanes == first)).astype(np.int64)
    r.set(n, [elected])


def _tma_load(r, n, mask):
    if not mask.any():
        return
    dst = r.get(n.operands[1])
    array, arr = _array(r, n, n.operands[2])
    index = r.get(n.operands[3])
    a = n.attrs
    size, offset, multicast = a["bytes"], a.get("dst_offset", 0), a.get("multicast_mask")
    t = r.threads(mask)
    dests = [c for c in range(r.c.s.cluster) if multicast >> c & 1] if multicast else [r.c.cta]
    tx, accesses = {}, []
    for d in dests:
        b = _barrier(r, n, array, index, _leader(r.c.cta) if arr.cta_group == 2 else d)
        tx[b] = tx.get(b, 0) + size * t.count
        if isinstance(dst, SmemRef):
            lo = dst.lo + offset
            accesses.append(Access(True, _smem(r, dst, d, lo, lo + size), mode="tma", what=dst.what,
                                   barrier=b))
    r.emit("tma_load", n, mask, tx=list(tx.items()), accesses=accesses)


def _tma_store(r, n, mask):
    src = r.get(n.operands[1])
    if mask.any():
        a = n.attrs
        accesses = []
        if isinstance(src, SmemRef):
            lo = src.lo + a.get("src_offset", 0)
            accesses.append(Access(False, _smem(r, src, None, lo, lo + a["bytes"]), mode="store", what=src.what))
        r.emit("tma_store", n, mask, accesses=accesses)


def _tma_store_wait(r, n, mask):
    if mask.any():
        r.emit("store_wait", n, mask, pending=n.attrs.get("pending", 0))


def _operand_access(r, ref, write, pair_ctas, n=None) -> list[Access]:
    out = []
    for c in pair_ctas:
        if isinstance(ref, SmemRef):
            out.append(Access(write, _smem(r, ref, c), mode="mma", what=ref.what))
        elif isinstance(ref, TmemRef):
            hi = ref.hi if n is None else min(ref.hi, ref.lo + n)
            out.append(Access(write, Resource("tmem", c, ref.root, ref.lo, max(hi, ref.lo + 1)), mode="mma",
                              what=ref.what))
    return out


MMA_K_COLUMNS = 8  # a TMEM A operand: one instruction reads K = 32 bytes of each row, 8 columns


def _tcgen05_mma(r, n, mask):
    if not mask.any() or not _has_tmem(r):
        return
    d, a, b = (r.get(v) for v in n.operands[:3])
    pair = n.attrs.get("cta_group", 1) == 2
    ctas = [r.c.cta, r.c.cta ^ 1] if pair and r.c.s.cluster > 1 else [r.c.cta]
    if isinstance(a, TmemRef):  # TS form: only the K step's columns, so P written later may follow
        lo = a.lo + n.attrs.get("a_offset", 0) // 4
        a = TmemRef(a.root, lo, lo + MMA_K_COLUMNS, a.what)
    accesses = (_operand_access(r, a, False, ctas) + _operand_access(r, b, False, ctas)
                + _operand_access(r, d, True, ctas, n.attrs["n"]))
    r.emit("mma", n, mask, accesses=accesses, pair=pair)


def _wgmma(r, n, mask):
    a, b = r.get(n.operands[0]), r.get(n.operands[1])
    if mask.any():
        r.emit("mma", n, mask, accesses=_operand_access(r, a, False, [r.c.cta]) + _operand_access(r, b, False, [r.c.cta]))
    r.set(n, [opaque(r.tids)])


def _wgmma_commit(r, n, mask):
    if mask.any():
        r.emit("wgmma_commit", n, mask)


def _wgmma_wait(r, n, mask):
    if mask.any():
        r.emit("wgmma_wait", n, mask, pending=n.attrs.get("pending", 0))


def _fence_proxy(r, n, mask):
    """``fence.proxy.async[.shared::cta]``: the executing threads' generic shared-memory writes
    become visible to the async proxy (TMA, MMA operands). Other proxy kinds order nothing here."""
    kind = n.attrs.get("_kind", "")
    if mask.any() and ("async>" in kind or "async.shared" in kind):
        r.emit("proxy_fence", n, mask)


def _vote(r, n, mask):
    """``vote.sync``: the same in every lane of a warp; a branch on it takes the scenario's decision."""
    r.set(n, [Sym(("vote",))])


def _nothing(r, n, mask):
    r.set(n, [opaque()] * len(n.results))


HANDLERS = {
    "arith.constant": _constant, "arith.cmpi": _cmpi, "arith.select": _select,
    **{f"arith.{op}": _binary(op) for op in _ARITH},
    **{f"arith.{op}": _cast for op in ("index_cast", "index_castui", "extui", "extsi", "trunci")},
    "nvvm.read.ptx.sreg.tid.x": _sreg("tid"), "nvvm.read.ptx.sreg.tid.y": _sreg("tid.y"),
    "nvvm.read.ptx.sreg.tid.z": _sreg("tid.z"), "nvvm.read.ptx.sreg.laneid": _sreg("lane"),
    "nvvm.read.ptx.sreg.warpid": _sreg("warp"), "nvvm.read.ptx.sreg.ctaid.x": _sreg("ctaid.x"),
    "nvvm.read.ptx.sreg.ctaid.y": _sreg("ctaid.y"), "nvvm.read.ptx.sreg.ctaid.z": _sreg("ctaid.z"),
    "nvvm.read.ptx.sreg.nctaid.x": _sreg("nctaid.x"), "nvvm.read.ptx.sreg.nctaid.y": _sreg("nctaid.y"),
    "nvvm.read.ptx.sreg.nctaid.z": _sreg("nctaid.z"), "gpu.grid_dim": _gpu_index("nctaid.x"),
    "nvvm.read.ptx.sreg.cluster.ctarank": _sreg("rank"),
    "gpu.thread_id": _gpu_index("tid"), "gpu.block_id": _gpu_index("ctaid.x"), "gpu.lane_id": _sreg("lane"),
    "llvm.load": _load, "llvm.store": _store, "llvm.getelementptr": _pointer_passthrough,
    "llvm.addrspacecast": _pointer_passthrough, "llvm.bitcast": _pointer_passthrough,
    "fa4.smem_region": _smem_region, "fa4.smem_alias": _smem_alias, "fa4.smem_stage": _stage(SmemRef, "bytes", "bytes"),
    "fa4.smem_address": _smem_address, "fa4.tmem_region": _tmem_region, "fa4.tmem_stage": _stage(TmemRef, "columns", "columns"), "fa4.tmem_alloc": _tmem_alloc,
    "fa4.tmem_dealloc": _tmem_dealloc, "fa4.tmem_load": _tmem_access(False), "fa4.tmem_store": _tmem_access(True),
    "fa4.mbarrier_alloc": _mbarrier_alloc, "fa4.mbarrier_init": _mbarrier_init,
    "fa4.mbarrier_arrive": _mbarrier_arrive, "fa4.mbarrier_arrive_expect_tx": _mbarrier_arrive_expect_tx,
    "fa4.mbarrier_try_wait_parity": _mbarrier_try_wait_parity, "fa4.mma_commit": _mma_commit,
    "fa4.pipeline_create": _pipeline_create, "fa4.pipeline_initial_state": _initial_state,
    "fa4.pipeline_advance": _advance, "fa4.pipeline_producer_acquire": _producer_acquire,
    "fa4.pipeline_producer_commit": _producer_commit, "fa4.pipeline_consumer_wait": _consumer_wait,
    "fa4.pipeline_consumer_release": _consumer_release, "fa4.warp_specialize": _nothing,
    "fa4.named_barrier": _named_barrier, "fa4.elect_one": _elect_one, "fa4.tma_load": _tma_load,
    "fa4.tma_store": _tma_store, "fa4.tma_store_wait": _tma_store_wait, "fa4.tcgen05_mma": _tcgen05_mma,
    "fa4.wgmma": _wgmma, "nvvm.vote.sync": _vote, "fa4.wgmma_commit": _wgmma_commit, "fa4.wgmma_wait": _wgmma_wait,
    "fa4.wgmma_fence_acc": _nothing, "nvvm.fence.proxy": _fence_proxy, "nvvm.cp.async.shared.global": _cp_async,
}
