"""The compiled-SQL fallback: a model dbt compiled (target/compiled/), with its relations turned back into
ref() and source() calls."""

from __future__ import annotations

import re
from pathlib import Path

from pipelinez.importers.dbt.yamlio import read_text

NOTE = "-- imported from dbt compiled SQL"


def compiled_path(root: Path, target_path: str, project: str, original: str) -> Path:
    return root / target_path / "compiled" / project / original


def spellings(parts: tuple[str, ...]) -> list[str]:
    """How a relation may be written: database.schema.identifier or schema.identifier, quoted or not."""
    found = []
    for take in (parts, parts[1:]):
        found.append(".".join(f'"{p}"' for p in take))
        found.append(".".join(take))
    return found


def restore_calls(text: str, relations: dict[tuple[str, str, str], str]) -> str:
    """Each relation of `relations` ((database, schema, identifier) → the Jinja call) back as its call."""
    table: dict[str, str] = {}
    for parts, call in relations.items():
        for spelling in spellings(parts):
            table.setdefault(spelling.lower(), call)
    if not table:
        return text
    alternatives = sorted(table, key=len, reverse=True)
    pattern = re.compile(
        r"(?<![\w.\"])(" + "|".join(re.escape(a) for a in alternatives) + r")(?![\w\"])", re.IGNORECASE
    )
    return pattern.sub(lambda m: table[m.group(1).lower()], text)


def mentions(text: str, parts: tuple[str, str, str]) -> bool:
    """Whether `text` names the relation (in any of its spellings)."""
    alternatives = "|".join(re.escape(s) for s in spellings(parts))
    return re.search(r"(?<![\w.\"])(" + alternatives + r")(?![\w\"])", text, re.IGNORECASE) is not None


def read_compiled(path: Path, relations: dict[tuple[str, str, str], str]) -> str | None:
    if not path.is_file():
        return None
    text = read_text(path)
    return NOTE + "\n" + restore_calls(text, relations).rstrip() + "\n"
