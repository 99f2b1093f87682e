"""The facade's compile cache, counted: `Project` compiles a project once per content. Each kind of edit
the key covers (a project file's bytes, a --var, a declared environment variable, a data file's columns
inside or outside the folder, a committed watermark, the pz or a connector version) compiles again; an
unchanged project, re-opened, does not; `engine.external_access` is never cached."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelinez.api import Project
from pipelinez.core.run_state import Watermark
from pipelinez.engine.run import compile_cache, folder_key
from pipelinez.engine.run.compile_cache import COMPILES, content_key
from tests.conftest import write_project

FILES = {
    "project.yml": """
        name: shop
        vars: { min_id: { type: int, default: 0 } }
        env: { SHOP_REGION: { default: eu } }
    """,
    "sources/files.yml": """
        connector: localfiles
        connection: { root: data }
        datasets:
          orders: { format: csv, path: orders.csv }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "data/orders.csv": "id,amount\n1,10\n2,20\n",
    "pipelines/big.sql": """
        INSERT INTO {{ sink('lake', 'big') }}
        SELECT id, amount FROM {{ source('files', 'orders') }} WHERE id > {{ var('min_id') }}
    """,
}


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The roots compiled, one entry per compile, from an empty process cache."""
    calls: list[str] = []
    original = compile_cache.compile_project

    def counted(project: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(project.root))
        return original(project, *args, **kwargs)

    monkeypatch.setattr(compile_cache, "compile_project", counted)
    COMPILES.clear()
    yield calls
    COMPILES.clear()


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return write_project(tmp_path / "shop", FILES)


def test_a_plan_a_validate_and_a_reopened_project_compile_once(shop: Path, compiles: list[str]) -> None:
    project = Project(shop)
    project.plan()
    project.validate()
    project.plan(select=["big"])
    Project(shop).plan()
    assert len(compiles) == 1


def test_a_validate_makes_no_ids_and_a_plan_after_it_gives_the_ids_of_its_own_compile(
    shop: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A validate runs nothing: its compile hashes no node. The plan that reuses it (one compile) has every
    id, the same as a plan's own compile."""
    from pipelinez.compile import dag

    hashed: list[str] = []
    original = dag.content_id

    def counted(node: Any, *args: Any, **kwargs: Any) -> str:
        hashed.append(node.name)
        return original(node, *args, **kwargs)

    monkeypatch.setattr(dag, "content_id", counted)
    (shop / "pipelines" / "small.sql").write_text("SELECT id FROM {{ ref('big') }}\n")
    Project(shop).validate()
    assert (len(compiles), hashed) == (1, [])
    after = {n.name: n.id for n in Project(shop).plan().nodes}
    assert len(compiles) == 1 and sorted(hashed) == sorted(after) and all(after.values())
    COMPILES.clear()
    assert {n.name: n.id for n in Project(shop).plan().nodes} == after and len(compiles) == 2


def test_a_plan_then_a_run_compile_once(shop: Path, compiles: list[str]) -> None:
    project = Project(shop)
    project.plan()
    assert project.run().exit_code == 0
    assert len(compiles) == 1


def test_an_edited_project_file_compiles_again_even_with_its_size_and_time_kept(
    shop: Path, compiles: list[str]
) -> None:
    Project(shop).plan()
    sql = shop / "pipelines" / "big.sql"
    before = sql.stat()
    sql.write_text(sql.read_text().replace("id > ", "id < "))
    os.utime(sql, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert sql.stat().st_size == before.st_size
    Project(shop).plan()
    assert len(compiles) == 2


@pytest.mark.parametrize(
    ("path", "text", "edit"),
    [
        ("macros/bounds.sql", "{% macro lower() %}0{% endmacro %}\n", ("0", "1")),
        ("tests/no_negative.sql", "SELECT * FROM {{ ref('big') }} WHERE amount < 0\n", ("< 0", "> 0")),
    ],
)
def test_an_edited_macro_or_singular_test_compiles_again_even_with_its_size_and_time_kept(
    shop: Path, compiles: list[str], path: str, text: str, edit: tuple[str, str]
) -> None:
    file = shop / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    Project(shop).plan()
    before = file.stat()
    file.write_text(text.replace(*edit))
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
    Project(shop).plan()
    assert len(compiles) == 2


def test_a_new_file_compiles_again(shop: Path, compiles: list[str]) -> None:
    Project(shop).plan()
    (shop / "pipelines" / "small.sql").write_text(
        "INSERT INTO {{ sink('lake', 'small') }} SELECT id FROM {{ source('files', 'orders') }}\n"
    )
    assert "small" in Project(shop).plan().names
    assert len(compiles) == 2


def test_a_var_compiles_again_and_the_earlier_value_is_still_cached(shop: Path, compiles: list[str]) -> None:
    project = Project(shop)
    project.plan()
    project.plan(vars={"min_id": "1"})
    project.plan(vars={"min_id": "1"})
    project.plan()
    assert len(compiles) == 2


def test_a_declared_env_variable_compiles_again_an_undeclared_one_does_not(
    shop: Path, compiles: list[str]
) -> None:
    Project(shop, environ={}).plan()
    Project(shop, environ={"UNRELATED": "x"}).plan()
    assert len(compiles) == 1
    Project(shop, environ={"SHOP_REGION": "us"}).plan()
    assert len(compiles) == 2


def test_a_data_file_s_columns_compile_again(shop: Path, compiles: list[str]) -> None:
    Project(shop).plan()
    (shop / "data" / "orders.csv").write_text("id,total\n1,10\n")
    with pytest.raises(Exception, match="amount"):  # the pipeline reads a column the file no longer has
        Project(shop).plan()
    assert len(compiles) == 2


def test_data_outside_the_folder_is_asked_again(tmp_path: Path, compiles: list[str]) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "orders.csv").write_text("id,amount\n1,10\n")
    sources = FILES["sources/files.yml"].replace("root: data", f"root: {outside}")
    files = {**FILES, "sources/files.yml": sources}
    shop = write_project(tmp_path / "shop", files)
    Project(shop).plan()
    Project(shop).plan()
    assert len(compiles) == 1
    (outside / "orders.csv").write_text("id,total\n1,10\n")
    with pytest.raises(Exception, match="amount"):
        Project(shop).plan()
    assert len(compiles) == 2


def test_the_pz_and_connector_versions_are_in_the_key(
    shop: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Project(shop).plan()
    monkeypatch.setattr(compile_cache, "__version__", "999.0")
    Project(shop).plan()
    assert len(compiles) == 2
    # another version of a connector's distribution: another digest of what is installed (core.installed)
    monkeypatch.setattr(folder_key, "installed_digest", lambda: "another localfiles")
    Project(shop).plan()
    assert len(compiles) == 3


def test_committed_watermarks_are_in_the_key(shop: Path) -> None:
    from pipelinez.config.loader import load_project

    project, _ = load_project(shop)
    assert project is not None
    mark = Watermark("files", "orders", "id", "2", "r1")
    tree = compile_cache.tree_key(project.root)
    none = content_key(project, tree, {}, {}, {})
    assert none == content_key(project, tree, {}, {}, {})
    assert none != content_key(project, tree, {}, {}, {("files", "orders"): mark})
    later = dataclasses.replace(mark, value="3")
    assert content_key(project, tree, {}, {}, {("files", "orders"): mark}) != content_key(
        project, tree, {}, {}, {("files", "orders"): later}
    )


def test_external_access_is_never_cached(shop: Path, compiles: list[str]) -> None:
    yml = shop / "project.yml"
    yml.write_text(yml.read_text() + "engine: { external_access: true }\n")
    Project(shop).plan()
    Project(shop).plan()
    assert len(compiles) == 2


def test_a_linked_pipelines_folder_pointed_elsewhere_compiles_again(
    tmp_path: Path, shop: Path, compiles: list[str]
) -> None:
    for name, column in (("one", "id"), ("two", "amount")):
        write_project(
            tmp_path / name,
            {
                f"{name}.sql": f"INSERT INTO {{{{ sink('lake', '{name}') }}}} "
                f"SELECT {column} FROM {{{{ source('files', 'orders') }}}}\n"
            },
        )
    link = shop / "pipelines" / "shared"
    link.symlink_to(tmp_path / "one")
    assert "one" in Project(shop).plan().names
    link.unlink()
    link.symlink_to(tmp_path / "two")
    assert "two" in Project(shop).plan().names
    assert len(compiles) == 2


def test_a_folder_too_large_to_fingerprint_is_not_cached(
    shop: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folder_key, "MAX_ENTRIES", 5)
    for i in range(6):
        (shop / "data" / f"extra{i}.txt").write_text("x")
    Project(shop).plan()
    Project(shop).plan()
    assert len(compiles) == 2


def test_a_full_refresh_retry_compiles_once_without_committed_watermarks(
    shop: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PZ_FAILPOINTS", "sink.write@lake.big")
    assert Project(shop).run().exit_code == 1
    monkeypatch.delenv("PZ_FAILPOINTS")
    compiles.clear()
    COMPILES.clear()  # else the failed run's compile serves the retry (its write failed: nothing changed)
    outcome = Project(shop).retry(full_refresh=True)
    assert outcome.run is not None and outcome.run.exit_code == 0
    assert len(compiles) == 1  # the failed run's ids and the full-refresh run: the same compile


def test_a_committed_watermark_compiles_again(tmp_path: Path, compiles: list[str]) -> None:
    shop = write_project(
        tmp_path / "shop",
        {
            "project.yml": "name: shop\n",
            "sources/files.yml": """
                connector: localfiles
                connection: { root: data }
                datasets:
                  orders:
                    format: csv
                    path: orders.csv
                    columns: { id: bigint }
                    sync: { mode: incremental, cursor: id }
            """,
            "sinks/lake.yml": f"connector: duckdb\nconnection: {{ path: {tmp_path / 'wh.duckdb'} }}\n"
            "outputs: { copy: { strategy: append, duplicates: accept } }\n",
            "data/orders.csv": "id\n1\n2\n",
            "pipelines/copy.sql": """
                INSERT INTO {{ sink('lake', 'copy') }}
                SELECT id FROM {{ source('files', 'orders') }}
            """,
        },
    )
    project = Project(shop)
    project.plan()
    assert len(compiles) == 1
    assert project.run().exit_code == 0  # commits the watermark id = 2 (the sink is outside the folder)
    assert len(compiles) == 1
    assert project.plan().nodes[0].incremental["watermark"] == "2"  # type: ignore[index]
    assert len(compiles) == 2


def test_one_walk_keys_the_stored_validation_and_the_compile_cache_but_a_fresh_check_walks_again(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelinez.engine.run import folder_key, validate_cache

    walks: list[Path] = []
    original = folder_key.discover

    def counted(root: Path) -> Any:
        walks.append(root)
        return original(root)

    monkeypatch.setattr(folder_key, "discover", counted)
    with folder_key.walk_once():
        first = validate_cache.files_key(shop, None)
        assert validate_cache.files_key(shop, None) == first
        assert len(walks) == 1
        (shop / "pipelines" / "big.sql").write_text("SELECT 1 AS id\n")
        assert validate_cache.files_key(shop, None, fresh=True) != first  # the check after a compile
        assert len(walks) == 2
    assert validate_cache.files_key(shop, None) != first  # outside the scope: walked every time
    assert len(walks) == 3


def test_an_edit_while_loading_is_not_stored_under_the_new_content(
    shop: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is taken before the project is loaded: an edit between the key and the load (or during the
    compile) never stores the old compile under the new content's key."""
    from pipelinez.engine.run import prepare

    original = prepare.load_project
    big = shop / "pipelines" / "big.sql"

    def edited_meanwhile(root: Path, **kwargs: Any) -> Any:
        loaded = original(root, **kwargs)
        big.write_text(big.read_text().replace("SELECT id, amount", "SELECT id"))
        return loaded

    monkeypatch.setattr(prepare, "load_project", edited_meanwhile)
    Project(shop).plan()  # compiles the old SQL (amount selected), the file now without it
    monkeypatch.setattr(prepare, "load_project", original)
    plan = Project(shop).plan()  # the new content: compiled again, never the old compile
    assert len(compiles) == 2
    node = next(n.planned.node for n in plan.nodes if n.name == "big")
    assert "amount" not in node.display_sql  # type: ignore[attr-defined]


def test_an_unchanged_folder_after_the_compile_is_stored(shop: Path, compiles: list[str]) -> None:
    Project(shop).plan()
    Project(shop).plan()
    assert len(compiles) == 1


@pytest.fixture
def folder_walks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The folders walked for a compile cache key (every entry's size and time), one entry per walk."""
    walks: list[Path] = []
    original = folder_key.feed_folder

    def counted(digest: Any, root: Path, read: Any = None) -> bool:
        walks.append(root)
        return original(digest, root, read)

    monkeypatch.setattr(folder_key, "feed_folder", counted)
    return walks


def test_a_project_without_the_compile_cache_neither_keys_the_folder_nor_stores_its_compile(
    shop: Path, compiles: list[str], folder_walks: list[Path]
) -> None:
    assert Project(shop, compile_cache=False).run().exit_code == 0
    assert folder_walks == []
    Project(shop).plan()  # nothing was stored: the cached facade compiles it
    assert len(compiles) == 1 and folder_walks


def test_pz_run_is_one_shot_so_it_skips_the_compile_cache(
    shop: Path, compiles: list[str], folder_walks: list[Path]
) -> None:
    from tests.conftest import pz

    result = pz(shop, "run")
    assert result.exit_code == 0, result.output
    assert folder_walks == [] and compiles == []  # compiled once, outside the cache


def test_compile_cache_must_be_a_flag(shop: Path) -> None:
    from pipelinez.core.diagnostics import PzUsageError

    with pytest.raises(PzUsageError) as raised:
        Project(shop, compile_cache="no")  # type: ignore[arg-type]
    assert raised.value.diagnostics[0].code == "PZ0513"
    assert "compile_cache='no'" in raised.value.diagnostics[0].message
