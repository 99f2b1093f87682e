"""An existing MySQL/MariaDB target's column types (information_schema COLUMN_TYPE), normalized for the
engine's narrowing rule. DATETIME and TIMESTAMP columns are naive; sessions run at time_zone '+00:00', so
zoned values land as UTC wall time (`utc`)."""

from __future__ import annotations

import re

from pipelinez.connectors.sdk import TargetColumn

_INTS = {
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "mediumint": "MEDIUMINT",
    "int": "INTEGER",
    "integer": "INTEGER",
    "bigint": "BIGINT",
}
_TEXT_BYTES = {"tinytext": 255, "text": 65_535, "mediumtext": 16_777_215}
_BLOB_BYTES = {"tinyblob": 255, "blob": 65_535, "mediumblob": 16_777_215}
_SHAPE = re.compile(r"^(?P<base>[a-z]+)(?:\((?P<args>[^)]*)\))?(?P<rest>.*)$")


def normalize(column_type: str) -> TargetColumn:
    """One COLUMN_TYPE (`int(10) unsigned`, `decimal(10,2)`, `varchar(20)`, `datetime(6)`) as a
    TargetColumn with an empty name."""
    text = column_type.strip().lower()
    match = _SHAPE.match(text)
    if not match:
        return TargetColumn("", column_type, column_type)
    base, args, rest = match["base"], match["args"] or "", match["rest"]
    numbers = [int(n) for n in re.findall(r"\d+", args)]
    unsigned = "unsigned" in rest
    if base in _INTS:
        name = _INTS[base]
        return TargetColumn("", ("U" if unsigned else "") + name, column_type)
    if base in ("decimal", "numeric", "dec", "fixed") or (base in ("float", "double") and len(numbers) == 2):
        precision = numbers[0] if numbers else 10
        scale = numbers[1] if len(numbers) > 1 else 0
        return TargetColumn("", f"DECIMAL({precision},{scale})", column_type)
    if base == "float":
        return TargetColumn("", "FLOAT", column_type)
    if base in ("double", "real"):
        return TargetColumn("", "DOUBLE", column_type)
    if base in ("varchar", "char"):
        return TargetColumn("", f"VARCHAR({numbers[0] if numbers else 1})", column_type)
    if base in _TEXT_BYTES:
        return TargetColumn("", "VARCHAR", column_type, max_bytes=_TEXT_BYTES[base])
    if base == "longtext":
        return TargetColumn("", "VARCHAR", column_type)
    if base in ("binary", "varbinary"):
        return TargetColumn("", "BLOB", column_type, max_bytes=numbers[0] if numbers else 1)
    if base in _BLOB_BYTES:
        return TargetColumn("", "BLOB", column_type, max_bytes=_BLOB_BYTES[base])
    if base == "longblob":
        return TargetColumn("", "BLOB", column_type)
    if base == "date":
        return TargetColumn("", "DATE", column_type)
    if base in ("datetime", "timestamp"):
        return TargetColumn("", f"TIMESTAMP({numbers[0] if numbers else 0})", column_type, utc=True)
    if base == "time":
        return TargetColumn("", f"TIME({numbers[0] if numbers else 0})", column_type)
    return TargetColumn("", column_type, column_type)


def collation_folds(collation: str | None) -> tuple[str, ...]:
    """What a MySQL/MariaDB collation ignores when it compares: case (`_ci`), accents (`_ai`, and the
    legacy `_ci` collations that are not `_as_`), trailing spaces (every PAD SPACE collation: all but the
    `nopad` and UCA 9.0.0 `_0900_` ones). Binary strings (no collation) compare byte by byte."""
    if not collation or collation == "binary":
        return ()
    name = collation.lower()
    folds = []
    if "_ci" in name:
        folds.append("case")
        if "_as_" not in name:
            folds.append("accents")
    elif "_ai_" in name or name.endswith("_ai"):
        folds.append("accents")
    if "nopad" not in name and "_0900_" not in name:
        folds.append("trailing_spaces")
    return tuple(folds)


def target_columns(
    columns: dict[str, str], required: set[str] | None = None, collations: dict[str, str | None] | None = None
) -> list[TargetColumn]:
    """The (name -> COLUMN_TYPE) columns as the SDK reports them; `required`: the NOT NULL columns without
    a default (nor auto-increment, nor generated); `collations`: each text column's collation."""
    out = []
    for name, kind in columns.items():
        col = normalize(kind)
        folds = collation_folds((collations or {}).get(name)) if col.type.startswith("VARCHAR") else ()
        if kind.strip().lower().startswith("char") and "trailing_spaces" not in folds:
            folds += ("trailing_spaces",)  # CHAR(n) drops trailing spaces when it stores a value
        out.append(
            TargetColumn(
                name,
                col.type,
                col.native,
                col.max_bytes,
                col.utc,
                folds=folds,
                required=name in (required or set()),
            )
        )
    return out
