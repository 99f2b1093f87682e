"""Staging on shared storage: project.yml's `engine.staging` block.

`url` says where the staging is when neither `--staging` nor `PZ_STAGING_URL` does (a folder, or
s3://bucket/prefix: the ray executor's staging, or the local executor's shared staging). An s3:// URL names
the bucket; the rest of the block says where it is and how to sign in, with the keys of the `s3` connector's
connection block (`endpoint`, `region`, `url_style`, `use_ssl`, `access_key_id`,
`secret_access_key`, `session_token`; no `bucket`). Its templates are rendered like a connection block (the
secret ones from secret env vars, so every printed rendering masks them) and it is checked with the s3
connector's own rules (keys that go together, a secret written literally, an endpoint's scheme): PZ0711 at
the key, before anything runs, whichever executor the run uses.
"""

from __future__ import annotations

from pipelinez.compile.connector_static import coerce
from pipelinez.compile.templating import TemplateFailure, Templater
from pipelinez.config.model import Project
from pipelinez.config.schema_defs import STAGING
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.json_types import JsonObject

PROJECT_FILE = "project.yml"


URL_KEY = "url"  # where the staging is; checked as a location when a run uses it (engine.run.executor_choice)


def store_settings(settings: JsonObject) -> JsonObject:
    """The block's keys of the s3 connector's connection block: all but `url`."""
    return {k: v for k, v in settings.items() if k != URL_KEY}


def resolve_staging(project: Project, templater: Templater) -> tuple[JsonObject, list[Diagnostic]]:
    """(the block's real values, its errors). Empty without a block: an s3:// staging is then read and
    written anonymously (a public bucket; the write probe before the run says when that is refused)."""
    block = project.engine.staging
    if not block:
        return {}, []
    base = ("engine", "staging")
    try:
        real, display = templater.render_tree(
            block,
            PROJECT_FILE,
            project.locate(PROJECT_FILE, base),
            lambda path: project.locate(PROJECT_FILE, (*base, *path), at="value"),  # each value's own place
        )
    except TemplateFailure as exc:
        return {}, list(exc.diagnostics)
    from pipelinez.connectors.sdk_objstore import store_connection_issues  # only with engine.staging

    real, display = coerce(STAGING, real), coerce(STAGING, display)
    diags = [
        error(
            "PZ0711",
            f"engine.staging: {issue.message}",
            place=project.locate(PROJECT_FILE, (*base, *issue.path)),
            next_step="fix engine.staging in project.yml (the keys of the s3 connector's connection block, "
            "without bucket: the bucket is the --staging URL's)",
        )
        for issue in store_connection_issues("s3", store_settings(display))
    ]
    return real, diags
