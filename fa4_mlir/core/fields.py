"""The pieces an fa4 op declaration is made of (``fa4_mlir.core.declare``): type constraints (``TypeDef``,
``Builtin``, ``AnyOf``) and fields (``Operand``, ``Result``, ``Region`` and the attribute kinds with their
Python checks: ``IntAttr``, ``StrAttr``, ``EnumAttr``, ``BoolAttr``, ``I32ArrayAttr``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from fa4_mlir._mlir import ir

_MISSING = object()  # an attribute without a default

# ===================================================================================================
# Types and type constraints
# ===================================================================================================


_PARSED: dict[str, tuple[ir.Context, ir.Type]] = {}  # asm -> (the Context it was parsed in, the type)


def parsed_type(asm: str) -> ir.Type:
    """``ir.Type.parse(asm)`` in the current Context, parsed once per Context (builders ask per op)."""
    context = ir.Context.current
    hit = _PARSED.get(asm)
    if hit is None or hit[0] is not context:
        hit = _PARSED[asm] = (context, ir.Type.parse(asm))
    return hit[1]


class TypeDef:
    """A parameterless type of a Python-defined dialect, e.g. ``!fa4.smem``."""

    def __init__(self, dialect, mnemonic: str, doc: str):  # dialect: a fa4_mlir.core.declare.Dialect
        self.dialect = dialect
        self.mnemonic = mnemonic
        self.doc = inspect.cleandoc(doc)

    @property
    def asm(self) -> str:
        return f"!{self.dialect.namespace}.{self.mnemonic}"

    def get(self) -> ir.Type:
        """The type in the current Context (the dialect must be loaded)."""
        return parsed_type(self.asm)

    def isinstance(self, t: ir.Type) -> bool:
        return str(t) == self.asm

    def irdl_constraint(self) -> str:
        return f"irdl.base @{self.dialect.namespace}::@{self.mnemonic}"

    def __str__(self) -> str:
        return self.asm


class Builtin:
    """A builtin type used as an operand/result constraint, e.g. ``Builtin("i32")``."""

    def __init__(self, asm: str):
        self.asm = asm

    def get(self) -> ir.Type:
        return parsed_type(self.asm)

    def isinstance(self, t: ir.Type) -> bool:
        return str(t) == self.asm

    def irdl_constraint(self) -> str:
        return f"irdl.is {self.asm}"

    def __str__(self) -> str:
        return self.asm


class AnyOf:
    """Any type IRDL accepts, narrowed in Python by ``check(type) -> bool`` (``describe`` says to what).

    Used where IRDL cannot express the constraint without aborting MLIR 22 (``any_of`` over ``base``
    constraints) or where the type is open (a vector of results, an LLVM struct of accumulators).
    """

    def __init__(self, describe: str, check: Callable[[ir.Type], bool]):
        self.describe, self.check = describe, check

    def get(self) -> ir.Type:
        raise TypeError(f"a result constrained to {self.describe} needs its type given to the builder")

    def isinstance(self, t: ir.Type) -> bool:
        return self.check(t)

    def irdl_constraint(self) -> str:
        return "irdl.any"

    def __str__(self) -> str:
        return self.describe


I1 = Builtin("i1")
I32 = Builtin("i32")


# ===================================================================================================
# Fields: operands, results, regions, attributes
# ===================================================================================================


class Field:
    """A declared part of an op; subclasses are descriptors giving typed access on the OpView."""

    name: str
    doc: str

    def __set_name__(self, owner, name):
        self.name = name


class Operand(Field):
    def __init__(self, constraint: TypeDef | Builtin | AnyOf, *, variadic: bool = False, doc: str = ""):
        self.constraint, self.variadic, self.doc = constraint, variadic, doc
        self.index = -1  # position among the op's operand groups, set by the op class

    def __get__(self, op, owner=None):
        if op is None:
            return self
        return op._operand_group(self.index)


class Result(Field):
    """A result. With an ``AnyOf`` constraint its type is an operand's (``type_of``) or a builder
    keyword ``<name>_type``."""

    def __init__(self, constraint: TypeDef | Builtin | AnyOf, *, type_of: str | None = None, doc: str = ""):
        self.constraint, self.type_of, self.doc = constraint, type_of, doc
        self.index = -1

    @property
    def type_keyword(self) -> str | None:
        """The builder keyword that gives this result's type, if it has one."""
        return f"{self.name}_type" if isinstance(self.constraint, AnyOf) and not self.type_of else None

    def __get__(self, op, owner=None):
        if op is None:
            return self
        return op.operation.results[self.index]


class Region(Field):
    """A single-block region without arguments, terminated by ``gpu.yield``."""

    def __init__(self, *, doc: str = ""):
        self.doc = doc
        self.index = -1

    def __get__(self, op, owner=None):
        if op is None:
            return self
        return op.operation.regions[self.index]


class Attr(Field):
    """An attribute. Required unless it has a default or is ``optional``.

    Required attributes are declared in IRDL (presence and base kind checked at parse time);
    defaulted and optional ones exist only here, since IRDL in MLIR 22 has no optional attributes.
    """

    kind: ClassVar[str]
    irdl_base: ClassVar[str]

    def __init__(self, *, default: Any = _MISSING, optional: bool = False, doc: str = ""):
        self.default, self.optional, self.doc = default, optional, doc

    @property
    def required(self) -> bool:
        return self.default is _MISSING and not self.optional

    def __get__(self, op, owner=None):
        if op is None:
            return self
        attrs = op.operation.attributes
        if self.name in attrs:
            return self.decode(attrs[self.name])
        return None if self.default is _MISSING else self.default

    # -- subclass interface --------------------------------------------------------------------------
    def decode(self, attr: ir.Attribute) -> Any:
        raise NotImplementedError

    def encode(self, value: Any) -> ir.Attribute:
        raise NotImplementedError

    def check_kind(self, attr: ir.Attribute) -> str | None:
        """None if ``attr`` has the right kind, else what it is instead."""
        raise NotImplementedError

    def check_value(self, value: Any) -> Iterator[str]:
        """Messages for a well-kinded value that breaks the field's constraints."""
        return iter(())

    def describe(self) -> str:
        raise NotImplementedError


class IntAttr(Attr):
    """A signless integer attribute (i64 unless written otherwise) with optional range checks."""

    kind = "integer"
    irdl_base = '"#builtin.integer"'

    def __init__(self, *, min: int | None = None, max: int | None = None, power_of_two: bool = False,
                 multiple_of: int | None = None, **kw):
        super().__init__(**kw)
        self.min, self.max, self.power_of_two, self.multiple_of = min, max, power_of_two, multiple_of

    def decode(self, attr):
        return ir.IntegerAttr(attr).value

    def encode(self, value):
        if isinstance(value, ir.Attribute):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{self.name} must be an int, got {value!r}")
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)

    def check_kind(self, attr):
        # Only i64 (what `{x = 4}` parses as): IntegerAttr.value reads narrower types as signed
        # (255 : i8 -> -1) and asserts on types wider than 64 bits.
        if isinstance(attr, ir.IntegerAttr) and str(attr.type) == "i64":
            return None
        return str(attr)

    def check_value(self, value):
        if self.min is not None and value < self.min:
            yield f"{self.name} must be >= {self.min}, got {value}"
        elif self.max is not None and value > self.max:
            yield f"{self.name} must be <= {self.max}, got {value}"
        elif self.power_of_two and (value <= 0 or value & (value - 1)):
            yield f"{self.name} must be a power of two, got {value}"
        elif self.multiple_of and value % self.multiple_of:
            yield f"{self.name} must be a multiple of {self.multiple_of}, got {value}"

    def describe(self):
        bits = []
        if self.min is not None:
            bits.append(f">= {self.min}")
        if self.max is not None:
            bits.append(f"<= {self.max}")
        if self.power_of_two:
            bits.append("power of two")
        if self.multiple_of:
            bits.append(f"multiple of {self.multiple_of}")
        return "an i64 integer" + (f" ({', '.join(bits)})" if bits else "")


class StrAttr(Attr):
    """A non-empty string attribute."""

    kind = "string"
    irdl_base = '"#builtin.string"'

    def decode(self, attr):
        return ir.StringAttr(attr).value

    def encode(self, value):
        if isinstance(value, ir.Attribute):
            return value
        if not isinstance(value, str):
            raise TypeError(f"{self.name} must be a str, got {value!r}")
        return ir.StringAttr.get(value)

    def check_kind(self, attr):
        return None if isinstance(attr, ir.StringAttr) else str(attr)

    def check_value(self, value):
        if not value:
            yield f"{self.name} must be a non-empty string, got \"\""

    def describe(self):
        return "a string"


class EnumAttr(StrAttr):
    """A string attribute restricted to a fixed set of members."""

    def __init__(self, choices: Sequence[str], **kw):
        super().__init__(**kw)
        self.choices = tuple(choices)

    def check_value(self, value):
        if value not in self.choices:
            members = ", ".join(f"'{c}'" for c in self.choices)
            yield f"{self.name} must be one of {members}, got '{value}'"

    def describe(self):
        return "one of " + ", ".join(f'"{c}"' for c in self.choices)


class BoolAttr(Attr):
    """A ``true`` / ``false`` attribute."""

    kind = "bool"
    irdl_base = '"#builtin.integer"'  # BoolAttr is an i1 IntegerAttr

    def decode(self, attr):
        return ir.BoolAttr(attr).value

    def encode(self, value):
        if isinstance(value, ir.Attribute):
            return value
        if not isinstance(value, bool):
            raise TypeError(f"{self.name} must be a bool, got {value!r}")
        return ir.BoolAttr.get(value)

    def check_kind(self, attr):
        return None if isinstance(attr, ir.BoolAttr) else str(attr)

    def describe(self):
        return "true or false"


class I32ArrayAttr(Attr):
    """A ``array<i32: ...>`` attribute (DenseI32ArrayAttr)."""

    kind = "array<i32>"
    irdl_base = '"#builtin.dense_array"'

    def __init__(self, *, min_len: int = 0, min_value: int | None = None, **kw):
        super().__init__(**kw)
        self.min_len, self.min_value = min_len, min_value

    def decode(self, attr):
        return list(ir.DenseI32ArrayAttr(attr))

    def encode(self, value):
        if isinstance(value, ir.Attribute):
            return value
        values = list(value)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise TypeError(f"{self.name} must be a sequence of ints, got {value!r}")
        return ir.DenseI32ArrayAttr.get(values)

    def check_kind(self, attr):
        return None if isinstance(attr, ir.DenseI32ArrayAttr) else str(attr)

    def check_value(self, value):
        if len(value) < self.min_len:
            yield f"{self.name} must have at least {self.min_len} element(s), got {len(value)}"
        if self.min_value is not None:
            bad = [v for v in value if v < self.min_value]
            if bad:
                yield f"{self.name} elements must be >= {self.min_value}, got {bad[0]}"

    def describe(self):
        return "an array<i32>"
