"""What keying a project folder costs, counted (issue 22's re-validation): discovery tells a plain file from
its directory entry (no stat of its own), the folder walk stats only the entries whose bytes are not in the
key already, and a project file is read through its descriptor, never from a named pipe or a folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelinez.config import discovery
from pipelinez.engine.run import folder_key
from tests.conftest import SMALL, write_project


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    root = write_project(tmp_path / "shop", SMALL)
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "extra.csv").write_text("id\n1\n")
    return root


def test_discovery_stats_no_plain_file_but_still_refuses_a_pipe(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked: list[Path] = []
    original = discovery._special

    def special(root: Path, path: Path) -> object:
        looked.append(path)
        return original(root, path)

    monkeypatch.setattr(discovery, "_special", special)
    files = discovery.discover(shop)
    assert files.pipelines and looked == []  # every pipeline a plain file: its listing says so
    os.mkfifo(shop / "pipelines" / "pipe.sql")
    (shop / "pipelines" / "linked.sql").symlink_to(shop / "pipelines" / files.pipelines[0].name)
    files = discovery.discover(shop)
    assert sorted(p.name for p in looked) == ["linked.sql", "pipe.sql"]
    assert [d.code for d in files.problems] == ["PZ0114"]
    assert shop / "pipelines" / "linked.sql" in files.pipelines


def test_the_folder_walk_stats_only_what_the_key_did_not_read(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statted: list[str] = []
    original = folder_key._stat

    def counted(path: str) -> object:
        statted.append(os.path.relpath(path, shop))
        return original(path)

    monkeypatch.setattr(folder_key, "_stat", counted)
    read = folder_key.read_project_files(shop)
    assert folder_key.feed_folder(folder_key.Digest(), shop, read.contents)
    assert "data/extra.csv" in statted
    assert not [p for p in statted if p.startswith(("pipelines/", "sources/", "sinks/"))], statted
    assert "project.yml" not in statted


def test_an_edit_of_a_read_file_still_changes_the_key(shop: Path) -> None:
    """Its bytes are in the key, not its size and time: an edit that keeps both is seen too."""
    sql = next((shop / "pipelines").glob("*.sql"))
    stat = sql.stat()
    key = _key(shop)
    text = sql.read_bytes()
    sql.write_bytes(text[:-1] + (b"x" if text[-1:] != b"x" else b"y"))  # same size
    os.utime(sql, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same modification time
    assert _key(shop) != key


def _key(root: Path) -> str:
    digest = folder_key.Digest()
    assert folder_key.feed_tree(digest, root)
    return digest.hexdigest()


def test_read_bytes_reads_regular_files_only(tmp_path: Path) -> None:
    data = tmp_path / "a.sql"
    data.write_bytes(b"SELECT 1\n" * 10_000)
    assert folder_key.read_bytes(data) == data.read_bytes()
    (tmp_path / "empty.sql").write_bytes(b"")
    assert folder_key.read_bytes(tmp_path / "empty.sql") == b""
    os.mkfifo(tmp_path / "pipe.sql")
    assert folder_key.read_bytes(tmp_path / "pipe.sql") is None  # never blocks on a pipe
    assert folder_key.read_bytes(tmp_path) is None
    assert folder_key.read_bytes(tmp_path / "missing.sql") is None
