"""Whether a template function call fits the function's signature, cheaply: positional-only calls are
counted against bounds known once per function body (the template functions are closures made afresh for
each render; `inspect.signature` on each call cost a fifth of `pz validate` at 2,000 pipelines).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def accepts(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether `fn` takes these arguments. A call with positional arguments only is checked by counting
    them against the function's bounds (known once per function body); any other call is bound, which
    cost most of a template function call."""
    known = _known(fn)
    if not kwargs:
        low, high = known.bounds
        if low <= len(args) <= high:
            return True
    try:
        known.signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def signature(fn: Callable[..., Any]) -> inspect.Signature:
    return _known(fn).signature


def shown(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A call's arguments as the user wrote them: `('a', n=1)`."""
    given = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"({', '.join(given)})"


@dataclass(frozen=True)
class _Known:
    """A template function's signature and how many positional arguments it takes."""

    signature: inspect.Signature
    bounds: tuple[float, float]  # (fewest, most) positional arguments taken without keywords


def _known(fn: Callable[..., Any]) -> _Known:
    """`fn`'s signature and bounds, computed once per function body: the template functions are closures
    made afresh for each render, and inspect.signature cost a fifth of `pz validate` at 2,000 pipelines.
    Closures of one body share their code, defaults and so their signature."""
    target = getattr(fn, "__func__", fn)
    try:
        key = (
            getattr(target, "__code__", None),
            getattr(target, "__defaults__", None),
            tuple(sorted((getattr(target, "__kwdefaults__", None) or {}).items())),
            hasattr(fn, "__self__"),
        )
        hash(key)
    except TypeError:  # an unhashable default: not cached
        return _study(fn)
    if key[0] is None:
        return _study(fn)
    found = _KNOWN.get(key)
    if found is None:
        found = _KNOWN[key] = _study(fn)
    return found


def _study(fn: Callable[..., Any]) -> _Known:
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.KEYWORD_ONLY and p.default is p.empty for p in params):
        return _Known(signature, (1.0, 0.0))  # no positional call fits: always bound
    low = sum(1 for p in positional if p.default is p.empty)
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return _Known(signature, (float(low), float("inf") if varargs else float(len(positional))))


_KNOWN: dict[tuple[Any, ...], _Known] = {}
