"""Re-validation from the per-file caches of `.pz/target/` (parsed.json, rendered.json, binds.json): after
each kind of edit, `pz validate` and `pz plan` answer exactly what they answer from no cache at all (same
diagnostics, same plan ids), and only what the edit reaches is parsed, rendered and bound again (counted by
`parse_cache.PARSED`, `render_cache.RENDERED` and `check_binds.BINDS`; each command as a new process would
run it, the in-memory compile cache emptied)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelinez.compile import dry_compile, render_cache
from pipelinez.config import parse_cache
from pipelinez.engine.run.compile_cache import COMPILES
from tests.conftest import pz, write_project
from tests.functional.test_revalidate_cache import FILES as SHOP

# the shop of test_revalidate_cache (a -> b -> c, d apart; d uses the var, c the env value, b has a check)
# with a macro that b calls
FILES = {
    **SHOP,
    "macros/twice.sql": "{% macro twice(x) %}{{ x }} * 2{% endmacro %}\n",
    "pipelines/b.sql": "SELECT id, {{ twice('amount') }} AS twice FROM {{ ref('a') }}\n",
}
PIPELINES = {f"pipelines/{name}.sql": 1 for name in "abcd"}
YAML = {"project.yml": 1, "sources/files.yml": 1, "sinks/lake.yml": 1, "pipelines/b.yml": 1}
CHECK = "chk_b__not_null_id"
CHECK2 = "chk_b__not_null_id_twice"
ALL = {"a", "b", "c", "d", CHECK}
FORGED = '0000\n{"format": 1, "versions": "x", "entries": {}}'  # a sound body under a wrong signature


@dataclass
class Outcome:
    validated: tuple[int, str]  # exit code, output
    planned: list[dict[str, object]]  # the plan's nodes, ids included
    parsed: Counter[str]
    rendered: Counter[str]
    bound: Counter[str]


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> Outcome:
    """`pz validate` then `pz plan`, each as a new process: what they answered, and what the validate
    parsed, rendered and bound."""
    for counter in (parse_cache.PARSED, render_cache.RENDERED, dry_compile.BINDS):
        counter.clear()
    COMPILES.clear()
    validated = pz(root, "validate", *args, env=env)
    parsed, rendered = Counter(parse_cache.PARSED), Counter(render_cache.RENDERED)
    bound = Counter(dry_compile.BINDS)
    COMPILES.clear()
    planned = pz(root, "--log-format", "json", "plan", *args, env=env)
    nodes = [json.loads(line) for line in planned.output.splitlines() if line.startswith("{")]
    for node in nodes:
        node.pop("ts", None)
    return Outcome((validated.exit_code, validated.output), nodes, parsed, rendered, bound)


def cold(root: Path, *args: str, env: dict[str, str] | None = None) -> Outcome:
    shutil.rmtree(root / ".pz" / "target", ignore_errors=True)
    return run(root, *args, env=env)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Path]:
    root = write_project(tmp_path / "shop", FILES)
    first = run(root)
    assert first.validated[0] == 0, first.validated[1]
    assert (first.parsed, first.rendered) == (Counter(YAML), Counter(PIPELINES))
    yield root


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def assert_as_cold(root: Path, warm: Outcome, *args: str, env: dict[str, str] | None = None) -> None:
    fresh = cold(root, *args, env=env)
    assert warm.validated == fresh.validated
    assert warm.planned == fresh.planned and warm.planned


def test_an_unchanged_project_parses_and_renders_nothing(shop: Path) -> None:
    (shop / ".pz" / "target" / "validate.json").unlink()  # not replayed: compiled from the file caches
    warm = run(shop)
    assert (warm.parsed, warm.rendered, warm.bound) == ({}, {}, {})
    assert_as_cold(shop, warm)


@pytest.mark.parametrize(
    ("rel", "old", "new", "parsed", "rendered", "bound"),
    [
        # SQL: the file rendered again; bound again it and the readers of a changed result
        ("pipelines/b.sql", "AS twice", "AS twice, 1 AS one", {}, {"b"}, {"b", "c", CHECK}),
        # a contract column: that file parsed again; nothing rendered again; its readers bound again
        ("sources/files.yml", "amount: integer", "amount: bigint", {"sources/files.yml"}, set(), ALL),
        # a var default: project.yml parsed again; what read the var rendered and bound again
        ("project.yml", "default: 0", "default: 7", {"project.yml"}, {"d"}, {"d"}),
        # a sidecar check: the sidecar parsed again, nothing rendered again, the new check bound
        ("pipelines/b.yml", "columns: [id]", "columns: [id, twice]", {"pipelines/b.yml"}, set(), {CHECK2}),
        # a macro file: every template may call it, every one rendered again; only b's SQL changed
        ("macros/twice.sql", "{{ x }} * 2", "{{ x }} * 2.5", {}, set("abcd"), {"b", "c", CHECK}),
        # project.yml alone (a comment): parsed again, nothing rendered or bound again
        ("project.yml", "name: shop\n", "name: shop  # the shop\n", {"project.yml"}, set(), set()),
    ],
    ids=["sql", "contract-column", "var-default", "sidecar-check", "macro", "project-yml"],
)  # fmt: skip
def test_an_edit_parses_renders_and_binds_what_it_reaches(
    shop: Path, rel: str, old: str, new: str, parsed: set[str], rendered: set[str], bound: set[str]
) -> None:
    edit(shop, rel, old, new)
    warm = run(shop)
    assert warm.validated[0] == 0, warm.validated[1]
    assert set(warm.parsed) == set(parsed)
    assert set(warm.rendered) == {f"pipelines/{name}.sql" for name in rendered}
    assert set(warm.bound) == bound
    assert_as_cold(shop, warm)


def test_an_env_value_renders_what_read_it(shop: Path) -> None:
    warm = run(shop, env={"SHOP_REGION": "zz-region"})
    assert (warm.parsed, set(warm.rendered), set(warm.bound)) == ({}, {"pipelines/c.sql"}, {"c"})
    assert_as_cold(shop, warm, env={"SHOP_REGION": "zz-region"})


def test_a_var_value_renders_what_read_it(shop: Path) -> None:
    warm = run(shop, "--var", "min_id=5")
    assert (warm.parsed, set(warm.rendered), set(warm.bound)) == ({}, {"pipelines/d.sql"}, {"d"})
    assert_as_cold(shop, warm, "--var", "min_id=5")


def test_a_connector_pin_parses_project_yml_only(shop: Path) -> None:
    edit(shop, "project.yml", "name: shop\n", 'name: shop\nconnectors:\n  localfiles: "<0.0.1"\n')
    warm = run(shop)
    assert warm.validated[0] != 0 and "PZ0220" in warm.validated[1]
    assert (set(warm.parsed), warm.rendered, warm.bound) == ({"project.yml"}, {}, {})
    fresh = cold(shop)
    assert warm.validated == fresh.validated


@pytest.mark.parametrize("name", ["parsed.json", "rendered.json"])
@pytest.mark.parametrize("text", ["{not json", FORGED, "[]", ""])
def test_a_corrupt_or_forged_cache_file_is_rebuilt(shop: Path, name: str, text: str) -> None:
    (shop / ".pz" / "target" / name).write_text(text)
    (shop / ".pz" / "target" / "validate.json").unlink()
    warm = run(shop)
    assert (warm.parsed, warm.rendered) == (
        (Counter(YAML), {}) if name == "parsed.json" else ({}, Counter(PIPELINES))
    )
    assert_as_cold(shop, warm)


def test_a_cache_signed_with_another_salt_is_ignored(shop: Path) -> None:
    """A target folder copied from another project (another salt): its entries are never taken."""
    (shop / ".pz" / "validate.key").write_text("another salt")
    (shop / ".pz" / "target" / "validate.json").unlink()
    warm = run(shop)
    assert (warm.parsed, warm.rendered) == (Counter(YAML), Counter(PIPELINES))


def test_an_empty_salt_file_is_replaced_and_the_caches_work_again(shop: Path) -> None:
    """An empty `.pz/validate.key` (what an older pz killed while making it left): replaced by a new salt,
    so the caches of the next command are kept and taken (it used to disable them for good)."""
    key = shop / ".pz" / "validate.key"
    key.write_text("")
    shutil.rmtree(shop / ".pz" / "target")
    first = run(shop)
    assert first.validated[0] == 0, first.validated[1]
    assert len(key.read_text().strip()) == 64 and key.stat().st_mode & 0o777 == 0o600
    (shop / ".pz" / "target" / "validate.json").unlink()  # compiled again, from the file caches
    warm = run(shop)
    assert (warm.parsed, warm.rendered, warm.bound) == ({}, {}, {})
    assert [p.name for p in (shop / ".pz").iterdir() if p.name.endswith(".tmp")] == []


def test_a_project_with_a_secret_env_keeps_every_rendering_that_reads_none(shop: Path) -> None:
    """A secret read by a pipeline, directly (a) or through a macro (d), keeps that pipeline out of the
    cache: rendered every time, the secret nowhere in .pz/target; b and c read none and are cached."""
    edit(shop, "project.yml", "{ default: eu } }", "{ default: eu }, SHOP_KEY: { secret: true } }")
    edit(shop, "pipelines/a.sql", "}}\n", "}} WHERE {{ env('SHOP_KEY') }} <> ''\n")
    (shop / "macros" / "key.sql").write_text("{% macro key() %}{{ env('SHOP_KEY') }}{% endmacro %}\n")
    edit(shop, "pipelines/d.sql", "{{ var('min_id') }}", "{{ var('min_id') }} AND {{ key() }} <> ''")
    secret = {"SHOP_KEY": "s3cr3t-value-long-enough"}
    rendered = []
    for _ in range(2):
        (shop / ".pz" / "target" / "validate.json").unlink(missing_ok=True)  # compiled, not replayed
        warm = run(shop, env=secret)
        assert warm.validated[0] == 0, warm.validated[1]
        rendered.append(set(warm.rendered))
    assert rendered == [set(PIPELINES), {"pipelines/a.sql", "pipelines/d.sql"}]
    assert_as_cold(shop, warm, env=secret)
    for path in (shop / ".pz" / "target").iterdir():
        assert "s3cr3t" not in path.read_text(), path


def test_a_cold_validate_discovers_and_reads_the_project_files_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keys' walk and the load share one discovery and one read: the loader loads the walk's bytes, and
    the check after the compile re-reads none of them (it stats the folder)."""
    from pipelinez.config import discovery, loader, textfile
    from pipelinez.engine.run import folder_key

    root = write_project(tmp_path / "shop", FILES)
    walks: list[Path] = []
    reads: list[Path] = []
    original_discover, original_read = discovery.discover, textfile.read_text

    def discover(where: Path) -> discovery.ProjectFiles:
        walks.append(where)
        return original_discover(where)

    def read_text(path: Path, file: str) -> tuple[str | None, list[object]]:
        reads.append(path)
        return original_read(path, file)  # type: ignore[return-value]

    monkeypatch.setattr(folder_key, "discover", discover)
    monkeypatch.setattr(loader, "discover", discover)
    monkeypatch.setattr(loader, "read_text", read_text)
    first = run(root)
    assert first.validated[0] == 0, first.validated[1]
    assert (len(walks), reads) == (2, [])  # one walk for validate, one for plan; the loader read nothing


def test_a_var_read_inside_a_macro_renders_its_caller_again(shop: Path) -> None:
    """A macro reaches a value through var() like the template itself: the call is recorded, its value is
    in the entry's check, so the caller is never answered with the old value's rendering."""
    (shop / "macros" / "floor.sql").write_text("{% macro floor() %}{{ var('min_id') }}{% endmacro %}\n")
    edit(shop, "pipelines/d.sql", "{{ var('min_id') }}", "{{ floor() }}")
    first = run(shop)
    assert first.validated[0] == 0, first.validated[1]
    warm = run(shop, "--var", "min_id=5")
    assert set(warm.rendered) == {"pipelines/d.sql"} and set(warm.bound) == {"d"}
    assert_as_cold(shop, warm, "--var", "min_id=5")


def test_a_large_project_keeps_its_cache_files_after_one_edit_and_answers_the_same(tmp_path: Path) -> None:
    """rendered.json and binds.json are rewritten when more than 1/64 of their entries changed: after edits
    of one file of a 150-pipeline project they are left as they were, that file is rendered and bound again
    by the next compiles too, and every answer is the cold one; enough edits rewrite them."""
    many = {
        f"pipelines/p{i:03}.sql": f"SELECT id, amount + {i} AS v FROM {{{{ ref('a') }}}}\n"
        for i in range(150)
    }
    root = write_project(tmp_path / "big", {**FILES, **many})
    assert run(root).validated[0] == 0
    target = root / ".pz" / "target"
    kept = {name: (target / name).read_bytes() for name in ("rendered.json", "binds.json")}
    edit(root, "pipelines/p007.sql", "+ 7 AS v", "+ 7.5 AS v")
    first = run(root)
    assert set(first.rendered) == {"pipelines/p007.sql"} and set(first.bound) == {"p007"}
    assert {name: (target / name).read_bytes() for name in kept} == kept
    edit(root, "pipelines/p007.sql", "+ 7.5 AS v", "+ 7.25 AS v")  # edited again, as one does
    second = run(root)
    assert set(second.rendered) == {"pipelines/p007.sql"} and set(second.bound) == {"p007"}
    assert {name: (target / name).read_bytes() for name in kept} == kept
    edit(root, "pipelines/p008.sql", "+ 8 AS v", "+ 8.5 AS v")
    third = run(root)  # p007's rendering and bind were not kept: done again
    assert set(third.rendered) == {"pipelines/p007.sql", "pipelines/p008.sql"}
    assert set(third.bound) == {"p007", "p008"}
    for i in range(10, 20):  # 2 x 12 entries differ from the file: more than 1/64 of 154
        edit(root, f"pipelines/p{i:03}.sql", f"+ {i} AS v", f"+ {i}.5 AS v")
    assert run(root).validated[0] == 0
    assert all((target / name).read_bytes() != data for name, data in kept.items())
    edit(root, "pipelines/p010.sql", "+ 10.5 AS v", "+ 10.25 AS v")
    last = run(root)
    assert set(last.rendered) == {"pipelines/p010.sql"}  # the others were written
    assert_as_cold(root, last)


def test_a_value_declared_secret_later_leaves_the_cache_files_at_once_in_a_large_project(
    tmp_path: Path,
) -> None:
    """An env value cached while it was not secret is gone from `.pz/target` on the first validate after it is
    declared `secret: true`, though one entry changed of 150 (below the rewrite share)."""
    many = {
        f"pipelines/p{i:03}.sql": f"SELECT id, amount + {i} AS v FROM {{{{ ref('a') }}}}\n"
        for i in range(150)
    }
    root = write_project(tmp_path / "big", {**FILES, **many})
    value = {"SHOP_REGION": "hunter2-token-value"}
    assert run(root, env=value).validated[0] == 0
    target = root / ".pz" / "target"
    assert "hunter2" in (target / "rendered.json").read_text()  # not secret yet: cached like any value
    edit(root, "project.yml", "SHOP_REGION: { default: eu }", "SHOP_REGION: { default: eu, secret: true }")
    assert run(root, env=value).validated[0] == 0
    for path in target.iterdir():
        assert "hunter2" not in path.read_text(errors="replace"), path
