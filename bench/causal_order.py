"""How well the causal sm_90a attention's CTA orders fill the GPU: a model, not a measurement.

    python bench/causal_order.py [--sms 132] [--overhead 1.0]

The causal one-tile kernel's CTAs do unequal work (query tile t of a head sees t + 1 key tiles) and the
hardware starts them in launch order, each on the first SM that frees (one CTA an SM: the kernel takes the
register file). This replays that greedy start for the two orders ``AttentionConfig.causal_order`` offers,
for the FA3 benchmark's causal shapes (bench/attention.py; bf16, the op's tiles), and prints the ideal time
(work / SMs) over the replayed makespan:

* ``heads``: each head's tiles in turn, its longest rows first (the order before the L2 sections);
* ``sections``: ``hopper.section_order``, the kernel's own code, with the section the kernel computes
  (``section_heads``: the fewest heads whose tiles make two waves, a power of two, from
  ``SM90_SECTION_MIN_TILES`` query tiles a head and head dim ``SM90_SECTION_MIN_HEAD_DIM``; else one head).

A CTA's work is its key tiles plus ``--overhead`` tiles (prologue, epilogue, launch). The model has no L2,
no clocks and no variation between tiles (its 1k rows gain from sections; the H100's lose, docs/PERF.md): it
says where the order alone loses, not what the H100 measures.
"""

from __future__ import annotations

import argparse
import heapq
import math

from fa4_mlir.configs.attention import SM90_SECTION_MIN_HEAD_DIM, SM90_SECTION_MIN_TILES, SM90_SMS, AttentionConfig
from fa4_mlir.configs.attention_op import default_tile
from fa4_mlir.kernels.attention.hopper import section_order

# (head dim, seqlen, batch, heads, kv heads): bench/attention.py's fa3 (B S = 16k, H D = 2048), gqa and short rows
SHAPES = [(d, s, 16384 // s, 2048 // d, 2048 // d) for d in (64, 128, 256) for s in (1024, 4096, 16384)]
SHAPES += [(128, 8192, 2, 64, 8), (128, 16384, 1, 64, 8), (128, 512, 32, 16, 16)]


def makespan(works: list[float], sms: int) -> float:
    """When the last CTA ends, the CTAs started in list order on the first free SM."""
    free = [0.0] * sms
    for work in works:
        heapq.heappush(free, heapq.heappop(free) + work)
    return max(free)


def section_heads(head_dim: int, q_tiles: int, heads_batch: int, sms: int = SM90_SMS) -> int:
    """The kernel's section (``hopper._causal_sections``), in Python."""
    if q_tiles < SM90_SECTION_MIN_TILES or head_dim < SM90_SECTION_MIN_HEAD_DIM:
        return 1
    waves = max(1, 2 * sms // q_tiles)
    return min(1 << (waves.bit_length() - 1), heads_batch)


def orders(d: int, s: int, b: int, h: int, hk: int, overhead: float, sms: int) -> dict[str, float]:
    num_q, block_n = default_tile("sm_90a", "bf16", d, True, s)  # the op's tile
    config = AttentionConfig(target="sm_90a", head_dim=d, causal=True, num_q=num_q, block_n=block_n)
    bm, bn = config.hopper.bm, config.hopper.bn
    q_tiles, hb = math.ceil(s / bm), h * b

    def work(qt: int) -> float:
        return math.ceil(min(s, (qt + 1) * bm) / bn) + overhead

    heads = [work(q_tiles - 1 - x) for _ in range(hb) for x in range(q_tiles)]
    section = section_heads(config.hopper.head_dim, q_tiles, hb)
    sections = [work(section_order(slot, q_tiles, hb, section)[0]) for slot in range(q_tiles * hb)]
    ideal = sum(heads) / sms
    return {"section": section, "heads": ideal / makespan(heads, sms), "sections": ideal / makespan(sections, sms)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sms", type=int, default=132, help="CTAs at work at once (H100 SXM: 132 SMs)")
    parser.add_argument("--overhead", type=float, default=1.0, help="a CTA's fixed cost, in key tiles")
    args = parser.parse_args()
    print("| D | S | B | H/Hkv | heads a section | heads order | sections order | sections / heads |")
    print("|---|---|---|---|---|---|---|---|")
    for d, s, b, h, hk in SHAPES:
        r = orders(d, s, b, h, hk, args.overhead, args.sms)
        print(f"| {d} | {s} | {b} | {h}/{hk} | {r['section']} | {r['heads']:.3f} | {r['sections']:.3f} | "
              f"{r['sections'] / r['heads']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
