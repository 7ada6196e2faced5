"""A recursive-descent parser from PTX text to the syntax tree of ``fa4_mlir.emu.ptx.ast``.

``parse(text, source)`` returns a ``Module`` or raises ``PtxSyntaxError`` (``source:line:column:
message``); no other exception escapes for any input text.

Representation choices beyond ``ast.py``:

* ``setp.lt.s32 %p1|%p2, ...`` / ``elect.sync %r1|%p1, -1``: the ``a|b`` destination pair is one
  operand, ``Vector((Register(a), Register(b)))`` (a brace vector can never be a destination of
  setp/elect, so there is no ambiguity for those opcodes).
* ``call.uni (retval0), fname, (param0, param1);``: each parenthesised list is a ``Vector`` of its
  elements (``Symbol``s of the ``.param`` names; ``()`` is ``Vector(())``); the callee is a ``Symbol``
  (or a ``Register`` for an indirect call, with a trailing prototype ``Symbol``).
* A name without ``%`` is a ``Register`` where a ``.reg`` of an enclosing scope declared it (``p`` in
  inline asm), or ``_``; otherwise a ``Symbol``.
* ``Variable.init`` holds Python ints for integer literals, Python floats for decimal floats,
  ``Immediate(bits, "f32"/"f64")`` for ``0f``/``0d`` literals and ``Symbol`` for names; nested braces
  are flattened. Variables declared in a function body with ``.param`` (call sequences) have
  ``space="param"``; ``.shared::cta`` is ``"shared"``.
* A module without ``.version``/``.target``/``.address_size`` gets ``(0, 0)``, ``()``, ``64``.
* ``.loc``/``.file`` (the rest of their line), ``.section`` blocks, ``.pragma`` and
  ``.callprototype`` statements are skipped.
"""

from __future__ import annotations

from fa4_mlir.emu.errors import PtxSyntaxError
from fa4_mlir.emu.ptx.ast import (
    Address,
    Block,
    Function,
    Instruction,
    Label,
    Loc,
    Module,
    Negated,
    Param,
    Register,
    RegisterDecl,
    Symbol,
    TensorAddress,
    Variable,
    Vector,
)
from fa4_mlir.emu.ptx.cursor import Cursor, _clip, _show

TYPES = frozenset((
    "b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
    "f16", "f16x2", "f32", "f64", "bf16", "bf16x2", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2",
    "e2m1x2", "e2m3x2", "e3m2x2", "ue8m0x2", "pred", "texref", "samplerref", "surfref",
))
SPACES = frozenset(("global", "shared", "const", "local", "param", "shared::cta", "shared::cluster"))
VECTORS = {"v2": 2, "v4": 4, "v8": 8}
# performance directives: name -> most integer arguments (0: a flag; else at least one)
FUNC_DIRECTIVES = {"reqntid": 3, "maxntid": 3, "reqnctapercluster": 3, "maxnreg": 1, "minnctapersm": 1,
                   "maxnctapersm": 1, "maxclusterrank": 1, "explicitcluster": 0, "noreturn": 0,
                   "blocksareclusters": 0}
MAX_BLOCK_DEPTH = 64
MAX_REGISTER_COUNT = 1 << 20
_STATEMENT = "a statement (instruction, label, .reg or a variable) in a function body"
_LINKAGE = ("visible", "extern", "weak", "common")
_OPERAND_STARTS = frozenset(("word", "num", "-", "{", "[", "(", "!"))


def parse(text: str, source: str = "<ptx>") -> Module:
    """Parse PTX ``text`` (``source`` names it in error messages) into a ``Module``."""
    if not isinstance(text, str):
        raise PtxSyntaxError(f"PTX text must be a str, got {type(text).__name__}", 1, 1, source)
    return _Parser(text, source).module()


class _Parser(Cursor):
    def __init__(self, text: str, source: str):
        super().__init__(text, source)
        self.scopes: list[tuple[set, dict]] = []   # per open scope: (names, {prefix: count})
        self.depth = 0

    # ---- module level -----------------------------------------------------------------------
    def module(self) -> Module:
        version, target, address_size = (0, 0), (), 64
        variables, functions = [], []
        while True:
            tok = self.toks[self.i]
            if tok[0] == "eof":
                break
            d = tok[1][1:] if tok[0] == "dir" else None
            if d == "version":
                self.i += 1
                v = self.toks[self.i]
                parts = v[1].split(".") if v[0] == "num" else ()
                if len(parts) != 2 or not all(p.isdigit() and len(p) <= 4 for p in parts):
                    self.error(f"version must be MAJOR.MINOR, got {_show(v)}", v)
                self.i += 1
                version = (int(parts[0]), int(parts[1]))
            elif d == "target":
                self.i += 1
                names = [self.name("a target name after '.target'")]
                while self.toks[self.i][0] == ",":
                    self.i += 1
                    names.append(self.name("a target name"))
                target = tuple(names)
            elif d == "address_size":
                self.i += 1
                size_tok = self.toks[self.i]
                address_size = self.integer("address size")
                if address_size not in (32, 64):
                    self.error(f"address size must be 32 or 64, got {address_size}", size_tok)
            elif d in ("file", "loc"):
                self.skip_line()
            elif d == "section":
                self.skip_section()
            elif d == "pragma":
                self.skip_statement()
            elif d in _LINKAGE or d in ("entry", "func") or (d in SPACES and d != "param"):
                item = self.declaration(scope_level=0)
                (functions if isinstance(item, Function) else variables).append(item)
            else:
                self.error("expected a module-level directive (.version, .target, .address_size, a variable, "
                           f".entry or .func), got {_show(tok)}", tok)
        return Module(version, target, address_size, tuple(variables), tuple(functions))

    def declaration(self, scope_level: int):
        """Linkage qualifiers then a variable or (at module level) a function."""
        first = self.toks[self.i]
        extern = visible = False
        while self.at_dir(*_LINKAGE):
            q = self.take()[1][1:]
            extern |= q == "extern"
            visible |= q == "visible"
        tok = self.toks[self.i]
        if scope_level == 0 and self.at_dir("entry", "func"):
            return self.function(first, extern, visible)
        if tok[0] == "dir" and tok[1][1:] in SPACES:
            return self.variable(first, extern, visible)
        self.error(f"expected a state space (.global, .shared, .const, .local) or .entry/.func after "
                   f"'{first[1]}', got {_show(tok)}", tok)

    def variable(self, first, extern: bool, visible: bool) -> Variable:
        space = self.take()[1][1:]
        if space == "shared::cta":
            space = "shared"
        align, vector, type_ = None, 1, None
        while self.toks[self.i][0] == "dir":
            tok = self.take()
            d = tok[1][1:]
            if d == "align":
                align = self.integer("alignment", 1)
            elif d in VECTORS:
                vector = VECTORS[d]
            elif d in TYPES and type_ is None:
                type_ = d
            else:
                self.error(f"expected .align, .v2/.v4 or a type in a .{space} variable, got {_show(tok)}",
                           tok)
        if type_ is None:
            self.error(f"a .{space} variable must have a type (.b8, .b32, .f32, ...), got "
                       f"{_show(self.toks[self.i])}", self.toks[self.i])
        name = self.name(f"a .{space} variable name")
        dims = self.dims()
        init = None
        if self.toks[self.i][0] == "=":
            self.i += 1
            values: list = []
            self.initializer(values, 0)
            init = tuple(values)
        self.expect(";", f"after the declaration of '{name}'")
        return Variable(space, type_, name, align, dims, extern, visible, vector, init,
                        Loc(first[2], first[3]))

    def initializer(self, out: list, depth: int):
        tok = self.toks[self.i]
        if tok[0] == "{":
            if depth >= 8:
                self.error("initializer braces must nest at most 8 deep, got more", tok)
            self.i += 1
            if self.toks[self.i][0] != "}":
                self.initializer(out, depth + 1)
                while self.toks[self.i][0] == ",":
                    self.i += 1
                    self.initializer(out, depth + 1)
            self.expect("}", f"or ',' in the initializer opened at {tok[2]}:{tok[3]}")
        elif tok[0] == "word":
            out.append(Symbol(self.name("an initializer symbol")))
        else:
            imm = self.signed_number("an initializer value (number, symbol or '{')")
            out.append(imm.value if imm.kind in ("int", "float") else imm)

    def function(self, first, extern: bool, visible: bool) -> Function:
        is_entry = self.take()[1] == ".entry"
        returns: tuple = ()
        if not is_entry and self.toks[self.i][0] == "(":
            returns = self.param_list()
        name = self.name("a function name")
        params: tuple = ()
        if self.toks[self.i][0] == "(":
            params = self.param_list()
        directives: dict = {}
        while self.toks[self.i][0] == "dir":
            tok = self.take()
            d = tok[1][1:]
            if d == "pragma":
                self.i -= 1
                self.skip_statement()
                continue
            if d not in FUNC_DIRECTIVES:
                self.error("expected a performance directive (.reqntid, .maxntid, .maxnreg, .minnctapersm, "
                           f"...), '{{' or ';' after function '{name}', got {_show(tok)}", tok)
            if d in directives:
                self.error(f"directive '.{d}' must appear once per function, got a second one", tok)
            hi = FUNC_DIRECTIVES[d]
            values = []
            if hi:
                values.append(self.integer(f".{d} value", 0))
                while self.toks[self.i][0] == "," and len(values) < hi:
                    self.i += 1
                    values.append(self.integer(f".{d} value", 0))
            directives[d] = tuple(values)
        body = None
        tok = self.toks[self.i]
        if tok[0] == "{":
            self.scopes = []
            body = self.block_body()
        elif tok[0] == ";":
            self.i += 1
        else:
            self.error(f"expected '{{' or ';' after the header of function '{name}', got {_show(tok)}", tok)
        return Function(name, is_entry, params, returns, body, directives, visible, extern,
                        Loc(first[2], first[3]))

    def param_list(self) -> tuple:
        opening = self.take()
        params = []
        if self.toks[self.i][0] != ")":
            params.append(self.param())
            while self.toks[self.i][0] == ",":
                self.i += 1
                params.append(self.param())
        self.expect(")", f"or ',' in the parameter list opened at {opening[2]}:{opening[3]}")
        return tuple(params)

    def param(self) -> Param:
        first = self.toks[self.i]
        if not self.at_dir("param", "reg"):
            self.error(f"expected '.param' to start a parameter, got {_show(first)}", first)
        self.i += 1
        align = type_ = ptr_space = ptr_align = None
        ptr = False
        while self.toks[self.i][0] == "dir":
            tok = self.take()
            d = tok[1][1:]
            if d == "align":
                value = self.integer("alignment", 1)
                if ptr:
                    ptr_align = value
                else:
                    align = value
            elif d == "ptr":
                ptr = True
            elif d in TYPES and type_ is None:
                type_ = d
            elif ptr and d in SPACES:
                ptr_space = d
            else:
                self.error(f"expected .align, a type or .ptr attributes in a parameter, got {_show(tok)}",
                           tok)
        if type_ is None:
            self.error(f"a parameter must have a type (.b32, .u64, ...), got {_show(self.toks[self.i])}",
                       self.toks[self.i])
        name = self.name("a parameter name")
        return Param(name, type_, align, self.dims(), ptr_space, ptr_align, Loc(first[2], first[3]))

    # ---- function bodies --------------------------------------------------------------------
    def block_body(self) -> tuple:
        """From '{' to its '}': the statements inside, in a new register scope."""
        opening = self.take()
        if self.depth >= MAX_BLOCK_DEPTH:
            self.error(f"blocks must nest at most {MAX_BLOCK_DEPTH} deep, got deeper", opening)
        self.depth += 1
        self.scopes.append((set(), {}))
        body: list = []
        append = body.append
        toks = self.toks
        while True:
            tok = toks[self.i]
            kind = tok[0]
            if kind == "word":
                if toks[self.i + 1][0] == ":":
                    label = self.name("a label name")
                    self.i += 1
                    append(Label(label, Loc(tok[2], tok[3])))
                else:
                    append(self.instruction())
            elif kind == "@":
                append(self.instruction())
            elif kind == "}":
                self.i += 1
                break
            elif kind == "{":
                append(Block(self.block_body(), Loc(tok[2], tok[3])))
            elif kind == "dir":
                d = tok[1][1:]
                if d == "reg":
                    body.extend(self.reg_decl())
                elif d in ("loc", "file"):
                    self.skip_line()
                elif d in ("pragma", "callprototype"):
                    self.skip_statement()
                elif d in SPACES or d in _LINKAGE:
                    append(self.declaration(scope_level=1))
                else:
                    self.error(f"expected {_STATEMENT}, got {_show(tok)}", tok)
            elif kind == "eof":
                self.error(f"expected '}}' to close the block opened at {opening[2]}:{opening[3]}, "
                           f"got end of input", tok)
            else:
                self.error(f"expected {_STATEMENT}, got {_show(tok)}", tok)
        self.scopes.pop()
        self.depth -= 1
        return tuple(body)

    def reg_decl(self) -> list:
        first = self.take()
        loc = Loc(first[2], first[3])
        vector, type_ = 1, None
        while self.toks[self.i][0] == "dir":
            tok = self.take()
            d = tok[1][1:]
            if d in VECTORS:
                vector = VECTORS[d]
            elif d in TYPES and type_ is None:
                type_ = d
            else:
                self.error(f"expected .v2/.v4 or a type in a .reg declaration, got {_show(tok)}", tok)
        if type_ is None:
            tok = self.toks[self.i]
            self.error(f"a .reg declaration must have a type (.b32, .pred, ...), got {_show(tok)}", tok)
        names, prefixes = self.scopes[-1]
        decls, plain = [], []
        while True:
            name = self.name("a register name")
            if self.toks[self.i][0] == "<":
                self.i += 1
                tok = self.toks[self.i]
                if tok[0] != "num":
                    self.error(f"register count in '{name}<N>' must be an integer, got {_show(tok)}", tok)
                count = self.integer("register count")
                if not 1 <= count <= MAX_REGISTER_COUNT:
                    self.error(f"register count must be in [1, {MAX_REGISTER_COUNT}], got {count}", tok)
                self.expect(">", f"to close '{name}<{count}'")
                decls.append(RegisterDecl(type_, (), name, count, vector, loc))
                prefixes[name] = max(count, prefixes.get(name, 0))
            else:
                plain.append(name)
                names.add(name)
            if self.toks[self.i][0] != ",":
                break
            self.i += 1
        self.expect(";", "after the .reg declaration")
        if plain:
            decls.append(RegisterDecl(type_, tuple(plain), None, 0, vector, loc))
        return decls

    def is_scoped_register(self, name: str) -> bool:
        for names, prefixes in reversed(self.scopes):
            if name in names:
                return True
            for prefix, count in prefixes.items():
                rest = name[len(prefix):]
                if name.startswith(prefix) and rest.isdigit() and len(rest) <= 9 and int(rest) < count:
                    return True
        return False

    def instruction(self) -> Instruction:
        toks = self.toks
        first = toks[self.i]
        guard, negated = None, False
        if first[0] == "@":
            self.i += 1
            if toks[self.i][0] == "!":
                self.i += 1
                negated = True
            g = toks[self.i]
            if g[0] != "word" or "." in g[1] or g[1] == "%":
                self.error(f"expected a predicate register after '@', got {_show(g)}", g)
            guard = g[1]
            self.i += 1
        op = toks[self.i]
        if op[0] != "word" or not (op[1][0].isalpha()):
            self.error(f"expected an opcode, got {_show(op)}", op)
        self.i += 1
        parts = op[1].split(".")
        operands = []
        tok = toks[self.i]
        if tok[0] != ";":
            if tok[0] not in _OPERAND_STARTS:
                self.error(f"expected an operand or ';' after '{_clip(op[1])}', got {_show(tok)}", tok)
            operands.append(self.operand())
            while toks[self.i][0] == ",":
                self.i += 1
                operands.append(self.operand())
        end = toks[self.i - 1][5]
        tok = toks[self.i]
        if tok[0] != ";":
            self.error(f"expected ',' or ';' after '{_clip(op[1])}', got {_show(tok)}", tok)
        self.i += 1
        text = " ".join(self.text[first[4]:end].split())
        return Instruction(parts[0], tuple(parts[1:]), tuple(operands), Loc(first[2], first[3]),
                           guard, negated, text)

    def register_or_symbol(self, tok):
        name = tok[1]
        if name[0] == "%":
            if name == "%":
                self.error("a register name must follow '%', got '%'", tok)
            return Register(name)
        if name == "_" or self.is_scoped_register(name):
            return Register(name)
        if "." in name:
            self.error(f"a symbol must be a plain identifier, got '{_clip(name)}'", tok)
        return Symbol(name)

    def operand(self):
        toks = self.toks
        tok = toks[self.i]
        kind = tok[0]
        if kind == "word":
            self.i += 1
            value = self.register_or_symbol(tok)
            if toks[self.i][0] == "|":
                self.i += 1
                second = toks[self.i]
                if second[0] != "word":
                    self.error(f"expected a register after '|', got {_show(second)}", second)
                self.i += 1
                value = Vector((value, self.register_or_symbol(second)))
            return value
        if kind == "num" or kind == "-":
            return self.signed_number("a number after '-'")
        if kind == "{":
            return self.vector("{", "}")
        if kind == "[":
            return self.address()
        if kind == "(":
            return self.vector("(", ")")
        if kind == "!":
            self.i += 1
            reg = toks[self.i]
            if reg[0] != "word":
                self.error(f"expected a predicate register after '!', got {_show(reg)}", reg)
            self.i += 1
            return Negated(self.register_or_symbol(reg))
        self.error(f"expected an operand, got {_show(tok)}", tok)

    def element(self):
        tok = self.toks[self.i]
        if tok[0] == "word":
            self.i += 1
            return self.register_or_symbol(tok)
        if tok[0] == "!":
            return self.operand()
        if tok[0] == "num" or tok[0] == "-":
            return self.signed_number("a number after '-'")
        self.error(f"expected a register, symbol or number in a list, got {_show(tok)}", tok)

    def vector(self, open_: str, close: str) -> Vector:
        opening = self.take()
        toks = self.toks
        elements = []
        if toks[self.i][0] != close or open_ == "{":
            elements.append(self.element())
            while toks[self.i][0] == ",":
                self.i += 1
                elements.append(self.element())
        tok = toks[self.i]
        if tok[0] != close:
            self.error(f"expected ',' or '{close}' to close the '{open_}' at {opening[2]}:{opening[3]}, "
                       f"got {_show(tok)}", tok)
        self.i += 1
        return Vector(tuple(elements))

    def address(self):
        opening = self.take()
        toks = self.toks
        tok = toks[self.i]
        base, offset = None, 0
        if tok[0] == "word":
            self.i += 1
            base = self.register_or_symbol(tok)
            if toks[self.i][0] == ",":
                self.i += 1
                if toks[self.i][0] != "{":
                    self.error(f"expected '{{' (the coordinates) after the tensor map in '[', got "
                               f"{_show(toks[self.i])}", toks[self.i])
                coords = self.vector("{", "}").elements
                self.expect("]", f"to close the '[' at {opening[2]}:{opening[3]}")
                return TensorAddress(base, coords)
            if toks[self.i][0] in "+-":
                sign = toks[self.i][0]
                self.i += 1
                offset = self.integer("address offset", -(1 << 63))
                if sign == "-":
                    offset = -offset
        elif tok[0] == "num" or tok[0] == "-":
            offset = self.integer("address", -(1 << 63))
        else:
            self.error(f"expected a register, symbol or integer inside '[', got {_show(tok)}", tok)
        tok = toks[self.i]
        if tok[0] != "]":
            self.error(f"expected ']' to close the '[' at {opening[2]}:{opening[3]}, got {_show(tok)}", tok)
        self.i += 1
        return Address(base, offset)
