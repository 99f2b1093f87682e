"""Which executor runs a run's nodes, and where a distributed run stages its data: from the command line
(`--executor`, `--staging`) or the environment (`PZ_EXECUTOR`, `PZ_STAGING_URL`; `RAY_ADDRESS` names the
cluster). Nothing here touches the project files: the same project runs on either executor.

- `local` (the default): a pool of threads in the pz process sharing one staging database. Given a staging
  location, it also publishes each source load there (shared staging), so `pz retry` on another worker
  reuses the loads (see `engine/run/shared_publish.py`).
- `ray`: the pz process stays the driver (validation, plan, ids, lock, scheduling, retries, breakers, events,
  watermarks) and each node runs as one Ray task, staging its result as Parquet under the staging URL.

A staging location is a folder (a path or a `file://` URL, local or a shared mount) or an `s3://bucket/prefix`
URL (its endpoint and credentials: the `engine.staging` block of project.yml, see `shared_staging`).

A setting that cannot be honoured is refused before anything runs (PZ0711), never ignored: an unknown
executor, a malformed s3:// URL, or a staging URL whose scheme is not available (gs://, az://, ...).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from pipelinez.core.diagnostics import PzConfigError, error
from pipelinez.core.vocabulary import ExecutorKind

LOCAL = ExecutorKind.LOCAL
RAY = ExecutorKind.RAY
EXECUTORS = (LOCAL, RAY)
STAGING_DIR = "staging"  # the default staging folder of a ray run: <project>/.pz/staging
S3 = "s3"
OBJECT_STORE_SCHEMES = ("s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https", "hdfs")  # not available
# an S3 bucket name: 3-63 lowercase letters, digits, dots and hyphens, starting and ending alnum
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class ExecutorChoice:
    kind: ExecutorKind = LOCAL
    # where staged tables are published: an absolute folder or s3://bucket/prefix; always set for ray, and
    # for local only when asked (shared staging for a retry on another worker)
    staging: str | None = None
    address: str | None = None  # the Ray cluster (RAY_ADDRESS); None: start a local Ray instance
    # the staging was named (a flag, the environment, the run a retry finishes), not a default: project.yml's
    # engine.staging.url does not replace it
    named: bool = field(default=False, compare=False)

    @property
    def is_ray(self) -> bool:
        return self.kind == RAY


def _refuse(message: str, where: str, next_step: str = "") -> PzConfigError:
    return PzConfigError([error("PZ0711", message, file=where, next_step=next_step)])


def is_object_store(location: str) -> bool:
    """Whether a staging location (as `staging_location` returns it) is an object store URL."""
    return location.startswith(f"{S3}://")


def staging_location(url: str, where: str) -> str:
    """A staging URL as a location: an absolute folder (a path, or a file:// URL; local or a shared mount),
    or `s3://bucket/prefix` (normalized: no trailing slash). Other object stores are refused with PZ0711
    (not available), never silently staged somewhere else."""
    text = url.strip()
    if not text:
        raise _refuse("the staging URL is empty", where)
    parsed = urlparse(text)
    scheme = parsed.scheme.lower()
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise _refuse(
                f"staging URL {_shown(text)!r}: a file:// URL names a folder of this machine", where
            )
        return str(Path(unquote(parsed.path)).resolve())
    if scheme == S3:
        return _s3_location(text, where)
    if scheme in OBJECT_STORE_SCHEMES:
        raise _refuse(
            f"staging URL {_shown(text)!r}: {scheme}:// staging is not available; pz stages on a local "
            "or shared folder, or on S3 (s3://bucket/prefix)",
            where,
            "use s3://bucket/prefix (any S3-compatible store), or a folder every worker mounts "
            "(a path or file://...), e.g. --staging /mnt/shared/pz-staging",
        )
    if scheme and len(scheme) > 1:  # a Windows drive letter parses as a one-letter scheme
        raise _refuse(f"staging URL {_shown(text)!r}: unknown scheme {scheme}://", where)
    return str(Path(text).expanduser().resolve())


def _shown(text: str) -> str:
    """A URL as messages may show it: without user info (which could hold a credential)."""
    parsed = urlparse(text)
    if "@" not in parsed.netloc:
        return text
    return parsed._replace(netloc="***@" + parsed.netloc.rsplit("@", 1)[1]).geturl()


def _s3_location(text: str, where: str) -> str:
    """`s3://bucket/prefix`, checked: a valid bucket name, a clean prefix, nothing else in the URL."""
    parsed = urlparse(text)
    shown = _shown(text)
    settings = "endpoint, region and credentials go in project.yml's engine.staging block"
    if "@" in parsed.netloc or parsed.query or parsed.params or parsed.fragment:
        raise _refuse(
            f"staging URL {shown!r}: an s3:// staging URL is s3://bucket/prefix, with no user, query or "
            "fragment",
            where,
            f"write --staging s3://bucket/prefix; {settings} (secrets from secret env vars)",
        )
    bucket = parsed.netloc
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise _refuse(
            f"staging URL {shown!r}: {bucket!r} is not an S3 bucket name (3-63 lowercase letters, digits, "
            "dots and hyphens)",
            where,
            "write --staging s3://bucket/prefix with the bucket's name",
        )
    segments = [seg for seg in unquote(parsed.path).split("/") if seg]
    bad = [seg for seg in segments if seg in (".", "..") or seg.startswith(".") or "\x00" in seg]
    if bad:
        raise _refuse(
            f"staging URL {shown!r}: the prefix segment {bad[0]!r} cannot be used (object keys have no "
            "parent folders, and pz hides its own temporary objects under names starting with '.')",
            where,
            "write --staging s3://bucket/prefix with plain prefix segments",
        )
    return "/".join([f"{S3}://{bucket}", *segments])


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
        shared = _local_staging(url, url_where, default)
        return ExecutorChoice(LOCAL, shared, named=shared is not None)
    address = env.get("RAY_ADDRESS", "").strip() or None
    if url is not None:
        return ExecutorChoice(RAY, staging_location(url, url_where), address, named=True)
    if default is not None and default.staging is not None:
        return ExecutorChoice(RAY, default.staging, address, named=True)
    return ExecutorChoice(RAY, str(state_dir.resolve() / STAGING_DIR), address)


PROJECT_URL = "project.yml engine.staging.url"


def with_project_staging(choice: ExecutorChoice, settings: Mapping[str, object]) -> ExecutorChoice:
    """`choice` with project.yml's engine.staging.url (`settings`: the rendered block) as its staging, when
    neither a flag, the environment nor the run a retry finishes named one. PZ0711 for a URL it can't use."""
    url = settings.get("url")
    if choice.named or not isinstance(url, str) or not url.strip():
        return choice
    return dataclasses.replace(choice, staging=staging_location(url, PROJECT_URL), named=True)


def _local_staging(url: str | None, where: str, default: ExecutorChoice | None) -> str | None:
    """The local executor's shared staging: the URL given, else that of the local run a retry finishes
    (it published there), else none (the run stages only in its staging.duckdb)."""
    if url is not None:
        return staging_location(url, where)
    if default is not None and default.kind == LOCAL:
        return default.staging
    return None
