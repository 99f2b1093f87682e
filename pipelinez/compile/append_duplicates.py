"""What an incremental dataset (either route) may feed, through any chain of pipelines:

- PZ0214: an `append` output is refused unless it says `duplicates: accept`. An incremental read re-sends rows
  whenever a run is retried after a partial append, or `lag:` (or a watermark() lookback such as
  `- INTERVAL 1 HOUR`) re-reads an overlap, or `--full-refresh` reads everything again; replace and merge
  absorb that, append does not.
- PZ0231: a `replace` output (also one with no entry in its sink file) is refused: each run reads only the
  delta, so the target would hold the last delta alone (and an empty delta fails PZ0509). There is no opt-in:
  merge keeps the whole table current, append accumulates it, and a table of "what the last run read" is a
  full read of a query that says so.

One pass over the pipelines in dependency order: each pipeline remembers one incremental dataset that feeds it
(and through which pipeline), so the cost is linear in the project.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pipelinez.compile.graph import ordered_and_left
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.vocabulary import DEFAULT_STRATEGY, Strategy

Key = tuple[str, str]


def yaml_incremental(project: Project) -> set[Key]:
    """Datasets whose YAML says `sync: { mode: incremental }`."""
    return {
        (s_name, d_name)
        for s_name, source in project.sources.items()
        for d_name, dataset in source.datasets.items()
        if (dataset.sync or {}).get("mode") == "incremental"
    }


def check_incremental_outputs(
    project: Project, infos: Mapping[str, PipelineInfo], incremental: Collection[Key]
) -> list[Diagnostic]:
    if not incremental:
        return []
    wanted = set(incremental)
    edges = {n: [r for r in i.refs if r in infos] for n, i in infos.items()}
    # pipeline -> (the incremental dataset feeding it, the pipeline it arrives through or None)
    fed: dict[str, tuple[Key, str | None]] = {}
    # pipelines on a ref() cycle are PZ0205 (tier 2), reported there: this rule looks at the others
    for name in ordered_and_left(edges)[0]:
        info = infos[name]
        direct = sorted(k for k in info.reads if k in wanted)
        if direct:
            fed[name] = (direct[0], None)
            continue
        upstream = next((r for r in sorted(edges[name]) if r in fed), None)
        if upstream is not None:
            fed[name] = (fed[upstream][0], upstream)
    diags = []
    for name in sorted(fed):
        info = infos[name]
        for (sink, output), place in zip(info.sinks, info.sink_places, strict=True):
            spec = project.sinks.get(sink)
            if spec is None:
                continue  # an unknown sink: PZ0201 already
            out = spec.outputs.get(output)
            (src, ds), _ = fed[name]
            chain = _chain(fed, name)
            route = f"source('{src}', '{ds}')" + "".join(f" -> {p}" for p in chain)
            strategy = out.strategy if out is not None else DEFAULT_STRATEGY
            if strategy == Strategy.REPLACE:
                diags.append(
                    error(
                        "PZ0231",
                        f"sink '{sink}' output '{output}' replaces its target with what pipeline '{name}' "
                        f"computes from incremental source '{src}' dataset '{ds}' ({route}): each run "
                        "reads only the rows past the watermark, so the target would hold the last delta "
                        "alone (and an empty delta would fail)",
                        place=project.locate(spec.file, ("outputs", output, "strategy"))
                        if out is not None and out.declared
                        else place,
                        next_step=f"give output '{output}' in {spec.file} strategy: merge with keys: "
                        "(or strategy: append with duplicates: accept), or read "
                        f"'{src}.{ds}' in full (remove its sync: incremental or its watermark() comparison)",
                    )
                )
                continue
            if out is None or out.strategy != "append" or out.duplicates == "accept":
                continue
            diags.append(
                error(
                    "PZ0214",
                    f"sink '{sink}' output '{output}' appends what pipeline '{name}' computes from "
                    f"incremental source '{src}' dataset '{ds}' ({route}): a retried write or a re-read "
                    "overlap would append the same rows again",
                    place=project.locate(spec.file, ("outputs", output, "strategy")),
                    next_step=f"add duplicates: accept to output '{output}' in {spec.file} if repeated rows "
                    "are acceptable there, or use strategy: merge with keys:",
                )
            )
    return diags


def _chain(fed: Mapping[str, tuple[Key, str | None]], name: str) -> list[str]:
    """The pipelines from the one that reads the dataset down to `name`."""
    chain = [name]
    through = fed[name][1]
    while through is not None:
        chain.append(through)
        through = fed[through][1]
    return list(reversed(chain))
