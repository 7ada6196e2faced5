"""Where a kernel's warps wait, from Nsight Compute's per-instruction export, kernel against kernel.

    ncu --clock-control none --set full --import-source no -k regex:"attention|sdpa|flash" --launch-skip 2 \
        --launch-count 2 -o rep python3 bench/ncu_pair.py --peer cudnn --causal 64 16 1024 32
    ncu --import rep.ncu-rep --page source --csv --print-source sass > source.csv
    python bench/ncu_stalls.py source.csv [--regions attention] [--json out.json]

For each kernel of the export: its SASS instructions, the warp stall samples by reason (each reason's share of
the kernel's samples: ``no_inst`` is waiting for an instruction, ``wait`` a fixed-latency dependency,
``selected`` issuing) and the executed instructions by opcode. With ``--regions NAME`` (a kernel name or its
start), that kernel's code is cut where the execution count changes (a loop body, a tile's prologue, a role's
code), and each region of at least ``--min-share`` of the samples is listed with its size, executions, samples
and stall reasons: what docs/PERF.md's "The causal walk's one K/V loop" section read its numbers from.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import sys

ALL = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def parse(lines) -> dict[str, list[dict[str, str]]]:
    """Kernel name -> its SASS rows (column -> text) from ``ncu --page source --csv --print-source sass``; a
    name that comes again (two kernels of one name, as the op's fp8 and bf16 ones) gets ``#2``, ``#3`` ..."""
    kernels: dict[str, list[dict[str, str]]] = {}
    rows, header = None, None
    for row in csv.reader(lines):
        if row and row[0] == "Kernel Name":
            name, n = row[1], 1
            while name in kernels:
                n += 1
                name = f"{row[1]}#{n}"
            rows, header = kernels.setdefault(name, []), None
        elif row and row[0] == "Address":
            header = row
        elif rows is not None and header is not None and row:
            rows.append(dict(zip(header, row)))
    if not kernels:
        raise SystemExit("ncu_stalls: no 'Kernel Name' line: the file must be ncu --page source --csv output")
    return kernels


def _opcode(source: str) -> str:
    words = source.split()
    if words and words[0].startswith("@"):  # a predicate guard
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def stalls(rows: list[dict[str, str]]) -> dict[str, float]:
    """Each stall reason's share of the rows' samples (``stall_*`` columns, the not-issued ones left out)."""
    total = sum(_number(r.get(ALL, "0")) for r in rows) or 1.0
    counts: collections.Counter = collections.Counter()
    for r in rows:
        for column, value in r.items():
            if column.startswith("stall_") and "Not Issued" not in column:
                counts[column.removeprefix("stall_")] += _number(value)
    return {reason: n / total for reason, n in counts.most_common() if n}


def summary(rows: list[dict[str, str]]) -> dict:
    """A kernel's instruction count, samples, executed instructions, stall shares and opcode mix."""
    opcodes: collections.Counter = collections.Counter()
    for r in rows:
        opcodes[_opcode(r.get("Source", ""))] += _number(r.get(EXECUTED, "0"))
    return {"instructions": len(rows), "samples": sum(_number(r.get(ALL, "0")) for r in rows),
            "executed": sum(opcodes.values()), "stalls": stalls(rows), "opcodes": dict(opcodes.most_common())}


def regions(rows: list[dict[str, str]], min_share: float = 0.004) -> list[dict]:
    """The rows cut where the execution count changes; those with at least ``min_share`` of the samples (or more
    than 40 instructions), each with its first row, size, executions, samples and stall shares."""
    total = sum(_number(r.get(ALL, "0")) for r in rows) or 1.0
    out, start = [], 0
    for end in range(1, len(rows) + 1):
        if end < len(rows) and rows[end].get(EXECUTED) == rows[start].get(EXECUTED):
            continue
        part = rows[start:end]
        samples = sum(_number(r.get(ALL, "0")) for r in part)
        if samples / total >= min_share or len(part) > 40:
            out.append({"first": start, "size": len(part), "executed": _number(part[0].get(EXECUTED, "0")),
                        "samples": samples, "share": samples / total, "stalls": stalls(part),
                        "opens": part[0].get("Source", "").strip()})
        start = end
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="ncu --page source --csv --print-source sass output")
    p.add_argument("--regions", metavar="NAME", help="also cut this kernel (its name or start; the second kernel "
                                                     "of one name is NAME#2) into regions")
    p.add_argument("--min-share", type=float, default=0.004, help="regions: the least share of samples to list")
    p.add_argument("--json")
    args = p.parse_args(argv)
    with open(args.source, encoding="utf-8", errors="replace") as f:
        kernels = parse(f)
    report = {name: summary(rows) for name, rows in kernels.items()}
    for name, s in report.items():
        print(f"{name[:90]}: {s['instructions']} SASS instructions, {s['executed'] / 1e6:.2f} M executed, "
              f"{s['samples']:.0f} samples")
        print("  stalls: " + ", ".join(f"{k} {v:.1%}" for k, v in list(s["stalls"].items())[:10]))
        print("  opcodes (M): " + ", ".join(f"{k} {v / 1e6:.2f}" for k, v in list(s["opcodes"].items())[:16]))
    if args.regions:
        found = [n for n in kernels if n.startswith(args.regions)]
        if not found:
            print(f"ncu_stalls: --regions must name a kernel of the file ({', '.join(k[:40] for k in kernels)}), "
                  f"got {args.regions!r}", file=sys.stderr)
            return 2
        report[found[0]]["regions"] = regions(kernels[found[0]], args.min_share)
        for r in report[found[0]]["regions"]:
            reasons = ", ".join(f"{k} {v:.0%}" for k, v in list(r["stalls"].items())[:5])
            print(f"  [{r['first']:5d} +{r['size']:4d}] x{r['executed']:.0f} {r['share']:5.1%} {reasons} "
                  f"| {r['opens'][:40]}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
