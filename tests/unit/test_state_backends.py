"""The state backend seam: the local backend round-trips what it keeps; a backend is found by name (a
plugin is one class); object-store names are refused, never silently local."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from pipelinez.core.run_state import Watermark
from pipelinez.core.state import registry
from pipelinez.core.state.backend import Holder, LeaseInfo, StateBackend, StateBackendError
from pipelinez.core.state.local import LocalBackend


class MemoryBackend(StateBackend):
    """A whole backend in one class: what a plugin writes."""

    name = "memory"

    def __init__(self, project: str, settings: dict[str, object]):
        super().__init__(project, settings)
        self.marks: dict[tuple[str, str], Watermark] = {}
        self.files: dict[tuple[str, str], str] = {}
        self.holder: Holder | None = None
        self.blobs: dict[str, bytes] = {}

    def describe(self) -> str:
        return "memory"

    def watermarks(self) -> dict[tuple[str, str], Watermark]:
        return dict(self.marks)

    def commit_watermarks(self, marks: Iterable[Watermark]) -> None:
        self.marks.update({(m.source, m.dataset): m for m in marks})

    def put_run_file(self, run_id: str, name: str, text: str) -> None:
        self.files[(run_id, name)] = text

    def get_run_file(self, run_id: str, name: str) -> str | None:
        return self.files.get((run_id, name))

    def run_ids(self) -> list[str]:
        return sorted({r for r, n in self.files if n == "run_results.json"})

    def delete_run(self, run_id: str) -> None:
        self.files = {k: v for k, v in self.files.items() if k[0] != run_id}

    def acquire(self, holder: Holder) -> LeaseInfo | None:
        if self.holder is not None:
            return LeaseInfo(self.holder, "later", False)
        self.holder = holder
        return None

    def renew(self, holder: Holder) -> bool:
        if self.holder is None or self.holder.token != holder.token:
            return False
        self.holder = holder  # the run it serves
        return True

    def release(self, holder: Holder) -> None:
        if self.holder is not None and self.holder.token == holder.token:
            self.holder = None

    def lease(self) -> LeaseInfo | None:
        return None if self.holder is None else LeaseInfo(self.holder, "later", False)

    def put_blob(self, name: str, data: bytes) -> None:
        self.blobs[name] = data

    def get_blob(self, name: str) -> bytes | None:
        return self.blobs.get(name)

    def check_writable(self) -> None:
        return None


def test_a_plugin_backend_is_found_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "available", lambda: {"memory": f"{__name__}:MemoryBackend"})
    backend = registry.open_backend(Path("/nowhere"), "shop", {"backend": "memory", "lease_seconds": 5})
    assert isinstance(backend, MemoryBackend) and backend.project == "shop" and backend.lease_seconds == 5
    assert backend.acquire(Holder("h", 1, "", "t1")) is None
    other = backend.acquire(Holder("h2", 2, "", "t2"))
    assert other is not None and other.holder.host == "h"  # never two holders


def test_without_a_state_block_the_backend_is_the_local_folder(tmp_path: Path) -> None:
    assert isinstance(registry.open_backend(tmp_path / ".pz", "shop", None), LocalBackend)
    assert isinstance(registry.open_backend(tmp_path / ".pz", "shop", {"backend": "local"}), LocalBackend)


def test_an_unknown_backend_is_pz0132(tmp_path: Path) -> None:
    with pytest.raises(StateBackendError) as caught:
        registry.open_backend(tmp_path, "shop", {"backend": "nosuch"})
    assert caught.value.diagnostics[0].code == "PZ0132"


@pytest.mark.parametrize("name", ["s3", "azureblob"])
def test_the_object_stores_are_builtin_backends_and_a_bad_url_is_pz0134(tmp_path: Path, name: str) -> None:
    assert name in registry.available()
    with pytest.raises(StateBackendError) as caught:  # never silently local
        registry.open_backend(tmp_path, "shop", {"backend": name, "url": "https://bucket/prefix"})
    assert caught.value.diagnostics[0].code == "PZ0134"


def test_the_local_backend_round_trips_what_it_keeps(tmp_path: Path) -> None:
    local = LocalBackend(tmp_path / ".pz")
    assert local.watermarks() == {} and local.run_ids() == []
    mark = Watermark("src", "items", "id", "3", "r1")
    local.commit_watermarks([mark])
    assert local.watermarks() == {("src", "items"): mark}
    assert (tmp_path / ".pz" / "state.duckdb").exists()  # where pz has always kept it
    local.put_run_file("r1", "events.jsonl", "{}\n")
    assert local.run_ids() == []  # a run is listed once its run_results.json is there
    local.put_run_file("r1", "run_results.json", '{"a": 1}')
    assert local.run_ids() == ["r1"] and local.get_run_file("r1", "run_results.json") == '{"a": 1}'
    local.delete_run("r1")
    assert local.run_ids() == [] and local.get_run_file("r1", "events.jsonl") is None
    local.put_blob("schemas.json", b"{}")
    assert (tmp_path / ".pz" / "target" / "schemas.json").read_bytes() == b"{}"
    assert local.get_blob("schemas.json") == b"{}" and local.get_blob("other") is None


def test_a_lock_whose_lease_was_taken_over_knows_it_lost_it(tmp_path: Path) -> None:
    from pipelinez.core.diagnostics import PzError
    from pipelinez.engine.state.lock import ProjectLock

    backend = MemoryBackend("shop", {"lease_seconds": 60})
    with ProjectLock(tmp_path / ".pz", backend) as lock:
        assert backend.holder is not None and not lock.lost
        with pytest.raises(PzError) as refused:  # a second holder, from another folder (another machine)
            ProjectLock(tmp_path / "other" / ".pz", backend).__enter__()
        assert refused.value.diagnostics[0].code == "PZ0511"
        lock.serve("run-1")
        assert backend.holder.run_id == "run-1" and not lock.lost
        backend.holder = Holder("elsewhere", 7, "run-2", "theirs")  # expired and taken over meanwhile
        lock.serve("run-1")
        assert lock.lost  # the session then commits no watermark (PZ0525)
    assert backend.holder is not None and backend.holder.token == "theirs"  # its release leaves theirs
