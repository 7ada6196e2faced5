"""Names in the printed IR for any SSA value: an op's result or a block argument.

``Value.named`` names an op's result; ``name`` also names block arguments (a kernel's parameters, a
loop's carried values inside the body), which ``Value.named`` refuses. The name is a NameLoc around
the value's location, printed as ``%name`` (``get_asm(use_name_loc_as_prefix=True)``): what
``fa4-compile --emit fa4`` shows and what text-level tools (the protocol mutation corpus) key on. A
name changes nothing else: locations and SSA names do not reach the PTX.
"""

from __future__ import annotations

from fa4_mlir._mlir import ir
from fa4_mlir.dsl.values import Value


def name(value, label: str):
    """Name ``value`` (a ``Value`` or an ``ir.Value``) ``%label``; returns ``value``. Naming an op's
    result names all its results (``%label#0``, ``%label#1``, ...)."""
    if not label.isidentifier():
        raise ValueError(f"a value name must be an identifier, got {label!r}")
    raw = value.value if isinstance(value, Value) else value
    if not isinstance(raw, ir.Value):
        raise TypeError(f"only an SSA value can be named, got {type(value).__name__} ('{label}')")
    if isinstance(raw.owner, ir.Block):
        argument = ir.BlockArgument(raw)
        argument.set_location(ir.Location.name(label, childLoc=argument.location))
    else:
        op = getattr(raw.owner, "operation", raw.owner)
        op.location = ir.Location.name(label, childLoc=op.location)
    return value


def name_all(values, labels) -> None:
    """Name each of ``values`` by the label in the same place of ``labels``."""
    values, labels = list(values), list(labels)
    if len(values) != len(labels):
        raise ValueError(f"name_all needs one label per value, got {len(labels)} labels for {len(values)} values")
    for v, label in zip(values, labels):
        name(v, label)
