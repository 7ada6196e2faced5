"""How the packed kernel's CTA order balances a ragged batch: a simulation of the GPU's dispatch, no GPU.

    python bench/varlen_order.py [--seeds 4] [--sms 132] [--prologue 0.3]

The numbers ``fa4_mlir/kernels/attention/varlen_schedule.py`` quotes. CTAs start in linear order (x fastest,
then y) on the first free SM, one CTA an SM (the sm_90a packed kernel's registers and shared memory); a CTA
takes ``prologue`` plus one unit per K/V tile it visits (BM = BN = 128; causal bottom-right with Sq = Sk: tile
t sees ceil(min(Sk, (t + 1) BM) / BN) tiles), an empty CTA of the old grid nothing. Batches:
``bench/varlen.py``'s ragged ones (lengths uniform in 1..4096 up to 16384 tokens, per seed), 16 and 32 heads.
Each order's finish time is printed over the ideal (every CTA's time summed over the SMs):

* ``old``: the grid (ceil(max / BM), H, B), causal tiles reversed (the kernel before the schedule);
* ``heads-major``: slots in batch order within each head, one head after another;
* ``heads-minor``: the schedule's causal order, each sequence's tiles last rows first, every head of a slot
  side by side (``hopper_varlen.place_slot``);
* ``lpt``: every tile of every head sorted by its work, longest first (what a device sort would buy).
"""

from __future__ import annotations

import argparse
import heapq
import random

BM = BN = 128


def ragged_lengths(longest: int, tokens: int, seed: int) -> list[int]:
    """bench/varlen.py's: lengths uniform in 1..longest until they hold ``tokens`` (the last one cut)."""
    rng, out = random.Random(seed), []
    while sum(out) < tokens:
        out.append(min(rng.randint(1, longest), tokens - sum(out)))
    return out


def work(length: int, t: int, causal: bool) -> int:
    """K/V tiles query tile ``t`` of a sequence of ``length`` rows and keys visits."""
    return -(-(min(length, (t + 1) * BM) if causal else length) // BN)


def finish(order: list[float], sms: int, prologue: float) -> float:
    free = [0.0] * sms
    end = 0.0
    for w in order:
        start = heapq.heappop(free)
        done = start + (prologue + w if w is not None else 0.0)
        end = max(end, done)
        heapq.heappush(free, done)
    return end


def orders(lengths: list[int], heads: int, causal: bool) -> dict[str, list]:
    tiles = [-(-n // BM) for n in lengths]
    longest = max(tiles)

    def tile(b: int, x: int) -> int:
        return tiles[b] - 1 - x if causal else x

    old = [work(n, tile_x, causal) if tile_x < tiles[b] else None
           for b, n in enumerate(lengths) for _ in range(heads) for x in range(longest)
           for tile_x in [longest - 1 - x if causal else x]]
    major = [work(lengths[b], tile(b, x), causal) for _ in range(heads) for b in range(len(lengths))
             for x in range(tiles[b])]
    minor = [work(lengths[b], tile(b, x), causal) for b in range(len(lengths)) for x in range(tiles[b])
             for _ in range(heads)]
    return {"old": old, "heads-major": major, "heads-minor": minor, "lpt": sorted(major, reverse=True)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--sms", type=int, default=132)
    p.add_argument("--prologue", type=float, default=0.3, help="a CTA's fixed time, in K/V tiles")
    args = p.parse_args(argv)
    print("| seed | B | heads | causal | " + " | ".join(orders([1], 1, False)) + " |")
    print("|---" * 8 + "|")
    for seed in range(args.seeds):
        lengths = ragged_lengths(4096, 16384, seed)
        for heads in (16, 32):
            for causal in (False, True):
                cases = orders(lengths, heads, causal)
                ideal = sum(w + args.prologue for w in cases["lpt"]) / args.sms
                ratios = " | ".join(f"{finish(o, args.sms, args.prologue) / ideal:.3f}" for o in cases.values())
                print(f"| {seed} | {len(lengths)} | {heads} | {'yes' if causal else 'no'} | {ratios} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
