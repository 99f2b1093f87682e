"""The docs are checked against the code: the error page is the registry's output, every code a page cites
exists, every builtin connector is in each connector list, and docs/cli.md names exactly the commands and
flags of the click tree. A message is one line: no code's text quotes a multi-line tool output raw."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest

from pipelinez.cli.main import cli
from pipelinez.connectors import registry
from pipelinez.core import codes
from pipelinez.core.diagnostics import RestoreError
from pipelinez.core.pins import PinError, parse_pin
from pipelinez.engine.packages import restore

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "cli.md"
_FLAG = re.compile(r"(?<![\w-])(--?[a-z][a-z-]*)")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _pages() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]


# --- error codes -------------------------------------------------------------------------------------


def test_errors_page_is_what_the_registry_generates() -> None:
    generated = subprocess.run(
        [sys.executable, "-m", "pipelinez.core.codes"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert _read(DOCS / "errors.md") == generated, (
        "regenerate: python -m pipelinez.core.codes > docs/errors.md"
    )


def test_every_code_a_page_cites_is_in_the_registry() -> None:
    unknown = {
        f"{page.name}: {code}"
        for page in _pages()
        for code in re.findall(r"\bPZ\d{4}\b", _read(page))
        if code not in codes.BY_CODE
    }
    assert not unknown, sorted(unknown)


def test_no_registry_entry_holds_a_line_break() -> None:
    for c in codes.REGISTRY:
        for text in (c.when, c.next_step):
            assert "\n" not in text and "\\n" not in text, c.code


# --- connectors --------------------------------------------------------------------------------------


def _builtin_connectors() -> set[str]:
    """The connectors pz's own package registers: its pyproject's entry points, and those the installed
    registry resolves into pipelinez itself (the two must agree)."""
    project = tomllib.loads(_read(ROOT / "pyproject.toml"))["project"]
    declared = set(project["entry-points"][registry.GROUP])
    resolved = {
        name
        for name, found in registry.installed().items()
        if found.entry_point.value.startswith("pipelinez.")
    }
    assert resolved <= declared, f"registered but not in pyproject: {sorted(resolved - declared)}"
    return declared


def _readme_connector_sentence() -> str:
    text = _read(ROOT / "README.md")
    start = text.index("PipelineZ moves data from sources")
    return text[start : text.index(")", text.index("(", start)) + 1]


def _getting_started_connector_line() -> str:
    found = re.search(
        r"^- \[Connectors\]\(connectors\.md\):.*?(?=^- |\Z)", _read(DOCS / "getting-started.md"), re.M | re.S
    )
    assert found, "docs/getting-started.md lost its '- [Connectors](connectors.md): …' line"
    return found.group()


def _connectors_page_table() -> str:
    text = _read(DOCS / "connectors.md")
    start = text.index("| connector |")
    return text[start : text.index("\n\n", start)]


@pytest.mark.parametrize(
    ("where", "listing"),
    [
        ("README.md", _readme_connector_sentence),
        ("docs/getting-started.md", _getting_started_connector_line),
        ("docs/connectors.md (table)", _connectors_page_table),
    ],
)
def test_every_builtin_connector_is_in_each_connector_list(where: str, listing: Any) -> None:
    named = set(re.findall(r"`([a-z0-9_]+)`", listing()))
    missing = _builtin_connectors() - named
    assert not missing, f"{where} does not list {sorted(missing)}"


def test_every_builtin_connector_has_its_section_and_the_count_is_right() -> None:
    text = _read(DOCS / "connectors.md")
    builtins = _builtin_connectors()
    for name in builtins:
        assert re.search(rf"^## {re.escape(name)}$", text, re.M), f"docs/connectors.md has no '## {name}'"
    words = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    assert f"ships {words.get(len(builtins), str(len(builtins)))}:" in text


def test_windowed_reads_in_docs_match_the_manifests() -> None:
    declaring = {n for n in _builtin_connectors() if registry.manifest_of(n).capabilities.windowed_reads}
    text = " ".join(_read(DOCS / "connectors.md").split())
    sentence = re.search(r"([^.]*) declare `windowed_reads: true`", text)
    assert sentence, "docs/connectors.md no longer says which builtins declare windowed_reads"
    assert set(re.findall(r"`([a-z0-9_]+)`", sentence.group(1))) == declaring


# --- CLI ---------------------------------------------------------------------------------------------


def _opts(command: click.Command) -> set[str]:
    """A command's own flags; a group's (`pz docs`) are its subcommands' together (one section)."""
    if isinstance(command, click.Group) and command is not cli:
        return {opt for sub in command.commands.values() if not sub.hidden for opt in _opts(sub)}
    return {
        opt
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
        for opt in (*param.opts, *param.secondary_opts)
    }


_GLOBAL = _opts(cli) | {"-h", "--help"}


def _commands() -> dict[str, click.Command]:
    assert isinstance(cli, click.Group)
    return {name: cmd for name, cmd in cli.commands.items() if not cmd.hidden}


def _section(name: str) -> str:
    """The text of docs/cli.md's `## pz <name>` section, up to the next `## ` heading."""
    found = re.search(rf"^## pz {name}\n(.*?)(?=^## |\Z)", _read(CLI_PAGE), re.M | re.S)
    assert found, f"docs/cli.md has no '## pz {name}' section"
    return found.group(1)


def _synopsis(section: str, name: str) -> str:
    found = re.search(rf"```text\n(pz {name}\b.*?)```", section, re.S)
    assert found, f"docs/cli.md's pz {name} section has no synopsis block"
    return found.group(1)


def _option_cells(section: str) -> set[str]:
    """The flags named in the first cell of the section's option tables."""
    return {flag for cell in re.findall(r"^\| `(-[^`]*)` \|", section, re.M) for flag in _FLAG.findall(cell)}


def test_every_command_is_in_the_command_table_and_has_a_section() -> None:
    table = _read(CLI_PAGE).split("## Global options")[0]
    for name in _commands():
        assert f"](#pz-{name})" in table, f"docs/cli.md's command table lacks pz {name}"
        _section(name)
    documented = set(re.findall(r"^## pz ([a-z-]+)$", _read(CLI_PAGE), re.M))
    assert documented == set(_commands()), "docs/cli.md documents a command pz does not have"


def test_global_options_table_is_exactly_the_groups_options() -> None:
    table = re.search(r"^## Global options\n(.*?)(?=^## )", _read(CLI_PAGE), re.M | re.S)
    assert table
    assert _option_cells(table.group(1)) == _GLOBAL


@pytest.mark.parametrize("name", sorted(_commands()))
def test_each_commands_flags_are_documented_and_exist(name: str) -> None:
    command = _commands()[name]
    own = _opts(command) - _GLOBAL
    section = _section(name)
    synopsis = set(_FLAG.findall(_synopsis(section, name)))
    cells = _option_cells(section)
    assert own <= synopsis, f"pz {name}: the synopsis lacks {sorted(own - synopsis)}"
    described = cells | set(re.findall(r"`(--?[a-z][a-z-]*)[ `=]", section))
    assert own <= described, f"pz {name}: the section never describes {sorted(own - described)}"
    invented = (synopsis | cells) - own - _GLOBAL
    assert not invented, f"docs/cli.md's pz {name} names flags it does not have: {sorted(invented)}"


def test_run_artifacts_describe_watermarks_and_retries_as_they_are() -> None:
    page = _read(CLI_PAGE)
    assert "always `null` in this version" not in page
    assert "Retries don't\n  appear in the text output" not in page
    assert "There is no `.pz/state.duckdb`" not in _read(DOCS / "project-files.md")


# --- links -------------------------------------------------------------------------------------------


def _outside_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def _anchors(page: Path) -> set[str]:
    """The heading anchors of a page, as GitHub makes them (lower case, punctuation dropped, spaces to -;
    a repeated heading gets -1, -2, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", _outside_code(_read(page)), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return found


def test_every_link_between_pages_reaches_a_page_and_heading() -> None:
    broken = []
    for page in _pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", _outside_code(_read(page))):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = page.parent / file if file else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


# --- one-line messages -------------------------------------------------------------------------------


def test_a_malformed_pin_is_explained_on_one_line() -> None:
    with pytest.raises(PinError) as caught:
        parse_pin("numbers", "acme pz")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("Expected")


def test_pip_failing_is_quoted_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    said = "ERROR: Could not find a version\nERROR: No matching distribution found for pz-numbers\n"
    failed = subprocess.CompletedProcess(args=[], returncode=1, stdout="", stderr=said)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: failed)
    want = restore._Want("numbers", "pz-numbers>=0.1", None, None)
    with pytest.raises(RestoreError) as caught:
        restore._pip([want], restore.PipOptions(no_index=True), [])
    (diag,) = caught.value.diagnostics
    assert diag.code == "PZ0703"
    assert "\n" not in diag.message and "\\n" not in diag.message, diag.message
    assert diag.message.endswith(
        "pip said: ERROR: Could not find a version | ERROR: No matching distribution found for pz-numbers"
    )


# --- docs/architecture.md names only modules that exist ---------------------------------------------

_LAYERS = "core|config|compile|plan|engine|connectors|cli|docs_site|importers|scaffold|api"
# a module path or dotted name inside backticks: `pipelinez/engine/run/session.py`,
# `engine.run.backend.Attempt`, `pipelinez.compile.work`, `compile.nodes.SourceLoadNode.part_table(i)`
# (what follows the name is ignored)
_MODULE_NAME = re.compile(rf"`((?:pipelinez[./])?(?:{_LAYERS})(?:[./][A-Za-z_][A-Za-z0-9_]*)+(?:\.py)?/?)")


def _resolves(name: str) -> str | None:
    """None when `name` is a package, a module, or an attribute (or dataclass field) of one; else what is
    missing."""
    import importlib

    parts = [p for p in re.split(r"[./]", name.removesuffix(".py").rstrip("/")) if p]
    if parts[0] != "pipelinez":
        parts.insert(0, "pipelinez")
    where = ROOT
    for i, part in enumerate(parts):
        after = parts[i + 1] if i + 1 < len(parts) else None
        if (where / part).is_dir() and (
            after is None or (where / part / after).is_dir() or (where / part / f"{after}.py").is_file()
        ):
            where = where / part  # a package, and what follows is one of its modules or sub-packages
            continue
        if not (where / part).is_dir() and not (where / f"{part}.py").is_file():
            return f"{'.'.join(parts)}: no module or package {'/'.join(parts[: i + 1])}"
        obj: Any = importlib.import_module(".".join(parts[: i + 1]))  # a module, or a package's attributes
        for attr in parts[i + 1 :]:
            fields = {*getattr(obj, "__dataclass_fields__", {}), *getattr(obj, "__annotations__", {})}
            if attr in fields:
                return None  # a field: what follows it is the field's
            if not hasattr(obj, attr):
                return f"{'.'.join(parts)}: no {attr}"
            obj = getattr(obj, attr)
        return None
    return None


def test_every_module_the_architecture_page_names_exists() -> None:
    text = _read(DOCS / "architecture.md")
    names = sorted(set(_MODULE_NAME.findall(text)))
    assert len(names) > 100, names  # the page names modules throughout; a broken pattern finds none
    missing = [problem for name in names if (problem := _resolves(name)) is not None]
    assert missing == []


def test_a_module_that_does_not_exist_is_caught() -> None:
    assert _resolves("pipelinez/engine/run/session.py") is None
    assert _resolves("engine.run.backend.Attempt") is None
    assert _resolves("compile.work.Endpoint.caps") is None
    assert _resolves("pipelinez/engine/workflow.py") is not None  # moved to engine/run/
    assert _resolves("engine.backend.WorkItem") is not None
    assert _resolves("engine.run.backend.NoSuchThing") is not None


def test_the_architecture_page_quotes_the_import_contracts_as_pyproject_has_them() -> None:
    page = _read(DOCS / "architecture.md")
    quoted = re.search(r"```toml\n(\[tool\.importlinter\]\n.*?)```", page, re.S)
    assert quoted is not None
    pyproject = _read(ROOT / "pyproject.toml")
    start = pyproject.index("[tool.importlinter]\n")
    end = pyproject.find("\n[tool.", start + 1)
    section = pyproject[start : end if end != -1 else None]
    assert tomllib.loads(quoted.group(1)) == tomllib.loads(section)
