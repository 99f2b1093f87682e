"""Unit tests of the tricky cores: registry, policy cascade, graph, pipeline split, templating, errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelinez.compile.graph import ancestors, descendants, find_cycle, topological_order
from pipelinez.compile.pipeline_sql import split_pipeline
from pipelinez.compile.policy import ENGINE_DEFAULT, RetryPolicy, effective_policy
from pipelinez.compile.templating import TemplateFailure, Templater
from pipelinez.compile.values import ResolvedValues, parse_typed, sql_literal
from pipelinez.config.model import RetrySpec
from pipelinez.core import codes
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.redact import Redactor
from pipelinez.core.sqlnames import quote_ident, quote_qualified
from pipelinez.engine import events
from pipelinez.engine.resilience.retry import backoff_delay, retry_delay
from pipelinez.engine.run.failures import NodeFailure


def test_codes_are_well_formed_unique_and_documented() -> None:
    seen = set()
    names: dict[str, str] = {}
    for code in codes.REGISTRY:
        assert codes.CODE_PATTERN.match(code.code), code.code
        assert code.code not in seen
        seen.add(code.code)
        assert code.name not in names, f"{code.code} and {names.get(code.name)} are both {code.name}"
        names[code.name] = code.code
        assert code.name and code.when and code.next_step
    for named in (
        "PZ0112",
        "PZ0113",
        "PZ0120",
        "PZ0201",
        "PZ0206",
        "PZ0208",
        "PZ0214",
        "PZ0223",
        "PZ0224",
        "PZ0225",
        "PZ0226",
        "PZ0227",
        "PZ0312",
        "PZ0313",
        "PZ0412",
        "PZ0501",
        "PZ0502",
        "PZ0503",
        "PZ0504",
        "PZ0506",
    ):
        assert named in codes.BY_CODE
    assert codes.BY_CODE["PZ0207"].retired


def test_error_docs_page_is_generated_from_registry() -> None:
    from pathlib import Path

    page = Path(__file__).parents[2] / "docs" / "errors.md"
    assert page.read_text() == codes.render_markdown(), (
        "regenerate: python -m pipelinez.core.codes > docs/errors.md"
    )


def test_every_diagnostic_and_event_serializes() -> None:
    d = error("PZ0201", "x", place=Place("a.sql", 1, 2))
    assert json.loads(json.dumps(d.to_dict()))["place"] == {"file": "a.sql", "line": 1, "col": 2}
    for cls in (
        events.RunStarted,
        events.NodeStarted,
        events.NodeCompleted,
        events.NodeRetry,
        events.BreakerStateChanged,
        events.WarningEvent,
        events.Note,
        events.RunCompleted,
    ):
        data = cls("run").to_dict()
        assert data["event"] == cls.EVENT and data["run_id"] == "run" and "ts" in data
        json.dumps(data)
    assert (
        events.BreakerStateChanged("r", instance="source:pg", from_state="closed", to_state="open").to_dict()[
            "from"
        ]
        == "closed"
    )


def test_diagnostic_takes_next_step_from_registry() -> None:
    assert Diagnostic("PZ0205", "cycle").next_step == codes.BY_CODE["PZ0205"].next_step


def test_retry_policy_cascade_nearest_wins_per_field() -> None:
    project = RetrySpec(max_attempts=4)
    instance = RetrySpec(base_delay=2.0)
    dataset = RetrySpec(max_attempts=6)
    assert effective_policy([project, instance, dataset]) == RetryPolicy(6, 2.0, 30.0)
    assert effective_policy([None, None]) == ENGINE_DEFAULT
    assert effective_policy([RetrySpec(max_delay=5.0), RetrySpec()]) == RetryPolicy(3, 1.0, 5.0)


def test_backoff_is_capped_jittered_and_floored_by_retry_after() -> None:
    policy = RetryPolicy(5, 1.0, 4.0)
    assert backoff_delay(policy, 1, None, rand=lambda: 1.0) == 1.0
    assert backoff_delay(policy, 10, None, rand=lambda: 1.0) == 4.0
    assert backoff_delay(policy, 3, None, rand=lambda: 0.0) == 0.0
    assert backoff_delay(policy, 1, 3.5, rand=lambda: 0.5) == 3.5  # retry_after floors the wait
    assert backoff_delay(policy, 1, 7.5, rand=lambda: 0.5) == 4.0  # ... up to max_delay, never past it


def test_only_transient_failures_retry_until_attempts_run_out() -> None:
    policy = RetryPolicy(3, 0.0, 0.0)
    transient = NodeFailure("PZ0505", "connection reset", transient=True)
    assert retry_delay(policy, 1, transient) == 0.0
    assert retry_delay(policy, 2, transient) == 0.0
    assert retry_delay(policy, 3, transient) is None  # attempts ran out
    assert retry_delay(RetryPolicy(5, 0.0, 0.0), 1, NodeFailure("PZ0505", "syntax error")) is None
    slow = NodeFailure("PZ0505", "throttled", transient=True, retry_after=9.0)
    assert retry_delay(RetryPolicy(3, 1.0, 2.0), 1, slow, rand=lambda: 1.0) == 2.0  # capped by max_delay
    assert retry_delay(RetryPolicy(3, 1.0, 10.0), 1, slow, rand=lambda: 1.0) == 9.0


def test_graph_order_cycles_and_neighbourhoods() -> None:
    edges = {"a": [], "b": ["a"], "c": ["b"], "d": ["a"]}
    order = topological_order(edges)
    assert sorted(order) == ["a", "b", "c", "d"]
    assert all(order.index(dep) < order.index(n) for n, deps in edges.items() for dep in deps)
    assert topological_order(edges) == order  # stable
    assert find_cycle(edges) is None
    assert find_cycle({"x": ["y"], "y": ["z"], "z": ["x"]}) == ["x", "y", "z", "x"]
    assert descendants(edges, ["a"]) == {"b", "c", "d"}
    assert ancestors(edges, ["c"]) == {"a", "b"}


def test_sink_clauses_split_keeps_line_numbers() -> None:
    text = "-- lead\nINSERT INTO __pz_sink_0__\ninsert  into __pz_sink_1__\nSELECT 1\nFROM t"
    split = split_pipeline(text)
    assert split.sink_indexes == (0, 1)
    assert split.query.count("\n") == text.count("\n")
    assert split.query.splitlines()[3] == "SELECT 1"
    late = split_pipeline("SELECT 1\nUNION ALL SELECT * FROM __pz_sink_0__")
    assert late.misplaced == (0,) and late.sink_indexes == ()


def test_templating_records_calls_with_positions_and_quotes_values() -> None:
    values = ResolvedValues()
    t = Templater(values)
    rendered = t.render_sql(
        "INSERT INTO {{ sink('lake', 'o') }}\nSELECT * FROM {{ source('s', 'd') }}", "p.sql"
    )
    assert [(c.function, c.args, c.place.line, c.place.col) for c in rendered.calls] == [
        ("sink", ("lake", "o"), 1, 13),
        ("source", ("s", "d"), 2, 15),
    ]
    assert '"src_s__d"' in rendered.text
    partial = t.render_sql("SELECT {{ var('nope') }}, {{ env('NOPE') }}, {{ var('nope', 1) }}", "p.sql")
    assert [(d.code, d.place.col) for d in partial.failures] == [("PZ0209", 8), ("PZ0211", 27)]
    assert partial.text == "SELECT NULL, NULL, NULL"
    with pytest.raises(TemplateFailure) as info:
        t.render_sql("SELECT {{ ''.__class__.__mro__ }}", "p.sql")
    assert info.value.diagnostic.code == "PZ0213"


def test_typed_vars_render_as_sql_literals_not_raw_text() -> None:
    assert sql_literal("date", parse_typed("date", "2025-01-31")) == "DATE '2025-01-31'"
    assert sql_literal("string", parse_typed("string", "O'Brien")) == "'O''Brien'"
    assert sql_literal("bool", parse_typed("bool", "yes")) == "TRUE"
    with pytest.raises(ValueError):
        parse_typed("int", "1; DROP TABLE x")


def test_redactor_masks_every_secret() -> None:
    redact = Redactor(("s3cr3t", "pw"))
    assert redact("token=s3cr3t pw") == "token=*** ***"
    assert redact.deep({"a": ["s3cr3t"], "b": 1}) == {"a": ["***"], "b": 1}


def test_redactor_masks_the_credentials_a_connection_string_holds() -> None:
    """Arrow's Azure errors print a SAS's URL (fields reordered, so never the whole SAS or connection
    string); a connection string's key or password can be printed alone too."""
    sas = "sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00%3A00%3A00Z&sig=96c2EygB3P%2FPybbU%3D"
    conn = f"AccountName=acct;AccountKey=a2V5LWJ5dGVz==;SharedAccessSignature={sas};"
    redact = Redactor((conn, "Server=db;Uid=u;Pwd=hunter2-long;"))
    arrow = "http://h/c?se=2099-01-01T00%3A00%3A00Z&sig=96c2EygB3P%2FPybbU%3D&sp=rwdlac&srt=sco&ss=b&sv=2021"
    assert "96c2EygB3P" not in redact(arrow) and "sig=***" in redact(arrow)
    assert redact("decoded: 96c2EygB3P/PybbU=") == "decoded: ***"
    assert redact("key a2V5LWJ5dGVz== and hunter2-long") == "key *** and ***"
    assert redact("sv=2021-08-06 AccountName=acct sp=rwdlac") == "sv=2021-08-06 AccountName=acct sp=rwdlac"


@given(st.text())
def test_identifier_quoting_round_trips(name: str) -> None:
    if "\x00" in name:
        return
    quoted = quote_ident(name)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert quoted[1:-1].replace('""', '"') == name


def test_qualified_names_are_quoted_per_part() -> None:
    assert quote_qualified("analytics.orders") == '"analytics"."orders"'
    assert quote_qualified('"we.ird".t') == '"we.ird"."t"'


@settings(deadline=None)  # a property, not a timing: a loaded machine must not fail it
@given(st.text(max_size=200))
def test_pipeline_split_never_crashes(text: str) -> None:
    split = split_pipeline(text)
    assert split.query.count("\n") == text.count("\n")


def test_node_failure_is_data() -> None:
    failure = NodeFailure("PZ0501", "boom", transient=True)
    assert failure.to_dict() == {"code": "PZ0501", "message": "boom", "transient": True}
    assert dataclasses.is_dataclass(failure)


def test_a_failed_append_records_the_rows_that_landed() -> None:
    from pipelinez.connectors.postgres.sink import AppendFailed
    from pipelinez.engine.run.failures import classify

    exc = AppendFailed(
        "boom", batches_committed=2, rows_committed=2_000_000, is_transient=False, retry_after=None
    )
    failure = classify(exc, "PZ0501", "sink 'wh' output 'events'")
    assert (failure.batches_committed, failure.rows) == (2, 2_000_000)


def test_no_duckdb_connection_of_pz_draws_a_progress_bar() -> None:
    """DuckDB draws a progress bar on stdout for queries over two seconds, into pz's own output lines; pz
    opens every connection through core.duck_connect, which turns it off (cursors inherit it)."""
    import pathlib
    import re

    from pipelinez.core import duck_connect

    con = duck_connect.connect()
    assert con.cursor().sql("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
    package = pathlib.Path(duck_connect.__file__).parents[1]
    direct = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "duck_connect.py" and re.search(r"\bduckdb\.connect\(", path.read_text())
    ]
    assert direct == [], f"connect through pipelinez.core.duck_connect instead: {direct}"


def test_a_stop_signal_of_an_earlier_command_does_not_turn_a_later_error_into_an_interrupt(
    tmp_path: Path,
) -> None:
    """In one process (the Python API, a test worker), a SIGINT that an earlier command took must not make
    every later command's user error read as PZ0514 'run interrupted'."""
    from click.testing import CliRunner

    from pipelinez.cli.main import cli
    from pipelinez.core import stop_signals

    (tmp_path / "project.yml").write_text("name: p\nbogus_key: 1\n")
    stop_signals._received.append("SIGINT")  # what the handler records for a signal an earlier command took
    stop_signals._tripped.set()
    try:
        result = CliRunner().invoke(cli, ["-p", str(tmp_path), "validate"])
    finally:
        stop_signals._received.pop()
        stop_signals._tripped.clear()
    assert "PZ0102" in result.output and "PZ0514" not in result.output, result.output
