"""`once`: a property computed on first access and kept in the instance's `__dict__`, as
`functools.cached_property` does, without its lock. On Python 3.11 `cached_property` takes a re-entrant lock
on every first access (of every instance): a compile of 2,000 pipelines asked three of them about 6,000
times. Kept values are never recomputed, so `once` is for what cannot change once the instance exists (a
frozen dataclass's derived values); two threads that race on a first access compute the same value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
R = TypeVar("R")


class once(Generic[T, R]):
    def __init__(self, compute: Callable[[T], R]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> once[T, R]: ...

    @overload
    def __get__(self, instance: T, owner: type[Any] | None = None) -> R: ...

    def __get__(self, instance: T | None, owner: type[Any] | None = None) -> once[T, R] | R:
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.name] = value  # found there from now on: `once` has no __set__
        return value
