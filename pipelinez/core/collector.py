"""The cyclic garbage collector paused while a compile builds its graph.

A compile of a large project allocates hundreds of thousands of objects that live until it ends (the loaded
project, its rendered SQL, the nodes); every 700 allocations the collector looks at the youngest and, more
and more often, at all of them: at 2,000 pipelines about a third of a re-validation's CPU, finding nothing
to free. Paused, reference counting still frees whatever has no cycle; what the compile left in cycles is
collected when the collector runs again after it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside (unless the caller had it off already), on again after; nested, only the
    outermost turns it back on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
