"""The PTX tokenizer: one compiled master regex run with ``re.finditer`` over the whole text.

A token is a plain tuple ``(kind, value, line, column, start, end)`` (see the ``K_*``/``T_*`` index
constants); ``start``/``end`` are offsets into the text so the parser can quote an instruction as
written. Kinds:

* ``"num"``  a number literal as written (``16``, ``-`` is a separate token, ``0x1F``, ``017``,
  ``0b101``, ``7U``, ``0f3F800000``, ``0d3FF0000000000000``, ``1.5``, ``1e-3``);
* ``"dir"``  a directive or type: ``.reg``, ``.b32``, ``.shared::cta``, ``.debug_info``;
* ``"word"`` an identifier with its dotted/``::`` parts: an opcode with its modifiers
  (``cp.async.bulk.tensor.2d.shared::cluster.global.tile``), a register (``%r12``, ``%tid.x``),
  a label or symbol (``$L__BB0_3``, ``gemm_param_0``), the sink ``_``;
* ``"str"``  a string literal with its quotes;
* punctuation: the kind is the character itself, one of ``{ } ( ) [ ] , ; : + - ! @ | < > =``;
* ``"eof"``  always the last token.

Whitespace and ``//``/``/* */`` comments are dropped. Anything else raises ``PtxSyntaxError``:
an unterminated comment or string, a malformed number (``0x``, ``12ab``, ``0f3F80``), a stray
character.
"""

from __future__ import annotations

import re

from fa4_mlir.emu.errors import PtxSyntaxError

# token tuple indices
T_KIND, T_VALUE, T_LINE, T_COL, T_START, T_END = range(6)

_IDENT_PART = r"[\w$]+(?:::[\w$]+)*"

_MASTER = re.compile(
    r"(?P<nl>\n)"
    r"|(?P<ws>[ \t\r\f\v]+)"
    r"|(?P<lc>//[^\n]*)"
    r"|(?P<bc>/\*.*?\*/)"
    r"|(?P<ubc>/\*)"
    r'|(?P<str>"(?:[^"\\\n]|\\.)*")'
    r'|(?P<ustr>")'
    r"|(?P<num>(?:0[fF][0-9A-Fa-f]{8}|0[dD][0-9A-Fa-f]{16}|0[xX][0-9A-Fa-f]+U?|0[bB][01]+U?"
    r"|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+U?)(?![\w.$]))"
    r"|(?P<badnum>\d[\w.$]*)"
    r"|(?P<dir>\." + _IDENT_PART + r")"
    r"|(?P<word>[A-Za-z_$%][\w$]*(?:::[\w$]+)*(?:\." + _IDENT_PART + r")*)"
    r"|(?P<punct>[{}()\[\],;:+\-!@|<>=])"
    r"|(?P<bad>.)",
    re.DOTALL,
)

_SKIP = frozenset(("ws", "lc"))


def tokenize(text: str, source: str = "<ptx>") -> list[tuple]:
    """Split ``text`` into tokens (see the module docstring); the list ends with an ``eof`` token."""
    tokens: list[tuple] = []
    append = tokens.append
    line, line_start = 1, 0
    for m in _MASTER.finditer(text):
        kind = m.lastgroup
        if kind in _SKIP:
            continue
        start = m.start()
        if kind == "nl":
            line += 1
            line_start = start + 1
            continue
        value = m.group()
        if kind == "punct":
            append((value, value, line, start - line_start + 1, start, m.end()))
        elif kind == "word" or kind == "num" or kind == "dir" or kind == "str":
            append((kind, value, line, start - line_start + 1, start, m.end()))
        elif kind == "bc":
            newlines = value.count("\n")
            if newlines:
                line += newlines
                line_start = start + value.rfind("\n") + 1
        else:
            column = start - line_start + 1
            if kind == "ubc":
                raise PtxSyntaxError("comment '/*' must be closed by '*/', got end of input",
                                     line, column, source)
            if kind == "ustr":
                raise PtxSyntaxError("string literal must be closed by '\"' on its line, got end of line",
                                     line, column, source)
            if kind == "badnum":
                shown = value if len(value) <= 40 else value[:37] + "..."
                raise PtxSyntaxError(f"number literal must be decimal, 0x hex, 0 octal, 0b binary, 0f<8 hex> "
                                     f"or 0d<16 hex>, got '{shown}'", line, column, source)
            raise PtxSyntaxError(f"expected a PTX token, got unexpected character {value!r}",
                                 line, column, source)
    end = len(text)
    append(("eof", "", line, end - line_start + 1, end, end))
    return tokens
