"""Loading a project: find its root, read every file, run tier 1 (shape) on each, and build the `Project`.

Every diagnostic of every file is collected; the Project is built only when there is no error.
Nothing is rendered here: `{{ env() }}`/`{{ var() }}` templates stay as written for the compile layer.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pipelinez.config.budget import budget_problems
from pipelinez.config.build import build_settings, build_sidecar, build_sink, build_source
from pipelinez.config.checks import duplicate_check_names
from pipelinez.config.discovery import (
    PROJECT_FILE,
    ProjectFiles,
    Snapshot,
    broken_link,
    discover,
    split_ext,
)
from pipelinez.config.folders import folder_problems, with_defaults
from pipelinez.config.model import PipelineSource, Project, SidecarSpec, SingularTest
from pipelinez.config.parse_cache import PARSED, ParseCache
from pipelinez.config.positions import Positions
from pipelinez.config.shape import validate_shape
from pipelinez.config.shape_memo import ShapeMemo
from pipelinez.config.textfile import MAX_FILE_BYTES, decode_text, read_text
from pipelinez.config.yaml_doc import YamlDoc
from pipelinez.core.diagnostics import Diagnostic, PzConfigError, error, sort_diagnostics
from pipelinez.core.sqlnames import is_name

T = TypeVar("T")


def find_project_root(start: Path) -> Path:
    """The nearest folder from `start` upwards holding project.yml; PzConfigError (PZ0105) if none."""
    here = start.expanduser().resolve()
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
        link = broken_link(folder, folder / PROJECT_FILE)
        if link:  # the project is here, its project.yml leads nowhere: say so, don't look further up
            raise PzConfigError([link])
    raise PzConfigError([_no_project(start)])


def load_project(
    root: Path,
    *,
    partial: bool = False,
    snapshot: Snapshot | None = None,
    parsed: ParseCache | None = None,
) -> tuple[Project | None, list[Diagnostic]]:
    """Read and shape-check every file of the project at `root`.

    Returns the Project (None when any error was found) and every diagnostic, sorted by file and position.
    With `partial`, a project whose project.yml is sound is returned even when other files have errors: it
    holds the files that passed tier 1, and `Project.broken` names the sources and sinks that did not, so
    later tiers can still check everything else (a later tier runs only where the earlier ones passed).
    `snapshot`: the files as a content key found and read them (loaded from it, not read again); `parsed`:
    the YAML files parsed before, by content (`parse_cache`), saved with what this load parsed.
    """
    root = root.expanduser().resolve()
    if snapshot is not None and snapshot.files.root != root:
        snapshot = None
    files = snapshot.files if snapshot is not None else discover(root)
    if not files.project.is_file():
        return None, [_no_project(root)]
    memo = ShapeMemo(root)
    loaded = _Loading(files, partial=partial, snapshot=snapshot, parsed=parsed, memo=memo).run()
    if parsed is not None:
        parsed.save()
    memo.save()
    return loaded


def _no_project(where: Path) -> Diagnostic:
    message = f"no {PROJECT_FILE} in {where} or any folder above it"
    if (where / "project.yaml").is_file():
        message = f"{where} has project.yaml; pz reads project.yml"
    return error("PZ0105", message)


@dataclass
class _Loading:
    """One load of a project: its files, and the diagnostics and positions gathered so far."""

    files: ProjectFiles
    partial: bool = False
    diagnostics: list[Diagnostic] = field(default_factory=list)
    positions: dict[str, Positions] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)  # "source:<name>" / "sink:<name>" that failed tier 1
    snapshot: Snapshot | None = None
    parsed: ParseCache | None = None
    memo: ShapeMemo | None = None  # the schema checks passed before (`config.shape_memo`)

    def run(self) -> tuple[Project | None, list[Diagnostic]]:
        self.diagnostics += self.files.problems
        settings = self._yaml(self.files.project, "project", build_settings)
        sources = self._instances(self.files.sources, "source", build_source)
        sinks = self._instances(self.files.sinks, "sink", build_sink)
        folders = settings.folders if settings else {}
        pipelines = self._pipelines()
        pipelines = with_defaults(pipelines, folders)
        self.diagnostics += folder_problems(self.files.root, folders, sinks, self.broken)
        if settings is not None:
            self.diagnostics += budget_problems(settings.engine, self.positions.get(PROJECT_FILE))
        doc_files = self._texts(self.files.docs)
        macro_files = self._texts(self.files.macros)
        singular_tests = self._singular_tests()
        for source in sources.values():
            for dataset in source.datasets.values():
                self.diagnostics += duplicate_check_names(
                    dataset.checks, f"dataset '{source.name}.{dataset.name}'"
                )
        for pipeline in pipelines.values():
            if pipeline.sidecar is not None:
                self.diagnostics += duplicate_check_names(
                    pipeline.sidecar.checks, f"pipeline '{pipeline.name}'"
                )

        found = sort_diagnostics(self.diagnostics)
        if settings is None or (any(d.is_error for d in found) and not self.partial):
            return None, found
        project = Project(
            root=self.files.root,
            name=settings.name,
            vars=settings.vars,
            env=settings.env,
            connector_pins=settings.connector_pins,
            engine=settings.engine,
            keep_last=settings.keep_last,
            state=settings.state,
            sources=sources,
            sinks=sinks,
            pipelines=pipelines,
            positions=dict(sorted(self.positions.items())),
            broken=frozenset(self.broken),
            doc_files=doc_files,
            singular_tests=singular_tests,
            macro_files=macro_files,
            folders=folders,
        )
        return project, found

    # --- YAML files ------------------------------------------------------------------------------

    def _read(self, path: Path, file: str) -> tuple[str | None, list[Diagnostic]]:
        """A project file's text: from the snapshot when it holds the file's bytes."""
        raw = self.snapshot.contents.get(path) if self.snapshot is not None else None
        if raw is not None and len(raw) <= MAX_FILE_BYTES:
            return decode_text(raw, file)
        if self.snapshot is not None:
            self.snapshot.read_elsewhere = True
        return read_text(path, file)

    def _yaml(self, path: Path, kind: str, build: Callable[[YamlDoc], T]) -> T | None:
        """Parse and shape-check one file (or take it from the parse cache); its spec when the file itself
        has no error."""
        file = self.files.rel(path)
        text, problems = self._read(path, file)
        if text is None:
            self.diagnostics += problems
            return None
        key = ParseCache.key(kind, file, text) if self.parsed is not None else ""
        cached = self.parsed.get(key, file) if self.parsed is not None else None
        if cached is not None:
            self.positions[cached.file] = cached.positions
            return build(cached)
        PARSED[file] += 1
        from pipelinez.config.yaml_loader import parse_yaml  # the parser: only for a file not in the cache

        doc, problems = parse_yaml(text, file)
        if doc is None:
            self.diagnostics += problems
            return None
        self.positions[doc.file] = doc.positions
        problems = validate_shape(doc, kind, self.memo)
        self.diagnostics += problems
        if problems:
            return None
        if self.parsed is not None:
            self.parsed.put(key, doc)
        return build(doc)

    def _instances(self, paths: list[Path], kind: str, build: Callable[[YamlDoc], T]) -> dict[str, T]:
        specs: dict[str, T] = {}
        for name, group in _by_stem(paths).items():
            self._check_name(name, group[0], kind)
            self._check_unique(name, group, f"{kind} instance")
            spec = self._yaml(group[0], kind, build)
            for extra in group[1:]:
                self._yaml(extra, kind, build)
            if spec is not None:
                specs[name] = spec
            else:
                self.broken.add(f"{kind}:{name}")
        return dict(sorted(specs.items()))

    # --- pipelines and sidecars ---------------------------------------------------------------------

    def _pipelines(self) -> dict[str, PipelineSource]:
        sidecars = self._sidecars()
        pipelines: dict[str, PipelineSource] = {}
        for name, group in _by_stem(self.files.pipelines).items():
            self._check_name(name, group[0], "pipeline")
            self._check_unique(name, group, "pipeline")
            for sql in group:
                file = self.files.rel(sql)
                text, problems = self._read(sql, file)
                self.diagnostics += problems
                if text is not None and sql is group[0]:
                    sidecar = sidecars.get(_base(sql)) if sidecars else None
                    pipelines[name] = PipelineSource(name, file, text, sidecar)
        return dict(sorted(pipelines.items()))

    def _sidecars(self) -> dict[str, SidecarSpec | None]:
        """Sidecars keyed by the path of their pipeline without suffix, as text (`_base`: no Path built per
        file), None when the sidecar had errors."""
        if not self.files.sidecars:
            return {}
        sql_bases = {_base(sql) for sql in self.files.pipelines}
        by_base: dict[str, list[Path]] = defaultdict(list)
        for path in self.files.sidecars:
            by_base[_base(path)].append(path)
        specs: dict[str, SidecarSpec | None] = {}
        for base, group in sorted(by_base.items(), key=lambda item: Path(item[0])):
            if len(group) > 1:
                self._error(
                    "PZ0204",
                    group[1],
                    f"pipeline '{os.path.basename(base)}' has two sidecars: "
                    f"{self.files.rel(group[0])} and {self.files.rel(group[1])}",
                    "keep one sidecar per pipeline (.yml)",
                )
            if base not in sql_bases:
                self._error(
                    "PZ0109",
                    group[0],
                    f"sidecar {self.files.rel(group[0])} has no pipeline: "
                    f"there is no {self.files.rel(Path(base + '.sql'))}",
                )
            for path in group:
                spec = self._yaml(path, "sidecar", build_sidecar)
                specs.setdefault(base, spec)
        return specs

    # --- tests/ ---------------------------------------------------------------------------------------

    def _singular_tests(self) -> dict[str, SingularTest]:
        """tests/**/*.sql by file stem: each a query that must return no rows."""
        tests: dict[str, SingularTest] = {}
        for name, group in _by_stem(self.files.tests).items():
            self._check_name(name, group[0], "singular test")
            self._check_unique(name, group, "singular test")
            file = self.files.rel(group[0])
            text, problems = self._read(group[0], file)
            self.diagnostics += problems
            if text is not None:
                tests[name] = SingularTest(name, file, text)
        return tests

    # --- docs/ and macros/ ----------------------------------------------------------------------------

    def _texts(self, paths: list[Path]) -> dict[str, str]:
        """The text of each docs/**/*.md (parsed for `{% docs %}` blocks in tier 2) or macros/**/*.sql."""
        texts: dict[str, str] = {}
        for path in paths:
            file = self.files.rel(path)
            text, problems = self._read(path, file)
            self.diagnostics += problems
            if text is not None:
                texts[file] = text
        return texts

    # --- names ---------------------------------------------------------------------------------------

    def _check_name(self, name: str, path: Path, what: str) -> None:
        """PZ0107 when `name` (the stem of `path`) is not a name."""
        if not is_name(name):
            self._error(
                "PZ0107",
                path,
                f"'{name}' ({self.files.rel(path)}) is not a valid {what} name: "
                "use letters, digits and _, not starting with a digit",
            )

    def _check_unique(self, name: str, group: list[Path], what: str) -> None:
        if len(group) < 2:
            return
        first = self.files.rel(group[0])
        for other in group[1:]:
            self._error(
                "PZ0204",
                other,
                f"{what} name '{name}' is used by two files: {first} and {self.files.rel(other)}",
            )

    def _error(self, code: str, path: Path, message: str, next_step: str = "") -> None:
        self.diagnostics.append(error(code, message, file=self.files.rel(path), next_step=next_step))


def _by_stem(paths: list[Path]) -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(paths):
        groups[split_ext(os.path.basename(path))[0]].append(path)  # `path.stem`, without a Path
    return dict(sorted(groups.items()))


def _base(path: Path) -> str:
    """`path` without its suffix, as text: `path.with_suffix("")` without building a Path."""
    return split_ext(os.fspath(path))[0]
