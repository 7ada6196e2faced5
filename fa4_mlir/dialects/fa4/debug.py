"""fa4 ops: run-time preconditions that only debug builds check (the dialect's "Debug" section)."""

from __future__ import annotations

import re

from fa4_mlir.core.declare import I1, AnyOf, Operand, StrAttr
from fa4_mlir.dialects.fa4.base import Op

# ===================================================================================================
# Debug
# ===================================================================================================

# One printf conversion: flags, width, precision, length modifier, conversion character (the emulator's
# vprintf and CUDA's accept the same syntax).
_CONVERSION = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d*|\*))?(hh|h|ll|l|j|z|t|L|q)?(.?)", re.DOTALL)
_INTEGER = "diouxX"
VALUE_TYPES = ("i32", "i64")


def _conversions(message: str) -> list[tuple[str, str, bool, bool]]:
    """The printf conversions of ``message`` (``%%`` excluded): ``(spec, conversion, wide, star)``, where
    ``wide`` is an ``l``/``ll`` length modifier and ``star`` a ``*`` width or precision."""
    found = []
    for m in _CONVERSION.finditer(message):
        flags, width, precision, length, conv = m.groups()
        if conv == "%" and m.group(0) == "%%":
            continue
        found.append((m.group(0), conv, length in ("l", "ll"), "*" in (width, precision)))
    return found


class DebugCheckOp(Op, name="debug_check"):
    """Assert ``cond`` at run time in debug builds: where it is false the thread prints ``message`` and traps.

    A kernel states a precondition it cannot prove at compile time (a block-table entry inside the page
    pool, a sequence length within its bound) without paying for it in release builds. ``message`` is a
    printf format with one integer conversion per value of ``values``, in order: ``%d``/``%i``/``%u``/
    ``%x``/``%X``/``%o`` for ``i32`` values, the same with ``l`` (``%ld``, ``%lu``, ...) for ``i64``
    ones; ``%%`` prints ``%``. The values of one check share one type (IRDL binds a variadic group to
    one type): widen with ``arith.extui``/``extsi`` to mix. The op has no barrier, memory or protocol
    effect: the protocol check skips it, and its operands are computed only for it.

    Lowers to (``fa4-lower-barriers``): in a debug build (``timeout`` > 0, ``compile_kernel(...,
    debug_timeout_ms=N)``) ``scf.if`` on the negated condition around ``gpu.printf message`` (a newline
    appended unless it ends in one) and ``llvm.intr.trap``; in a release build nothing: the op is
    erased, and the values computed only for it go with canonicalisation, so the PTX is that of the
    kernel without the check.
    """

    cond = Operand(I1, doc="the precondition; false traps (debug builds)")
    values = Operand(AnyOf("i32 or i64", lambda t: str(t) in VALUE_TYPES), variadic=True,
                     doc="printed by the message's conversions, in order; all of one type")
    message = StrAttr(doc="printf format, e.g. `fa4 debug: page %d of sequence %d out of range`")

    def verify(self):
        found = _conversions(self.message)
        values = list(self.values)
        types = sorted({str(v.type) for v in values})
        if len(types) > 1:  # IRDL rejects parsed IR first; this names it for ops built in Python
            yield (f"values must all have one type (IRDL binds one per variadic group), got "
                   f"{' and '.join(types)}")
        if len(found) != len(values):
            yield (f"message must have one conversion per value ({len(values)}), got {len(found)} in "
                   f"{self.message!r}")
        for i, (spec, conv, wide, star) in enumerate(found):
            if conv not in _INTEGER:
                yield f"message conversions must be integer ones (%d %i %u %o %x %X), got '{spec}'"
            elif star:
                yield f"message conversions must not take a '*' width or precision, got '{spec}'"
            elif i < len(values):
                want_wide = str(values[i].type) == "i64"
                if wide != want_wide:
                    length = "have an l" if want_wide else "have no l"
                    yield (f"conversion {i} of message must {length} length modifier for value #{i} of type "
                           f"{values[i].type}, got '{spec}'")
