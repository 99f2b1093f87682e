"""`pz show` and `pz test`: run part of the graph on a throwaway staging database, through the run's own
executor, and write nothing that lasts: no sink write is planned, no watermark is committed, no run is
recorded, no project lock is taken. The staging database lives in a temporary folder under .pz that is
removed at the end."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.graph import ancestors
from pipelinez.compile.nodes import CheckNode, PipelineNode, SinkWriteNode
from pipelinez.config.suggest import did_you_mean
from pipelinez.core.diagnostics import Diagnostic, PzError, PzValidationError, error
from pipelinez.core.sqlnames import quote_ident
from pipelinez.core.vocabulary import RunCommand, RunStatus
from pipelinez.engine.events import EventBus, utc_now
from pipelinez.engine.run.context import RunContext, close_staging, open_staging
from pipelinez.engine.run.executor import OK_STATUSES, Executor
from pipelinez.engine.run.prepare import validate
from pipelinez.engine.state.run_results import NodeResult, ResultsWriter, RunArgs, RunResults
from pipelinez.plan.planner import plan_named
from pipelinez.plan.selection import match_nodes, nothing_selected


@dataclass(frozen=True)
class Preview:
    """`pz show`: the first `limit` rows of a pipeline's query, or why they could not be computed."""

    pipeline: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    nodes: tuple[NodeResult, ...]  # the inputs loaded (and upstream pipelines and checks run) first
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def failed(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status not in OK_STATUSES]


@dataclass(frozen=True)
class ChecksOutcome:
    """`pz test`: every check that ran (and what it needed), nothing written."""

    nodes: tuple[NodeResult, ...]
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def checks(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.kind == "check"]

    @property
    def exit_code(self) -> int:
        return 0 if all(n.status in OK_STATUSES for n in self.nodes) else 1


def compiled(
    root: Path, overrides: Mapping[str, str] | None, environ: Mapping[str, str] | None
) -> tuple[CompiledDag, list[Diagnostic]]:
    """The valid project's graph and its warnings; PzValidationError with every error otherwise."""
    checked = validate(root, overrides, environ)
    if checked.errors or checked.compiled is None or checked.compiled.dag is None:
        raise PzValidationError([*checked.errors, *checked.warnings])
    return checked.compiled.dag, checked.warnings


@contextlib.contextmanager
def _executed(
    dag: CompiledDag, names: set[str], command: RunCommand
) -> Iterator[tuple[RunContext, RunResults]]:
    """Run `names` (closed over ancestors, no sink writes) on a fresh staging database in a temporary folder
    under .pz; the folder and everything in it is gone when the block ends, however it ends."""
    state = dag.project.state_dir
    state.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="preview-", dir=state) as scratch:
        folder = Path(scratch)
        plan = plan_named(dag, sorted(names), [command])
        results = RunResults(f"{command}-preview", command, utc_now(), [command], RunArgs())
        results.nodes = [NodeResult(p.node.id, p.node.name, p.node.kind) for p in plan.nodes]
        staging = open_staging(folder / "staging.duckdb", dag.project.engine.memory_limit)
        ctx = RunContext(results.run_id, folder, plan, EventBus(dag.redactor), staging)
        try:
            writer = ResultsWriter(folder / "run_results.json", results, dag.redactor)
            threads = dag.project.engine.threads or os.cpu_count() or 1
            Executor(ctx, writer, threads, dag.project.engine.fail_fast).run()  # captures: never committed
            ok = all(n.status in OK_STATUSES for n in results.nodes)
            results.status = RunStatus.SUCCESS if ok else RunStatus.FAILED
            yield ctx, results
        finally:
            ctx.close()
            close_staging(staging)


def _needed(dag: CompiledDag, names: set[str]) -> set[str]:
    closed = names | ancestors(dag.edges, sorted(names))
    return {n for n in closed if not isinstance(dag.nodes[n], SinkWriteNode)}


def _not_a_pipeline(dag: CompiledDag, name: str) -> PzError:
    pipelines = [n for n, node in dag.nodes.items() if isinstance(node, PipelineNode)]
    return PzError(
        [
            error(
                "PZ0253",
                f"'{name}' is no pipeline of the project{did_you_mean(name, pipelines)}",
                file="command line",
            )
        ]
    )


def show(
    root: Path,
    pipeline: str,
    limit: int,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Preview:
    """Load what `pipeline` reads into a throwaway staging database, then run its query for `limit` rows."""
    dag, warnings = compiled(root, overrides, environ)
    node = dag.nodes.get(pipeline)
    if not isinstance(node, PipelineNode):
        raise _not_a_pipeline(dag, pipeline)
    with _executed(dag, _needed(dag, set(node.deps)), RunCommand.SHOW) as (ctx, results):
        if results.status != RunStatus.SUCCESS:
            return Preview(pipeline, (), (), tuple(results.nodes), tuple(warnings))
        columns, rows = _rows(ctx, node, limit)
    return Preview(pipeline, columns, rows, tuple(results.nodes), tuple(warnings))


def _rows(
    ctx: RunContext, node: PipelineNode, limit: int
) -> tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]:
    from pipelinez.engine.nodes.node_runners import refuse_outside_reads
    from pipelinez.engine.run.failures import classify

    cur = ctx.cursor()
    query = node.sql.rstrip().rstrip(";")
    try:
        refuse_outside_reads(cur, node.sql, node.work.external_access, f"pipeline '{node.name}'")
        # the query on lines of its own: a comment on its last line must not swallow the parenthesis
        cur.execute(f"SELECT * FROM (\n{query}\n) AS {quote_ident('pz_show')} LIMIT {int(limit)}")
        columns = tuple(d[0] for d in cur.description or ())
        return columns, tuple(tuple(row) for row in cur.fetchall())
    except Exception as exc:
        failure = classify(exc, "PZ0507", f"pipeline '{node.name}' ({node.place.file})")
        raise PzError([error(failure.code, failure.message, node=node.name)]) from exc
    finally:
        ctx.release(cur)


def run_checks(
    root: Path,
    select: Sequence[str],
    exclude: Sequence[str],
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ChecksOutcome:
    """Run the selected checks (every check without a selection; the checks of every selected node) and
    what they need, sinks left out."""
    dag, warnings = compiled(root, overrides, environ)
    chosen, diags = match_nodes(dag, select, exclude)
    errors = [d for d in diags if d.is_error]
    if errors:
        raise PzValidationError([*errors, *warnings])
    checks = {  # as dbt's indirect selection: a selected node brings its checks
        n
        for n, node in dag.nodes.items()
        if isinstance(node, CheckNode) and (n in chosen or node.target in chosen)
    }
    warnings = [*warnings, *diags]
    if not checks:
        return ChecksOutcome((), (*warnings, nothing_selected()))
    with _executed(dag, _needed(dag, checks), RunCommand.TEST) as (_ctx, results):
        return ChecksOutcome(tuple(results.nodes), tuple(warnings))


__all__ = ["ChecksOutcome", "Preview", "run_checks", "show"]
