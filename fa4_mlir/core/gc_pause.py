"""Pause Python's cyclic garbage collector around a bounded burst of allocation. No MLIR import.

A compile allocates on the order of a million short-lived objects (the protocol check's mirror of the
IR, its events and clocks). The collector, triggered by allocation counts, then walks every live
object again and again, the imported modules' included: about 0.1 s of a 0.3 s protocol check, and
10 ms of a cold ``fa4-compile``'s imports. Reference counting still frees what is not in a cycle;
cycles wait for the next full collection after the pause (a few MB here).
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Run the body with the cyclic GC off; restore its previous state (nests)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:  # (unfreeze would also release what the caller froze)
                # What survived the pause joins the oldest generation, as it would have: else the first
                # young collection after it walks all of it at once (40 ms after a cold compile).
                gc.freeze()
                gc.unfreeze()
            gc.enable()
