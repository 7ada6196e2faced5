"""A small declarative layer for Python-defined MLIR dialects on MLIR 22.

MLIR 22 has IRDL (dialects defined as IR) but no Python DSL on top of it (``mlir.dialects.ext`` arrives
with LLVM 23). This module gives ops and types the shape of that DSL:

    fa4 = Dialect("fa4", search_prefix="fa4_mlir.dialects")
    SmemType = fa4.type("smem", "A shared-memory region.")

    class SmemRegionOp(fa4.Operation, name="smem_region"):
        '''Declare a shared-memory region.  (summary line, then semantics and PTX mapping)'''
        sym_name = StrAttr(doc="name of the region")
        bytes = IntAttr(min=1)
        result = Result(SmemType)

        def verify(self):            # cross-field / cross-op invariants IRDL cannot express
            if ...: yield "bytes must be ..., got ..."

From the class the layer derives, once:
  * the IRDL module (``Dialect.irdl_text()``), loaded into a Context by ``Dialect.load(ctx)``;
  * an OpView subclass registered for the op name, so parsed IR comes back typed, with a keyword
    builder ``SmemRegionOp(sym_name="q", bytes=1024)`` and accessors ``op.bytes`` / ``op.result``;
  * a snake_case builder ``smem_region(...)`` that returns the result value(s);
  * Python checks for everything IRDL cannot say (value ranges, enum members, optional attributes),
    run by ``fa4_mlir.core.verify`` with messages "'fa4.smem_region' bytes must be >= 1, got 0".

What IRDL checks (at parse time): operand/result types, presence and base kind of required
attributes, region count. What Python checks: the rest. Enum attributes are checked in Python only,
because IRDL's ``any_of`` failure message ("'"x"' does not satisfy the constraint") does not name the
attribute.

Design limits that keep IRDL happy (see the toolchain notes): at most one variadic operand group per
op (no segment-size attributes); no ``any_of`` over ``base`` constraints (aborts MLIR 22); region
bodies end in ``gpu.yield`` (IRDL ops cannot be terminators).

The type constraints and fields live in ``fa4_mlir.core.fields`` (re-exported here); this module holds
the op base class, the dialect registry and the IRDL text it generates.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from fa4_mlir._mlir import _cext, gpu, ir, irdl
from fa4_mlir.core.fields import (  # noqa: F401  (re-exported: dialects declare ops with them)
    _MISSING, AnyOf, Attr, BoolAttr, Builtin, EnumAttr, Field, I1, I32, I32ArrayAttr, IntAttr, Operand, Region,
    Result, StrAttr, TypeDef,
)



# ===================================================================================================
# Operations
# ===================================================================================================


class OpBase(ir.OpView):
    """Base of every declared op; ``Dialect.Operation`` binds it to a dialect."""

    _dialect: ClassVar[Dialect]
    _operands: ClassVar[tuple[Operand, ...]] = ()
    _results: ClassVar[tuple[Result, ...]] = ()
    _regions: ClassVar[tuple[Region, ...]] = ()
    _attrs: ClassVar[tuple[Attr, ...]] = ()
    _ODS_OPERAND_SEGMENTS = None
    _ODS_RESULT_SEGMENTS = None

    def __init_subclass__(cls, name: str | None = None, **kw):
        super().__init_subclass__(**kw)
        if name is None:  # an intermediate base class, not an op
            return
        fields = [f for f in cls.__dict__.values() if isinstance(f, Field)]
        cls._operands = tuple(f for f in fields if isinstance(f, Operand))
        cls._results = tuple(f for f in fields if isinstance(f, Result))
        cls._regions = tuple(f for f in fields if isinstance(f, Region))
        cls._attrs = tuple(f for f in fields if isinstance(f, Attr))
        if sum(o.variadic for o in cls._operands) > 1:
            raise TypeError(f"{cls.__name__}: at most one variadic operand group (no segment sizes)")
        for group in (cls._operands, cls._results, cls._regions):
            for i, f in enumerate(group):
                f.index = i
        cls.OPERATION_NAME = f"{cls._dialect.namespace}.{name}"
        cls._ODS_REGIONS = (len(cls._regions), True)
        cls.__init__ = _make_builder_init(cls)
        cls._dialect._add_op(cls)

    # -- accessors -----------------------------------------------------------------------------------
    def _operand_group(self, index: int):
        operands = self.operation.operands
        variadic = [o.index for o in self._operands if o.variadic]
        if not variadic or index < variadic[0]:
            return operands[index]
        n_after = len(self._operands) - 1 - variadic[0]
        if index == variadic[0]:
            return list(operands)[index:len(operands) - n_after]
        return operands[len(operands) - (len(self._operands) - index)]

    def region_ip(self, index: int = 0) -> ir.InsertionPoint:
        """Insertion point before the ``gpu.yield`` that ends region ``index``."""
        return ir.InsertionPoint.at_block_terminator(self.operation.regions[index].blocks[0])

    # -- verification --------------------------------------------------------------------------------
    def verify(self) -> Iterator[str]:
        """Invariants beyond the declared fields; yield one message per violation."""
        return iter(())

    @classmethod
    def field_errors(cls, op: ir.Operation) -> Iterator[str]:
        """Messages for attributes of the wrong kind, missing, or out of range."""
        attrs = op.attributes
        for f in cls._attrs:
            if f.name not in attrs:
                if f.required:
                    yield f"{f.name} must be set ({f.describe()}), got none"
                continue
            wrong = f.check_kind(attrs[f.name])
            if wrong is not None:
                yield f"{f.name} must be {f.describe()}, got {wrong}"
                continue
            yield from f.check_value(f.decode(attrs[f.name]))
        view = op.opview
        for f in (*cls._operands, *cls._results):
            if isinstance(f.constraint, AnyOf):
                variadic = isinstance(f, Operand) and f.variadic  # each value checked, named by position
                values = getattr(view, f.name)
                for i, v in enumerate(values if variadic else [values]):
                    if not f.constraint.check(v.type):
                        where = f"{f.name} #{i}" if variadic else f.name
                        yield f"{where} must be {f.constraint.describe}, got {v.type}"
        for r in cls._regions:
            region = op.regions[r.index]
            blocks = list(region.blocks)
            if len(blocks) != 1:
                yield f"region '{r.name}' must have exactly one block, got {len(blocks)}"
            elif len(blocks[0].arguments):
                yield f"region '{r.name}' must have no block arguments, got {len(blocks[0].arguments)}"
            else:
                ops = list(blocks[0].operations)
                last = ops[-1].operation.name if ops else "nothing"
                if last != "gpu.yield":
                    yield f"region '{r.name}' must end in 'gpu.yield', got '{last}'"

    def is_well_formed(self) -> bool:
        """Whether the op's own fields pass their checks; hooks read only well-formed neighbours."""
        return next(iter(self.field_errors(self.operation)), None) is None

    @classmethod
    def summary(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "").split("\n", 1)[0]

    @classmethod
    def description(cls) -> str:
        parts = inspect.cleandoc(cls.__doc__ or "").split("\n", 1)
        return parts[1].strip() if len(parts) > 1 else ""

    @classmethod
    def snake_name(cls) -> str:
        return cls.OPERATION_NAME.split(".", 1)[1].replace(".", "_")

    @classmethod
    def builder(cls) -> Callable[..., Any]:
        """The snake_case builder: builds the op, returns its result, results, or the op if none."""

        def build(*args, **kwargs):
            op = cls(*args, **kwargs)
            results = list(op.operation.results)
            if not results:
                return op
            return results[0] if len(results) == 1 else tuple(results)

        build.__name__ = cls.snake_name()
        build.__qualname__ = build.__name__
        build.__doc__ = f"Build ``{cls.OPERATION_NAME}`` and return its results. {cls.summary()}"
        build.__signature__ = inspect.signature(cls.__init__).replace(
            parameters=list(inspect.signature(cls.__init__).parameters.values())[1:])
        return build


def _make_builder_init(cls: type[OpBase]):
    """Generate ``__init__(self, *operands, *, attrs..., loc=None, ip=None)`` for an op class."""
    op_name = cls.OPERATION_NAME
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    # a trailing variadic group may be left out (no operands)
    params += [P(o.name, P.POSITIONAL_OR_KEYWORD, default=() if o.variadic and o is cls._operands[-1] else P.empty)
               for o in cls._operands]
    params += [P(r.type_keyword, P.KEYWORD_ONLY) for r in cls._results if r.type_keyword]
    params += [P(a.name, P.KEYWORD_ONLY) for a in cls._attrs if a.required]
    params += [P(a.name, P.KEYWORD_ONLY, default=None) for a in cls._attrs if not a.required]
    params += [P("loc", P.KEYWORD_ONLY, default=None), P("ip", P.KEYWORD_ONLY, default=None)]
    signature = inspect.Signature(params)
    positional = [p.name for p in params[1:] if p.kind is P.POSITIONAL_OR_KEYWORD]
    known = {p.name for p in params[1:]}
    required = [p.name for p in params[1:] if p.default is P.empty]

    def bind(args: tuple, kwargs: dict) -> dict:
        """``signature.bind``'s checks and messages, at a fraction of its cost (builders run per op)."""
        if len(args) > len(positional):
            raise TypeError(f"'{op_name}' builder: too many positional arguments")
        values = dict(zip(positional, args))
        for name, value in kwargs.items():
            if name not in known:
                raise TypeError(f"'{op_name}' builder: got an unexpected keyword argument '{name}'")
            if name in values:
                raise TypeError(f"'{op_name}' builder: multiple values for argument '{name}'")
            values[name] = value
        for name in required:
            if name not in values:
                raise TypeError(f"'{op_name}' builder: missing a required argument: '{name}'")
        return values

    def __init__(self, *args, **kwargs):
        values = bind(args, kwargs)
        operands = []
        for o in cls._operands:
            v = values.get(o.name, ())
            operands.extend(list(v) if o.variadic else [v])
        attributes = {}
        for a in cls._attrs:
            v = values.get(a.name)
            if v is None:
                continue
            attr = a.encode(v)  # a Python value is checked as given: decoding it back costs per op
            errors = list(a.check_value(a.decode(attr) if isinstance(v, ir.Attribute) else v))
            if errors:
                raise ValueError(f"'{op_name}' {errors[0]}")
            attributes[a.name] = attr
        results = [values[r.type_keyword] if r.type_keyword else
                   values[r.type_of].type if r.type_of else r.constraint.get() for r in cls._results]
        super(cls, self).__init__(
            op_name, cls._ODS_REGIONS, None, None, attributes=attributes, results=results,
            operands=operands, successors=None, regions=None, loc=values.get("loc"), ip=values.get("ip"))
        for region in self.operation.regions:  # a valid op from the start: one block ending in gpu.yield
            block = region.blocks.append()
            with ir.InsertionPoint(block), self.operation.location:
                gpu.YieldOp([])

    __init__.__signature__ = signature
    __init__.__doc__ = f"Build ``{op_name}``. {cls.summary()}"
    return __init__


# ===================================================================================================
# The dialect
# ===================================================================================================


class Dialect:
    """A Python-defined dialect: its types, its ops, its IRDL module, and its OpView registration."""

    def __init__(self, namespace: str, *, search_prefix: str, doc: str = ""):
        """``search_prefix`` is the package holding a module named ``namespace``, so that MLIR's
        op-class lookup (which imports ``<prefix>.<namespace>``) finds the OpView classes."""
        self.namespace = namespace
        self.doc = inspect.cleandoc(doc)
        self.types: list[TypeDef] = []
        self.ops: list[type[OpBase]] = []
        self.discardable: dict[str, Attr] = {}
        self._irdl: str | None = None
        _cext.globals.append_dialect_search_prefix(search_prefix)
        self._mlir_dialect = _cext.register_dialect(
            type(f"_{namespace.capitalize()}Dialect", (ir.Dialect,), {"DIALECT_NAMESPACE": namespace}))
        self.Operation = type(f"{namespace.capitalize()}Op", (OpBase,), {"_dialect": self,
                                                                          "__module__": __name__})

    def type(self, mnemonic: str, doc: str) -> TypeDef:
        t = TypeDef(self, mnemonic, doc)
        self.types.append(t)
        return t

    def discardable_attr(self, name: str, field: Attr, doc: str) -> Attr:
        """Declare ``<namespace>.<name>``, an attribute the dialect's passes set on (or read from) ops
        of other dialects, such as a kernel's ``fa4.smem_bytes``. Wherever it appears its kind and
        value are checked like an op's field (``discardable_errors``), because passes read it back."""
        field.name, field.doc = f"{self.namespace}.{name}", inspect.cleandoc(doc)
        self.discardable[field.name] = field
        return field

    def discardable_errors(self, op: ir.Operation) -> Iterator[str]:
        """Messages for the dialect's discardable attributes on ``op`` that are of the wrong kind or
        out of range."""
        attrs = op.attributes
        for name, field in self.discardable.items():
            if name not in attrs:
                continue
            wrong = field.check_kind(attrs[name])
            if wrong is not None:
                yield f"{name} must be {field.describe()}, got {wrong}"
            else:
                yield from field.check_value(field.decode(attrs[name]))

    def _add_op(self, cls: type[OpBase]) -> None:
        _cext.register_operation(self._mlir_dialect, replace=True)(cls)
        self.ops.append(cls)
        self._irdl = None

    def op_class(self, name: str) -> type[OpBase] | None:
        for cls in self.ops:
            if cls.OPERATION_NAME == name:
                return cls
        return None

    # -- IRDL ----------------------------------------------------------------------------------------
    def irdl_text(self) -> str:
        """The dialect as an IRDL module (what MLIR verifies at parse time)."""
        if self._irdl is None:
            lines = [f"irdl.dialect @{self.namespace} {{"]
            lines += [f"  irdl.type @{t.mnemonic}" for t in self.types]
            for cls in self.ops:
                lines += _irdl_operation(cls)
            lines.append("}")
            self._irdl = "\n".join(lines)
        return self._irdl

    def load(self, ctx: ir.Context) -> None:
        """Register the dialect in ``ctx``, once (a second IRDL load aborts MLIR 22)."""
        if self.ops and ctx.is_registered_operation(self.ops[0].OPERATION_NAME):
            return
        with ctx:
            irdl.load_dialects(ir.Module.parse(self.irdl_text()))

    def builders(self) -> dict[str, Callable[..., Any]]:
        return {cls.snake_name(): cls.builder() for cls in self.ops}

    # -- documentation -------------------------------------------------------------------------------
    def markdown(self) -> str:
        """Reference documentation of every type and op, generated from the declarations."""
        out = [f"# The `{self.namespace}` dialect", "", "<!-- generated by `python -m fa4_mlir.tools.dialect_docs`;"
               " do not edit -->", "", self.doc, "", "## Types", ""]
        for t in self.types:
            out += [f"### `{t.asm}`", "", t.doc, ""]
        if self.discardable:
            out += ["## Attributes on other ops", "", "Set by the passes (or by hand) on functions and modules; "
                    "checked wherever they appear.", "", "| attribute | kind | meaning |", "|---|---|---|"]
            out += [f"| `{a.name}` | {_attr_kind(a)} | {a.doc} |" for a in self.discardable.values()]
            out.append("")
        out += ["## Operations", ""]
        for cls in self.ops:
            out += [f"### `{cls.OPERATION_NAME}` ({cls.__name__}, builder `{cls.snake_name()}`)", "",
                    cls.summary(), "", cls.description(), ""]
            rows = [(f"operand `{o.name}`", f"{'variadic ' if o.variadic else ''}`{o.constraint}`", o.doc)
                    for o in cls._operands]
            rows += [(f"attribute `{a.name}`", _attr_kind(a), a.doc) for a in cls._attrs]
            rows += [(f"region `{r.name}`", "one block, ends in `gpu.yield`", r.doc) for r in cls._regions]
            rows += [(f"result `{r.name}`", f"`{r.constraint}`", r.doc) for r in cls._results]
            if rows:
                out += ["| field | kind | meaning |", "|---|---|---|"]
                out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
                out.append("")
        return "\n".join(out).rstrip() + "\n"


def _attr_kind(a: Attr) -> str:
    kind = a.describe()
    if a.default is not _MISSING:
        return f"{kind}, default {a.default!r}"
    return f"{kind}, optional" if a.optional else kind


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _irdl_operation(cls: type[OpBase]) -> list[str]:
    mnemonic = cls.OPERATION_NAME.split(".", 1)[1]
    body, names = [], {}

    def var(constraint: str) -> str:  # one SSA value per use: shared values would force equality
        name = f"%v{len(names)}"
        names[name] = constraint
        body.append(f"    {name} = {constraint}")
        return name

    operands = [f"{o.name}: {'variadic ' if o.variadic else ''}{var(o.constraint.irdl_constraint())}"
                for o in cls._operands]
    results = [f"{r.name}: {var(r.constraint.irdl_constraint())}" for r in cls._results]
    attrs = [f'"{a.name}" = {var("irdl.base " + a.irdl_base)}' for a in cls._attrs if a.required]
    regions = [f"{r.name}: {var('irdl.region with size 1')}" for r in cls._regions]
    for f in (*cls._operands, *cls._results, *cls._regions):
        assert _IDENT.match(f.name), f"IRDL field names must be identifiers, got {f.name!r}"
    if operands:
        body.append(f"    irdl.operands({', '.join(operands)})")
    if results:
        body.append(f"    irdl.results({', '.join(results)})")
    if attrs:
        body.append(f"    irdl.attributes {{{', '.join(attrs)}}}")
    if regions:
        body.append(f"    irdl.regions({', '.join(regions)})")
    return [f"  irdl.operation @{mnemonic} {{", *body, "  }"]
