"""The command-line options a built-in kernel's config class implies, shared by fa4-compile and fa4-emu:
one ``--field`` per config field and the shorthands (``--tile MxNxK``) a config accepts."""

from __future__ import annotations

import argparse
import dataclasses

# Shorthands a config class may accept: option -> (config fields it sets, how to parse it).
SHORTHANDS = {
    "tile": (("tile_m", "tile_n", "tile_k"), "MxNxK", "the tile shape, e.g. 128x256x64"),
    "stages": (("num_stages",), "N", "A/B pipeline stages (0: as many as fit)"),
}


def kernel_options(parser: argparse.ArgumentParser, config_cls) -> None:
    group = parser.add_argument_group(f"{config_cls.__name__} options")
    fields = {f.name for f in dataclasses.fields(config_cls)}
    for f in dataclasses.fields(config_cls):
        if f.name == "target":
            continue
        default = f.default
        if isinstance(default, bool):
            group.add_argument(f"--{f.name.replace('_', '-')}", dest=f"cfg_{f.name}", default=default,
                               action=argparse.BooleanOptionalAction, help=f"default: {default}")
            continue
        group.add_argument(f"--{f.name.replace('_', '-')}", dest=f"cfg_{f.name}", type=type(default),
                           default=default, metavar=type(default).__name__.upper(),
                           help=f"default: {default}")
    for name, (targets, metavar, text) in SHORTHANDS.items():
        if set(targets) <= fields and name not in fields:
            group.add_argument(f"--{name}", dest=f"short_{name}", default=None, metavar=metavar,
                               help=f"{text} (sets {', '.join(targets)})")


def shorthands(args) -> dict | str:
    """Config fields the shorthand options set, or an error message."""
    out = {}
    for name, (targets, metavar, _) in SHORTHANDS.items():
        value = getattr(args, f"short_{name}", None)
        if value is None:
            continue
        parts = value.lower().split("x")
        if len(parts) != len(targets) or not all(p.isdigit() for p in parts):
            return f"--{name} must be {metavar} with integers, got '{value}'"
        out.update(zip(targets, (int(p) for p in parts)))
    return out
