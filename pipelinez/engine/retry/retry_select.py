"""What `pz retry` does with the last run: the smallest amount of work that finishes it.

Rules ("Retry without starting over"):
- select every node that failed, was skipped because something upstream failed, or was cancelled, matched by
  content-hash id; an edited node is not "the node that failed" and is reported as changed;
- add whatever those nodes depend on, and the checks of every pipeline that runs (pipelines and checks always
  re-run);
- a source load that succeeded last time is copied from the failed run's staging (checked at run time); one
  that failed part-way resumes past its landed partitions;
- a sink write that committed last time, downstream of a selected source, is carried forward only when every
  node between it and its sources succeeded last time and is unchanged, and every source load feeding it is
  being reused; otherwise it runs again (and so do its ancestors). Its other source loads are taken along
  for reuse first when they succeeded last time: a local copy is cheaper than writing the sink again;
- a pipeline that calls a volatile function (`random()`, `now()`, `uuid()`, `current_timestamp`) computes
  other rows when it re-runs, so a sink write downstream of one is never carried forward: it runs again,
  with a note saying why, and so gets the same rows as its sibling sinks.
`--full-refresh` turns reuse and carry-forward off. This module decides; nothing here runs or prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.graph import ancestors, descendants
from pipelinez.compile.ids import id_parts
from pipelinez.compile.nodes import CheckNode, PipelineNode, SinkWriteNode, SourceLoadNode
from pipelinez.compile.volatility import volatile_calls
from pipelinez.core.vocabulary import NodeKind, NodeStatus, Provenance
from pipelinez.engine.staging.staging_store import Reuse, StagedLoad, StagedPart, StagingStore
from pipelinez.engine.state.run_results import NodeResult, RunResults

FULL_PASS = "run 'pz run' for a full pass if needed"
UNFINISHED = frozenset(
    {NodeStatus.FAILED, NodeStatus.SKIPPED, NodeStatus.CANCELLED, NodeStatus.PENDING, NodeStatus.RUNNING}
)
COMMITTED = frozenset({NodeStatus.SUCCESS, NodeStatus.CARRIED_FORWARD})


@dataclass
class RetrySelection:
    """The retry of run `retry_of`: what runs, what is reused, what is carried forward, and why not."""

    retry_of: str
    run: list[str] = field(default_factory=list)  # node names to run, in dependency order
    reuse: dict[str, Reuse] = field(default_factory=dict)  # source loads taking the failed run's staging
    carried: list[NodeResult] = field(default_factory=list)  # sink writes carried forward
    fallbacks: dict[str, str] = field(default_factory=dict)  # source load -> why it is extracted again
    changed: list[str] = field(default_factory=list)  # edited nodes that were to be retried (notes)
    removed: list[str] = field(default_factory=list)  # nodes to retry that are no longer in the project
    why_changed: dict[str, str] = field(default_factory=dict)  # changed node -> " (only its connection …)"
    order: list[str] = field(default_factory=list)  # run and carried nodes, in dependency order
    left_alone: list[str] = field(default_factory=list)  # committed, edited since: neither carried nor run
    volatile: dict[str, str] = field(default_factory=dict)  # committed sink write -> why it runs again

    @property
    def nothing(self) -> bool:
        return not self.run

    def steps(self) -> list[tuple[str, str, str]]:
        """(action, node, detail) for every node the retry touches, in run order: `reuse`, `resume`,
        `extract` (a reuse that falls back), `run`, `carry forward`. What `pz retry --dry-run` prints."""
        carried = {c.name: c for c in self.carried}
        out: list[tuple[str, str, str]] = []
        for name in self.order:
            if name in carried:
                c = carried[name]
                out.append(("carry forward", name, f"{c.rows} rows committed by run {c.reused_from}"))
            elif name in self.reuse and self.reuse[name].whole:
                staged = self.reuse[name].staged
                out.append(("reuse", name, f"{staged.rows} rows staged by run {staged.run_id}"))
            elif name in self.reuse:
                staged = self.reuse[name].staged
                out.append(
                    ("resume", name, f"past {len(staged.parts)} partition(s) landed in run {staged.run_id}")
                )
            elif name in self.fallbacks:
                out.append(("extract", name, f"cannot reuse: {self.fallbacks[name]}"))
            elif name in self.volatile:
                out.append(("run", name, f"not carried forward: {self.volatile[name]}"))
            else:
                out.append(("run", name, ""))
        return out

    def notes(self) -> list[str]:
        """The notes a retry prints before its nodes, in the words of "Retry without starting over"."""
        notes = [
            f"{n} changed since the failed run{self.why_changed.get(n, '')}; {FULL_PASS}"
            for n in self.changed
        ]
        notes += [
            f"{n} is no longer in the project; run 'pz run' for a full pass if needed" for n in self.removed
        ]
        notes += [
            f"{n} changed since the failed run: its earlier commit is not carried forward and the retry does "
            "not run it; run 'pz run' for a full pass if needed"
            for n in self.left_alone
        ]
        if self.run:
            notes += [
                f"cannot reuse staged data for {n} from run {self.retry_of}: {why}; extracting it again"
                for n, why in self.fallbacks.items()
            ]
            whole = [r for r in self.reuse.values() if r.whole]
            if whole:
                notes.append(f"reusing staged data for {len(whole)} source load(s) from run {self.retry_of}")
            notes += [
                f"{n} runs again rather than being carried forward: {why}" for n, why in self.volatile.items()
            ]
            for name, r in self.reuse.items():
                if not r.whole:
                    notes.append(
                        f"resuming {name} past {len(r.staged.parts)} partition(s) that landed in run "
                        f"{self.retry_of}"
                    )
            writers: dict[str, int] = {}
            for c in self.carried:  # named by the run that wrote them, as their reused_from says
                writers[c.reused_from or self.retry_of] = writers.get(c.reused_from or self.retry_of, 0) + 1
            for run_id, count in writers.items():
                notes.append(f"carrying forward {count} committed sink write(s) from run {run_id}")
        return notes


def select_retry(
    last: RunResults, dag: CompiledDag, store: StagingStore, full_refresh: bool = False
) -> RetrySelection:
    sel = RetrySelection(last.run_id)
    old = {n.name: n for n in last.nodes}
    edges = dag.edges
    pending = [n for n in last.nodes if n.status in UNFINISHED]
    chosen = {n.name for n in pending if n.name in dag.nodes and dag.nodes[n.name].id == n.id}
    _report_changes(sel, last, dag, [n.name for n in pending if n.name not in chosen])
    if not chosen:
        return sel
    reuse: dict[str, Reuse] = {}
    carried: dict[str, NodeResult] = {}
    volatile = _Volatility(dag)
    while True:
        chosen |= ancestors(edges, sorted(chosen))
        chosen |= _checks_of(dag, chosen)
        for name in sorted(chosen):
            if name not in reuse and name not in sel.fallbacks and not full_refresh:
                _plan_reuse(sel, reuse, store, last.run_id, name, dag, old.get(name))
        candidates = _carry_candidates(dag, chosen, old)
        pulled = set() if full_refresh else _reusable_loads_feeding(candidates, dag, old, chosen)
        if pulled:  # copying a load is cheaper than writing a sink again: take it, then decide
            chosen |= pulled
            continue
        carried.clear()
        grew = False
        for name in candidates:
            why = volatile.why_not_carried(name)
            if why is not None:
                sel.volatile[name] = why
                chosen.add(name)
                grew = True
            elif _may_carry(name, dag, old, reuse):
                carried[name] = _carried(old[name], last.run_id)
            else:
                chosen.add(name)  # it runs again, with its ancestors
                grew = True
        if not grew:
            break
    sel.run = [n for n in dag.nodes if n in chosen]
    sel.reuse = {n: r for n, r in reuse.items() if n in chosen}
    sel.carried = [carried[n] for n in dag.nodes if n in carried]
    sel.order = [n for n in dag.nodes if n in chosen or n in carried]
    below = descendants(edges, sorted(n for n in chosen if isinstance(dag.nodes[n], SourceLoadNode)))
    sel.left_alone = [
        n
        for n in dag.nodes
        if n in below
        and n not in chosen
        and isinstance(dag.nodes[n], SinkWriteNode)
        and n in old
        and old[n].id != dag.nodes[n].id
        and old[n].status in COMMITTED
    ]
    return sel


def _report_changes(sel: RetrySelection, last: RunResults, dag: CompiledDag, unmatched: list[str]) -> None:
    """Name the edited nodes at the root of each unmatched node's change ("Retry without starting over" names
    the pipeline that was edited, not every node whose id changed with it)."""
    old_ids = {n.name: n.id for n in last.nodes}
    edited = {n for n, node in dag.nodes.items() if n in old_ids and node.id != old_ids[n]}
    roots: list[str] = []
    for name in unmatched:
        if name not in dag.nodes:
            sel.removed.append(name)
            continue
        lineage = ancestors(dag.edges, [name]) | {name}
        for n in lineage:
            node_deps = dag.nodes[n].deps
            if n in edited and not any(d in edited for d in node_deps) and n not in roots:
                roots.append(n)
        if not any(n in edited for n in lineage) and name not in roots:
            roots.append(name)  # its own change left no trace upstream (e.g. an input was added)
    sel.changed = [n for n in dag.nodes if n in roots]
    before = {n.name: n.id_parts for n in last.nodes}
    for n in sel.changed:
        old_parts, new_parts = before.get(n), id_parts(dag.nodes[n])
        if old_parts is None:
            continue
        differ = {k for k in old_parts.keys() | new_parts.keys() if old_parts.get(k) != new_parts.get(k)}
        if differ and all(k.endswith(".connection_identity") for k in differ):
            sel.why_changed[n] = (
                " (only its connection changed: where it points (host, port, database, path, bucket), not "
                "how pz signs in)"
            )


class _Volatility:
    """Which pipelines upstream of a sink write call volatile functions (parsed once per retry, only for the
    pipelines above a write that could be carried forward)."""

    def __init__(self, dag: CompiledDag):
        self.dag = dag
        self.calls: dict[str, tuple[str, ...]] = {}

    def why_not_carried(self, sink: str) -> str | None:
        """Why `sink`'s earlier commit cannot stand for this retry, or None."""
        above = ancestors(self.dag.edges, [sink])
        pipelines = [n for n in self.dag.nodes if n in above and self._is_pipeline(n)]
        unknown = [n for n in pipelines if n not in self.calls]
        if unknown:
            sqls = [self._sql(n) for n in unknown]
            self.calls.update(zip(unknown, volatile_calls(sqls), strict=True))
        found = [(n, self.calls[n]) for n in pipelines if self.calls[n]]
        if not found:
            return None
        named = "; ".join(f"pipeline {n} calls {', '.join(calls)}" for n, calls in found)
        return (
            f"{named}, so it computes other rows on every run and the earlier commit would not match what "
            "the other sinks get now"
        )

    def _is_pipeline(self, name: str) -> bool:
        return isinstance(self.dag.nodes[name], PipelineNode)

    def _sql(self, name: str) -> str:
        node = self.dag.nodes[name]
        assert isinstance(node, PipelineNode)
        return node.work.sql


def _checks_of(dag: CompiledDag, chosen: set[str]) -> set[str]:
    """The checks of every chosen pipeline or source load: checks always re-run with what they check."""
    return {
        name
        for name, node in dag.nodes.items()
        if isinstance(node, CheckNode) and node.target in chosen and set(node.deps) <= chosen | {node.target}
    }


def _plan_reuse(
    sel: RetrySelection,
    reuse: dict[str, Reuse],
    store: StagingStore,
    run_id: str,
    name: str,
    dag: CompiledDag,
    before: NodeResult | None,
) -> None:
    node = dag.nodes[name]
    if not isinstance(node, SourceLoadNode) or before is None or before.id != node.id:
        return
    if before.status in (NodeStatus.SUCCESS, NodeStatus.WARN):
        staged = StagedLoad(run_id, node.table, before.rows)
        whole = True
    elif before.status == NodeStatus.FAILED and before.partitions:
        parts = tuple(
            StagedPart(p.index, p.rows, p.fingerprint, node.part_table(p.index))
            for p in before.partitions
            if p.status == NodeStatus.SUCCESS
            and p.fingerprint
            and store.unusable(StagedLoad(run_id, node.part_table(p.index), p.rows)) is None
        )
        if not parts:
            return
        staged, whole = StagedLoad(run_id, node.table, before.rows, parts), False
        reuse[name] = Reuse(store, staged, whole)
        return
    else:
        return
    why = store.unusable(staged)
    if why is not None:
        sel.fallbacks[name] = why
        return
    reuse[name] = Reuse(store, staged, whole, before.watermark if whole else None)


def _reusable_loads_feeding(
    sinks: list[str], dag: CompiledDag, old: dict[str, NodeResult], chosen: set[str]
) -> set[str]:
    """Source loads feeding `sinks` that are not chosen yet but succeeded last time, unchanged."""
    return {
        up
        for up in ancestors(dag.edges, sinks)
        if up not in chosen
        and isinstance(dag.nodes[up], SourceLoadNode)
        and up in old
        and old[up].id == dag.nodes[up].id
        and old[up].status == NodeStatus.SUCCESS
    }


def _carry_candidates(dag: CompiledDag, chosen: set[str], old: dict[str, NodeResult]) -> list[str]:
    """Committed sink writes of the last run, unchanged, not chosen, downstream of a chosen source load."""
    loads = sorted(n for n in chosen if isinstance(dag.nodes[n], SourceLoadNode))
    below = descendants(dag.edges, loads)
    return [
        n
        for n in dag.nodes
        if n in below
        and n not in chosen
        and isinstance(dag.nodes[n], SinkWriteNode)
        and n in old
        and old[n].id == dag.nodes[n].id
        and old[n].status in COMMITTED
    ]


def _may_carry(name: str, dag: CompiledDag, old: dict[str, NodeResult], reuse: dict[str, Reuse]) -> bool:
    """The two conditions of "Retry without starting over": every node between the sink and its sources
    succeeded last time and is unchanged (an id hashes the node and its inputs' ids, so an equal id vouches
    for the whole lineage), and every source load feeding it is being reused whole from the failed run's
    staging."""
    was_carried = old[name].status == NodeStatus.CARRIED_FORWARD
    for up in ancestors(dag.edges, [name]):
        before = old.get(up)
        if before is None:
            if not was_carried:  # a carried write's lineage may have stayed out of the last run
                return False
            if isinstance(dag.nodes[up], SourceLoadNode):
                return False  # and then its sources are not being reused from it
            continue
        if before.id != dag.nodes[up].id or before.status not in COMMITTED | {NodeStatus.WARN}:
            return False
        if isinstance(dag.nodes[up], SourceLoadNode) and not (up in reuse and reuse[up].whole):
            return False
    return True


def _carried(before: NodeResult, run_id: str) -> NodeResult:
    """The new run's record of a write carried forward: the rows of the run that wrote it."""
    wrote = before.reused_from if before.provenance == Provenance.CARRIED_FORWARD else run_id
    return NodeResult(
        id=before.id,
        name=before.name,
        kind=NodeKind.SINK_WRITE,
        status=NodeStatus.CARRIED_FORWARD,
        rows=before.rows,
        tier=before.tier,
        provenance=Provenance.CARRIED_FORWARD,
        reused_from=wrote or run_id,
        batches_committed=before.batches_committed,
        id_parts=before.id_parts,
        description=before.description,
    )
