"""The render cache's recorded calls read back (`render_cache._call`, built without the frozen dataclasses'
`__init__`): the same `Call` and `Place` a rendering records, equal and hashed alike; anything else a miss."""

from __future__ import annotations

import pytest

from pipelinez.compile.render_cache import _call
from pipelinez.compile.template_calls import Call
from pipelinez.core.diagnostics import Place


@pytest.mark.parametrize(
    ("data", "made"),
    [
        (["ref", ["p_1"], "pipelines/p.sql", 3, 7], Call("ref", ("p_1",), Place("pipelines/p.sql", 3, 7))),
        (["source", ["s", "d"], "m/x.sql", None, None], Call("source", ("s", "d"), Place("m/x.sql"))),
        (["var", ["v"], None, 1, 2], Call("var", ("v",), Place(None, 1, 2))),
        # a file name that is not printable is escaped, as Place escapes it
        (["ref", ["p"], "a\tb.sql", 1, 1], Call("ref", ("p",), Place("a\tb.sql", 1, 1))),
    ],
)
def test_a_call_read_back_is_the_call_recorded(data: list[object], made: Call) -> None:
    found = _call(data)
    assert found == made and hash(found) == hash(made)
    assert found.place == made.place and hash(found.place) == hash(made.place)
    assert repr(found) == repr(made)
    assert type(found.args) is tuple


@pytest.mark.parametrize(
    "data",
    [
        [1, ["p"], "f.sql", 1, 1],
        ["ref", ("p",), "f.sql", 1, 1],
        ["ref", [1], "f.sql", 1, 1],
        ["ref", ["p"], 5, 1, 1],
        ["ref", ["p"], "f.sql", "1", 1],
        ["ref", ["p"], "f.sql", 1, 1.5],
    ],
)
def test_anything_else_is_a_miss(data: list[object]) -> None:
    with pytest.raises(TypeError):
        _call(data)
