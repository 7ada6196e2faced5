"""Vector clocks for happens-before: one component per warp, per mbarrier and per named barrier.

A warp's component counts its own steps. A barrier's component is the number of its phases known
to have completed (a named barrier's: generations); waiting on a phase joins the clock the phase
completed with. An async op (TMA, MMA, TMA store) is done at an *end condition*: an OR of ANDs of
``clock[component] >= value`` (e.g. "phase 3 of full[1] is known complete").
"""

from __future__ import annotations

import numpy as np

from fa4_mlir.protocol.model import Barrier

Condition = list[list[tuple[int, int]]]  # OR over alternatives, each an AND of (component, minimum)


class ClockSpace:
    """The component index of every warp, mbarrier and named barrier of a cluster."""

    def __init__(self, num_warps: int, cluster: int, barriers: list[Barrier], named: list[tuple[int, str]]):
        self.num_warps = num_warps
        self.size = num_warps * cluster
        self.barrier = {}
        for b in barriers:
            self.barrier[b] = self.size
            self.size += 1
        self.named = {}
        for key in named:
            self.named[key] = self.size
            self.size += 1

    def warp(self, cta: int, warp: int) -> int:
        return cta * self.num_warps + warp

    def zero(self) -> np.ndarray:
        return np.zeros(self.size, dtype=np.int64)


def satisfied(end: Condition | None, clock: np.ndarray) -> bool:
    """Whether ``clock`` knows the event whose end condition is ``end`` (None: not ended yet)."""
    if end is None:
        return False
    return any(all(clock[c] >= v for c, v in alt) for alt in end)
