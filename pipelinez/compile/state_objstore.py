"""The `state:` block of an object-store backend: `backend: s3 | azureblob`, `url:` (`s3://bucket/prefix`,
`az://container/prefix`), `connection:` (the store connector's connection keys without the bucket or
container, which the url names) and `lease_seconds`.

The url and the connection are rendered like a connection block (secrets from secret env vars, so every
printed rendering masks them), then checked before anything runs: the url's form and the connection's keys
against the connector's manifest schema and its own rules (keys that go together, an endpoint's scheme) are
PZ0134 at the key; a secret written literally is PZ0133.
"""

from __future__ import annotations

from typing import Any

from pipelinez.compile.connector_static import coerce
from pipelinez.compile.templating import TemplateFailure, Templater
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.json_types import JsonObject

PROJECT_FILE = "project.yml"
OBJECT_STORES = {"s3": ("s3", "bucket"), "azureblob": ("az", "container")}  # backend -> (url scheme, root)
_KEYS = {"backend", "url", "connection", "lease_seconds"}


def resolve_object_store(
    project: Project, templater: Templater, name: str
) -> tuple[JsonObject, list[Diagnostic]]:
    """(the rendered settings, their errors) of an s3 or azureblob `state:` block."""
    block = project.state
    scheme, kind = OBJECT_STORES[name]
    problems = [
        _problem(project, (key,), f"state: backend {name} takes no key '{key}'", "remove it")
        for key in sorted(set(block) - _KEYS)
    ]
    try:
        url, _ = templater.render_value(
            str(block.get("url") or ""),
            PROJECT_FILE,
            project.locate(PROJECT_FILE, ("state", "url"), at="value"),
        )
        real, display = templater.render_tree(
            block.get("connection") or {},
            PROJECT_FILE,
            project.locate(PROJECT_FILE, ("state", "connection")),
            lambda path: project.locate(PROJECT_FILE, ("state", "connection", *path), at="value"),
        )
    except TemplateFailure as exc:
        return {}, [*problems, *exc.diagnostics]
    root = _url_root(url, scheme)
    if root is None:
        problems.append(
            _problem(
                project,
                ("url",),
                f"state.url '{url}' is not {scheme}://<{kind}>/<prefix>" if url else "state.url is missing",
                f"write url: {scheme}://<{kind}>/<prefix> (the {kind} must exist; pz never creates one)",
            )
        )
    if not isinstance(real, dict) or not isinstance(display, dict):
        problems.append(_problem(project, ("connection",), "state.connection is not a mapping", "fix it"))
        return {}, problems
    if kind in real:
        problems.append(
            _problem(
                project,
                ("connection", kind),
                f"state.connection.{kind}: the url names the {kind}",
                "remove it",
            )
        )
    problems += _connection_problems(project, name, kind, root or "root", real, display)
    if problems:
        return {}, problems
    settings: JsonObject = {"backend": name, "url": url, "connection": _coerced(name, real)}
    if block.get("lease_seconds") is not None:
        settings["lease_seconds"] = block["lease_seconds"]
    return settings, []


def _url_root(url: str, scheme: str) -> str | None:
    head = f"{scheme}://"
    if not url.startswith(head) or "?" in url or "#" in url:
        return None
    root = url[len(head) :].split("/", 1)[0]
    return root or None


def _connection_problems(
    project: Project, name: str, kind: str, root: str, real: dict[str, Any], display: dict[str, Any]
) -> list[Diagnostic]:
    """The connection's keys against the connector's manifest schema and its own rules."""
    from jsonschema import Draft202012Validator

    from pipelinez.connectors import registry
    from pipelinez.connectors.sdk_objstore import store_connection_issues  # only with an object store

    schema = registry.manifest_of(name).connection_schema
    problems = []
    for err in Draft202012Validator(schema).iter_errors(coerce(schema, {**display, kind: root})):
        key = str(err.absolute_path[0]) if err.absolute_path else ""
        problems.append(
            _problem(
                project,
                ("connection", key) if key else ("connection",),
                f"state.connection{'.' + key if key else ''}: {err.message}",
                f"use the {name} connector's connection keys (docs/deploying.md), without {kind}",
            )
        )
    for issue in store_connection_issues(name, {**display, kind: root}):
        literal = "secret environment variable" in issue.message
        problems.append(
            _problem(
                project,
                ("connection", *issue.path),
                f"state.connection: {issue.message}",
                "write the secret as \"{{ env('NAME') }}\" and declare NAME under env: with secret: true"
                if literal
                else "fix state.connection in project.yml",
                code="PZ0133" if literal else "PZ0134",
            )
        )
    return problems


def _coerced(name: str, real: dict[str, Any]) -> Any:
    from pipelinez.connectors import registry

    return coerce(registry.manifest_of(name).connection_schema, real)


def _problem(
    project: Project, path: tuple[str, ...], message: str, next_step: str, code: str = "PZ0134"
) -> Diagnostic:
    return error(code, message, place=project.locate(PROJECT_FILE, ("state", *path)), next_step=next_step)
