"""``scf.if`` with both branches: ``if_else(condition, carry=...)``.

``Kernel.if_`` is a one-armed branch (its carried states pass through unchanged where the condition
fails). A kernel whose two arms do different work, each leaving a carried state in its own way (the
GEMM's epilogue with and without the residual C), opens both::

    with dsl.if_else(load_c, carry=[epi]) as branch:
        with branch.then_():
            ...                 # epi steps through the C ring
        with branch.else_():
            ...                 # epi as it was
    # epi: the scf.if's results

Each arm starts from the states as they were before the branch; the values a state holds at the end
of an arm are that arm's ``scf.yield``; after the branch the states are the op's results. An arm not
written yields the states unchanged. Every op carries the author's location (``location.here``).
"""

from __future__ import annotations

import contextlib

from fa4_mlir._mlir import ir, scf
from fa4_mlir.dsl.location import here
from fa4_mlir.dsl.pipelines import Carried
from fa4_mlir.dsl.values import raw


class IfElse:
    """The open ``scf.if`` of ``if_else``: ``then_()`` and ``else_()`` build its arms, once each."""

    def __init__(self, condition, carry: tuple[Carried, ...]):
        self.carry = tuple(carry)
        self.before = [v for c in self.carry for v in c.carried()]
        self.op = scf.IfOp(raw(condition), [v.type for v in self.before], has_else=True, loc=here())
        self._built: set[str] = set()

    @contextlib.contextmanager
    def _arm(self, which: str, block):
        if which in self._built:
            raise RuntimeError(f"the {which} arm of an if_else must be built once, got it twice")
        self._built.add(which)
        _rebind(self.carry, list(self.before))
        with ir.InsertionPoint(block):
            yield
            scf.YieldOp([v for c in self.carry for v in c.carried()], loc=here())

    def then_(self):
        """The arm that runs where the condition holds."""
        return self._arm("then", self.op.then_block)

    def else_(self):
        """The arm that runs where it does not."""
        return self._arm("else", self.op.else_block)

    def _close(self) -> None:
        for which, block in (("then", self.op.then_block), ("else", self.op.else_block)):
            if which not in self._built:
                with ir.InsertionPoint(block):
                    scf.YieldOp(list(self.before), loc=here())
        _rebind(self.carry, list(self.op.results))


@contextlib.contextmanager
def if_else(condition, carry=()):
    """``scf.if`` on ``condition`` (an i1) with a then and an else arm; ``carry`` states become its
    results (see the module doc)."""
    branch = IfElse(condition, tuple(carry))
    yield branch
    branch._close()


def _rebind(carry: tuple[Carried, ...], values: list) -> None:
    for c in carry:
        n = len(c.carried())
        c.rebind(values[:n])
        values = values[n:]
