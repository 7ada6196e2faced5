"""Values the IR leaves to run time, bound per scenario so that every role sees the same run.

A value that depends on kernel arguments is a *term*: a tuple tree whose leaves are
``("arg", i)`` (kernel argument ``i``), ``("mem", ("gep", argument, index), type)`` (a value loaded at
one address off a kernel argument, the same in every thread: the packed kernels' cu_seqlens),
``("fn", fingerprint, inputs, i)`` (a result that a region the interpreter does not enter computes
the same in every thread: ``uniformity``) or ``("sreg", "ctaid.x" | "nctaid.x")`` (the CTA's place in the
grid, which a scenario binds from the start) and whose inner nodes are the integer ops that computed it
(``("bin", op, width, a, b)``, ``("cmp", pred, width, a, b)``, ``("select", c, a, b)``,
``("cast", width, a)``). Terms are structural, so two roles that compute a bound the same way hold
the same term. Anything else the verifier cannot know (a loaded value, a warp vote) is an
*opaque* term, which no binding resolves.

A scenario binds leaves lazily, where the run needs a value:

* a loop whose bounds are terms binds their leaves so that it runs the scenario's trip count
  (``solve_trips``): ``0 to n`` and ``1 to n`` then see the same ``n``, so a role whose loop runs
  ``n - 1`` against its partner's ``n``, or over another argument, is caught as a mismatch;
* a branch on a term is a decision (taken, or not) recorded as a constraint on its leaves, so
  ``flag > 0`` in one role and ``flag <= 0`` in another are decided consistently;
* a barrier index, stage or phase that is a term binds its leaves to values that keep every
  constraint.

Each binding keeps the recorded constraints true; when none can, the scenario is infeasible (it
describes no real run) and is skipped.
"""

from __future__ import annotations

import itertools

from fa4_mlir.protocol.values import binary, compare, wrap

# Values tried for a leaf that a constraint (not a loop) needs: small counts, tile-size edges, flags.
CANDIDATES = (1, 0, 2, 3, 4, 5, 7, 8, 9, 16, 63, 64, 65, 127, 128, 129, 255, 256, 1000, 4096, -1)
DEFAULTS = (1, 3, 4096)  # values of the other leaves of a trip count while one leaf is searched
SEARCH_LIMIT = 1 << 24
# mem: a value loaded from a kernel argument's memory (semantics._load); fn: a UNIFORM result of a region the
# interpreter does not enter (uniformity)
LEAVES = ("arg", "sreg", "mem", "fn")
GRID_LEAVES = (("sreg", "ctaid.x"), ("sreg", "nctaid.x"))


class Infeasible(Exception):
    """The scenario's decisions contradict each other: no run takes them all."""


def substitute(term, values: dict):
    """``term`` with the leaves in ``values`` replaced by their values."""
    if not is_term(term):
        return term
    if term in values:
        return values[term]
    kind = term[0]
    if kind in ("bin", "cmp"):
        return (*term[:3], substitute(term[3], values), substitute(term[4], values))
    if kind == "select":
        return (kind, *(substitute(t, values) for t in term[1:]))
    if kind == "cast":
        return (kind, term[1], substitute(term[2], values))
    return term


def is_term(v) -> bool:
    return isinstance(v, tuple)


def leaves(term, out: dict | None = None) -> dict:
    """The argument leaves of ``term`` in order of first appearance (a dict used as an ordered set)."""
    out = {} if out is None else out
    if not is_term(term):
        return out
    if term[0] in LEAVES:
        out[term] = None
    elif term[0] in ("bin", "cmp"):
        leaves(term[3], out)
        leaves(term[4], out)
    elif term[0] == "select":
        for t in term[1:]:
            leaves(t, out)
    elif term[0] == "cast":
        leaves(term[2], out)
    return out


def evaluable(term) -> bool:
    """Whether binding the leaves of ``term`` gives it a value (no opaque part)."""
    if not is_term(term):
        return True
    kind = term[0]
    if kind in LEAVES:
        return kind in ("arg", "mem", "fn") or term in GRID_LEAVES
    if kind in ("bin", "cmp"):
        return evaluable(term[3]) and evaluable(term[4])
    if kind == "select":
        return all(evaluable(t) for t in term[1:])
    if kind == "cast":
        return evaluable(term[2])
    return False


def evaluate(term, env: dict, strict: bool = False):
    """``term`` under the leaf values ``env``; None if a leaf is unbound or a part is opaque, and
    with ``strict`` also if an operation overflows its width (no real launch computes that)."""
    if not is_term(term):
        return term
    kind = term[0]
    if kind in LEAVES:
        return env.get(term)
    if kind == "bin":
        a, b = evaluate(term[3], env, strict), evaluate(term[4], env, strict)
        if a is None or b is None:
            return None
        v = binary(term[1], a, b, term[2])
        return None if strict and v is not None and v != binary(term[1], a, b, None) else v
    if kind == "cmp":
        a, b = evaluate(term[3], env, strict), evaluate(term[4], env, strict)
        return None if a is None or b is None else compare(term[1], a, b, term[2])
    if kind == "select":
        c = evaluate(term[1], env, strict)
        return None if c is None else evaluate(term[2] if c else term[3], env, strict)
    if kind == "cast":
        a = evaluate(term[2], env, strict)
        if a is None:
            return None
        v = wrap(a, term[1])
        return None if strict and v != a else v
    return None


def _all_hold(constraints, env: dict) -> bool:
    """Whether every (term, taken) decision evaluates under ``env`` (overflow-free) as it was taken."""
    for term, want in constraints:
        v = evaluate(term, env, strict=True)
        if v is None or bool(v) != want:
            return False
    return True


def trip_count(lb: int, ub: int, step: int) -> int | None:
    if step <= 0:
        return None
    return max(0, -(-(ub - lb) // step))


class Bindings:
    """The leaf values of one scenario and the branch decisions they must keep."""

    def __init__(self, spread: int = 0, preconditions=(), grid: dict | None = None):
        self.bound: dict = dict(grid or {})
        self.constraints: list[tuple[tuple, bool]] = [(t, True) for t in preconditions]
        self.spread = spread  # each loop bound solved gets this many trips more than the one before
        self.solves = 0

    # ---- reading --------------------------------------------------------------------------------

    def value(self, term):
        return evaluate(term, self.bound)

    def _holds(self, env: dict) -> bool:
        """Whether every decision whose leaves ``env`` binds evaluates as it was taken."""
        for term, want in self.constraints:
            v = evaluate(term, env, strict=True)
            if v is not None and bool(v) != want:
                return False
        return True

    def _satisfiable(self, env: dict, extra=()) -> dict | None:
        """Values for the leaves that ``env`` leaves unbound making every decision (and ``extra``)
        hold, searched one or two leaves at a time over CANDIDATES; None if none is found.

        A trial changes only its chosen leaves, so a decision over none of them keeps the truth it has
        with every free leaf at CANDIDATES[0]: a choice that leaves a false one untouched is skipped,
        and a trial evaluates only the decisions over its leaves. The first binding found is the one
        evaluating every decision for every trial in the same order would find."""
        constraints = [*self.constraints, *extra]
        free, uses = {}, []
        for term, _ in constraints:
            mine = leaves(term)
            uses.append(mine)
            free.update(mine)
        free = [x for x in free if x not in env]
        if not free:
            return env if _all_hold(constraints, env) else None
        trial = {**env, **{x: CANDIDATES[0] for x in free}}
        false = [i for i, c in enumerate(constraints) if not _all_hold((c,), trial)]
        if not false:
            return trial
        for width in (1, 2):
            for chosen in itertools.combinations(free, width):
                if any(all(x not in uses[i] for x in chosen) for i in false):
                    continue  # a false decision none of these leaves can change
                touched = [c for c, used in zip(constraints, uses) if any(x in used for x in chosen)]
                for values in itertools.product(CANDIDATES, repeat=width):
                    e = {**trial, **dict(zip(chosen, values))}
                    if _all_hold(touched, e):
                        return e
        return None

    # ---- deciding -------------------------------------------------------------------------------

    def decide(self, term, want: bool) -> tuple[bool, bool]:
        """Take the branch on ``term`` as ``want`` if some binding allows it, else the other way.
        Returns (taken, forced)."""
        for choice, forced in ((want, False), (not want, True)):
            if self._satisfiable(dict(self.bound), [(term, choice)]) is not None:
                self.constraints.append((term, choice))
                return choice, forced
        raise Infeasible(f"no values of the kernel arguments take this branch either way: {describe(term)}")

    def require(self, term) -> None:
        """A fact every real run has (a loop ``1 to n`` peels the first iteration: ``n >= 1``)."""
        if (term, True) in self.constraints:
            return
        if self._satisfiable(dict(self.bound), [(term, True)]) is None:
            raise Infeasible(f"the bindings so far contradict {describe(term)}")
        self.constraints.append((term, True))

    def commit(self, term):
        """Bind the leaves of ``term`` to values that keep every decision; its value (None if opaque)."""
        if not evaluable(term):
            return None
        v = self.value(term)
        if v is not None:
            return v
        env = self._satisfiable(dict(self.bound))
        if env is None:
            raise Infeasible("no values of the kernel arguments keep every branch taken so far")
        for x in leaves(term):
            self.bound[x] = env.get(x, CANDIDATES[0])
        return self.value(term)

    def solve_trips(self, lb, ub, step, target: int) -> int | None:
        """Bind the leaves of a loop's bounds so that it runs ``target`` times (or, when no values
        reach it, as close as they come, preferring argument values near the target); the trip
        count, or None when a bound is opaque."""
        if not all(evaluable(t) for t in (lb, ub, step)):
            return None
        unbound = [x for x in (*reversed(leaves(ub)), *leaves(lb), *leaves(step)) if x not in self.bound]
        unbound = list(dict.fromkeys(unbound))
        if not unbound:
            return trip_count(self.value(lb), self.value(ub), self.value(step))
        target = max(0, target + self.spread * self.solves)
        self.solves += 1
        # Among the values that reach the target, the one nearest ``target + 1``: ``1 to n`` (a loop
        # peeled by one) and ``0 to n`` then agree with the other role's count more often than not.
        best = None  # ((trip distance, value distance), env)
        for free in unbound:
            others = [x for x in unbound if x is not free]
            for default in DEFAULTS:
                env = {**self.bound, **{x: default for x in others}}
                for v, trips in _search(lambda v: self._trips(env, free, v, lb, ub, step), target):
                    key = (abs(trips - target), abs(v - target - 1))
                    if best is not None and key >= best[0]:
                        continue
                    e = {**env, free: v}
                    if self._holds(e) and self._satisfiable(e) is not None:
                        best = (key, e)
                    if best is not None and best[0][0] == 0 and v > target:
                        break  # past target + 1: no exact value nearer to it follows
                if best is not None and best[0][0] == 0:
                    break
            if best is not None and best[0][0] == 0:
                break
        if best is None:
            raise Infeasible("no values of the kernel arguments give this loop a trip count and keep "
                             "every branch taken so far")
        for x in unbound:
            self.bound[x] = best[1][x]
        return trip_count(self.value(lb), self.value(ub), self.value(step))

    @staticmethod
    def _trips(env, free, v, lb, ub, step):
        e = {**env, free: v}
        lo, hi, st = evaluate(lb, e, True), evaluate(ub, e, True), evaluate(step, e, True)
        if lo is None or hi is None or st is None:
            return None
        return trip_count(lo, hi, st)


def _search(trips_of, target: int):
    """(value, trips) candidates for one leaf: 0..64 in order, then a bisection between the powers
    of two where the trip count crosses ``target`` (trip counts are monotone in most bounds)."""
    prev = None
    for v in range(65):
        t = trips_of(v)
        if t is not None:
            yield v, t
            prev = (v, t)
    v = 128
    while v <= SEARCH_LIMIT:
        t = trips_of(v)
        if t is None:
            v *= 2
            continue
        yield v, t
        if t == target:
            return
        if prev is not None and (prev[1] - target) * (t - target) < 0:
            lo, hi = prev[0], v
            while hi - lo > 1:
                mid = (lo + hi) // 2
                tm = trips_of(mid)
                if tm is None:
                    break
                if tm == target:
                    yield mid, tm
                    return
                if (prev[1] - target) * (tm - target) < 0:
                    hi = mid
                else:
                    lo = mid
            yield v, t
            return
        prev = (v, t)
        v *= 2
    # no value reaches the target: offer one next to it (e.g. ``min(S, n)`` with a target past S)
    t = trips_of(target + 1)
    if t is not None:
        yield target + 1, t


def describe(term) -> str:
    """A term as an expression over kernel arguments (``%arg2 - 1``), for messages."""
    if not is_term(term):
        return str(term)
    kind = term[0]
    if kind == "arg":
        return f"%arg{term[1]}"
    if kind == "sreg":
        return f"%{term[1]}"
    if kind == "mem":  # ("mem", ("gep", argument, index), type)
        return f"{describe(term[1][1])}[{describe(term[1][2])}]"
    if kind == "fn":  # ("fn", fingerprint, inputs, i)
        from fa4_mlir.protocol.uniformity import WHERE

        return f"result {term[3]} of {WHERE.get(term[1], 'a region')}"
    if kind == "bin":
        sym = {"addi": "+", "subi": "-", "muli": "*", "divui": "/", "divsi": "/", "remui": "%", "remsi": "%",
               "andi": "&", "ori": "|", "xori": "^", "shli": "<<", "shrui": ">>", "shrsi": ">>"}.get(term[1])
        a, b = describe(term[3]), describe(term[4])
        return f"({a} {sym} {b})" if sym else f"{term[1]}({a}, {b})"
    if kind == "cmp":
        sym = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}[term[1]]
        return f"{describe(term[3])} {sym} {describe(term[4])}"
    if kind == "select":
        return f"({describe(term[1])} ? {describe(term[2])} : {describe(term[3])})"
    if kind == "cast":
        return describe(term[2])
    return "an unknown value"
