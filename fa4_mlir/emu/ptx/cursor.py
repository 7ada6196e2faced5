"""Token-level reading for the PTX parser: a cursor over ``lexer.tokenize``'s tokens, numbers, names.

Tokens are tuples ``(kind, text, line, column, start, end)``; every error is a ``PtxSyntaxError`` at
the token it is about (``source:line:column: message``).
"""

from __future__ import annotations

from fa4_mlir.emu.errors import PtxSyntaxError
from fa4_mlir.emu.ptx.ast import Immediate
from fa4_mlir.emu.ptx.lexer import tokenize

_U64 = 1 << 64


def _clip(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _show(tok) -> str:
    return "end of input" if tok[0] == "eof" else repr(_clip(tok[1]))


class Cursor:
    """The token stream of ``text`` and the position in it (``i``), with the reading helpers the
    grammar (``parser._Parser``) is written in."""

    def __init__(self, text: str, source: str):
        self.text, self.source = text, source
        self.toks = tokenize(text, source)
        self.i = 0

    # ---- token helpers ----------------------------------------------------------------------
    def error(self, message: str, tok):
        raise PtxSyntaxError(message, tok[2], tok[3], self.source)

    def take(self):
        tok = self.toks[self.i]
        if tok[0] != "eof":
            self.i += 1
        return tok

    def expect(self, kind: str, context: str = ""):
        tok = self.toks[self.i]
        if tok[0] != kind:
            where = f" {context}" if context else ""
            shown = f"'{kind}'" if len(kind) == 1 else {"word": "a name", "dir": "a directive"}[kind]
            self.error(f"expected {shown}{where}, got {_show(tok)}", tok)
        self.i += 1
        return tok

    def at_dir(self, *names: str) -> bool:
        tok = self.toks[self.i]
        return tok[0] == "dir" and tok[1][1:] in names

    def skip_line(self):
        line = self.toks[self.i][2]
        self.i += 1
        while self.toks[self.i][0] != "eof" and self.toks[self.i][2] == line:
            self.i += 1

    def skip_statement(self):
        """Skip to and past the next ';' (for .pragma / .callprototype)."""
        start = self.toks[self.i]
        while True:
            tok = self.take()
            if tok[0] == ";":
                return
            if tok[0] == "eof":
                self.error(f"expected ';' to end the {start[1]} statement, got end of input", tok)

    def skip_section(self):
        """``.section .debug_x { ... }``: skipped with everything inside."""
        self.take()
        name = self.expect("dir", "(a section name) after '.section'")
        opening = self.expect("{", f"after '.section {name[1]}'")
        level = 1
        while level:
            tok = self.take()
            if tok[0] == "{":
                level += 1
            elif tok[0] == "}":
                level -= 1
            elif tok[0] == "eof":
                self.error(f"expected '}}' to close the '{{' of section '{name[1]}' at "
                           f"{opening[2]}:{opening[3]}, got end of input", tok)

    # ---- numbers ----------------------------------------------------------------------------
    def number(self, tok) -> Immediate:
        """The Immediate of a ``num`` token (without a sign)."""
        s = tok[1]
        radix = s[:2].lower()
        if radix == "0f":
            return Immediate(int(s[2:], 16), "f32")  # noqa: FURB166 (0f is no Python prefix)
        if radix == "0d":
            return Immediate(int(s[2:], 16), "f64")  # noqa: FURB166
        if radix != "0x" and ("." in s or "e" in s or "E" in s):
            return Immediate(float(s), "float")
        body = s.removesuffix("U")
        if radix == "0x":
            value = int(body, 16)
        elif radix == "0b":
            value = int(body, 2)
        elif len(body) > 21:
            self.error(f"integer literal must fit in 64 bits, got '{_clip(s)}'", tok)
        elif len(body) > 1 and body[0] == "0":
            if body.strip("01234567"):
                self.error(f"octal literal must use digits 0-7, got '{_clip(s)}'", tok)
            value = int(body, 8)
        else:
            value = int(body)
        if value >= _U64:
            self.error(f"integer literal must fit in 64 bits, got '{_clip(s)}'", tok)
        return Immediate(value, "int")

    def signed_number(self, what: str) -> Immediate:
        neg = self.toks[self.i][0] == "-"
        if neg:
            self.i += 1
        tok = self.toks[self.i]
        if tok[0] != "num":
            self.error(f"expected {what}, got {_show(tok)}", tok)
        self.i += 1
        imm = self.number(tok)
        if not neg:
            return imm
        if imm.kind not in ("int", "float"):
            self.error(f"a negated literal must be an integer or decimal float, got '-{_clip(tok[1])}'", tok)
        if imm.kind == "int" and imm.value > 1 << 63:
            self.error(f"integer literal must fit in 64 bits, got '-{_clip(tok[1])}'", tok)
        return Immediate(-imm.value, imm.kind)

    def integer(self, what: str, minimum: int = 0) -> int:
        tok = self.toks[self.i]
        imm = self.signed_number(f"{what} (an integer)")
        if imm.kind != "int":
            written = self.text[tok[4]:self.toks[self.i - 1][5]]
            self.error(f"{what} must be an integer, got '{_clip(written)}'", tok)
        if imm.value < minimum:
            self.error(f"{what} must be >= {minimum}, got {imm.value}", tok)
        return imm.value

    def name(self, what: str) -> str:
        tok = self.toks[self.i]
        if tok[0] != "word":
            self.error(f"expected {what}, got {_show(tok)}", tok)
        if "." in tok[1] or tok[1] == "%":
            self.error(f"{what} must be a plain identifier, got '{_clip(tok[1])}'", tok)
        self.i += 1
        return tok[1]

    def dims(self) -> tuple:
        out = []
        while self.toks[self.i][0] == "[":
            opening = self.take()
            if self.toks[self.i][0] == "]":
                out.append(None)
            else:
                out.append(self.integer("array size"))
            self.expect("]", f"to close the '[' at {opening[2]}:{opening[3]}")
        return tuple(out)
