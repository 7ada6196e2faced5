"""Opcode inventory of the PTX fixtures: ``python test/python/emu_ptx/opcodes.py [FILE.ptx ...]``.

Prints every distinct instruction (opcode with all its dot-modifiers, e.g. ``ld.global.v4.b32``,
``cp.async.cg.shared.global``) with its count over the fixtures and the files using it, then the
special registers read and the directives seen.  A quick regex scan, not a parser: it strips
comments, skips directives/labels/debug sections and reads the first token of each statement.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def statements(text: str):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    # drop DWARF sections: ".section .debug_xxx { ... }"
    text = re.sub(r"\.section\s+\.debug\w*\s*\{.*?\}", "", text, flags=re.S)
    for stmt in re.split(r"[;\n]", text):
        s = stmt.strip()
        if not s or s in "{}":
            continue
        yield s


def scan(files):
    ops = collections.Counter()
    where = collections.defaultdict(set)
    sregs = collections.Counter()
    directives = collections.Counter()
    for f in files:
        text = Path(f).read_text()
        for s in statements(text):
            s = s.lstrip("{").strip()
            if not s or re.match(r"^[$\w]+:", s):  # labels
                s = re.sub(r"^[$\w]+:\s*", "", s)
                if not s:
                    continue
            if s.startswith("."):
                directives[s.split()[0]] += 1
                continue
            s = re.sub(r"^@!?%?\w+\s+", "", s)  # guard predicate (%p1, or a scoped .reg .pred name)
            op = s.split()[0].rstrip(",")
            if not re.match(r"^[a-z]", op):
                continue
            ops[op] += 1
            where[op].add(Path(f).stem)
        for r in re.findall(r"%(tid|ntid|ctaid|nctaid|laneid|warpid|nwarpid|smid|nsmid|clock64|clock|"
                            r"globaltimer|cluster_\w+|is_explicit_cluster|dynamic_smem_size|"
                            r"total_smem_size|lanemask_\w+|envreg\d+)(\.[xyz])?\b", text):
            sregs["%" + r[0] + r[1]] += 1
    return ops, where, sregs, directives


def main(argv):
    files = argv or sorted(str(p) for p in HERE.glob("*.ptx"))
    ops, where, sregs, directives = scan(files)
    for op, n in sorted(ops.items()):
        print(f"{n:6d}  {op:70s} {','.join(sorted(where[op]))}")
    print("\nspecial registers:", dict(sorted(sregs.items())))
    print("directives:", dict(sorted(directives.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
