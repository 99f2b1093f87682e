"""The scan that locates `f('literal', ...)` calls in a template finds exactly what the pattern's finditer
finds (it starts from the text's `('` instead of trying the pattern at every word)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelinez.compile.template_locate import LITERAL_ARG as _LITERAL_ARG
from pipelinez.compile.template_locate import LITERAL_CALL as _LITERAL_CALL
from pipelinez.compile.template_locate import literal_calls as _literal_calls

PIECES = [
    "a",
    "b",
    "_",
    "1",
    "é",
    "٣",
    " ",
    "\n",
    "(",
    ")",
    "'",
    '"',
    ",",
    "{{ ",
    " }}",
    "ref",
    "f ",
    "x('a')",
]


def _by_finditer(raw: str) -> dict[tuple[str, tuple[str, ...]], int]:
    found: dict[tuple[str, tuple[str, ...]], int] = {}
    for match in _LITERAL_CALL.finditer(raw):
        args = tuple(a or b for a, b in _LITERAL_ARG.findall(match.group(2)))
        found.setdefault((match.group(1), args), match.start())
    return found


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=16).map("".join))
def test_the_scan_finds_what_finditer_finds(raw: str) -> None:
    assert _literal_calls.__wrapped__(raw) == _by_finditer(raw)


def test_calls_in_a_pipeline() -> None:
    raw = "SELECT coalesce(a, 'x') FROM {{ ref('p1') }} JOIN {{ source ( 'files', \"raw\" ) }}\n-- ref('p1')"
    assert _literal_calls(raw) == {
        ("ref", ("p1",)): raw.index("ref("),
        ("source", ("files", "raw")): raw.index("source"),
    }
