"""is_incremental() blocks: a `col > (select max(col) from {{ this }})` filter on a model that reads one
source becomes a watermark() read; anything else is a full rebuild and warning PZ0145."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelinez.importers.dbt.jinja_text import blank

_BLOCK = re.compile(
    r"\{%-?\s*if\s+is_incremental\(\)\s*-?%\}(?P<body>.*?)\{%-?\s*endif\s*-?%\}", re.DOTALL | re.IGNORECASE
)
_FILTER = re.compile(
    r"^\s*(?P<kw>where|and)\s+(?P<col>[\w.\"]+)\s*(?P<op>>=|>)\s*\(\s*select\s+max\(\s*[\w.\"]+\s*\)\s+"
    r"from\s+\{\{\s*this\s*\}\}\s*\)\s*$",
    re.IGNORECASE,
)
_REF = re.compile(r"ref\(\s*['\"](\w+)['\"]\s*\)")
_SOURCE = re.compile(r"source\(\s*['\"](\w+)['\"]\s*,\s*['\"](\w+)['\"]\s*\)")
CURSOR_TYPES = {"integer", "bigint", "int", "decimal", "date", "timestamp", "timestamptz", "double"}


@dataclass
class Incremental:
    text: str
    watermark: tuple[str, str] | None  # (source, dataset) when the read became incremental
    reason: str  # why not, when it did not


def refs(text: str) -> list[str]:
    return sorted(set(_REF.findall(text)))


def sources_read(text: str) -> list[tuple[str, str]]:
    return sorted(set(_SOURCE.findall(text)))


def convert(
    text: str,
    cursor_types: dict[tuple[str, str], dict[str, str]],
    other_readers: dict[tuple[str, str], list[str]] | None = None,
    ref_readers: list[str] | None = None,
) -> Incremental:
    """The model with its is_incremental() block as a watermark() filter, or dropped (and why).
    `other_readers`: the other models that read a source; `ref_readers`: the models that ref() this one. A
    watermark would make either see only the new rows (in dbt, ref() of an incremental model is its whole
    table)."""
    blocks = list(_BLOCK.finditer(text))
    if not blocks:
        return Incremental(text, None, "the model has no is_incremental() block")
    sources = sorted(set(_SOURCE.findall(text)))
    match = _FILTER.match(blocks[0].group("body")) if len(blocks) == 1 else None
    if match is None or "{%" in blocks[0].group("body"):
        return Incremental(
            _drop(text),
            None,
            "its is_incremental() filter is not `<column> > (select max(...) from {{ this }})`",
        )
    if len(sources) != 1:
        return Incremental(
            _drop(text), None, "it does not read exactly one source(), which a watermark() needs"
        )
    if ref_readers:
        why = f"it is read by {', '.join(ref_readers)} with ref(), which would see only the new rows"
        return Incremental(_drop(text), None, why)
    readers = (other_readers or {}).get(sources[0], [])
    if readers:
        src, dataset = sources[0]
        names = ", ".join(readers)
        why = f"source('{src}', '{dataset}') is also read by {names}, which would see only new rows"
        return Incremental(_drop(text), None, why)
    column = match.group("col").split(".")[-1].strip('"')
    types = cursor_types.get(sources[0], {})
    if types.get(column, "").split("(")[0] not in CURSOR_TYPES - {"double"}:
        why = f"the cursor {column} has no declared date, timestamp, integer or decimal type in the source"
        return Incremental(_drop(text), None, why)
    block = blocks[0]
    src, dataset = sources[0]
    call = "{{ watermark('" + src + "', '" + dataset + "') }}"
    filt = f"{match.group('kw')} {match.group('col')} {match.group('op')} {call}"
    lines = block.group(0).count("\n")
    replacement = filt + "\n" * lines
    return Incremental(text[: block.start()] + replacement + text[block.end() :], sources[0], "")


def _drop(text: str) -> str:
    return _BLOCK.sub(lambda m: blank(m.group(0)), text)
