"""project.yml's `state:` block: where pz remembers things between runs (docs/deploying.md).

Without a block (or with `backend: local`) state stays in the project's `.pz/` folder. Another backend is
found by name (`core.state.registry`); `s3` and `azureblob` are refused (PZ0132, not available yet: a later
lane of issue 23), never silently local. The connection's templates are rendered like a connection block
(secrets from secret env vars); a password written literally is refused (PZ0133).
"""

from __future__ import annotations

from pipelinez.compile.templating import TemplateFailure, Templater
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.json_types import JsonObject
from pipelinez.core.state.registry import GROUP, LATER, available

PROJECT_FILE = "project.yml"
_SECRET_KEYS = ("password", "dsn")


def resolve_state(project: Project, templater: Templater) -> tuple[JsonObject, list[Diagnostic]]:
    """(the block with its real values, its errors); {} for the local `.pz/` folder."""
    block = project.state
    if not block:
        return {}, []
    name = str(block.get("backend") or "local")
    base = ("state",)
    at = project.locate(PROJECT_FILE, (*base, "backend"), at="value")
    if name == "local":
        extra = sorted(set(block) - {"backend"})
        if extra:
            return {}, [
                error(
                    "PZ0133",
                    f"state: backend local takes no other key (found {', '.join(extra)})",
                    place=project.locate(PROJECT_FILE, (*base, extra[0])),
                    next_step="remove the keys, or name the shared backend they are for",
                )
            ]
        return {}, []
    if name in LATER or name not in available():
        later = name in LATER
        return {}, [
            error(
                "PZ0132",
                f"state backend '{name}' is "
                + (
                    "not available yet (object-store state is a later part of issue 23)"
                    if later
                    else "unknown"
                ),
                place=at,
                next_step="use `backend: local` (the .pz/ folder) or `backend: postgres`"
                + ("" if later else f", or install the plugin that registers '{name}' in {GROUP}"),
            )
        ]
    problems = _literal_secrets(project, block)
    # the connection and the schema are templates like any YAML string: `{{ var('schema') }}` sees the
    # run's --var (the compile's values), `{{ env('PZ_STATE_PASSWORD') }}` the environment
    rendered: JsonObject = {"connection": block.get("connection") or {}}
    for key in ("schema", "lease_seconds"):
        if block.get(key) is not None:
            rendered[key] = block[key]
    try:
        real, _display = templater.render_tree(
            rendered,
            PROJECT_FILE,
            project.locate(PROJECT_FILE, base),
            lambda path: project.locate(PROJECT_FILE, (*base, *path), at="value"),
        )
    except TemplateFailure as exc:
        return {}, [*problems, *exc.diagnostics]
    settings: JsonObject = {"backend": name, **real}
    return (settings if not problems else {}), problems


def _literal_secrets(project: Project, block: JsonObject) -> list[Diagnostic]:
    connection = block.get("connection") or {}
    if not isinstance(connection, dict):
        return []
    return [
        error(
            "PZ0133",
            f"state.connection.{key} is written literally in project.yml: a secret must come from a "
            "secret env var",
            place=project.locate(PROJECT_FILE, ("state", "connection", key), at="value"),
            next_step=f"write {key}: \"{{{{ env('PZ_STATE_PASSWORD') }}}}\" and declare the variable under "
            "env: with secret: true",
        )
        for key in _SECRET_KEYS
        if isinstance(connection.get(key), str) and "{{" not in connection[key] and connection[key]
    ]
