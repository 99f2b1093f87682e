"""Which extension files pz loads into staging without DuckDB's signature check (`core.duck_extensions`):
only a file whose size and SHA-256 are the ones its installed distribution's RECORD lists."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from pipelinez.connectors.postgres import native
from pipelinez.core import duck_extensions


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], Path]:
    """Puts a fake site-packages on sys.path (where pz looks for the RECORD of an extension file)."""

    def put(site: Path) -> Path:
        site.mkdir(parents=True, exist_ok=True)
        monkeypatch.syspath_prepend(str(site))
        return site

    return put


def _installed(site: Path, payload: bytes, listed: bytes | None = None) -> Path:
    """A distribution `pkg` in a fake site-packages holding one file; RECORD lists `listed`'s hash."""
    file = site / "pkg" / "extensions" / "x.duckdb_extension"
    file.parent.mkdir(parents=True)
    file.write_bytes(payload)
    digest = base64.urlsafe_b64encode(hashlib.sha256(listed or payload).digest()).rstrip(b"=").decode()
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(
        f"pkg/__init__.py,,\npkg/extensions/x.duckdb_extension,sha256={digest},{len(listed or payload)}\n"
        "pkg-1.0.dist-info/RECORD,,\n",
        encoding="utf-8",
    )
    return file


def test_the_shipped_postgres_extension_is_found_intact() -> None:
    assert duck_extensions.shipped_intact(native.extension_path())


def test_a_file_as_installed_is_intact(tmp_path: Path, on_path: Callable[[Path], Path]) -> None:
    file = _installed(on_path(tmp_path / "site-packages"), b"extension bytes")
    assert duck_extensions.trusted([str(file)]) == [str(file)]


def test_a_changed_byte_or_size_is_not(tmp_path: Path, on_path: Callable[[Path], Path]) -> None:
    same_size = _installed(
        on_path(tmp_path / "a" / "site-packages"), b"extension bytez", listed=b"extension bytes"
    )
    longer = _installed(
        on_path(tmp_path / "b" / "site-packages"), b"extension bytes!", listed=b"extension bytes"
    )
    assert duck_extensions.trusted([str(same_size), str(longer)]) == []


def test_a_file_no_record_lists_is_not(tmp_path: Path, on_path: Callable[[Path], Path]) -> None:
    file = _installed(on_path(tmp_path / "site-packages"), b"extension bytes")
    stray = file.with_name("y.duckdb_extension")
    stray.write_bytes(b"extension bytes")
    assert not duck_extensions.shipped_intact(str(stray))
    assert not duck_extensions.shipped_intact(str(tmp_path / "missing.duckdb_extension"))


def test_the_environment_can_keep_duckdbs_own_check(
    tmp_path: Path, on_path: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    file = _installed(on_path(tmp_path / "site-packages"), b"extension bytes")
    monkeypatch.setenv(duck_extensions.VERIFY_ENV, "1")
    assert duck_extensions.trusted([str(file), native.extension_path()]) == []


def test_a_file_checked_before_is_not_read_again_until_it_changes(
    tmp_path: Path, on_path: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    file = _installed(on_path(tmp_path / "site-packages"), b"extension bytes")
    project = tmp_path / "project"
    project.mkdir()
    hashed: list[Path] = []
    real = duck_extensions._matches

    def counting(path: Path, digest: str, size: int) -> bool:
        hashed.append(path)
        return real(path, digest, size)

    monkeypatch.setattr(duck_extensions, "_matches", counting)
    assert duck_extensions.trusted([str(file)], project) == [str(file)]
    assert duck_extensions.trusted([str(file)], project) == [str(file)]
    assert len(hashed) == 1  # the second run found it unchanged in .pz/target/extensions.json
    file.write_bytes(b"extension bytez")  # same size: its mtime and ctime change
    assert duck_extensions.trusted([str(file)], project) == []
    assert len(hashed) == 2


def test_a_record_beside_a_file_outside_every_sys_path_entry_proves_nothing(tmp_path: Path) -> None:
    """Only where pip installs counts: a RECORD written next to a file in any other folder (which anyone
    able to write the file can write too) does not make the file trusted."""
    file = _installed(tmp_path / "not-a-site", b"extension bytes")
    assert not duck_extensions.shipped_intact(str(file))
    assert duck_extensions.trusted([str(file)]) == []
