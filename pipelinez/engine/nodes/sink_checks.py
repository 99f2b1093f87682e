"""Checks on a sink write that run in the engine, on the staged result, before the connector writes
anything, so every connector refuses the same things with the same code and message:

- column sets (PZ0517): a result column the existing target lacks is refused on every connector (merge and
  append never change the target's definition), and so is a result that lacks a target column an insert must
  fill (NOT NULL without a default, as the connector reports it); other target columns the result lacks are
  left NULL (or their default) on insert and untouched on update;
- narrowing (PZ0515): a result column that does not fit the existing target column without loss
  (the rule is `type_fit.misfit`; the connector reports its target's columns through
  `Connector.target_columns`);
- NULL merge keys (PZ0520): a NULL identifies no row; connectors disagreed (postgres refused, duckdb and
  mysql matched NULL to NULL), so the engine refuses them for all;
- duplicate merge keys (PZ0516): merge needs one result row per key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelinez.connectors.sdk import Connector, OutputRequest, TargetColumn
from pipelinez.core.sqlnames import quote_ident
from pipelinez.engine.nodes.type_fit import ResultColumn, Target, misfit, needs_lengths, parse_kind
from pipelinez.engine.run.failures import NodeFailure

if TYPE_CHECKING:
    import duckdb

_SHOWN_VALUE = 60  # characters of an example key value in a message


def written_columns(
    cur: duckdb.DuckDBPyConnection, request: OutputRequest, source: str
) -> list[tuple[str, str]]:
    """(name, DuckDB type) of the result columns the write lands: all but merge's on_delete column."""
    cols = [(str(r[0]), str(r[1])) for r in cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
    flag = request.on_delete.lower() if request.strategy == "merge" and request.on_delete else None
    return [(n, t) for n, t in cols if n.lower() != flag]


def _match(name: str, targets: dict[str, TargetColumn]) -> TargetColumn | None:
    if name in targets:
        return targets[name]
    folded = [t for n, t in targets.items() if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _measure(
    cur: duckdb.DuckDBPyConnection, source: str, pairs: Sequence[tuple[str, str, TargetColumn]]
) -> dict[str, tuple[int | None, int | None]]:
    """The longest value (characters, bytes) of each text/binary result column a bounded target needs."""
    wanted = [
        (name, kind)
        for name, kind, target in pairs
        if needs_lengths(target.type, target.max_bytes)
        and (parse_kind(kind).family in ("text", "binary") or parse_kind(target.type).family == "text")
    ]
    if not wanted:
        return {}
    items = []
    for name, kind in wanted:
        ref = quote_ident(name)
        family = parse_kind(kind).family
        if family == "binary":
            items.append(f"NULL::BIGINT, max(octet_length({ref}))")
        else:  # text, or a value written as text (measured as DuckDB spells it)
            text = ref if family == "text" else f"CAST({ref} AS VARCHAR)"
            items.append(f"max(length({text})), max(strlen({text}))")
    row = cur.execute(f"SELECT {', '.join(items)} FROM {source}").fetchone() or ()
    out: dict[str, tuple[int | None, int | None]] = {}
    for i, (name, _) in enumerate(wanted):
        chars, nbytes = row[2 * i], row[2 * i + 1]
        out[name] = (None if chars is None else int(chars), None if nbytes is None else int(nbytes))
    return out


def cast_hint(name: str, target: TargetColumn, result_type: str = "VARCHAR") -> str:
    """The pipeline change that makes `name` (of `result_type`) fit `target`."""
    ref = quote_ident(name) if not name.isidentifier() else name
    kind = parse_kind(target.type)
    if kind.family == "text" and parse_kind(result_type).family not in ("text", "binary"):
        ref = f"CAST({ref} AS VARCHAR)"
    if kind.family == "text" and kind.length is not None:
        return f"left({ref}, {kind.length})"
    if kind.family in ("text", "binary"):
        return f"a shorter value of {ref}"
    if kind.family in ("timestamp", "time") and kind.digits < 6:
        unit = "second" if kind.digits < 3 else "millisecond"
        zone = "TIMESTAMPTZ" if kind.zoned else "TIMESTAMP"
        base = f"date_trunc('{unit}', {ref})" if kind.family == "timestamp" else ref
        return f"CAST({base} AS {zone if kind.family == 'timestamp' else 'TIME'})"
    if kind.family == "timestamp":
        return f"CAST({ref} AS {'TIMESTAMPTZ' if kind.zoned else 'TIMESTAMP'})"
    if kind.family == "decimal" and kind.precision is not None and kind.precision > 38:
        return f"CAST({ref} AS DECIMAL(38,{min(kind.scale, 38)}))"
    spelled = target.type.upper()
    if spelled.startswith("MEDIUMINT"):
        return f"CAST({ref} AS INTEGER)"
    if spelled.startswith("UMEDIUMINT"):
        return f"CAST({ref} AS UINTEGER)"
    return f"CAST({ref} AS {target.type})"


def refuse_other_columns(
    written: Sequence[tuple[str, str]], targets: dict[str, TargetColumn], request: OutputRequest, what: str
) -> None:
    """PZ0517 when the result's columns do not fit the existing target's: result columns the target lacks,
    or target columns an insert must fill (NOT NULL without a default) that the result lacks. One rule and
    one message for every connector and tier."""
    extra = [(name, kind) for name, kind in written if _match(name, targets) is None]
    present = {name.lower() for name, _ in written}
    needed = [t.name for t in targets.values() if t.required and t.name.lower() not in present]
    if not extra and not needed:
        return
    problems, steps = [], []
    if extra:
        problems.append(
            f"the result has column(s) {', '.join(n for n, _ in extra)} that the existing target does not "
            f"have (it has: {', '.join(targets)})"
        )
        adds = "; ".join(f"ADD COLUMN {n if n.isidentifier() else quote_ident(n)} {k}" for n, k in extra)
        steps.append(f"Leave them out of the pipeline's SELECT, add them to the target ({adds})")
    if needed:
        problems.append(
            f"the result does not have the target's column(s) {', '.join(needed)}, which every written row "
            "must fill (NOT NULL without a default, or a column of the parquet files already there)"
        )
        steps.append(f"select {', '.join(needed)} in the pipeline (or give the target column(s) a default)")
    steps[1:] = [s[0].lower() + s[1:] for s in steps[1:]]
    steps[0] = steps[0][0].upper() + steps[0][1:]
    raise NodeFailure(
        "PZ0517",
        f"{what}: {'; '.join(problems)}; {request.strategy} never changes the target's definition, so "
        f"nothing was written. {', '.join(steps)}, or write with strategy replace",
    )


def check_target(
    cur: duckdb.DuckDBPyConnection, connector: Connector, request: OutputRequest, source: str, what: str
) -> None:
    """The checks against an existing target, before anything is written: column set (PZ0517), then
    narrowing (PZ0515). The connector reports the target's columns once."""
    reported = connector.target_columns(request)
    if not reported:
        return
    targets = {t.name: t for t in reported}
    written = written_columns(cur, request, source)
    refuse_other_columns(written, targets, request, what)
    refuse_narrowing(cur, targets, request, written, source, what)
    refuse_folded_duplicate_keys(cur, targets, request, written, source, what)


_FOLDED = {
    "case": "ignoring case",
    "accents": "ignoring accents",
    "trailing_spaces": "ignoring trailing spaces",
}


def _folded(ref: str, folds: Sequence[str]) -> str:
    """The DuckDB expression that compares `ref` as a target that ignores `folds` does."""
    if "trailing_spaces" in folds:
        ref = f"rtrim({ref}, ' ')"
    if "case" in folds:
        ref = f"lower({ref})"
    if "accents" in folds:
        ref = f"strip_accents({ref})"
    return ref


def refuse_folded_duplicate_keys(
    cur: duckdb.DuckDBPyConnection,
    targets: dict[str, TargetColumn],
    request: OutputRequest,
    written: Sequence[tuple[str, str]],
    source: str,
    what: str,
) -> None:
    """PZ0516 when two rows of a merge's result have keys the existing target compares as equal, though
    they differ (a case-insensitive or PAD SPACE collation, citext, char(n)): the target would fold them
    into one row, one of them lost. The same message as for equal keys."""
    if request.strategy != "merge" or not request.keys:
        return
    kinds = {name.lower(): kind for name, kind in written}
    folded: list[tuple[str, TargetColumn]] = []
    for key in request.keys:
        target = _match(key, targets)
        if target and target.folds and parse_kind(kinds.get(key.lower(), "")).family == "text":
            folded.append((key, target))
    if not folded:
        return
    by_key = {k: t for k, t in folded}
    exprs = [
        _folded(quote_ident(k), by_key[k].folds) if k in by_key else quote_ident(k) for k in request.keys
    ]
    grouped = ", ".join(f"{e} AS {quote_ident(f'__pz_k{i}')}" for i, e in enumerate(exprs))
    repeated = f"SELECT count(*) AS __pz_rows, {grouped} FROM {source} GROUP BY ALL HAVING count(*) > 1"
    if not cur.execute(f"{repeated} LIMIT 1").fetchone():
        return
    total = cur.execute(f"SELECT count(*) FROM ({repeated})").fetchone()
    example_keys = ", ".join(quote_ident(k) for k in request.keys)
    rows = cur.execute(
        f"SELECT {example_keys} FROM {source} WHERE ({', '.join(exprs)}) IN "
        f"(SELECT ({', '.join(quote_ident(f'__pz_k{i}') for i in range(len(exprs)))}) FROM ({repeated}) "
        f"ORDER BY __pz_rows DESC LIMIT 1) ORDER BY ALL LIMIT 3"
    ).fetchall()
    assert total is not None
    shown = " and ".join(
        ", ".join(f"{k} = {_shown(v)}" for k, v in zip(request.keys, row, strict=True)) for row in rows
    )
    how = "; ".join(
        f"{t.name} ({t.native or t.type}) {' and '.join(_FOLDED[f] for f in t.folds)}" for _, t in folded
    )
    raise NodeFailure(
        "PZ0516",
        f"{what}: merge needs one row per key ({', '.join(request.keys)}), but {total[0]} key value(s) "
        f"repeat in the result as the existing target compares keys ({how}), e.g. {shown}; the target "
        "would keep one of them, so nothing was written. Deduplicate the pipeline's result the way the "
        "target compares (e.g. QUALIFY row_number() OVER (PARTITION BY lower(key) ORDER BY …) = 1), or "
        "give the key column a case- and space-sensitive collation",
    )


def refuse_narrowing(
    cur: duckdb.DuckDBPyConnection,
    targets: dict[str, TargetColumn],
    request: OutputRequest,
    written: Sequence[tuple[str, str]],
    source: str,
    what: str,
) -> None:
    """PZ0515 when a result column would lose values in the existing target; nothing is written."""
    pairs = [(name, kind, target) for name, kind in written if (target := _match(name, targets)) is not None]
    lengths = _measure(cur, source, pairs)
    problems = []
    for name, kind, target in pairs:
        chars, nbytes = lengths.get(name, (None, None))
        reason = misfit(
            ResultColumn(name, kind, chars, nbytes),
            Target(target.name, target.type, target.native or target.type, target.max_bytes, target.utc),
        )
        if reason:
            native = target.native or target.type
            problems.append(
                f"column {name} is {kind} in the result but {native} in the target: {reason}; "
                f"write {cast_hint(name, target, kind)} in the pipeline"
            )
    if problems:
        raise NodeFailure(
            "PZ0515",
            f"{what}: the result does not fit the existing target without loss, so nothing was written "
            f"({request.strategy}): " + "; ".join(problems) + ". Cast in the pipeline as shown, or alter "
            "the target column to hold the result's type",
        )


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str) else ("NULL" if value is None else str(value))
    return text if len(text) <= _SHOWN_VALUE else text[: _SHOWN_VALUE - 1] + "…"


def _key_columns(cur: duckdb.DuckDBPyConnection, request: OutputRequest, source: str) -> str | None:
    """The merge's quoted key list, or None when this is no merge or a key column is missing (the
    connector names the missing column)."""
    if request.strategy != "merge" or not request.keys:
        return None
    names = {str(r[0]).lower() for r in cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    if any(k.lower() not in names for k in request.keys):
        return None
    return ", ".join(quote_ident(k) for k in request.keys)


def refuse_null_keys(cur: duckdb.DuckDBPyConnection, request: OutputRequest, source: str, what: str) -> None:
    """PZ0520 when a row of a merge's result has a NULL key column: it would match nothing (or, on some
    connectors, every other NULL); refused the same way on every connector and tier."""
    keys = _key_columns(cur, request, source)
    if keys is None:
        return
    nulls = " OR ".join(f"{quote_ident(k)} IS NULL" for k in request.keys)
    row = cur.execute(f"SELECT {keys} FROM {source} WHERE {nulls} LIMIT 1").fetchone()
    if row is None:
        return
    total = cur.execute(f"SELECT count(*) FROM {source} WHERE {nulls}").fetchone()
    assert total is not None
    example = ", ".join(f"{k} = {_shown(v)}" for k, v in zip(request.keys, row, strict=True))
    raise NodeFailure(
        "PZ0520",
        f"{what}: merge keys ({', '.join(request.keys)}) must not be NULL, but {total[0]} row(s) of the "
        f"result have a NULL key, e.g. {example}; nothing was written. Filter them out (WHERE … IS NOT "
        "NULL) or give them a key (COALESCE) in the pipeline",
    )


def refuse_duplicate_keys(
    cur: duckdb.DuckDBPyConnection, request: OutputRequest, source: str, what: str
) -> None:
    """PZ0516 when two rows of a merge's result share a key (which one should win is not defined)."""
    keys = _key_columns(cur, request, source)
    if keys is None:
        return
    repeated = f"SELECT count(*) AS __pz_rows, {keys} FROM {source} GROUP BY ALL HAVING count(*) > 1"
    # one aggregation pass when every key is unique (the common case); the details only on refusal
    if not cur.execute(f"{repeated} LIMIT 1").fetchone():
        return
    total = cur.execute(f"SELECT count(*) FROM ({repeated})").fetchone()
    row = cur.execute(f"{repeated} ORDER BY __pz_rows DESC, {keys} LIMIT 1").fetchone()
    assert total is not None and row is not None
    example = ", ".join(f"{k} = {_shown(v)}" for k, v in zip(request.keys, row[1:], strict=True))
    raise NodeFailure(
        "PZ0516",
        f"{what}: merge needs one row per key ({', '.join(request.keys)}), but {total[0]} key value(s) "
        f"repeat in the result, e.g. {example} ({row[0]} rows); nothing was written. Deduplicate the "
        "pipeline's result (e.g. QUALIFY row_number() OVER (PARTITION BY the keys ORDER BY …) = 1)",
    )
