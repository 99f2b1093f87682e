"""`strategy: view` outputs: the SQL of the view a sink write creates in its target, and its refusals.

The view's query is its pipeline's query with each ref() rendered as the table (or view) the pipeline it
names writes in the same sink instance, as the target's own SQL names it (`Connector.view_relation`), and each
ephemeral pipeline it reads inlined as a subquery (as staging does). A view can read nothing else: a source()
dataset, a pipeline that writes into no output of that sink, or a table named without ref() or source() (not
a CTE, found on DuckDB's parse tree), also through an ephemeral pipeline, is PZ0241, naming the pipeline and
the relation. A view has no rows of its own, so keys, on_delete, duplicates and
allow_empty on its output are PZ0242, and so is a secret in its SQL (the view's definition would keep it in
the target).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.compile.sql_inputs import bare_tables
from pipelinez.compile.templating import REF_TOKEN_RE, staging_table
from pipelinez.config.model import OutputSpec
from pipelinez.connectors import registry
from pipelinez.core.diagnostics import ConnectorHostError, Diagnostic, Place, error
from pipelinez.core.vocabulary import Strategy


@dataclass(frozen=True)
class SinkView:
    """A view a sink output is made of: its SQL in the target and what it reads."""

    sql: str  # the query in the target, ref() as the target's relations
    display_sql: str  # the same with secrets masked
    reads: tuple[str, ...]  # the sink write nodes ("sink.output") that write the relations it reads


def is_view(spec: OutputSpec | None) -> bool:
    return spec is not None and spec.strategy == Strategy.VIEW


def sink_view(
    pipeline: str,
    infos: Mapping[str, PipelineInfo],
    sink: ResolvedInstance,
    spec: OutputSpec,
    place: Place,
) -> SinkView | list[Diagnostic]:
    """The view output `spec` of `sink` written by `pipeline`, or every reason it cannot be one."""
    info = infos[pipeline]
    try:
        cls = registry.load_class(sink.connector)
        makes_views = Strategy.VIEW in cls.manifest().capabilities.strategies
    except ConnectorHostError:
        makes_views = False  # tier 3 reported the connector
    if not makes_views:
        return SinkView("", "", ())  # the connector makes no views: PZ0305 (tier 3) says so
    where = f"output '{sink.name}.{spec.name}' (strategy: view) of pipeline '{pipeline}'"
    problems = _options(spec, where)
    found = _Reads(infos, sink, cls, where, place)
    found.gather(pipeline)
    problems += found.problems
    if problems:
        return problems
    if found.unnamed:
        return SinkView("", "", ())
    relations, inlined = found.relations, found.inlined

    def render(query: str, display: bool) -> str:
        def one(match: re.Match[str]) -> str:
            ref = match.group(1)
            if ref in relations:
                return relations[ref][0]
            inner = inlined[ref]
            return (
                "(\n"
                + render(inner.display_query if display else inner.query, display).strip().rstrip(";")
                + "\n)"
            )

        return REF_TOKEN_RE.sub(one, query)

    writes = tuple(dict.fromkeys(node for _, node in relations.values()))
    sql = render(info.query, False).strip().rstrip(";")
    shown = render(info.display_query, True).strip().rstrip(";")
    if sql != shown:
        return [
            error(
                "PZ0242",
                f"{where}: its SQL holds a secret (an env() declared secret: true), which the view's "
                "definition would keep in the target for anyone who can read it",
                place=place,
            )
        ]
    return SinkView(sql, shown, writes)


class _Reads:
    """What a view's pipeline reads, and what the ephemeral pipelines it reads read (no cycles: tier 2)."""

    def __init__(
        self, infos: Mapping[str, PipelineInfo], sink: ResolvedInstance, cls: Any, where: str, place: Place
    ):
        self.infos, self.sink, self.cls, self.where, self.place = infos, sink, cls, where, place
        self.relations: dict[str, tuple[str, str]] = {}  # ref -> (relation SQL, its sink write node)
        self.inlined: dict[str, PipelineInfo] = {}  # ephemeral pipelines read: inlined as subqueries
        self.unnamed = False  # an output whose table name is invalid: tier 3 reports it
        self.problems: list[Diagnostic] = []

    def gather(self, pipeline: str) -> None:
        from pipelinez.core.duck_connect import connect

        pending, seen = [pipeline], set()
        con = connect()  # only parses: DuckDB's parse tree names what the query reads
        try:
            while pending:
                name = pending.pop()
                if name not in seen:
                    seen.add(name)
                    self._gather_one(con, name, pipeline, pending)
        finally:
            con.close()

    def _gather_one(self, con: Any, name: str, pipeline: str, pending: list[str]) -> None:
        via = "" if name == pipeline else f" through ephemeral '{name}'"
        self._bare(con, self.infos[name], via)
        for src, dataset in self.infos[name].reads:
            self._outside(f"source('{src}', '{dataset}'){via}", "a source dataset is not in the sink")
        for ref in self.infos[name].refs:
            read = self.infos.get(ref)
            if read is not None and read.ephemeral:
                self.inlined[ref] = read
                pending.append(ref)
            elif read is not None:  # an unknown ref: tier 2 reported it
                self._table(ref, read, via)

    def _bare(self, con: Any, info: PipelineInfo, via: str) -> None:
        """A table named without ref() or source() (nor a CTE's name): the view would read whatever the
        target holds under that name."""
        known = {staging_table(s, d).lower() for s, d in info.reads}
        for name, _ in bare_tables(con, info.query) or []:
            if not REF_TOKEN_RE.fullmatch(name) and name.lower() not in known:
                self._outside(
                    f"table '{name}' by name{via}", "only ref() and source() name what a view reads"
                )

    def _table(self, ref: str, read: PipelineInfo, via: str) -> None:
        output = next((o for s, o in read.sinks if s == self.sink.name), None)
        if output is None:
            self._outside(f"ref('{ref}'){via}", f"it writes into no output of sink '{self.sink.name}'")
            return
        relation = self.cls.view_relation(self.sink.connection, output, self.sink.blocks.get(output, {}))
        self.unnamed = self.unnamed or relation is None
        self.relations[ref] = (relation or "", f"{self.sink.name}.{output}")

    def _outside(self, relation: str, why: str) -> None:
        self.problems.append(_outside(self.where, relation, why, self.place))


def _outside(where: str, relation: str, why: str, place: Place) -> Diagnostic:
    return error(
        "PZ0241",
        f"{where} reads {relation}, which does not live in that sink ({why}): the view could not read it",
        place=place,
    )


def _options(spec: OutputSpec, where: str) -> list[Diagnostic]:
    given = [
        key
        for key, value in (
            ("keys", spec.keys),
            ("on_delete", spec.on_delete),
            ("duplicates", spec.duplicates),
            ("allow_empty", spec.allow_empty),
        )
        if value
    ]
    if not given:
        return []
    return [
        error(
            "PZ0242",
            f"{where} sets {', '.join(given)}: a view has no rows of its own",
            place=spec.place,
        )
    ]
