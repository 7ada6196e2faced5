"""Mutation operators of the input fuzzer: each turns MLIR text into a nearby, usually broken, text.

An operator is ``op(rng, text) -> (what, new_text) | None`` (None: it does not apply to this text),
picked by ``mutate`` with a seeded ``random.Random``. They are textual on purpose: the point is
input the parser, IRDL, ``fa4-verify`` and the lowering have never seen, including input that is
not MLIR at all. Most operators prefer fa4 op lines, where the verifier's checks live; the rest of
a kernel (arith constants, scf loops, NVVM reads) is mutated too, because the fa4 ops read it
(constant stage indices, loop bounds).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

Mutation = tuple[str, str]
Operator = Callable[[random.Random, str], "Mutation | None"]

# -- integers -----------------------------------------------------------------------------------------

# A decimal integer that is a token of its own: not part of a name (%c0, i32, sm_100a), a result
# number (%s#1) or a shape (4xi32); an optional sign.
_INT = re.compile(r"(?<![\w#.%@$-])-?\d+(?![\w.])")
EXTREME_INTS = (0, -1, 1, 2, 3, 7, 31, 33, 48, 96, 127, 255, 1000, 1536, 4097, 65535, 65536, 1 << 20,
                (1 << 31) - 1, 1 << 31, 1 << 32, (1 << 63) - 1, -(1 << 31))


def _fa4_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if '"fa4.' in line]


def _pick_line(rng: random.Random, lines: list[str], pattern: re.Pattern, fa4_bias: float = 0.6) -> int | None:
    """A line holding ``pattern``, an fa4 op line with probability ``fa4_bias`` when there is one."""
    hits = [i for i, line in enumerate(lines) if pattern.search(line) and not line.lstrip().startswith("//")]
    if not hits:
        return None
    fa4 = [i for i in hits if '"fa4.' in lines[i]]
    return rng.choice(fa4 if fa4 and rng.random() < fa4_bias else hits)


def _replace_in_line(rng, text: str, pattern: re.Pattern, new: Callable[[re.Match], str],
                     fa4_bias: float = 0.6) -> Mutation | None:
    lines = text.split("\n")
    i = _pick_line(rng, lines, pattern, fa4_bias)
    if i is None:
        return None
    m = rng.choice(list(pattern.finditer(lines[i])))
    replacement = new(m)
    if replacement == m.group(0):
        return None
    lines[i] = lines[i][:m.start()] + replacement + lines[i][m.end():]
    return f"line {i + 1}: {m.group(0)!r} -> {replacement!r}", "\n".join(lines)


def int_extreme(rng, text):
    """An integer in an attribute or constant becomes 0, -1, 2^31, 2^32, odd, a non-power of two..."""
    def new(m):
        v = int(m.group(0))
        choice = rng.random()
        if choice < 0.6:
            return str(rng.choice(EXTREME_INTS))
        if choice < 0.8:
            return str(v + rng.choice((-1, 1)))
        return str(rng.choice((v * 2, v // 2, v * 3, -v, v + 8, v + 16, v + 128)))
    return _replace_in_line(rng, text, _INT, new)


_ATTR_VALUE = re.compile(r'\b([a-z_][\w.]*) = (-?\d+(?! :)|"[^"]*"|array<[^>]*>|true|false)')


def attr_kind(rng, text):
    """An attribute's value changes kind: an i64 becomes i32/i8/i128/index, a string, a float, an
    array or unit; a string, array or bool becomes an integer or another kind."""
    def new(m):
        v = m.group(2)
        if not v.lstrip("-").isdigit():
            v = rng.choice(("0", "1", "3", "128"))
        return f"{m.group(1)} = " + rng.choice((f"{v} : i32", f"{v} : i8", f"{v} : i128", f"{v} : index",
                                                f"\"{v}\"", f"{v}.0", f"array<i32: {v}>", "unit", "true",
                                                f"{v} : i1", f"dense<{v}> : tensor<1xi64>", v, f"[{v}]",
                                                f"array<i64: {v}>", "@sym"))
    return _replace_in_line(rng, text, _ATTR_VALUE, new, fa4_bias=0.8)


# -- lines ---------------------------------------------------------------------------------------------

def _code_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("//")]


def _some_line(rng, lines) -> int | None:
    code = _code_lines(lines)
    if not code:
        return None
    fa4 = _fa4_lines(lines)
    return rng.choice(fa4 if fa4 and rng.random() < 0.5 else code)


def delete_line(rng, text):
    """A line disappears (an op, a yield, a closing brace)."""
    lines = text.split("\n")
    i = _some_line(rng, lines)
    if i is None:
        return None
    return f"line {i + 1} deleted: {lines[i].strip()[:60]!r}", "\n".join(lines[:i] + lines[i + 1:])


def duplicate_line(rng, text):
    """A line is repeated (a second definition of its results, a second arrive or wait)."""
    lines = text.split("\n")
    i = _some_line(rng, lines)
    if i is None:
        return None
    return f"line {i + 1} duplicated", "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])


def swap_lines(rng, text):
    """Two lines trade places: a neighbour (an op moved across its neighbour) or any two."""
    lines = text.split("\n")
    code = _code_lines(lines)
    if len(code) < 2:
        return None
    k = rng.randrange(len(code) - 1)
    i, j = (code[k], code[k + 1]) if rng.random() < 0.6 else tuple(sorted(rng.sample(code, 2)))
    lines[i], lines[j] = lines[j], lines[i]
    return f"lines {i + 1} and {j + 1} swapped", "\n".join(lines)


def move_line(rng, text):
    """An op moves somewhere else (out of its loop, into another role, before its operands)."""
    lines = text.split("\n")
    i = _some_line(rng, lines)
    code = _code_lines(lines)
    if i is None or len(code) < 2:
        return None
    line = lines.pop(i)
    j = rng.randrange(len(lines) + 1)
    lines.insert(j, line)
    return f"line {i + 1} moved to {j + 1}", "\n".join(lines)


# -- bytes ---------------------------------------------------------------------------------------------

def truncate(rng, text):
    """The input ends early (a half-written file)."""
    if len(text) < 2:
        return None
    cut = rng.randrange(1, len(text))
    return f"truncated at byte {cut} of {len(text)}", text[:cut]


# Characters the parser treats specially, control bytes, and bytes that are not UTF-8 (kept as
# surrogates by surrogateescape so that the file written has exactly these bytes).
_GARBAGE = ['"', "'", "{", "}", "(", ")", "<", ">", "[", "]", "%", "#", "!", "^", "@", ":", ",", "=", "\\",
            "\x00", "\x07", "\t", "\r", "\n", "\x7f", "\udcff", "\udcfe", "\udcc3", "\udc80", "\u00e9", "\u2028",
            "\ufeff", "0x", "-", "?", "//", "/*", "*/", "$", "`"]


def garbage_bytes(rng, text):
    """A few random bytes land somewhere, or replace some bytes."""
    pos = rng.randrange(len(text) + 1)
    junk = "".join(rng.choice(_GARBAGE) if rng.random() < 0.7 else chr(rng.randrange(32, 127))
                   for _ in range(rng.randint(1, 8)))
    drop = rng.choice((0, 0, len(junk)))
    return f"{len(junk)} garbage bytes at {pos}", text[:pos] + junk + text[pos + drop:]


# -- names and types ----------------------------------------------------------------------------------

# A use of an SSA value: not its definition (`%x =`, `%x:2 =`, `iter_args(%x = ...`) nor a block
# argument (`%arg0: i32`).
_USE = re.compile(r"(?<![\w%])%[\w$.-]+(?:#\d+)?(?![\w$.#-])(?!(?::\d+)?\s*=)(?!: )")
_DEF = re.compile(r"^\s*(%[\w$.-]+)(?::\d+)?\s*=", re.M)


def undefined_ssa(rng, text):
    """An operand names a value that is not defined, or another defined value (maybe of another type)."""
    defined = _DEF.findall(text)

    def new(m):
        if defined and rng.random() < 0.5:
            other = rng.choice(defined)
            return other + (m.group(0)[m.group(0).index("#"):] if "#" in m.group(0) and rng.random() < 0.5 else "")
        return rng.choice(("%undefined", "%nope#0", m.group(0).split("#")[0] + "_x", "%0", "%c99"))
    return _replace_in_line(rng, text, _USE, new)


_OPERAND_LIST = re.compile(r'"fa4\.[a-z0-9_]+"\(([^()]*,[^()]*)\)')


def swap_operands(rng, text):
    """Two operands of an fa4 op trade places (a stage for a phase, full for empty)."""
    lines = text.split("\n")
    i = _pick_line(rng, lines, _OPERAND_LIST, fa4_bias=1.0)
    if i is None:
        return None
    m = _OPERAND_LIST.search(lines[i])
    ops = [o.strip() for o in m.group(1).split(",")]
    a, b = rng.sample(range(len(ops)), 2)
    if ops[a] == ops[b]:
        return None
    ops[a], ops[b] = ops[b], ops[a]
    lines[i] = lines[i][:m.start(1)] + ", ".join(ops) + lines[i][m.end(1):]
    return f"line {i + 1}: operands {a} and {b} swapped", "\n".join(lines)


_TYPE_FAMILIES = (
    ("i1", "i8", "i16", "i32", "i64", "index", "f16", "f32", "bf16"),
    ("!fa4.smem", "!fa4.tmem", "!fa4.mbarriers", "!fa4.pipeline", "!fa4.tensormap", "!fa4.nope", "i32"),
    ("!llvm.ptr<3>", "!llvm.ptr<6>", "!llvm.ptr<1>", "!llvm.ptr", "i64"),
    ("vector<2xi32>", "vector<4xi32>", "vector<8xi32>", "vector<3xi32>", "vector<256xi32>", "vector<4xi64>",
     "vector<4xf32>", "vector<0xi32>"),
)
# Longest first, so that !llvm.ptr<3> is not read as !llvm.ptr; not inside a name or a shape
# (vector<4xi32>), and not the attribute named `index`.
_TYPE = re.compile(r"(?<![\w.])(?:" + "|".join(sorted({re.escape(t) for f in _TYPE_FAMILIES for t in f},
                                                      key=len, reverse=True)) + r")(?![\w<])(?! =)")


def wrong_type(rng, text):
    """A type becomes another of its family: i32 <-> i64/index/f32, !fa4.smem <-> !fa4.tmem, ptr spaces."""
    def new(m):
        family = next((f for f in _TYPE_FAMILIES if m.group(0) in f), _TYPE_FAMILIES[0])
        return rng.choice([t for t in family if t != m.group(0)] or [m.group(0)])
    return _replace_in_line(rng, text, _TYPE, new)


_OP_NAME = re.compile(r'"(fa4\.[a-z0-9_]+)"')


def rename_op(rng, text):
    """An fa4 op becomes another fa4 op (same operands, other meaning) or a misspelling of itself."""
    names = sorted(set(_OP_NAME.findall(text))) + list(FA4_OPS)

    def new(m):
        name = m.group(1)
        r = rng.random()
        if r < 0.6:
            other = rng.choice(names)
        elif r < 0.7:
            other = name.upper()
        elif r < 0.8:
            other = name + "s"
        elif r < 0.9:
            other = name.replace("fa4.", "fa5.")
        else:
            k = rng.randrange(len(name))
            other = name[:k] + name[k + 1:]
        return f'"{other}"'
    return _replace_in_line(rng, text, _OP_NAME, new, fa4_bias=1.0)


# Every fa4 op name (as of issue 19); rename_op also uses the names it finds in the text.
FA4_OPS = ("fa4.smem_region", "fa4.smem_alias", "fa4.smem_stage", "fa4.smem_address", "fa4.tmem_region",
           "fa4.tmem_stage", "fa4.tmem_alloc", "fa4.tmem_dealloc", "fa4.tmem_load", "fa4.tmem_store",
           "fa4.mbarrier_alloc", "fa4.mbarrier_init", "fa4.mbarrier_arrive", "fa4.mbarrier_arrive_expect_tx",
           "fa4.mbarrier_try_wait_parity", "fa4.mma_commit", "fa4.pipeline_create",
           "fa4.pipeline_initial_state", "fa4.pipeline_advance", "fa4.pipeline_producer_acquire",
           "fa4.pipeline_producer_commit", "fa4.pipeline_consumer_wait", "fa4.pipeline_consumer_release",
           "fa4.warp_specialize", "fa4.warp_role", "fa4.named_barrier", "fa4.tma_load", "fa4.tma_store",
           "fa4.tma_store_wait", "fa4.tcgen05_mma", "fa4.wgmma", "fa4.wgmma_commit", "fa4.wgmma_wait",
           "fa4.wgmma_fence_acc", "fa4.elect_one")


# -- attributes -----------------------------------------------------------------------------------------

_ATTR_ENTRY = re.compile(r'(?:, )?\b[a-z_][\w.]* = (?:"[^"]*"|array<[^>]*>|[^,}]+)(?=[,}])')


def drop_attr(rng, text):
    """An attribute disappears from an op's dictionary (a required one, a default, an allocator's)."""
    return _replace_in_line(rng, text, _ATTR_ENTRY, lambda m: "", fa4_bias=0.9)


_STR_ATTR = re.compile(r'\b([a-z_][\w.]*) = "([^"]*)"')
ENUM_VALUES = {
    "arrival": ("threads", "tx", "commit"), "swizzle": ("none", "32B", "64B", "128B"),
    "ab_type": ("f16", "bf16", "tf32", "f32", "fp8"), "b_major": ("k", "mn"), "side": ("producer", "consumer"),
    "kind": ("sync", "arrive"), "fa4.target": ("sm_100a", "sm_90a", "sm_80", "sm_100", "sm_90", "sm_120a"),
    "chip": ("sm_100a", "sm_90a", "sm_90", "sm_100", "sm_80", "sm_103a"),
    "features": ("+ptx86", "+ptx80", "+ptx87", "+ptx99", "", "+ptx60", "ptx86"),
}


def change_enum(rng, text):
    """A string attribute gets another member of its enum, a near miss, an empty string or a name
    that another op of the kernel uses."""
    names = re.findall(r'sym_name = "([^"]*)"', text)

    def new(m):
        key, value = m.group(1), m.group(2)
        pool = list(ENUM_VALUES.get(key, ())) + ["", value.upper(), value + "x", "bogus"]
        if key == "sym_name" or key.endswith("_region"):
            pool += names
        return f'{key} = "{rng.choice([p for p in pool if p != value] or pool)}"'
    return _replace_in_line(rng, text, _STR_ATTR, new, fa4_bias=0.8)


_ARRAY = re.compile(r"array<i32(?:: ([^>]*))?>")


def change_array(rng, text):
    """An array<i32: ...> (warps, arrive counts, ABI lists) becomes empty, repeats, grows, goes
    negative or huge, or changes element type."""
    def new(m):
        values = [v.strip() for v in (m.group(1) or "").split(",") if v.strip()]
        r = rng.random()
        if r < 0.15 or not values:
            values = []
        elif r < 0.3:
            values = values + [rng.choice(values)]
        elif r < 0.45:
            values = [rng.choice(values)] * 2
        elif r < 0.6:
            values[rng.randrange(len(values))] = str(rng.choice((-1, 0, 31, 32, 64, 1 << 20, (1 << 31) - 1)))
        elif r < 0.7:
            values = values[:-1]
        elif r < 0.8:
            values = values + [str(int(values[-1]) + 1 if values[-1].lstrip("-").isdigit() else 1)]
        elif r < 0.9:
            return f"array<i64: {', '.join(values)}>" if values else "array<i64>"
        else:
            rng.shuffle(values)
        return f"array<i32: {', '.join(values)}>" if values else "array<i32>"
    return _replace_in_line(rng, text, _ARRAY, new)


_ATTR_DICT = re.compile(r'("fa4\.[a-z0-9_]+"\([^)]*\)(?: \(\{)?[^{]*?) \{([^{}]*)\} :|("fa4\.[a-z0-9_]+"\([^)]*\)) :')
EXTRA_ATTRS = ("offset = {v}", "index = {v}", "column = {v}", "columns = {v}", "align = {v}", "registers = {v}",
               "multicast_mask = {v}", "tx_bytes = {v}", "b_block_stride = {v}", "cta_group = {v}",
               "sub_stage = {v}", "count = {v}", "pending = {v}", "column_offset = {v}", "a_offset = {v}",
               "b_offset = {v}", "dst_offset = {v}", "src_offset = {v}", "arrive_counts = array<i32: {v}>",
               'swizzle = "128B"', 'b_major = "mn"', "accumulate = {v}", "producer_sub_stages = {v}")


def add_attr(rng, text):
    """An fa4 op gets an attribute it did not have: an allocator's field preset (offset, index,
    column), an optional field, a count."""
    lines = text.split("\n")
    fa4 = [i for i in _fa4_lines(lines) if not lines[i].lstrip().startswith("//")]
    if not fa4:
        return None
    i = rng.choice(fa4)
    v = rng.choice((0, 1, 2, 3, 4, 7, 8, 16, 24, 64, 100, 128, 256, 511, 512, 1024, 4096, 1 << 20, -1, 1 << 31))
    entry = rng.choice(EXTRA_ATTRS).format(v=v)
    line = lines[i]
    at = line.rfind("} :")
    if at >= 0 and line.rfind(") {", 0, at) >= 0 and "({" not in line:
        lines[i] = line[:at] + f", {entry}" + line[at:]
    else:
        close = line.find(") :")
        if close < 0:
            return None
        lines[i] = line[:close + 1] + f" {{{entry}}}" + line[close + 1:]
    return f"line {i + 1}: added {entry}", "\n".join(lines)


def add_func_attr(rng, text):
    """The kernel function gets a pass-set attribute preset (sizes, indices, the target, the ABI list)."""
    m = re.search(r"(gpu\.func|func\.func) @[\w$.]+\([^)]*\)[^{\n]*", text)
    if not m:
        return None
    v = rng.choice((0, 1, 7, 100, 1 << 20, 1 << 31, -1))
    entry = rng.choice((f"fa4.smem_bytes = {v} : i64", f"fa4.tmem_columns = {v} : i64", f"fa4.num_mbarriers = {v} : i64",
                        'fa4.mbarrier_region = "nope"', f'fa4.target = "{rng.choice(ENUM_VALUES["fa4.target"])}"',
                        "fa4.verify_protocol = false", f"fa4.grid_constant_args = array<i32: {v}>",
                        f"nvvm.reqntid = array<i32: {v}, 1, 1>", f"nvvm.maxnreg = {v} : i32"))
    head = m.group(0)
    if " attributes {" in head:
        new = head.replace(" attributes {", f" attributes {{{entry}, ", 1)
    else:
        new = head + f" attributes {{{entry}}}"
    return f"kernel attribute {entry}", text[:m.start()] + new + text[m.end():]


OPERATORS: dict[str, Operator] = {f.__name__: f for f in (
    int_extreme, attr_kind, delete_line, duplicate_line, swap_lines, move_line, truncate, garbage_bytes,
    undefined_ssa, swap_operands, wrong_type, rename_op, drop_attr, change_enum, change_array, add_attr,
    add_func_attr)}
# Operators that keep the text parseable more often get more weight: they reach fa4-verify and the
# lowering, where the bugs this fuzzer looks for live; the parser's own rejections are cheap to find.
WEIGHTS = {"int_extreme": 6, "attr_kind": 2, "delete_line": 2, "duplicate_line": 2, "swap_lines": 2, "move_line": 1,
           "truncate": 1, "garbage_bytes": 1, "undefined_ssa": 2, "swap_operands": 2, "wrong_type": 2,
           "rename_op": 2, "drop_attr": 4, "change_enum": 4, "change_array": 3, "add_attr": 5, "add_func_attr": 2}


def mutate(rng: random.Random, text: str) -> tuple[list[str], str]:
    """1 mutation (75%) or 2 to 4, each by an operator drawn by weight; returns (what changed, text)."""
    n = 1 if rng.random() < 0.75 else rng.randint(2, 4)
    names, weights = zip(*WEIGHTS.items())
    done = []
    for _ in range(n):
        for _attempt in range(8):  # an operator that does not apply draws again
            name = rng.choices(names, weights)[0]
            result = OPERATORS[name](rng, text)
            if result is not None:
                what, text = result
                done.append(f"{name}: {what}")
                break
    return done, text
