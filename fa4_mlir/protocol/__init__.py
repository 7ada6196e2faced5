"""The static protocol verifier: prove a kernel's barrier protocol before it runs.

``verify_protocol(module, target)`` extracts, per warp role and CTA, the sequence of protocol events
(``extract``), runs them over the semantics of mbarriers, named barriers, TMA, MMA and TMEM
(``simulate``) and reports every violated rule as a located error naming its bug class:

======================  ===========================================================================
class                   meaning
======================  ===========================================================================
``bounds``              a ring stage outside its ring's region, or a barrier index outside its array
``deadlock``            a wait that can never complete (a cycle of waits, or nobody arrives again)
``under-arrival``       a phase gets fewer arrivals than the barrier's count, and nobody arrives again
                        (or it is still incomplete when the kernel exits)
``over-arrival``        more arrivals than the count, or an arrival that can land a phase early
``tx-mismatch``         expect_tx bytes differ from the bytes the phase's TMA loads deliver
``parity``              a wait that can pass on the wrong phase (e.g. parity 1 on a fresh barrier)
``named-barrier``       a thread count that differs from the threads that meet, or one id reused
                        by groups whose uses are not ordered
``race``                a write to shared memory or TMEM that another role (or other threads of the
                        role) may still read or write, e.g. a producer loading a stage a consumer
                        may still read; async work still running when its CTA can exit
``fence``               a generic-proxy store read by the async proxy (TMA store, MMA) without
                        fence.proxy.async in the writing warps
``tmem``                TMEM used before allocation, deallocated while in use, never freed, not
                        allocated and freed by one and the same whole warp, or allocated too small
``cta-pair``            a pair MMA from the odd CTA, or a CTA that can exit while its peer signals it
``init``                a barrier used before fa4.mbarrier_init
``unsupported``         the kernel does something the verifier cannot model (it says what)
======================  ===========================================================================

Kernel arguments are bound per scenario (``solve``) so that loops whose bounds depend on them run
0, 1, 2, S, S + 1 and 2S + 1 times (S: the most stages of any ring), covering the prologue, the
steady state with every ring wrapping around in both phases, and the epilogue, in the first CTA of
the grid and in the last (a trailing or late CTA); every role sees the same argument values.
"""

from __future__ import annotations

import dataclasses

from fa4_mlir._mlir import ir
from fa4_mlir.core.diagnostics import Diagnostic
from fa4_mlir.protocol.extract import Infeasible, Scenario, Unverifiable, extract, kernel_shape
from fa4_mlir.protocol.mirror import Mirror
from fa4_mlir.protocol.model import Kernel, Site
from fa4_mlir.protocol.simulate import Simulation
from fa4_mlir.protocol.violations import CLASSES, Violation

MAX_BRANCH_RUNS = 8  # scenarios per trip count that flip unknown conditions


@dataclasses.dataclass
class Report:
    """The verdict on one kernel: its violations (empty: verified) under ``scenario``, and the
    canonical run of the last scenario checked (for timelines)."""

    kernel: str
    violations: list[Violation]
    scenario: str
    scenarios: int
    simulation: Simulation | None = None
    events: int = 0  # events of the longest scenario run


def trip_counts(max_stages: int) -> list[int]:
    s = max_stages
    return sorted({0, 1, 2, s, s + 1, 2 * s + 1})


def plans(max_stages: int, trips: list[int] | None = None) -> list[tuple[int, str, int]]:
    """(trip count, CTA, spread) of every scenario family: the first CTA of the grid at short trip
    counts (the prologue and epilogue, an empty range); the last CTA at every trip count (its
    place is solved with the loop bounds: a trailing CTA with a short or empty tile range, or a
    late CTA with a long causal range); loop bounds solved for one more trip each, which tells
    roles that loop over different arguments apart; and, in the last CTA, for one fewer trip each,
    which tells a role whose range is clamped to the grid's end from one whose range is not."""
    counts = trips if trips is not None else trip_counts(max_stages)
    out = [(k, "first", 0) for k in counts if k <= 2]
    out += [(k, "last", 0) for k in counts]
    out += [(k, "first", 1) for k in counts if k == 1]
    out += [(k, "last", -1) for k in counts if k == 2]
    return out


def verify_kernel(func: ir.Operation, target_sm: int, witness: int = 6, trips: list[int] | None = None) -> Report | None:
    """Verify one kernel function; None if it uses no barriers, pipelines or TMEM."""
    mirror = Mirror(func)
    shape = kernel_shape(mirror, target_sm)
    if shape is None:
        return None
    runs, last, done, preconditions, events = 0, None, set(), [], 0
    for k, cta, spread in plans(shape.max_stages, trips):
        queue = [{}]
        tried = 0
        extracted = None
        while queue and tried < MAX_BRANCH_RUNS:
            branches = queue.pop(0)
            scenario = Scenario(k, branches, cta=cta, spread=spread, preconditions=preconditions,
                                cluster=shape.cluster)
            tried += 1
            known = len(preconditions)
            try:
                kernel = extract(shape, scenario)
            except Infeasible:
                if len(preconditions) > known:
                    queue.insert(0, branches)  # it learnt a precondition: run it again knowing it
                continue  # its decisions contradict each other: no run takes them
            except Unverifiable as exc:
                hint = ("; turn the verifier off for this kernel (fa4-compile --no-verify-protocol) if it is right"
                        if exc.cls == "unsupported" else "")
                v = Violation(exc.cls, 0, exc.site, f"{exc}{hint}")
                return Report(mirror.name, [v], scenario.describe(), runs + 1)
            extracted = scenario
            for term in scenario.seen:
                queue.append({**scenario.branches, term: False})
            if scenario.signature() in done:
                continue  # the same run as a scenario already simulated
            done.add(scenario.signature())
            runs += 1
            events = max(events, sum(len(p.events) for p in kernel.processes))
            sim = Simulation(kernel)
            violations = _ranked(sim.run())
            last = sim
            if violations:
                for v in violations:
                    v.witness = sim.witness.explain(v, witness)
                return Report(mirror.name, violations, scenario.describe(), runs, sim, events)
        if extracted is not None and not (extracted.dynamic_loops or extracted.seen or extracted.uses_cta):
            break  # nothing depends on the trip count or the CTA
    return Report(mirror.name, [], "", runs, last, events)


def _ranked(violations: list[Violation]) -> list[Violation]:
    seen, out = set(), []
    for v in sorted(violations, key=lambda v: (v.step, CLASSES.index(v.cls))):
        if v.key and v.key in seen:
            continue
        seen.add(v.key)
        out.append(v)
    return out


def to_diagnostics(report: Report, max_errors: int) -> list[Diagnostic]:
    out = []
    for v in report.violations[:max_errors]:
        notes = [Diagnostic("note", f"witness: {line}") for line in v.witness]
        scenario = f" [{report.scenario}]" if report.scenario and v.cls != "unsupported" else ""
        out.append(Diagnostic("error", f"{v.headline()}{scenario}", v.site.file, v.site.line, v.site.col,
                              tuple(notes)))
    return out


__all__ = ["CLASSES", "Kernel", "Report", "Site", "Violation", "plans", "to_diagnostics", "trip_counts", "verify_kernel"]
