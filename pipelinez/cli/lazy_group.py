"""The `pz` group with its commands imported on first use.

`pz --version` and `pz --help` of one command should not import every command's module (and, through them,
the engine): each command is registered by name with the function that imports it, and is loaded when click
asks for it by name. Listing the commands (`pz --help`, a usage error naming the commands, `cli.commands`)
knows every name without importing anything; `cli.commands` itself loads them all, for code that walks them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, NoReturn

import click

from pipelinez.cli import interrupts
from pipelinez.cli.usage import PzGroup

Loader = Callable[[], click.Command]


class LazyPzGroup(PzGroup):
    """A `PzGroup` whose commands are imported by `get_command`, one at a time."""

    def __init__(self, *args: Any, lazy: Mapping[str, Loader] | None = None, **kwargs: Any) -> None:
        self._lazy: dict[str, Loader] = dict(lazy or {})
        self._loaded: MutableMapping[str, click.Command] = {}
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        """Every command, loaded: for code that walks them (the docs checks, the test helpers)."""
        for name in list(self._lazy):
            self._load(name)
        return self._loaded

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._loaded = value

    def _load(self, name: str) -> click.Command | None:
        loader = self._lazy.get(name)
        if loader is not None:
            try:
                self._loaded[name] = loader()
            except ImportError:  # a stop signal that lands while a C extension initializes (`interrupts`)
                if interrupts.tripped():
                    raise KeyboardInterrupt from None
                _not_loaded(name)
            except Exception:  # a broken install or a pz bug: the PZ0512 line and crash log, no traceback
                _not_loaded(name)
            del self._lazy[name]
        return self._loaded.get(name)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """A command registered already imported (as click does), without loading the lazy ones."""
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self._lazy.pop(name, None)
        self._loaded[name] = cmd

    def command_names(self) -> list[str]:
        return sorted({*self._loaded, *self._lazy})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self.command_names()

    def find_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)


def _not_loaded(name: str) -> NoReturn:
    """The command's module failed to import: the PZ0512 line (a crash log holds the traceback), exit 2."""
    from pipelinez.cli.common import EXIT_REFUSED, Settings, _report_crash

    context = click.get_current_context(silent=True)
    settings = context.obj if context is not None and isinstance(context.obj, Settings) else None
    _report_crash(settings or Settings(None, "text", False, False))
    sys.exit(EXIT_REFUSED)
