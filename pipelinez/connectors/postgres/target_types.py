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


def folds(type_name: str, deterministic: bool, locale: str) -> tuple[str, ...]:
    """What PostgreSQL ignores when it compares values of a column: `citext` ignores case, `char(n)`
    (bpchar) trailing spaces, a nondeterministic ICU collation case (`ks-level2`) or case and accents
    (`ks-level1`)."""
    out: list[str] = []
    if type_name == "citext":
        out.append("case")
    if not deterministic:
        spec = locale.lower()
        if "ks-level1" in spec or "colstrength=primary" in spec:
            out += ["case", "accents"]
        elif "ks-level2" in spec or "colstrength=secondary" in spec:
            out.append("case")
    if type_name == "bpchar":
        out.append("trailing_spaces")
    return tuple(dict.fromkeys(out))


def target_columns(
    columns: dict[str, str],
    required: set[str] | None = None,
    compared: dict[str, tuple[str, bool, str]] | None = None,
) -> list[TargetColumn]:
    """The catalog's (name -> format_type) columns as the SDK reports them; `required`: the NOT NULL
    columns without a default; `compared`: (type name, deterministic, locale) per column."""
    return [
        TargetColumn(
            name,
            normalize(kind),
            kind,
            folds=folds(*compared[name]) if compared and name in compared else (),
            required=name in (required or set()),
        )
        for name, kind in columns.items()
    ]
