"""Issue 6, storage safety: what pz leaves behind in the systems it writes to is whole, standalone and
never silently wrong (checkpointed DuckDB sink files, ...)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from tests.conftest import pz, write_project

BIG = """
    INSERT INTO {{ sink('wh', 'big') }}
    INSERT INTO {{ sink('wh', 'log') }}
    SELECT range AS id, md5(range::varchar) AS payload FROM range(200000)
"""


@pytest.mark.parametrize("universal", [False, True], ids=["native", "universal"])
def test_duckdb_sink_file_stands_alone_and_stays_bounded(tmp_path: Path, universal: bool) -> None:
    project = write_project(
        tmp_path / "proj",
        {
            "project.yml": f"name: wal\nengine: {{ force_universal: {str(universal).lower()} }}\n",
            "sinks/wh.yml": """
                connector: duckdb
                connection: { path: out/wh.duckdb }
                outputs:
                  big: { table: main.big }
                  log: { table: main.log, strategy: merge, keys: [id] }
            """,
            "pipelines/big.sql": BIG,
        },
    )
    sizes = []
    for attempt in range(6):
        result = pz(project, "run")
        assert result.exit_code == 0, result.output
        file = project / "out" / "wh.duckdb"
        assert not (project / "out" / "wh.duckdb.wal").exists(), f"run {attempt} left a .wal behind"
        sizes.append(file.stat().st_size)
        alone = tmp_path / f"copy{attempt}" / "wh.duckdb"
        alone.parent.mkdir()
        shutil.copyfile(file, alone)  # the file alone, no .wal
        con = duckdb.connect(str(alone), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM big").fetchone() == (200000,)
            assert con.execute("SELECT count(*) FROM log").fetchone() == (200000,)
        finally:
            con.close()
    # repeated replaces reuse the space the old table freed: the file does not grow run after run
    assert max(sizes) <= 2 * sizes[0], sizes
