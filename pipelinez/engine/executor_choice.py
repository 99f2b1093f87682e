"""Which executor runs a run's nodes, and where a distributed run stages its data: from the command line
(`--executor`, `--staging`) or the environment (`PZ_EXECUTOR`, `PZ_STAGING_URL`; `RAY_ADDRESS` names the
cluster). Nothing here touches the project files: the same project runs on either executor.

- `local` (the default): a pool of threads in the pz process sharing one staging database.
- `ray`: the pz process stays the driver (validation, plan, ids, lock, scheduling, retries, breakers, events,
  watermarks) and each node runs as one Ray task, staging its result as Parquet under the staging URL.

A setting that cannot be honoured is refused before anything runs (PZ0711), never ignored: an unknown
executor, `--staging` with the local executor, or a staging URL whose scheme is not available yet.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from pipelinez.core.diagnostics import PzConfigError, error

LOCAL = "local"
RAY = "ray"
EXECUTORS = (LOCAL, RAY)
STAGING_DIR = "staging"  # the default staging folder of a ray run: <project>/.pz/staging
OBJECT_STORE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https", "hdfs")


@dataclass(frozen=True)
class ExecutorChoice:
    kind: str = LOCAL
    staging: Path | None = None  # the ray executor's staging folder (absolute); None for local
    address: str | None = None  # the Ray cluster (RAY_ADDRESS); None: start a local Ray instance

    @property
    def is_ray(self) -> bool:
        return self.kind == RAY


def _refuse(message: str, where: str, next_step: str = "") -> PzConfigError:
    return PzConfigError([error("PZ0711", message, file=where, next_step=next_step)])


def staging_folder(url: str, where: str) -> Path:
    """A staging URL as a local (or shared-mount) folder: a path, or a file:// URL. Object stores are refused
    with PZ0711 (not available yet), never silently staged somewhere else."""
    text = url.strip()
    if not text:
        raise _refuse("the staging URL is empty", where)
    parsed = urlparse(text)
    scheme = parsed.scheme.lower()
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise _refuse(f"staging URL {text!r}: a file:// URL names a folder of this machine", where)
        return Path(unquote(parsed.path)).resolve()
    if scheme in OBJECT_STORE_SCHEMES:
        raise _refuse(
            f"staging URL {text!r}: {scheme}:// staging is not available yet; the ray executor stages on "
            "a local or shared folder",
            where,
            "use a folder every Ray node mounts (a path or file://...), "
            "e.g. --staging /mnt/shared/pz-staging",
        )
    if scheme and len(scheme) > 1:  # a Windows drive letter parses as a one-letter scheme
        raise _refuse(f"staging URL {text!r}: unknown scheme {scheme}://", where)
    return Path(text).expanduser().resolve()


def choose_executor(
    executor: str | None,
    staging: str | None,
    environ: Mapping[str, str] | None,
    state_dir: Path,
    *,
    default: ExecutorChoice | None = None,
) -> ExecutorChoice:
    """The executor of a run: flags first, then PZ_EXECUTOR / PZ_STAGING_URL, then `default` (a retry: the
    executor of the run it finishes), then local. Raises PzConfigError (PZ0711) for a setting it can't use."""
    env = os.environ if environ is None else environ
    where = "command line"
    kind = executor
    if kind is None and env.get("PZ_EXECUTOR", "").strip():
        kind, where = env["PZ_EXECUTOR"].strip().lower(), "environment PZ_EXECUTOR"
    if kind is None:
        kind = default.kind if default else LOCAL
    if kind not in EXECUTORS:
        raise _refuse(f"unknown executor {kind!r}", where, "use local or ray")
    url, url_where = staging, "command line"
    if url is None and env.get("PZ_STAGING_URL", "").strip():
        url, url_where = env["PZ_STAGING_URL"], "environment PZ_STAGING_URL"
    if kind == LOCAL:
        if staging is not None:
            raise _refuse(
                "--staging is a setting of the ray executor; the local executor stages in "
                ".pz/runs/<run-id>/staging.duckdb",
                "command line",
                "add --executor ray, or leave --staging out",
            )
        return ExecutorChoice(LOCAL)
    if url is not None:
        folder = staging_folder(url, url_where)
    elif default is not None and default.staging is not None:
        folder = default.staging
    else:
        folder = state_dir.resolve() / STAGING_DIR
    address = env.get("RAY_ADDRESS", "").strip() or None
    return ExecutorChoice(RAY, folder, address)
