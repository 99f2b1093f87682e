"""The bind cache's key: by content (equal column lists give equal keys, any change of a name or a type
another key), each input's column list encoded once however many readers it has."""

from __future__ import annotations

import pytest

from pipelinez.compile import bind_cache
from pipelinez.compile.bind_cache import BindCache


def test_keys_are_by_content_and_see_every_column_change() -> None:
    cache = BindCache(None)
    wide = [(f"c{i}", "BIGINT") for i in range(120)]
    key = cache.key("pipeline", "SELECT * FROM a", [("a", wide), ("b", None)])
    assert cache.key("pipeline", "SELECT * FROM a", [("b", None), ("a", list(wide))]) == key
    retyped = [*wide[:-1], ("c119", "VARCHAR")]
    renamed = [*wide[:-1], ("c120", "BIGINT")]
    others = [
        cache.key("pipeline", "SELECT * FROM a", [("a", retyped), ("b", None)]),
        cache.key("pipeline", "SELECT * FROM a", [("a", renamed), ("b", None)]),
        cache.key("pipeline", "SELECT * FROM a", [("a", wide), ("b", [])]),
        cache.key("check", "SELECT * FROM a", [("a", wide), ("b", None)]),
        cache.key("pipeline", "SELECT 1 FROM a", [("a", wide), ("b", None)]),
    ]
    assert len({key, *others}) == len(others) + 1


class _Counting:
    """An encoder that records what it was given."""

    def __init__(self) -> None:
        self.given: list[object] = []

    def encode(self, value: object) -> str:
        self.given.append(value)
        return _REAL_ENCODE(value)


_REAL_ENCODE = bind_cache._ENCODER.encode


def test_a_column_list_is_encoded_once_for_all_its_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = BindCache(None)
    wide = [(f"c{i}", "BIGINT") for i in range(120)]
    counting = _Counting()
    monkeypatch.setattr(bind_cache, "_ENCODER", counting)
    for reader in range(10):
        cache.key("pipeline", f"SELECT {reader} FROM a", [("a", wide)])
    assert sum(value is wide for value in counting.given) == 1
