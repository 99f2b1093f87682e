"""Re-validation from `.pz/target/`: binds counted per pipeline and check (`dry_compile.BINDS`), each
`pz validate` as a new process would run it (the in-memory compile cache emptied). An unchanged project binds
nothing; each kind of edit binds again exactly what it reaches: the edited pipeline, and its readers while
the result they read changes."""

from __future__ import annotations

import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelinez.compile import bind_cache, dry_compile
from pipelinez.engine.run import validate_cache
from pipelinez.engine.run.compile_cache import COMPILES
from tests.conftest import pz, write_project

# a -> b -> c, d apart; a and d read the dataset; d uses the var, c the env value; b has a check
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
          orders: { format: csv, path: orders.csv, columns: { id: bigint, amount: integer } }
    """,
    "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\n",
    "data/orders.csv": "id,amount\n1,10\n",
    "pipelines/a.sql": "SELECT id, amount FROM {{ source('files', 'orders') }}\n",
    "pipelines/b.sql": "SELECT id, amount * 2 AS twice FROM {{ ref('a') }}\n",
    "pipelines/b.yml": "checks:\n  - not_null: { columns: [id] }\n",
    "pipelines/c.sql": (
        "INSERT INTO {{ sink('lake', 'c') }}\nSELECT id, twice, {{ env('SHOP_REGION') }} AS region "
        "FROM {{ ref('b') }}\n"
    ),
    "pipelines/d.sql": (
        "INSERT INTO {{ sink('lake', 'd') }}\n"
        "SELECT id FROM {{ source('files', 'orders') }} WHERE id > {{ var('min_id') }}\n"
    ),
}
CHECK = "chk_b__not_null_id"
EVERYTHING = {"a": 1, "b": 1, "c": 1, "d": 1, CHECK: 1}


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Path]:
    root = write_project(tmp_path / "shop", FILES)
    assert validate(root) == EVERYTHING  # cold: every query bound once
    yield root


def validate(
    root: Path, *args: str, env: dict[str, str] | None = None, ok: bool = True, nodes: int = 8
) -> Counter[str]:
    """One `pz validate` as a new process runs it: what it bound, by pipeline or check."""
    COMPILES.clear()
    dry_compile.BINDS.clear()
    result = pz(root, "validate", *args, env=env)
    assert (result.exit_code == 0) == ok, result.output
    if ok:
        assert f"ok: project is valid ({nodes} nodes)" in result.output, result.output
    return Counter(dry_compile.BINDS)


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_an_unchanged_project_binds_nothing(shop: Path) -> None:
    assert validate(shop) == {}
    (shop / ".pz" / "target" / "validate.json").unlink()  # the bind cache alone: still nothing bound
    assert validate(shop) == {}


def test_a_pipelines_sql_binds_it_and_the_readers_of_a_changed_result(shop: Path) -> None:
    edit(shop, "pipelines/b.sql", "amount * 2 AS twice", "amount * 2.5 AS twice")  # integer -> decimal
    assert validate(shop) == {"b": 1, "c": 1, CHECK: 1}


def test_an_edit_that_keeps_the_result_binds_the_pipeline_only(shop: Path) -> None:
    edit(shop, "pipelines/a.sql", "}}\n", "}} WHERE amount > 0\n")
    assert validate(shop) == {"a": 1}


def test_a_contract_column_binds_what_reads_the_dataset(shop: Path) -> None:
    edit(shop, "sources/files.yml", "amount: integer", "amount: bigint")
    assert validate(shop) == {"a": 1, "b": 1, "c": 1, "d": 1, CHECK: 1}  # d reads the dataset too


def test_a_var_default_and_a_var_value_bind_what_uses_the_var(shop: Path) -> None:
    assert validate(shop, "--var", "min_id=5") == {"d": 1}
    assert validate(shop, "--var", "min_id=5") == {}
    edit(shop, "project.yml", "default: 0", "default: 7")
    assert validate(shop) == {"d": 1}


def test_an_env_value_binds_what_uses_it(shop: Path) -> None:
    assert validate(shop, env={"SHOP_REGION": "zz-region"}) == {"c": 1}
    assert validate(shop, env={"SHOP_REGION": "zz-region"}) == {}
    assert validate(shop) == {"c": 1}  # back to the default: the other value's entry was not kept


def test_a_sidecar_check_binds_the_check_only(shop: Path) -> None:
    edit(shop, "pipelines/b.yml", "columns: [id]", "columns: [id, twice]")
    found = validate(shop)
    assert found == {"chk_b__not_null_id_twice": 1}, found


def test_a_connector_pin_validates_again_and_binds_nothing(shop: Path) -> None:
    edit(shop, "project.yml", "name: shop\n", 'name: shop\nconnectors:\n  localfiles: "<0.0.1"\n')
    result_binds = validate(shop, ok=False)  # the pin is checked again (PZ0220), no query bound again
    assert result_binds == {}
    edit(shop, "project.yml", '"<0.0.1"', '">=0"')
    assert validate(shop) == {}


def test_another_pz_version_binds_everything(shop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bind_cache, "__version__", "999.0")
    monkeypatch.setattr(validate_cache, "__version__", "999.0")
    assert validate(shop) == EVERYTHING


@pytest.mark.parametrize("text", ["{not json", '{"format": 1, "binds": [1, 2]}', "[]", ""])
def test_a_corrupt_or_foreign_cache_file_is_rebuilt(shop: Path, text: str) -> None:
    target = shop / ".pz" / "target"
    (target / "validate.json").write_text(text)
    (target / "binds.json").write_text(text)
    assert validate(shop) == EVERYTHING
    assert validate(shop) == {}


def test_an_error_is_bound_again_never_replayed(shop: Path) -> None:
    edit(shop, "pipelines/b.sql", "amount * 2", "amount * nope")
    for _ in range(2):
        assert validate(shop, ok=False) == {"b": 1}  # c is not bound behind it
    result = pz(shop, "validate")
    assert "PZ0402" in result.output or "nope" in result.output, result.output


def test_a_project_with_external_access_is_not_cached(shop: Path) -> None:
    edit(shop, "project.yml", "name: shop\n", "name: shop\nengine: { external_access: true }\n")
    assert validate(shop) == EVERYTHING
    assert validate(shop) == EVERYTHING


def test_replay_keeps_warnings_and_checks_env_values(tmp_path: Path) -> None:
    from pipelinez.config.loader import load_project
    from pipelinez.core.diagnostics import Place, warning

    root = write_project(tmp_path / "shop", FILES)
    project, _ = load_project(root)
    assert project is not None
    warned = (
        warning(
            "PZ0406", "dataset 'files.orders' has no declared columns", place=Place("sources/files.yml", 3, 5)
        ),
    )
    key = validate_cache.files_key(root, {})
    seen = validate_cache.before(key, {})
    validate_cache.store(
        project, seen, {"SHOP_REGION": "zz-region"}, False, validate_cache.Replayed(8, warned)
    )
    replayed = validate_cache.replay(root, key, {"SHOP_REGION": "zz-region"})
    assert replayed == validate_cache.Replayed(8, warned)
    assert validate_cache.replay(root, key, {"SHOP_REGION": "eu"}) is None
    assert (
        validate_cache.replay(
            root, validate_cache.files_key(root, {"min_id": "1"}), {"SHOP_REGION": "zz-region"}
        )
        is None
    )
    assert "zz-region" not in (root / ".pz" / "target" / "validate.json").read_text()  # a digest only


def test_a_folder_edited_while_it_compiled_is_not_stored(tmp_path: Path) -> None:
    from pipelinez.config.loader import load_project

    root = write_project(tmp_path / "shop", FILES)
    project, _ = load_project(root)
    assert project is not None
    seen = validate_cache.before(validate_cache.files_key(root, {}), {})
    edit(root, "pipelines/a.sql", "SELECT", "SELECT 1 AS one,")
    validate_cache.store(project, seen, None, False, validate_cache.Replayed(8, ()))
    assert not (root / ".pz" / "target" / "validate.json").exists()


def test_a_case_clash_found_after_the_bind_is_found_from_the_cache_too(shop: Path) -> None:
    """PZ0119 describes the query again over its inputs: the tables the cache answered for are made."""
    edit(shop, "pipelines/c.sql", "AS region", 'AS region, 1 AS "ID"')
    for _ in range(2):
        COMPILES.clear()
        result = pz(shop, "validate")
        assert result.exit_code == 2 and "PZ0119 pipelines/c.sql" in result.output, result.output


def test_a_column_named_like_a_renamed_one_describes_nothing_again(
    shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`extra_2` beside no `extra` is not CREATE TABLE … AS's rename of a clash: the cached tables are not
    all made to describe the query again (`region_1` beside `region` still is, and finds no clash)."""
    described: list[str] = []
    real = dry_compile.DryCompiler.query_columns

    def counted(self: dry_compile.DryCompiler, sql: str) -> list[str] | None:
        described.append(sql)
        return real(self, sql)

    monkeypatch.setattr(dry_compile.DryCompiler, "query_columns", counted)
    edit(shop, "pipelines/c.sql", "AS region", "AS region, 2 AS extra_2")
    assert validate(shop) == {"c": 1} and described == []
    edit(shop, "pipelines/c.sql", "2 AS extra_2", "2 AS region_1")
    assert validate(shop) == {"c": 1} and len(described) == 1


def test_a_reader_binds_against_a_table_made_from_cached_types(tmp_path: Path) -> None:
    """The cached upstream's table is created from its column types (no bind), whatever the types."""
    upstream = (
        "SELECT id, {'k': id, 'odd \"name\"': [1.5, 2.5]} AS nested, [id, 2] AS list, "
        "map([1], ['x']) AS mapped, 1.25::DECIMAL(18,3) AS dec, TIMESTAMPTZ '2024-01-01 00:00:00+00' AS ts, "
        "union_value(num := 2) AS uni, 'x' AS \"Quoted Col\" FROM {{ source('files', 'orders') }}\n"
    )
    files = {
        **FILES,
        "pipelines/b.sql": upstream,
        "pipelines/c.sql": (
            "SELECT nested.k, list[1] AS first, dec, ts, uni, \"Quoted Col\" FROM {{ ref('b') }}\n"
        ),
    }
    files = {k: v for k, v in files.items() if k != "pipelines/b.yml"}
    root = write_project(tmp_path / "shop", files)
    assert validate(root, nodes=6) == {"a": 1, "b": 1, "c": 1, "d": 1}
    edit(root, "pipelines/c.sql", "AS first", "AS first_item")
    assert validate(root, nodes=6) == {"c": 1}  # b's table made from its cached types, not bound


def test_a_project_that_reads_incrementally_is_validated_again(tmp_path: Path) -> None:
    """Its committed watermarks enter its validation, wherever the state lives: never replayed (its
    pipelines' binds are still cached: the watermark literals are in their SQL)."""
    files = {
        **FILES,
        "sources/files.yml": FILES["sources/files.yml"].replace(
            "amount: integer } }", "amount: integer }, sync: { mode: incremental, cursor: id } }"
        ),
        "sinks/lake.yml": "connector: localfiles\nconnection: { root: out }\noutputs:\n"
        "  c: { strategy: append, duplicates: accept }\n  d: { strategy: append, duplicates: accept }\n",
    }
    root = write_project(tmp_path / "shop", files)
    assert validate(root) == EVERYTHING
    assert not (root / ".pz" / "target" / "validate.json").exists()
    assert validate(root) == {}


def test_a_sink_root_linked_outside_the_project_and_retargeted_validates_again(tmp_path: Path) -> None:
    """The link out of the project is not in its folder: where it leads (resolved, with its stat) is."""
    link = tmp_path / "lake-link"
    (tmp_path / "elsewhere").mkdir()
    link.symlink_to(tmp_path / "elsewhere")
    files = {**FILES, "sinks/lake.yml": f"connector: localfiles\nconnection: {{ root: '{link}' }}\n"}
    root = write_project(tmp_path / "shop", files)
    assert validate(root) == EVERYTHING
    assert validate(root) == {}  # replayed
    link.unlink()
    link.symlink_to(root / "pipelines")  # the sink now writes into the project's pipelines
    COMPILES.clear()
    result = pz(root, "validate")
    assert result.exit_code == 2 and "PZ0237" in result.output, result.output


def _distribution(folder: Path, name: str, version: str, origin: str) -> Path:
    """An installed distribution's metadata folder, as pip writes it."""
    meta = folder / f"{name}-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (meta / "entry_points.txt").write_text(f"[pipelinez.connectors]\n{name} = {name}:Connector\n")
    (meta / "direct_url.json").write_text(origin)
    return meta


def test_another_version_or_origin_of_any_distribution_validates_again(
    shop: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key reads what is installed from the metadata folders on sys.path (core.installed): a version
    (DuckDB's, a connector's, Jinja's) is in the folder's name; a reinstall from another origin under the
    same version is a new folder. Each new process computes it again (the cache is per process)."""
    from pipelinez.core import installed

    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    meta = _distribution(site, "jinja2", "3.1.0", '{"url": "https://example.com/a.git"}')
    installed._digest_of.cache_clear()
    key = validate_cache.files_key(shop, {})
    assert validate(shop) == {}  # stored under this key: replayed
    assert validate_cache.replay(shop, key, None) is not None
    keys = {key}
    meta.rename(site / "jinja2-3.2.0.dist-info")  # upgraded
    installed._digest_of.cache_clear()
    keys.add(validate_cache.files_key(shop, {}))
    shutil.rmtree(site / "jinja2-3.2.0.dist-info")  # reinstalled from elsewhere, same version
    time.sleep(0.01)
    _distribution(site, "jinja2", "3.2.0", '{"url": "https://example.com/b.git"}')
    installed._digest_of.cache_clear()
    keys.add(validate_cache.files_key(shop, {}))
    shutil.rmtree(site / "jinja2-3.2.0.dist-info")  # removed
    installed._digest_of.cache_clear()
    keys.add(validate_cache.files_key(shop, {}))
    assert len(keys) == 4 and validate_cache.replay(shop, validate_cache.files_key(shop, {}), None) is None
    installed._digest_of.cache_clear()


def test_the_installed_digest_is_the_same_from_any_working_directory(tmp_path: Path) -> None:
    """`python -m` puts the working directory first on sys.path: without metadata there it changes nothing."""
    from pipelinez.core import installed

    site = tmp_path / "site"
    _distribution(site, "duckdb", "1.0.0", "{}")
    assert installed.digest_of([str(tmp_path / "cwd"), str(site)]) == installed.digest_of([str(site)])
    before = installed.digest_of([str(site)])
    assert before != installed.digest_of([])
    (site / "extra.pth").write_text("/somewhere\n")  # an editable install's pointer
    assert installed.digest_of([str(site)]) != before


def test_another_python_is_another_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelinez.core import installed

    before = installed.digest_of([])
    monkeypatch.setattr(sys, "version", "3.99.0 (elsewhere)")
    assert installed.digest_of([]) != before


def test_the_salt_lives_outside_the_target_folder(shop: Path) -> None:
    """A copied .pz/target holds the env values' digest but not its salt."""
    entry = (shop / ".pz" / "target" / "validate.json").read_text()
    assert "salt" not in entry
    salt = shop / ".pz" / validate_cache.SALT_FILE
    assert salt.read_text() and salt.stat().st_mode & 0o777 == 0o600
    assert salt.read_text() not in entry
    salt.unlink()  # without it the stored digest cannot be checked: a miss, never a wrong replay
    assert validate(shop) == {}
    assert salt.exists()


def test_a_pipeline_reading_a_bare_table_is_always_bound(tmp_path: Path) -> None:
    """`FROM a` without ref(): its input's columns are not in its key, so its bind is never answered from
    the cache; a dropped column of `a` is found warm as cold."""
    files = {**FILES, "pipelines/z.sql": "SELECT id, amount FROM a\n"}
    root = write_project(tmp_path / "shop", files)
    assert validate(root, nodes=9) == {**EVERYTHING, "z": 1}
    edit(root, "pipelines/d.sql", "> {{", ">= {{")
    assert validate(root, nodes=9) == {"d": 1, "z": 1}  # z bound again: it names a table bare
    edit(root, "pipelines/a.sql", "id, amount", "id, amount AS cost")  # a no longer has amount
    edit(root, "pipelines/b.sql", "amount * 2", "cost * 2")  # ...and only z reads it
    COMPILES.clear()
    result = pz(root, "validate")
    assert result.exit_code == 2 and "pipelines/z.sql" in result.output, result.output
