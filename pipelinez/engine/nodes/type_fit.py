"""Whether a result column fits an existing target column without loss: the one narrowing rule.

Pure functions over normalized type names. A result type is DuckDB's spelling of the staged column's type
(`DECIMAL(38,2)`, `TIMESTAMP WITH TIME ZONE`, `VARCHAR`); a target type is what the sink's connector reports
for its existing column, in the same vocabulary plus bounds DuckDB itself does not carry (see
`pipelinez.connectors.sdk.TargetColumn`): `VARCHAR(n)` (at most n characters), `DECIMAL` without precision
(unbounded numeric), `TIMESTAMP(p)` / `TIMESTAMPTZ(p)` / `TIME(p)` (p fractional-second digits, 6 when
absent).

The rule refuses only pairs where some value of the result type would change on the way in: numeric
precision or scale, integer width, signedness, integers or decimals into a float that cannot hold all
their digits, a float into an integer or bounded decimal, a wider float into a narrower one, a number into
a boolean, timestamp -> date or time, fewer fractional-second digits, and time zone (zoned <-> naive),
unless the connector fills a naive column with UTC wall time. Text and binary lengths are checked against
the longest value of the result (measured in staging), since DuckDB's VARCHAR has no length; a result that
is not text (a number, a timestamp, a UUID …) going into a bounded text column is measured as DuckDB writes
it as text. Types the rule does not model (lists, structs, JSON, UUID, intervals into other types,
cross-family pairs such as text into integer) are left to the target system, which refuses bad values
loudly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# integer types: (bits, signed)
_INTS = {
    "TINYINT": (8, True),
    "MEDIUMINT": (24, True),
    "UMEDIUMINT": (24, False),
    "SMALLINT": (16, True),
    "INTEGER": (32, True),
    "BIGINT": (64, True),
    "HUGEINT": (128, True),
    "UTINYINT": (8, False),
    "USMALLINT": (16, False),
    "UINTEGER": (32, False),
    "UBIGINT": (64, False),
    "UHUGEINT": (128, False),
}
_INT_ALIASES = {"INT": "INTEGER", "INT1": "TINYINT", "INT2": "SMALLINT", "INT4": "INTEGER", "INT8": "BIGINT"}
# decimal digits every value of the integer type can have (128-bit counts as DECIMAL(38,0), the widest
# decimal anywhere in pz: a value beyond it fails loudly in the write's cast, never silently)
_ALL_DIGITS = {8: 3, 16: 5, 24: 7, 32: 10, 64: 19, 128: 38}
_UNSIGNED_DIGITS = {8: 3, 16: 5, 24: 8, 32: 10, 64: 20, 128: 38}
# digits that every integer of the target can hold (the largest n with 10**n - 1 <= max)
_SAFE_DIGITS = {8: 2, 16: 4, 24: 6, 32: 9, 64: 18, 128: 38}
_FLOATS = {"FLOAT": 32, "REAL": 32, "FLOAT4": 32, "DOUBLE": 64, "FLOAT8": 64, "DOUBLE PRECISION": 64}
_FLOAT_DIGITS = {32: 6, 64: 15}  # decimal digits a float round-trips
_FLOAT_INT_BITS = {32: 24, 64: 53}  # integers held exactly
_TIMESTAMPS = {
    "TIMESTAMP": (False, 6),
    "DATETIME": (False, 6),
    "TIMESTAMP_S": (False, 0),
    "TIMESTAMP_MS": (False, 3),
    "TIMESTAMP_US": (False, 6),
    "TIMESTAMP_NS": (False, 9),
    "TIMESTAMPTZ": (True, 6),
    "TIMESTAMP WITH TIME ZONE": (True, 6),
}
_TIMES = {"TIME": (False, 6), "TIME_NS": (False, 9), "TIMETZ": (True, 6), "TIME WITH TIME ZONE": (True, 6)}
_TEXT = {"VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR"}
_BINARY = {"BLOB", "BYTEA", "VARBINARY", "BINARY"}
_NUMBERED = re.compile(r"^(?P<base>[A-Z_ ]+?)\s*\((?P<args>[^()]*)\)$")
MICRO_DIGITS = 6  # pz moves timestamps as microseconds: nanoseconds never reach a target


@dataclass(frozen=True)
class Kind:
    """A parsed type: its family and the bounds the rule compares."""

    family: str  # bool int decimal float text binary date time timestamp other
    bits: int = 0  # int, float
    signed: bool = True  # int
    precision: int | None = None  # decimal (None: unbounded)
    scale: int = 0  # decimal
    zoned: bool = False  # time, timestamp
    digits: int = MICRO_DIGITS  # time, timestamp: fractional-second digits
    length: int | None = None  # text: at most this many characters


def parse_kind(text: str) -> Kind:
    """The family and bounds of a normalized type name; `other` for anything the rule does not model."""
    spelled = " ".join(text.strip().upper().split())
    if spelled.endswith("]") or spelled.startswith(("STRUCT", "MAP", "UNION", "ENUM")):
        return Kind("other")
    base, args = spelled, ""
    match = _NUMBERED.match(spelled)
    if match:
        base, args = match["base"].strip(), match["args"]
    numbers = [int(a) for a in re.findall(r"-?\d+", args)]
    base = _INT_ALIASES.get(base, base)
    if base in ("BOOLEAN", "BOOL"):
        return Kind("bool")
    if base in _INTS:
        bits, signed = _INTS[base]
        return Kind("int", bits=bits, signed=signed)
    if base in ("DECIMAL", "NUMERIC"):
        if not numbers:
            return Kind("decimal", precision=None)
        return Kind("decimal", precision=numbers[0], scale=numbers[1] if len(numbers) > 1 else 0)
    if base in _FLOATS:
        return Kind("float", bits=_FLOATS[base])
    if base in _TEXT:
        return Kind("text", length=numbers[0] if numbers else None)
    if base in _BINARY:
        return Kind("binary")
    if base == "DATE":
        return Kind("date")
    for table, family in ((_TIMESTAMPS, "timestamp"), (_TIMES, "time")):
        if base in table:
            zoned, digits = table[base]
            return Kind(family, zoned=zoned, digits=numbers[0] if numbers else digits)
    return Kind("other")


@dataclass(frozen=True)
class ResultColumn:
    """A column of the pipeline's result: DuckDB type, and for text/binary the longest value measured."""

    name: str
    type: str
    max_chars: int | None = None
    max_bytes: int | None = None


@dataclass(frozen=True)
class Target:
    """An existing target column as the rule sees it (from the connector's TargetColumn)."""

    name: str
    type: str
    native: str
    max_bytes: int | None = None
    utc: bool = False


def misfit(result: ResultColumn, target: Target) -> str | None:
    """Why `result` does not fit `target` without loss, or None when it fits."""
    r, t = parse_kind(result.type), parse_kind(target.type)
    if t.family == "text" and r.family not in ("text", "binary"):  # a number, date, uuid … as text
        return _length(result, t, target.max_bytes, as_text=True)
    if r.family == "other" or t.family == "other":
        return None
    if r.family in ("int", "decimal", "float", "bool") and t.family in ("int", "decimal", "float", "bool"):
        return _numeric(r, t)
    if r.family in ("text", "binary") and t.family == r.family:
        return _length(result, t, target.max_bytes)
    if r.family in ("timestamp", "time", "date") and t.family in ("timestamp", "time", "date"):
        return _temporal(r, t, target.utc)
    return None


def _numeric(r: Kind, t: Kind) -> str | None:
    if r.family == "bool":
        if t.family == "decimal" and t.precision is not None and t.precision <= t.scale:
            return "the column has no integer digit for 1 (numeric precision)"
        return None
    if t.family == "bool":
        return "a boolean holds only true and false"
    if r.family == "int":
        return _from_int(r, t)
    if r.family == "decimal":
        return _from_decimal(r, t)
    # float
    if t.family == "float":
        return "a narrower float rounds the value" if t.bits < r.bits else None
    if t.family == "decimal" and t.precision is None:
        return None
    return "a float's fraction and range do not fit"


def _int_digits(k: Kind) -> int:
    return (_ALL_DIGITS if k.signed else _UNSIGNED_DIGITS)[k.bits]


def _from_int(r: Kind, t: Kind) -> str | None:
    if t.family == "int":
        if r.signed and not t.signed:
            return "negative values do not fit an unsigned column (signedness)"
        wide_enough = t.bits > r.bits if (t.signed and not r.signed) else t.bits >= r.bits
        return None if wide_enough else "the integer is wider than the column (integer width)"
    if t.family == "decimal":
        if t.precision is None or t.precision - t.scale >= _int_digits(r):
            return None
        return f"up to {_int_digits(r)} integer digits do not fit {t.precision - t.scale} (numeric precision)"
    bits = r.bits if not r.signed else r.bits - 1
    if bits <= _FLOAT_INT_BITS[t.bits]:
        return None
    return "the float cannot hold every integer of that width exactly (integer width)"


def _from_decimal(r: Kind, t: Kind) -> str | None:
    p, s = r.precision, r.scale
    if p is None:
        return None if t.family == "decimal" and t.precision is None else "an unbounded numeric does not fit"
    if t.family == "int":
        if s > 0:
            return f"the fraction ({s} decimal places) would be rounded away (numeric scale)"
        if not t.signed:
            return "negative values do not fit an unsigned column (signedness)"
        if p <= _SAFE_DIGITS[t.bits]:
            return None
        return f"{p} digits do not fit the integer (numeric precision)"
    if t.family == "decimal":
        if t.precision is None:
            return None
        if s > t.scale:
            return f"{s} decimal places would be rounded to {t.scale} (numeric scale)"
        if p - s > t.precision - t.scale:
            return f"{p - s} integer digits do not fit {t.precision - t.scale} (numeric precision)"
        return None
    if p <= _FLOAT_DIGITS[t.bits]:
        return None
    return f"{p} digits do not round-trip through the float (numeric precision)"


def _length(result: ResultColumn, t: Kind, max_bytes: int | None, as_text: bool = False) -> str | None:
    longest = "written as text its longest value" if as_text else "its longest value"
    if t.length is not None and result.max_chars is not None and result.max_chars > t.length:
        return f"{longest} has {result.max_chars} characters, the column holds {t.length} (text length)"
    if max_bytes is not None and result.max_bytes is not None and result.max_bytes > max_bytes:
        return f"{longest} has {result.max_bytes} bytes, the column holds {max_bytes} (length)"
    return None


def _temporal(r: Kind, t: Kind, utc: bool) -> str | None:
    if r.family == "date":
        return None if t.family in ("date", "timestamp") else "a date has no time of day"
    if r.family == "timestamp" and t.family == "date":
        return "the time of day would be dropped (timestamp -> date)"
    if r.family != t.family:
        return f"a {r.family} does not fit a {t.family} column"
    if r.zoned != t.zoned and not (t.family == "timestamp" and not t.zoned and utc):
        if r.zoned:
            return "the time zone would be dropped (time zone)"
        return "a time without zone would be read in the server's time zone (time zone)"
    if min(r.digits, MICRO_DIGITS) > t.digits:
        return f"fractional seconds would be rounded to {t.digits} digits (time precision)"
    return None


def needs_lengths(target_type: str, max_bytes: int | None) -> bool:
    """Whether the rule needs the result's longest value for a column of this target type."""
    kind = parse_kind(target_type)
    return (kind.family == "text" and kind.length is not None) or (
        kind.family in ("text", "binary") and max_bytes is not None
    )
