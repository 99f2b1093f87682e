"""A replace's promote of several objects that a failure, or a killed process, never leaves half done.

An object store swaps one object at a time, so a promote that copies more than one object into the output,
or deletes any of the output's objects, is done object by object. Before it touches the output it backs up
every object the output holds (server-side copies into a hidden sibling prefix, `.<name>.pz-bak-<run>-<hex>/`)
and writes a small journal object next to the output (`.<name>.pz-promote.json`: the backup prefix, the keys
the promote writes, the keys that existed before). Then:
- the promote succeeds: the journal is deleted (that is its commit point), then the backup;
- it fails: the output is put back from the backup (every backed-up object copied back, every object the
  promote added deleted), the journal and the backup are deleted, and the promote's own error is raised (a
  failing restore is added to it as a note and leaves the journal for the next write);
- the process is killed: the journal stays, and the next write of that output (`ObjectFolder.sweep`) puts the
  output back from it before anything else.
A reader listing the output while a promote or a restore runs can still see a mix of old and new objects:
object stores have no multi-object atomic swap.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelinez.core import failpoints
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    from pipelinez.connectors.files.objects import ObjectStore

# the run's debug log (.pz/runs/<id>/pz.log, secrets masked) while a run lasts; stderr outside one
LOG = logging.getLogger("pipelinez.node_errors")
JOURNAL_VERSION = 1


@dataclass(frozen=True)
class Journal:
    """What a promote in progress changes: enough to put the output back as it was."""

    output: str  # the output prefix
    backup: str  # the prefix holding a copy of every object in `existed` (same relative keys)
    written: tuple[str, ...]  # output keys the promote copies in
    existed: tuple[str, ...]  # output keys that existed before the promote

    def backup_key(self, key: str) -> str:
        return f"{self.backup}/{key[len(self.output) + 1 :]}"

    def to_json(self) -> bytes:
        body = {
            "version": JOURNAL_VERSION,
            "output": self.output,
            "backup": self.backup,
            "written": list(self.written),
            "existed": list(self.existed),
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Journal:
        try:
            body = json.loads(data)
            if body.get("version") != JOURNAL_VERSION:
                raise ValueError(f"version {body.get('version')!r}, expected {JOURNAL_VERSION}")
            return cls(
                str(body["output"]),
                str(body["backup"]),
                tuple(str(k) for k in body["written"]),
                tuple(str(k) for k in body["existed"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PzConnectorError(
                f"the promote journal {where} cannot be read ({exc}); an earlier replace of this output was "
                "interrupted. Next: restore the output from the .pz-bak- prefix the journal names (or accept "
                "the output as it is), delete the journal, then run again",
                code="PZ0501",
            ) from None


def needs_journal(new: list[str], old: list[str]) -> bool:
    """A promote of more than one object, or one that deletes any, is done object by object."""
    return len(new) > 1 or bool(old)


def promote_journaled(store: ObjectStore, journal_key: str, tmp: str, journal: Journal) -> None:
    """Copy every object of `tmp` over the output (same relative keys) and delete the output's other
    objects, backed up and journaled first so a failure puts the output back as it was (module docstring)."""
    back_up(store, journal_key, journal)
    written = set(journal.written)
    try:
        for key in journal.written:
            store.copy(f"{tmp}/{key[len(journal.output) + 1 :]}", key)
        failpoints.hit("sink.during_promote")
        for key in journal.existed:
            if key not in written:
                store.delete(key)
        store.delete(journal_key)  # the commit point: from here on the new output stands
    except BaseException as exc:
        _undo(store, journal_key, journal, exc)
        raise
    with contextlib.suppress(OSError):  # a backup left here is swept by the next write
        store.remove(journal.backup)


def back_up(store: ObjectStore, journal_key: str, journal: Journal) -> None:
    """Copy every existing output object into the backup prefix, then write the journal; a failure removes
    the partial backup (the output is untouched) and is raised."""
    try:
        for key in journal.existed:
            store.copy(key, journal.backup_key(key))
        store.put(journal_key, journal.to_json())
    except BaseException:
        try:  # a journal whose answer was lost may be stored: it must not outlive the backup it names
            store.discard(journal_key)
        except OSError:
            pass  # it may stand: keep its backup too (the next write restores the untouched output from it)
        else:
            with contextlib.suppress(OSError):
                store.remove(journal.backup)
        raise


def _undo(store: ObjectStore, journal_key: str, journal: Journal, failure: BaseException) -> None:
    try:
        restore(store, journal_key, journal)
    except Exception as exc:  # the promote's own error stands; the journal is kept for the next write
        note = (
            f"putting {store.uri(journal.output)} back from its backup {store.uri(journal.backup)} failed "
            f"too ({type(exc).__name__}: {exc}); the next write of this output (or pz retry) puts it back "
            "first"
        )
        failure.add_note(note)
        LOG.warning("%s", note)


def restore(store: ObjectStore, journal_key: str, journal: Journal) -> None:
    """Put the output back as the journal says it was (every backed-up object copied back, every object the
    promote added deleted), then delete the journal and the backup. Safe to run again after an
    interruption."""
    failpoints.hit("sink.promote_restore")
    for key in journal.existed:
        store.copy(journal.backup_key(key), key)
    existed = set(journal.existed)
    present = {key for key, _ in store.objects(journal.output)}
    for key in journal.written:
        if key in present and key not in existed:
            store.delete(key)
    store.discard(journal_key)
    with contextlib.suppress(OSError):
        store.remove(journal.backup)


def roll_back_interrupted(store: ObjectStore, journal_key: str) -> None:
    """When a killed promote left its journal: put the output back from it (before any other write)."""
    data = store.get(journal_key)
    if data is None:
        return
    restore(store, journal_key, Journal.from_json(data, store.uri(journal_key)))
