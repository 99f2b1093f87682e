"""The project's macros/ as pz shared macros: adapter.dispatch resolved for the target, dbt's naming
macros (generate_schema_name, ...) applied at import and left out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pipelinez.importers.dbt.yamlio import read_text

_BLOCK = re.compile(
    r"\{%-?\s*macro\s+(?P<name>\w+)\s*\((?P<args>[^)]*)\)\s*-?%\}(?P<body>.*?)\{%-?\s*endmacro\s*-?%\}",
    re.DOTALL,
)
_DISPATCH = re.compile(r"adapter\.dispatch\(\s*['\"](\w+)['\"]")
NAMING_MACROS = ("generate_schema_name", "generate_alias_name", "generate_database_name")


@dataclass
class MacroFiles:
    files: dict[str, str] = field(default_factory=dict)  # pz relative path → text
    names: list[str] = field(default_factory=list)
    schema_macro: str | None = None  # the source of generate_schema_name, when the project has one
    notes: list[str] = field(default_factory=list)


def _resolve_dispatch(text: str, adapter: str, rel: str, notes: list[str]) -> str:
    blocks = {m.group("name"): m for m in _BLOCK.finditer(text)}
    for match in list(_BLOCK.finditer(text)):
        dispatched = _DISPATCH.search(match.group("body"))
        if not dispatched or dispatched.group(1) != match.group("name"):
            continue
        name = match.group("name")
        chosen = blocks.get(f"{adapter}__{name}") or blocks.get(f"default__{name}")
        if chosen is None:
            continue
        body = chosen.group("body")
        replacement = f"{{% macro {name}({match.group('args').strip()}) -%}}{body}{{%- endmacro %}}"
        text = text.replace(match.group(0), replacement)
        for other in [n for n in blocks if n.endswith(f"__{name}")]:
            text = text.replace(blocks[other].group(0), "")
        impl = chosen.group("name")
        notes.append(f"{rel}: macro {name} dispatches per adapter; imported as {impl} (the {adapter} choice)")
    return text


def read_macros(root: Path, macro_paths: list[str], adapter: str) -> MacroFiles:
    result = MacroFiles()
    for folder in macro_paths:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.sql")):
            if any(part.startswith(".") for part in path.relative_to(base).parts):
                continue
            rel = path.relative_to(root).as_posix()
            text = read_text(path)
            for match in list(_BLOCK.finditer(text)):
                if match.group("name") in NAMING_MACROS:
                    if match.group("name") == "generate_schema_name":
                        result.schema_macro = match.group(0)
                    result.notes.append(f"{rel}: {match.group('name')} applied at import to the output names")
                    text = text.replace(match.group(0), "")
            text = _resolve_dispatch(text, adapter, rel, result.notes)
            if not _BLOCK.search(text):
                continue
            out = "macros/" + path.relative_to(base).as_posix()
            result.files[out] = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
            result.names.extend(m.group("name") for m in _BLOCK.finditer(text))
    result.names = sorted(set(result.names))
    return result
