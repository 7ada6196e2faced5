"""Shared fixtures for the Python API tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def ctx():
    """A fresh fa4 Context entered with an unknown location (what builders need)."""
    from fa4_mlir._mlir import ir
    from fa4_mlir.core.context import make_context

    context = make_context()
    with context, ir.Location.unknown():
        yield context


@pytest.fixture
def module(ctx):
    """An empty module whose body is the current insertion point."""
    from fa4_mlir._mlir import ir

    m = ir.Module.create()
    with ir.InsertionPoint(m.body):
        yield m
