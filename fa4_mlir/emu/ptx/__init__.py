"""The PTX front end of the emulator: ``parse(text, source) -> Module`` (see ``parser`` and ``ast``)."""

from fa4_mlir.emu.ptx.ast import Module
from fa4_mlir.emu.ptx.parser import parse

__all__ = ["Module", "parse"]
