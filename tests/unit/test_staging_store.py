"""The local staging store a retry reuses from: the planning's checks open the failed run's staging once (the
open replays its WAL, the dearest part of a check) and answer every load and partition from it; the seed is
a byte-identical copy of the failed run's files, whichever way the kernel copies them; `prepare` starts the
open and the copy while the project is validated, and a copy no run takes is deleted."""

from __future__ import annotations

import errno
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipelinez.engine.staging import staging_store
from pipelinez.engine.staging.staging_store import LocalStagingStore, Reuse, StagedLoad, copy_file
from pipelinez.engine.state.runs import SEED_PREFIX, STAGING_FILE, sweep

RUN = "20261130T200000000Z-abcd"


def _staging(runs: Path) -> Path:
    """A failed run's staging as a run leaves it: closed without a checkpoint (its tables are in the WAL)."""
    path = runs / RUN / STAGING_FILE
    path.parent.mkdir(parents=True)
    con = duckdb.connect(str(path))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("SET checkpoint_threshold = '1TB'")
    con.execute("CREATE TABLE src_a AS SELECT range AS id FROM range(3)")
    for i in range(4):
        con.execute(f"CREATE TABLE src_b__part{i} AS SELECT range AS id FROM range({i + 1})")
    con.close()
    assert path.with_name(STAGING_FILE + ".wal").is_file()
    return path


def _count_connects(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    opened: list[int] = []
    real = duckdb.connect

    def connect(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", connect)
    return opened


def test_planning_opens_the_failed_staging_once_for_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _staging(tmp_path)
    store = LocalStagingStore(tmp_path)
    opened = _count_connects(monkeypatch)
    answers = [store.unusable(StagedLoad(RUN, f"src_b__part{i}", i + 1)) for i in range(4)]
    answers += [
        store.unusable(StagedLoad(RUN, "src_a", 3)),
        store.unusable(StagedLoad(RUN, "src_a", 4)),
        store.unusable(StagedLoad(RUN, "src_gone", 1)),
    ]
    assert answers[:5] == [None] * 5
    assert answers[5] == "its staged table has 3 rows, the run recorded 4"
    assert answers[6] is not None and answers[6].startswith("its staged table src_gone cannot be read")
    assert len(opened) == 1
    store.close()
    assert store.unusable(StagedLoad(RUN, "src_a", 3)) is None  # opened again after close
    assert len(opened) == 2
    store.close()


def test_a_staging_that_cannot_be_opened_is_tried_once_and_named_for_each_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / RUN / STAGING_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a duckdb file" * 1000)
    store = LocalStagingStore(tmp_path)
    opened = _count_connects(monkeypatch)
    answers = {store.unusable(StagedLoad(RUN, table, 1)) for table in ("src_a", "src_b", "src_c")}
    assert len(answers) == 1
    why = answers.pop()
    assert why is not None and why.startswith("its staging database cannot be opened (")
    assert len(opened) == 1
    path.unlink()
    assert store.unusable(StagedLoad(RUN, "src_a", 1)) == (
        f"its staging database {STAGING_FILE} is gone (deleted by pz clean or the retention sweep)"
    )
    store.close()


def test_the_seed_is_a_byte_identical_copy_of_database_and_wal(tmp_path: Path) -> None:
    source = _staging(tmp_path / "runs")
    target = tmp_path / "new" / STAGING_FILE
    target.parent.mkdir()
    assert LocalStagingStore(tmp_path / "runs").seed(RUN, target)
    for name in (STAGING_FILE, STAGING_FILE + ".wal"):
        assert (target.parent / name).read_bytes() == source.with_name(name).read_bytes()
    con = duckdb.connect(str(target))
    assert con.execute("SELECT count(*) FROM src_a").fetchone() == (3,)
    con.close()
    assert not LocalStagingStore(tmp_path / "runs").seed(RUN, target)  # never over an existing staging


@pytest.mark.parametrize("refusal", [errno.EXDEV, errno.ENOSYS, errno.EINVAL])
def test_a_refused_range_copy_falls_back_to_a_plain_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    source = tmp_path / "a.bin"
    source.write_bytes(os.urandom(300_000))
    calls: list[int] = []

    def refuse(*args: Any) -> int:
        calls.append(1)
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    copy_file(source, tmp_path / "b.bin")
    assert calls and (tmp_path / "b.bin").read_bytes() == source.read_bytes()


def test_a_failing_disk_during_the_seed_leaves_no_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _staging(tmp_path / "runs")
    target = tmp_path / "new" / STAGING_FILE
    target.parent.mkdir()

    def full(*args: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "copy_file_range", full, raising=False)
    monkeypatch.setattr(shutil, "copyfile", full)
    assert not LocalStagingStore(tmp_path / "runs").seed(RUN, target)
    assert list(target.parent.iterdir()) == []


def _listing(runs: Path) -> list[str]:
    return sorted(str(p.relative_to(runs)) for p in runs.rglob("*"))


def test_prepare_opens_and_copies_ahead_and_the_seed_takes_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    source = _staging(runs)
    before = {p.name: p.read_bytes() for p in source.parent.iterdir()}
    opened = _count_connects(monkeypatch)
    store = LocalStagingStore(runs)
    store.prepare(RUN)
    assert store.unusable(StagedLoad(RUN, "src_a", 3)) is None
    assert store.unusable(StagedLoad(RUN, "src_b__part0", 1)) is None
    assert len(opened) == 1
    store.close_readers()
    target = tmp_path / "new" / STAGING_FILE
    target.parent.mkdir()
    assert store.seed(RUN, target)
    assert [p.name for p in runs.iterdir() if not p.is_dir()] == []  # moved into place, not copied twice
    for name, data in before.items():
        assert (target.parent / name).read_bytes() == data
        assert (source.parent / name).read_bytes() == data  # the failed run's files: read, never written
    store.close()
    assert _listing(target.parent) == [STAGING_FILE, STAGING_FILE + ".wal"]


def test_a_copy_no_run_takes_is_deleted_and_a_killed_retrys_copy_is_swept(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _staging(runs)
    listing = _listing(runs)
    store = LocalStagingStore(runs)
    store.prepare(RUN)
    store.close()  # nothing to retry, or the project did not validate
    assert _listing(runs) == listing
    stray = runs / f"{SEED_PREFIX}{RUN}.duckdb"
    stray.write_bytes(b"half a copy")  # a retry killed while it was planned
    store = LocalStagingStore(runs)
    store.prepare(RUN, copy=False)  # a dry run copies nothing (and leaves what it finds)
    store.close()
    assert stray.exists()
    sweep(tmp_path, keep_last=10)
    assert _listing(runs) == listing


def test_a_failed_copy_ahead_falls_back_to_copying_at_the_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    source = _staging(runs)
    real = staging_store.copy_file
    failures: list[Path] = []

    def flaky(src: Path, dst: Path) -> None:
        if not failures:
            failures.append(dst)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(src, dst)

    monkeypatch.setattr(staging_store, "copy_file", flaky)
    store = LocalStagingStore(runs)
    store.prepare(RUN)
    target = tmp_path / "new" / STAGING_FILE
    target.parent.mkdir()
    assert store.seed(RUN, target)
    assert failures and failures[0].name.startswith(SEED_PREFIX)
    assert target.read_bytes() == source.read_bytes()
    store.close()
    assert [p.name for p in runs.iterdir() if not p.is_dir()] == []


def test_prepare_without_a_staging_does_nothing(tmp_path: Path) -> None:
    (tmp_path / "runs" / RUN).mkdir(parents=True)
    store = LocalStagingStore(tmp_path / "runs")
    store.prepare(RUN)
    assert store.unusable(StagedLoad(RUN, "src_a", 1)) == (
        f"its staging database {STAGING_FILE} is gone (deleted by pz clean or the retention sweep)"
    )
    store.close()
    assert _listing(tmp_path / "runs") == [RUN]


def test_a_store_pickles_as_its_folder_while_its_checks_are_open(tmp_path: Path) -> None:
    _staging(tmp_path / "runs")
    store = LocalStagingStore(tmp_path / "runs")
    store.prepare(RUN)
    assert store.unusable(StagedLoad(RUN, "src_a", 3)) is None
    copied = pickle.loads(pickle.dumps(Reuse(store, StagedLoad(RUN, "src_a", 3))))
    assert copied.store == store and copied.store.unusable(StagedLoad(RUN, "src_a", 3)) is None
    copied.store.close()
    store.close()
