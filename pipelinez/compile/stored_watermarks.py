"""PZ0235: a watermark `.pz/state.duckdb` holds that no longer fits its incremental dataset.

A stored watermark is used only when it belongs to the dataset's cursor column (a changed `sync.cursor`, or a
watermark() comparison on another column, means the stored value orders another column's values) and its
text is a finite value of the cursor's type (a hand edit, a type change, or an `infinity` an older pz
committed).
Anything else is refused before data moves, naming the state file, the dataset and the value, with
`--full-refresh` as the way out: reading from the start stores a fitting watermark. When the project keeps
its state in a shared backend (`state:` in project.yml) the message names that backend's watermarks table,
never `.pz/state.duckdb` (which then holds none of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipelinez.compile.incremental import IncrementalSpec
from pipelinez.compile.incremental_yaml import utc_text, value_problem
from pipelinez.compile.watermark_literal import ZONED
from pipelinez.config.model import Project
from pipelinez.core.diagnostics import Diagnostic, error

Key = tuple[str, str]


@dataclass(frozen=True)
class StoredMark:
    """A committed watermark as compile sees it: its value's text, and the column it was committed for
    (None when unknown, e.g. given as a bare value)."""

    value: str
    column: str | None = None


def shared_table(project: Project) -> str | None:
    """Where a shared state backend keeps the watermarks (None: the local `.pz/state.duckdb`)."""
    block = project.state
    backend = str(block.get("backend") or "local") if block else "local"
    if backend == "local":
        return None
    if block.get("url"):  # an object store: one document under the url's prefix
        url = str(block["url"]).rstrip("/")
        where = f"{url}/{project.name}/watermarks.json"
        return f"the {backend} state backend's document {where} (state: in project.yml)"
    schema = str(block.get("schema") or "pz_state")
    return f"the {backend} state backend's table {schema}.watermarks (state: in project.yml)"


def check_stored(
    specs: Mapping[Key, IncrementalSpec],
    stored: Mapping[Key, StoredMark],
    state_file: str,
    shared: str | None = None,
) -> tuple[dict[Key, str], list[Diagnostic]]:
    """The usable committed watermark of each incremental dataset (a zoned cursor's in UTC), and a PZ0235
    for each stored one that does not fit. A stored watermark of a dataset that is not incremental is left
    alone (it is used again if the dataset becomes incremental on the same cursor)."""
    usable: dict[Key, str] = {}
    diags: list[Diagnostic] = []
    for key, spec in sorted(specs.items()):
        mark = stored.get(key)
        if mark is None:
            continue
        problem = _problem(spec, mark)
        if problem is None:
            usable[key] = utc_text(mark.value) if spec.cursor_type == ZONED else mark.value
            continue
        where = shared or state_file
        diags.append(
            error(
                "PZ0235",
                f"source '{key[0]}' dataset '{key[1]}': the watermark stored in {where} "
                f"('{mark.value}') no longer fits: {problem}",
                file="project.yml" if shared else state_file,
                next_step=f"run `pz run --full-refresh` to read "
                f"{key[0]}.{key[1]} from its start and store a new watermark, or delete its row from "
                f"{where}",
            )
        )
    return usable, diags


def _problem(spec: IncrementalSpec, mark: StoredMark) -> str | None:
    if mark.column is not None and mark.column.lower() != spec.cursor.lower():
        return (
            f"it was committed for cursor column '{mark.column}', and the dataset's cursor is now "
            f"'{spec.cursor}'"
        )
    if spec.cursor_type is None:
        return None
    return value_problem(mark.value, spec.cursor_type)
