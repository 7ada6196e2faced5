"""The compiler core: MLIR context, declarative dialect layer, diagnostics, verification, pipelines."""
