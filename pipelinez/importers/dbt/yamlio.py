"""Reading dbt's YAML files (safe loader, errors as PZ0140) and writing pz's YAML deterministically."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from pipelinez.core.diagnostics import PzError, error
from pipelinez.core.json_types import JsonObject

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def load_yaml(path: Path, rel: str) -> Any:
    """The file's data (None for an empty file); a file that cannot be read or parsed is PZ0140."""
    try:
        text = path.read_text(encoding="utf-8")
        return YAML(typ="safe", pure=True).load(text)
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PzError([error("PZ0140", f"cannot read dbt file {rel}: {reason}", file=rel)]) from None


def read_text(path: Path) -> str:
    """A dbt file's text; one that cannot be read or is not UTF-8 (dbt reads its files as UTF-8) is PZ0140
    naming the file, never a crash."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        shown = path.name if not path.is_absolute() else str(path)
        raise PzError([error("PZ0140", f"cannot read dbt file {shown}: {reason}", file=shown)]) from None


def mapping(value: Any) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED and not _looks_numeric(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return bool(re.match(r"^\d{4}-\d\d-\d\d", text))
    return True


def _flow(value: Any) -> str | None:
    """A short list of scalars, or a small mapping of scalars, on one line; None when it doesn't fit."""
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        text = "[" + ", ".join(_scalar(v) for v in value) + "]"
    elif isinstance(value, dict) and all(not isinstance(v, dict) for v in value.values()):
        parts = []
        for key, item in value.items():
            inner = _flow(item) if isinstance(item, list) else _scalar(item)
            if inner is None:
                return None
            parts.append(f"{_scalar(key)}: {inner}")
        text = "{ " + ", ".join(parts) + " }" if parts else "{}"
    else:
        return None
    return text if len(text) <= 100 else None


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{pad}{_scalar(key)}:"
            if isinstance(item, (dict, list)):
                flow = _flow(item)
                if flow is not None and (item or isinstance(item, dict)):
                    out.append(f"{head} {flow}")
                elif not item:
                    out.append(f"{head} []")
                else:
                    out.append(head)
                    out.extend(_lines(item, indent + 2))
            else:
                out.append(f"{head} {_scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                flow = _flow(item)
                if flow is not None:
                    out.append(f"{pad}- {flow}")
                    continue
                inner = _lines(item, indent + 2)
                out.append(f"{pad}- {inner[0].lstrip()}")
                out.extend(inner[1:])
            else:
                out.append(f"{pad}- {_scalar(item)}")
    return out


def dump_yaml(data: JsonObject) -> str:
    """Block YAML in the mapping's own key order, short lists and mappings in flow style; every string
    that YAML could read as something else is double-quoted (JSON quoting)."""
    return "\n".join(_lines(data, 0)) + "\n"
