"""The `pz` group imports each command's module when the command is looked up (cli/lazy_group.py): every
command is still listed and reachable, and a stop signal that makes a command module's import fail is the
usual PZ0514 line, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from pipelinez.cli.main import COMMANDS, cli


def test_help_lists_every_command_and_each_resolves() -> None:
    names = {*COMMANDS, "import"}
    assert set(cli.list_commands(None)) == names  # type: ignore[arg-type]
    listed = CliRunner().invoke(cli, ["--help"]).output
    assert all(f"\n  {name} " in listed for name in names), listed
    assert set(cli.commands) == names
    for name, (module, _attr) in COMMANDS.items():
        assert cli.commands[name].callback is not None
        assert sys.modules[f"pipelinez.cli.{module}"] is not None


def test_a_version_or_help_imports_no_command_module() -> None:
    probe = textwrap.dedent(
        """
        import sys
        from click.testing import CliRunner
        from pipelinez.cli.main import cli
        CliRunner().invoke(cli, ["--version"])
        CliRunner().invoke(cli, ["validate", "--help"])
        print(sorted(m for m in sys.modules if m.startswith("pipelinez.cli.commands_")))
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['pipelinez.cli.commands_inspect']"


def test_a_stop_signal_that_breaks_a_command_import_is_one_pz0514_line() -> None:
    probe = textwrap.dedent(
        """
        import sys
        from pipelinez.cli import main
        from pipelinez.core import stop_signals

        def broken():
            try:
                stop_signals.on_stop_signal(2, None)  # SIGINT arrives while a C extension initializes
            except KeyboardInterrupt:
                pass
            raise ImportError("initialization of _json raised unreported exception")

        main.cli._lazy["validate"] = broken
        sys.argv = ["pz", "validate"]
        main.main()
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "PZ0514" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_command_added_the_click_way_loads_no_lazy_one() -> None:
    import click

    from pipelinez.cli.lazy_group import LazyPzGroup

    loaded: list[str] = []

    def lazy() -> click.Command:
        loaded.append("lazy")
        return click.Command("lazy")

    group = LazyPzGroup("g", lazy={"lazy": lazy})
    group.add_command(click.Command("eager"))
    assert loaded == [] and group.list_commands(click.Context(group)) == ["eager", "lazy"]
    assert group.get_command(click.Context(group), "lazy") is not None and loaded == ["lazy"]


def test_a_command_module_that_fails_to_import_is_one_coded_line(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "sys.modules['pipelinez.cli.commands_state'] = None\n"
        "sys.argv = ['pz', 'state', 'show']\n"
        "from pipelinez.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "error: PZ0512" in done.stderr and "Traceback" not in done.stderr + done.stdout
