"""Promoting a blob with Azure's asynchronous Copy Blob, which has no size cap within one storage account
(pyarrow's copy is the synchronous Copy Blob From URL: 256 MiB of source at most), such that a copy that
does not succeed leaves its destination as it was.

Copy Blob may finish before it answers (usual within one account) or later (status `pending`); pz then
polls Get Blob Properties with a backoff (0.2 s doubling to 5 s) for at most `wait_limit()` seconds and
aborts a copy still pending after that. While a copy is pending its destination holds neither the old nor
the new content, and a copy that fails or is aborted leaves the destination empty. So a copy over an
existing blob first snapshots it (a snapshot shares the blob's blocks: no data moves), and:
- the copy succeeded: the snapshot is deleted;
- the copy failed, was aborted, timed out, or pz stopped waiting for any other reason (an error, an
  interrupt): the destination is put back by a Copy Blob of the snapshot over its base blob, then the
  snapshot is deleted; a destination that did not exist before is deleted;
- the service refused to start the copy: nothing changed; the snapshot is deleted.
A write killed while a copy is pending leaves the copy to finish on its own and the snapshot behind.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

from pipelinez.connectors.azureblob.rest import AzureRestError, BlobRest, CopyState
from pipelinez.connectors.files.rest import TRANSIENT_STATUS
from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError

WAIT_ENV = "PZ_AZURE_COPY_WAIT_SECONDS"
DEFAULT_WAIT = 3600.0  # seconds one copy may stay pending
FIRST_DELAY, MAX_DELAY = 0.2, 5.0
_TRANSIENT_COPY_FAILURES = ("408", "429", "500", "502", "503", "504")


def wait_limit() -> float:
    """How long (seconds) pz waits for one pending copy: PZ_AZURE_COPY_WAIT_SECONDS, else one hour."""
    text = os.environ.get(WAIT_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_WAIT
    return value if value >= 0 else DEFAULT_WAIT


def copy_blob(rest: BlobRest, source: str, dest: str, uri: Callable[[str], str]) -> None:
    """Copy the blob `source` over `dest` (names in `rest`'s container) server-side; when the copy does not
    succeed, `dest` is put back as it was and the error names it (`uri` gives a blob's display name)."""
    snapshot = rest.snapshot(dest)
    try:
        state = rest.start_copy(rest.url(source), dest)
    except AzureRestError as exc:
        if exc.status is not None and exc.status not in TRANSIENT_STATUS:  # refused: nothing changed
            _drop_snapshot(rest, dest, snapshot)
        else:  # no answer, or a server-side failure: the copy may have started
            _put_back(rest, dest, snapshot, str(exc), uri)
        raise
    try:
        failpoints.hit("azure.copy_started")
        state = wait_for_copy(rest, dest, state)
    except BaseException as exc:
        _put_back(rest, dest, snapshot, _message(exc), uri)
        raise
    if state.status != "success":
        headline, step, transient = _outcome(uri(source), uri(dest), state)
        _put_back(rest, dest, snapshot, headline, uri)
        raise PzConnectorError(
            f"{headline}; {uri(dest)} is as it was before the copy. Next: {step}",
            is_transient=transient,
            code="PZ0501",
        )
    _drop_snapshot(rest, dest, snapshot)


def wait_for_copy(rest: BlobRest, dest: str, state: CopyState) -> CopyState:
    """Poll `dest` until its copy `state.copy_id` is no longer pending; a copy still pending after
    `wait_limit()` seconds is aborted and returned as pending."""
    deadline = time.monotonic() + wait_limit()
    delay = FIRST_DELAY
    while state.status == "pending":
        left = deadline - time.monotonic()
        if left <= 0:
            rest.abort_copy(dest, state.copy_id)
            return state
        time.sleep(min(delay, left))
        delay = min(delay * 2, MAX_DELAY)
        seen = rest.copy_state(dest)
        if seen is None or seen.copy_id != state.copy_id:
            raise PzConnectorError(
                f"blob {rest.name(dest)} was deleted or overwritten by another writer while pz copied to it; "
                "make sure one writer writes this output, then run again",
                code="PZ0501",
            )
        state = seen
    return state


def _outcome(source: str, dest: str, state: CopyState) -> tuple[str, str, bool]:
    """(what happened, the next step, whether another attempt may succeed) for a copy that ended other than
    `success`."""
    said = f" ({state.description})" if state.description else ""
    progress = f" after {state.progress} bytes" if state.progress else ""
    if state.status == "pending":
        what = f"did not finish within {wait_limit():g} s{progress}, so pz aborted it"
        step = f"run again when the storage account is less busy, or raise {WAIT_ENV} (seconds)"
    elif state.status == "aborted":
        what = f"was aborted by another client{progress}{said}"
        step = "make sure nothing else aborts copies into this output, then run again"
    else:
        what = f"ended '{state.status}'{progress}{said}"
        step = "run again; if it keeps failing, check the storage account's health in the Azure portal"
    transient = state.status == "failed" and state.description.startswith(_TRANSIENT_COPY_FAILURES)
    return f"promoting {dest}: Azure's copy from {source} {what}", step, transient


def _put_back(
    rest: BlobRest, dest: str, snapshot: str | None, failure: str, uri: Callable[[str], str]
) -> None:
    """Put `dest` back as it was before a copy over it began (its snapshot copied back over it, or, without
    one, as it did not exist, deleted); when that fails too, raise an error saying so (`failure`: what went
    wrong first)."""
    try:
        current = rest.copy_state(dest)
        if current is not None and current.status == "pending":
            rest.abort_copy(dest, current.copy_id)
        if snapshot is None:
            rest.delete(dest)
            return
        restored = wait_for_copy(rest, dest, rest.start_copy(rest.url(dest, snapshot), dest))
        if restored.status != "success":
            raise AzureRestError(
                f"the copy back from its snapshot ended '{restored.status}'", transient=False
            )
    except (OSError, PzConnectorError) as exc:
        kept = f": its old content is kept in its snapshot {snapshot}" if snapshot else ""
        raise PzConnectorError(
            f"{failure}; and putting {uri(dest)} back failed too ({_message(exc)}), so it may be empty or "
            f"partly copied{kept}. Next: run the write again (a replace rewrites the whole output)",
            code="PZ0501",
        ) from exc
    _drop_snapshot(rest, dest, snapshot)


def _drop_snapshot(rest: BlobRest, dest: str, snapshot: str | None) -> None:
    if snapshot is not None:
        with contextlib.suppress(OSError):  # left behind, it only costs the old blocks' storage
            rest.delete(dest, snapshot)


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, PzConnectorError) else str(exc) or type(exc).__name__
