"""Why the run stopped with roles still waiting: under-arrival, tx-byte mismatch, or a wait cycle."""

from __future__ import annotations

from fa4_mlir.protocol.model import Barrier
from fa4_mlir.protocol.violations import Violation


def _future_arrivers(sim, b: Barrier) -> list[tuple[str, object]]:
    """(process, event) of the next arrival on ``b`` each stuck process would make."""
    found = []
    for i, p in enumerate(sim.k.processes):
        for e in p.events[sim.pc[i]:]:
            if any(t == b for t, _ in e.arrivals) or any(t == b for t, _ in e.tx):
                found.append((p.name, e))
                break
    return found


def loop_mismatch(procs) -> str:
    """A note naming the loops with run-time bounds when roles ran them a different number of
    times (the usual cause of a role left waiting: one loop bound off by one, or another argument)."""
    loops = [(p.name, site, trips, text) for p in procs for site, trips, text in p.loops]
    if len({trips for _, _, trips, _ in loops}) < 2:
        return ""
    runs = "; ".join(f"{name} {trips} time{'s' if trips != 1 else ''} ({text}) at {site.where()}"
                     for name, site, trips, text in loops[:6])
    return (f"the roles' loops with run-time bounds ran different numbers of times: {runs}; loops that "
            f"walk one ring must run the same number of times (the same bound)")


def diagnose_deadlock(sim, stuck: list[int]) -> list[Violation]:
    procs = sim.k.processes
    loops = loop_mismatch([p for p in procs if p.cta == 0])
    blocked = []
    out: list[Violation] = []
    for i in stuck:
        p, e = procs[i], procs[i].events[sim.pc[i]]
        if e.kind == "wait":
            b = e.barrier
            s = sim.bars[b]
            arrived = s.count - s.pending
            state = f"phase {s.completed}: {arrived} of {s.count} arrivals"
            if s.expected or s.delivered:
                state += f", {s.delivered} of {s.expected} tx bytes"
            blocked.append(f"{p.name} waits {sim.label(b)} for parity {e.parity} ({state}) at {e.site.where()}")
            future = _future_arrivers(sim, b)
            comp = sim.space.barrier[b]
            current = {a.process for a in s.arrivals[-1] if a.count}
            pair = sim.k.arrays[b.array].cta_group == 2
            if pair and b.cta % 2 and not arrived and not future:
                out.append(Violation(
                    "cta-pair", sim.step, e.site,
                    f"{p.name} in CTA {b.cta} waits on its own copy of '{sim.k.arrays[b.array].name}', a CTA-pair "
                    f"barrier (cta_group = 2) whose arrivals all go to the leader CTA, so it never completes: "
                    f"only the leader (even) CTA may wait on it; guard the wait with the CTA rank",
                    key=("cta-pair", b.array, e.site), barriers=[b]))
            elif s.completed and any(sim.clock[(b.cta, w)][comp] < s.completed for w in e.threads.warps):
                missed = "a fresh barrier" if s.completed == 1 else f"phase {s.completed - 2}"
                out.append(Violation(
                    "parity", sim.step, e.site,
                    f"the wait of {p.name} on {sim.label(b)} for parity {e.parity} passes on {missed} if it "
                    f"runs before phase {s.completed - 1} completes, and blocks forever if it runs after (as "
                    f"here): nothing orders it before that phase; check the phase the wait starts from "
                    f"(a pipeline's consumer starts from phase 0, its producer from phase 1)",
                    key=("parity", b.cta, b.array, e.site), barriers=[b]))
            elif s.pending == 0 and s.tx > 0 and not any(ev.tx for name, ev in future if name not in current):
                # the bytes are short, and no role outside this phase's arrivers brings more
                expect = next((a.event for a in s.arrivals[-1] if a.count), e)
                out.append(Violation(
                    "tx-mismatch", sim.step, expect.site,
                    f"{sim.label(b, s.completed)} never completes: expect_tx announced {s.expected} bytes "
                    f"but its TMA loads deliver {s.delivered}; {p.name} waits for it at {e.site.where()}",
                    key=("tx-mismatch", b.cta, b.array), barriers=[b]))
            elif 0 < arrived and {name for name, _ in future} <= current:
                who = "; ".join(sorted({f"{a.process} ({a.event.site.where()})" for a in s.arrivals[-1]}))
                out.append(Violation(
                    "under-arrival", sim.step, e.site,
                    f"{sim.label(b, s.completed)} gets {arrived} of its {s.count} arrivals (from {who}); no other "
                    f"role arrives on it, so {p.name} waits forever at {e.site.where()}: the arrive count "
                    f"must equal the arrivals of one phase", key=("under-arrival", b.cta, b.array), barriers=[b]))
            elif not future:
                out.append(Violation(
                    "deadlock", sim.step, e.site,
                    f"{p.name} waits at {e.site.where()} for {sim.label(b)} parity {e.parity}, which can never "
                    f"pass: no role arrives on it again ({state}); "
                    + (loops or "check the phase the wait starts from"),
                    key=("deadlock", b.cta, b.array), barriers=[b]))
        elif e.kind == "named":
            st = sim.named.get((e.threads.cta, e.name))
            arrived = st.arrived if st else 0
            blocked.append(f"{p.name} waits at named barrier '{e.name}' ({arrived} of {e.expected} threads) "
                           f"at {e.site.where()}")
            # a role that would still meet here later (blocked elsewhere first) makes this a wait
            # cycle, diagnosed as a deadlock below, not a thread count that can never be met
            if not any(ev.kind == "named" and ev.name == e.name and ev.threads.cta == e.threads.cta
                       for j in range(len(procs)) if j != i for ev in procs[j].events[sim.pc[j]:]):
                members = "; ".join(f"{n} ({ev.threads.describe()})" for n, ev in (st.members if st else []))
                out.append(Violation(
                    "named-barrier", sim.step, e.site,
                    f"named barrier '{e.name}' counts {e.expected} threads but only {arrived} arrive "
                    f"({members}) and no role arrives again: the thread count must equal the threads that "
                    f"meet there", key=("named-barrier", e.name, "under")))
        else:
            blocked.append(f"{p.name} waits at the CTA barrier after fa4.mbarrier_init at {e.site.where()}")
    if not out:
        first = procs[stuck[0]].events[sim.pc[stuck[0]]]
        out.append(Violation(
            "deadlock", sim.step, first.site,
            "deadlock: every remaining wait depends on another: " + "; ".join(blocked) + (f"; {loops}" if loops else ""),
            key=("deadlock", "cycle"),
            barriers=[procs[i].events[sim.pc[i]].barrier for i in stuck if procs[i].events[sim.pc[i]].barrier]))
    return out
