"""PZ0214: an incremental dataset (either route) that feeds an `append` output, through any chain of
pipelines, is refused unless the output says `duplicates: accept`.

An incremental read re-sends rows whenever a run is retried after a partial append, or `lag:` re-reads an
overlap, or `--full-refresh` reads everything again; replace and merge absorb that, append does not. One pass
over the pipelines in dependency order: each pipeline remembers one incremental dataset that feeds it (and
through which pipeline), so the cost is linear in the project.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pipelinez.compile.graph import ordered_and_left
from pipelinez.compile.semantic import PipelineInfo
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, error

Key = tuple[str, str]


def yaml_incremental(project: Project) -> set[Key]:
    """Datasets whose YAML says `sync: { mode: incremental }`."""
    return {
        (s_name, d_name)
        for s_name, source in project.sources.items()
        for d_name, dataset in source.datasets.items()
        if (dataset.sync or {}).get("mode") == "incremental"
    }


def check_append_duplicates(
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
            out = spec.outputs.get(output) if spec is not None else None
            if out is None or out.strategy != "append" or out.duplicates == "accept":
                continue
            (src, ds), _ = fed[name]
            chain = _chain(fed, name)
            route = f"source('{src}', '{ds}')" + "".join(f" -> {p}" for p in chain)
            diags.append(
                error(
                    "PZ0214",
                    f"sink '{sink}' output '{output}' appends what pipeline '{name}' computes from "
                    f"incremental source '{src}' dataset '{ds}' ({route}): a retried write or a re-read "
                    "overlap would append the same rows again",
                    place=project.locate(spec.file, ("outputs", output, "strategy")) if spec else place,
                    next_step=f"add duplicates: accept to output '{output}' in "
                    f"{spec.file if spec else 'its sink'} if repeated rows are acceptable there, or use "
                    "strategy: merge with keys:",
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
