"""Python-defined MLIR dialects of fa4-mlir (installed as ``fa4_mlir.dialects``).

MLIR's op-class lookup imports ``fa4_mlir.dialects.fa4`` for ``fa4.*`` ops, which is how parsed IR
comes back as the typed OpView classes defined there.
"""
