"""Command lines of the option fuzzer: ``fa4-compile KERNEL [options]`` and ``fa4-layout [options]``.

The options are read from the tools' own argparse parsers (and, for fa4-compile, the option group
each kernel's config class adds), so a new option is fuzzed without touching this file. Each
option gets a plausible value (near its default, a size kernels use) or a bad one (negative, 0,
huge, the wrong type, empty, an unknown enum member), plus now and then an unknown option.
"""

from __future__ import annotations

import argparse
import random

# Values kernels are built with: most valid command lines combine these.
GOOD_INTS = (0, 1, 2, 3, 4, 6, 8, 16, 24, 32, 40, 64, 80, 96, 128, 152, 192, 232, 256, 512)
BAD_INTS = ("-1", "-2147483648", "2147483648", "4294967296", "1000000000000000000000000000000", "abc", "1.5",
            "", "0x10", " 4", "1e3", "--1", "7", "33", "1000")
GOOD_STRS = {
    "dtype": ("bf16", "fp16", "fp8_e4m3"), "target": ("sm_100a", "sm_90a"), "b_major": ("k", "mn"),
    "tile": ("128x256x64", "128x128x64", "256x256x64", "128x64x64", "64x64x64", "256x128x64"),
    "rope_dtype": ("bf16", "fp8_e4m3"), "scale_dtype": ("bf16", "fp8_e4m3", "fp16"),
    "emit": ("fa4", "nvvm", "llvm", "ptx", "cubin"), "form": ("absorbed", "prefill"),
}
BAD_STRS = ("", "bogus", "BF16", "sm_80", "sm_100", "sm_90", "x" * 300, "128x", "0x0x0", "-128x-256x-64",
            "99999999999x1x1", "1x1x1", "128X256X64", "fp32", "f16", "\u00e9", "none", "-1", "k ", "128x256x64x1")
UNKNOWN_OPTIONS = ("--bogus", "--head_dim", "--stage", "--tile-m=", "-x", "--targets", "--emit-ir", "--json",
                   "--kernel", "--dtype=", "--", "-")
# Options the fuzzer sets itself (output places) or that only print and exit.
FIXED = {"-o", "--output", "-h", "--help", "--version"}


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not set(a.option_strings) & FIXED]


def compile_parser(kernel: str) -> argparse.ArgumentParser:
    """fa4-compile's parser with the option group of built-in ``kernel`` (as its main() builds it)."""
    from fa4_mlir.kernels import KERNELS
    from fa4_mlir.tools import fa4_compile

    parser = fa4_compile._base_parser(add_help=True)
    if kernel in KERNELS:
        fa4_compile._kernel_options(parser, KERNELS[kernel][0])
    return parser


def layout_parser() -> argparse.ArgumentParser:
    from fa4_mlir.tools import fa4_layout

    return fa4_layout._arg_parser()


def _value(rng: random.Random, action: argparse.Action, bad: bool) -> list[str]:
    """The argv words that set ``action``: its flag and, unless it is a switch, a value."""
    flag = rng.choice(action.option_strings)
    if action.nargs == 0:  # a switch (store_true, BooleanOptionalAction's --x / --no-x)
        return [flag]
    name = action.dest.removeprefix("cfg_").removeprefix("short_")
    if action.choices:
        value = rng.choice(BAD_STRS) if bad else rng.choice(list(action.choices))
    elif action.type is int:
        if bad:
            value = rng.choice(BAD_INTS)
        else:
            default = action.default if isinstance(action.default, int) else 0
            value = str(rng.choice((default, *GOOD_INTS)))
    elif bad or name not in GOOD_STRS:
        value = rng.choice(BAD_STRS + GOOD_STRS.get(name, ()))
    else:
        value = rng.choice(GOOD_STRS[name])
    # `--flag=value` also reaches values that start with '-' (argparse reads `--x -1` as two options)
    return [f"{flag}={value}"] if rng.random() < 0.5 or value.startswith("-") else [flag, value]


def _options(rng: random.Random, parser: argparse.ArgumentParser, most: int) -> tuple[list[str], list[str]]:
    """Random options of ``parser``: (argv words, the option names used)."""
    actions = _actions(parser)
    argv, used = [], []
    bad_share = rng.choice((0.0, 0.0, 0.2, 0.5))  # a third of the command lines are all-valid
    for action in rng.sample(actions, min(len(actions), rng.randint(0, most))):
        argv += _value(rng, action, rng.random() < bad_share)
        used.append(action.option_strings[-1])
    if rng.random() < 0.06:
        argv.insert(rng.randrange(len(argv) + 1), rng.choice(UNKNOWN_OPTIONS))
    return argv, used


def compile_case(rng: random.Random, out_dir: str) -> list[str]:
    """An fa4-compile command line (without the program name) that writes only under ``out_dir``."""
    from fa4_mlir.kernels import KERNELS

    r = rng.random()
    kernel = rng.choice(sorted(KERNELS)) if r < 0.94 else rng.choice(("nope", "missing.mlir", "", "-"))
    argv, used = _options(rng, compile_parser(kernel), most=5)
    if "--emit" not in used:
        # ptxas (the cubin stage) is the slowest step and its own program: run it a tenth of the time
        argv += ["--emit", rng.choices(("fa4", "nvvm", "llvm", "ptx", "cubin"), (1, 1, 2, 5, 1))[0]]
    return [kernel, *argv, "-o", out_dir]


def layout_case(rng: random.Random) -> list[str]:
    """An fa4-layout command line (without the program name)."""
    argv, _ = _options(rng, layout_parser(), most=5)
    return argv
