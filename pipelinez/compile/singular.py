"""Singular tests (dbt's): `tests/**/*.sql`, each a query that must return no rows.

A singular test is rendered like a pipeline (source(), ref(), var(), env() and macros), but writes nowhere
(no sink(), no watermark()). It becomes the check node `chk_test__<file stem>`, which runs after every
pipeline and source load it reads, gates nothing (no pipeline or sink write waits for it) and fails when its
query returns rows; the number of rows is its failure count.
"""

from __future__ import annotations

from pipelinez.compile.pipeline_sql import has_query, split_pipeline
from pipelinez.compile.semantic import PipelineInfo, call_problem
from pipelinez.compile.templating import TemplateFailure, Templater
from pipelinez.config.model import CheckSpec, PipelineSource, Project, SingularTest
from pipelinez.core.diagnostics import Diagnostic, Place, error
from pipelinez.core.vocabulary import CheckSeverity

PREFIX = "test__"  # a singular test's check name; its node is chk_test__<stem>
_NOT_HERE = ("sink", "watermark")


def singular_key(name: str) -> str:
    """The key of a singular test among pipeline infos and check names: `test__<stem>`."""
    return f"{PREFIX}{name}"


def analyse_singular(
    project: Project, templater: Templater
) -> tuple[dict[str, PipelineInfo], list[Diagnostic]]:
    """(each singular test that rendered with nothing wrong, by `test__<stem>`; every error found)."""
    infos: dict[str, PipelineInfo] = {}
    errors: list[Diagnostic] = []
    for name, test in sorted(project.singular_tests.items()):
        found, info = _analyse(project, templater, test)
        errors += found
        if info is not None and not found:
            infos[singular_key(name)] = info
    return infos, errors


def _analyse(
    project: Project, templater: Templater, test: SingularTest
) -> tuple[list[Diagnostic], PipelineInfo | None]:
    try:
        rendered = templater.render_sql(test.text, test.file)
    except TemplateFailure as exc:
        return list(exc.diagnostics), None
    errors = list(rendered.failures)
    for call in rendered.calls:
        if call.function in _NOT_HERE:
            errors.append(
                error(
                    "PZ0245",
                    f"singular test '{test.name}' calls {call.function}(): a test only reads, it writes "
                    "nothing and reads no watermark",
                    place=call.place,
                    next_step="remove the call; read with source() and ref() only",
                )
            )
        problem = call_problem(project, call)
        if problem:
            errors.append(problem)
    split = split_pipeline(rendered.text)
    display = split if rendered.display_text is rendered.text else split_pipeline(rendered.display_text)
    if not has_query(split.query):
        errors.append(
            error(
                "PZ0246",
                f"singular test '{test.name}' holds no query",
                file=test.file,
                next_step="write a SELECT returning the rows that break the rule (none: the test passes)",
            )
        )
    source = PipelineSource(singular_key(test.name), test.file, test.text, None)
    info = PipelineInfo(source, rendered, _unterminated(split.query), _unterminated(display.query))
    info.reads = list(dict.fromkeys((c.args[0], c.args[1]) for c in rendered.of("source")))
    info.refs = list(dict.fromkeys(c.args[0] for c in rendered.of("ref")))
    return errors, info


def _unterminated(query: str) -> str:
    query = query.rstrip()
    return query[:-1] if query.endswith(";") else query


def singular_check(info: PipelineInfo) -> CheckSpec:
    """The check a singular test runs as (type `singular`, named `test__<stem>`, at its file)."""
    return CheckSpec(
        "singular", {"file": info.source.file}, CheckSeverity.ERROR, info.name, Place(info.source.file)
    )


def singular_sql(query: str) -> str:
    """The check query: the test's rows counted (failing, observed)."""
    return f"SELECT count(*)::BIGINT, NULL::VARCHAR FROM (\n{query}\n) AS __pz_singular"
