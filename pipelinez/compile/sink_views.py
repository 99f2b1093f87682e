"""`strategy: view` outputs: the SQL of the view a sink write creates in its target, and its refusals.

The view's query is its pipeline's query with each ref() rendered as the table (or view) the pipeline it
names writes in the same sink instance, as the target's own SQL names it (`Connector.view_relation`). A view
can read nothing else: a source() dataset, a pipeline that writes into no output of that sink, or an
ephemeral pipeline (which lives nowhere) is PZ0241, naming the pipeline and the relation. A view has no rows
of its own, so keys, on_delete, duplicates and allow_empty on its output are PZ0242, and so is a secret in its
SQL (the view's definition would keep it in the target).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.compile.templating import REF_TOKEN_RE
from pipelinez.config.model import OutputSpec
from pipelinez.connectors import registry
from pipelinez.core.diagnostics import ConnectorHostError, Diagnostic, Place, error
from pipelinez.core.vocabulary import Strategy


@dataclass(frozen=True)
class SinkView:
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
    for src, dataset in info.reads:
        problems.append(
            _outside(where, f"source('{src}', '{dataset}')", "a source dataset is not in the sink", place)
        )
    relations: dict[str, tuple[str, str]] = {}  # ref -> (relation SQL, its sink write node)
    for ref in info.refs:
        read = infos.get(ref)
        if read is None:
            continue  # an unknown ref: tier 2 reported it
        output = next((o for s, o in read.sinks if s == sink.name), None)
        if read.ephemeral or output is None:
            why = "it is ephemeral" if read.ephemeral else f"it writes into no output of sink '{sink.name}'"
            problems.append(_outside(where, f"ref('{ref}')", why, place))
            continue
        relation = cls.view_relation(sink.connection, output, sink.blocks.get(output, {}))
        if relation is None:
            continue  # the connector makes no views: PZ0305 says so
        relations[ref] = (relation, f"{sink.name}.{output}")
    if problems:
        return problems

    def render(query: str) -> str:
        return REF_TOKEN_RE.sub(lambda m: relations[m.group(1)][0], query)

    reads = tuple(dict.fromkeys(node for _, node in relations.values()))
    sql, shown = render(info.query).strip().rstrip(";"), render(info.display_query).strip().rstrip(";")
    if sql != shown:
        return [
            error(
                "PZ0242",
                f"{where}: its SQL holds a secret (an env() declared secret: true), which the view's "
                "definition would keep in the target for anyone who can read it",
                place=place,
            )
        ]
    return SinkView(sql, shown, reads)


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
