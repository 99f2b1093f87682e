"""An existing PostgreSQL target's column types, normalized for the engine's narrowing rule."""

from __future__ import annotations

import re

from pipelinez.connectors.sdk import TargetColumn

_PLAIN = {
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "boolean": "BOOLEAN",
    "numeric": "DECIMAL",
    "text": "VARCHAR",
    "character varying": "VARCHAR",
    "bytea": "BLOB",
    "date": "DATE",
}
_NUMBERED = re.compile(
    r"^(?P<base>numeric|character varying|character|bpchar|timestamp|time)(?:\((?P<args>[\d,\s-]+)\))?"
    r"(?P<rest>.*)$"
)


def normalize(pg_type: str) -> str:
    """`numeric(12,2)` -> `DECIMAL(12,2)`, `character varying(20)` -> `VARCHAR(20)`,
    `timestamp(3) with time zone` -> `TIMESTAMPTZ(3)`; types the rule does not model pass through."""
    if pg_type in _PLAIN:
        return _PLAIN[pg_type]
    match = _NUMBERED.match(pg_type)
    if not match:
        return pg_type
    base, args, rest = match["base"], (match["args"] or "").replace(" ", ""), match["rest"].strip()
    suffix = f"({args})" if args else ""
    if base == "numeric" and not rest:
        return f"DECIMAL{suffix}"
    if base in ("character varying", "character", "bpchar") and not rest:
        return f"VARCHAR{suffix or ('(1)' if base == 'character' else '')}"
    if base in ("timestamp", "time") and rest in ("without time zone", "with time zone"):
        name = base.upper() + ("TZ" if rest == "with time zone" else "")
        return f"{name}{suffix}"
    return pg_type


def target_columns(columns: dict[str, str], required: set[str] | None = None) -> list[TargetColumn]:
    """The catalog's (name -> format_type) columns as the SDK reports them; `required`: the NOT NULL
    columns without a default."""
    return [
        TargetColumn(name, normalize(kind), kind, required=name in (required or set()))
        for name, kind in columns.items()
    ]
