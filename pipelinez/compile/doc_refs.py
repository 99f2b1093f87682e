"""Tier 2 of docs/ blocks: every `{% docs %}` block well formed and named once (PZ0125), and every
`{{ doc('name') }}` of every description naming one of them (PZ0124), all reported at once."""

from __future__ import annotations

from collections.abc import Iterator

from pipelinez.config.doc_blocks import collect_doc_blocks, doc_reference_problems, uses_doc
from pipelinez.config.model import Project
from pipelinez.config.positions import JsonPath
from pipelinez.core.diagnostics import Diagnostic


def doc_problems(project: Project) -> list[Diagnostic]:
    blocks, problems = collect_doc_blocks(project.doc_files)
    for text, file, path, what in _descriptions(project):
        if uses_doc(text):
            place = project.locate(file, path, at="value")
            problems += doc_reference_problems(text, blocks, place, what)
    return problems


def _descriptions(project: Project) -> Iterator[tuple[str, str, JsonPath, str]]:
    """(description, file, its JSON path there, what it describes) of every description of the project."""
    for source in project.sources.values():
        for dataset in source.datasets.values():
            at: JsonPath = ("datasets", dataset.name)
            what = f"dataset '{source.name}.{dataset.name}'"
            if dataset.description is not None:
                yield dataset.description, source.file, (*at, "description"), what
            for column, text in dataset.column_docs.items():
                yield text, source.file, (*at, "columns", column, "description"), f"{what}, column '{column}'"
    for sink in project.sinks.values():
        for output in sink.outputs.values():
            if output.description is not None:
                what = f"output '{sink.name}.{output.name}'"
                yield output.description, sink.file, ("outputs", output.name, "description"), what
    for pipeline in project.pipelines.values():
        sidecar = pipeline.sidecar
        if sidecar is None:
            continue
        what = f"pipeline '{pipeline.name}'"
        if sidecar.description is not None:
            yield sidecar.description, sidecar.file, ("description",), what
        for column, text in sidecar.column_docs.items():
            yield text, sidecar.file, ("columns", column, "description"), f"{what}, column '{column}'"
