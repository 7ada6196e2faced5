"""The one way to make an MLIR Context for fa4-mlir."""

from __future__ import annotations

from fa4_mlir._mlir import ir


def make_context() -> ir.Context:
    """A Context with multithreading off and the fa4 dialect loaded exactly once.

    Multithreading is off because MLIR 22 can abort with a nanobind GIL error when a verifier fails
    while isolated ops are verified in parallel (llvm-project#215781); loading IRDL twice into one
    Context aborts too, so ``Dialect.load`` guards it.
    """
    from fa4_mlir.dialects.fa4 import DIALECT  # deferred: the dialect module builds MLIR classes

    ctx = ir.Context()
    ctx.enable_multithreading(False)
    DIALECT.load(ctx)
    return ctx
