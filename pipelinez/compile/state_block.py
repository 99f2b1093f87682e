"""project.yml's `state:` block: where pz remembers things between runs (docs/deploying.md).

Without a block (or with `backend: local`) state stays in the project's `.pz/` folder. Another backend is
found by name (`core.state.registry`), never silently local. The connection's templates are rendered like a
connection block (secrets from secret env vars); a secret written literally is refused (PZ0133). The object
stores (`s3`, `azureblob`, `state_objstore`) take a `url` and their connector's connection keys.
"""

from __future__ import annotations

from pipelinez.compile.templating import TemplateFailure, Templater
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.json_types import JsonObject
from pipelinez.core.state.registry import GROUP, available

PROJECT_FILE = "project.yml"
OBJECT_STORE_BACKENDS = ("s3", "azureblob")  # compile.state_objstore resolves their blocks
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
    if name not in available():
        return {}, [
            error(
                "PZ0132",
                f"state backend '{name}' is unknown",
                place=at,
                next_step="use `backend: local` (the .pz/ folder), `postgres`, `s3` or `azureblob`, or "
                f"install the plugin that registers '{name}' in {GROUP}",
            )
        ]
    if name in OBJECT_STORE_BACKENDS:
        from pipelinez.compile.state_objstore import resolve_object_store  # only for such a block

        return resolve_object_store(project, templater, name)
    problems = _literal_secrets(project, block)
    if "url" in block:
        problems.append(
            error(
                "PZ0133",
                f"state: backend {name} takes no url (that is for s3 and azureblob)",
                place=project.locate(PROJECT_FILE, (*base, "url")),
                next_step="remove url, or name the object-store backend it is for",
            )
        )
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
