"""Rendering of `pz show` (a rich table) and `pz test` (one line per node that ran)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

_MARK = {"success": "pass", "warn": "warn", "failed": "FAIL", "skipped": "skip", "cancelled": "cancelled"}


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], color: bool) -> None:
    """The rows as a table; as wide as the values on a pipe, as wide as the terminal on a terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{title} (first {len(rows)} row(s))", title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    width = None if sys.stdout.isatty() else 240
    Console(no_color=not color, highlight=False, width=width, soft_wrap=False).print(table)


def _line(node: Any) -> str:
    status = str(node.status)
    text = f"{_MARK.get(status, status):>4} {node.name}"
    if node.error is not None:
        text += f": {node.error.code} {node.error.message}"
    elif node.skipped_because:
        text += f": {node.skipped_because}"
    elif status == "warn" and node.message:
        text += f": {node.message}"
    return text


def failed_lines(nodes: Iterable[Any]) -> list[str]:
    """What kept `pz show` from computing its rows: the nodes that failed or were skipped."""
    return ["error: the pipeline's inputs could not be computed:", *(f"  {_line(n)}" for n in nodes)]


def test_lines(outcome: Any, quiet: bool) -> list[str]:
    """Every check that ran (and every other node that did not succeed), then the counts."""
    shown = [n for n in outcome.nodes if n.kind == "check" or str(n.status) != "success"]
    lines = [_line(n) for n in shown if not quiet or str(n.status) != "success"]
    checks = outcome.checks
    counts = {
        s: sum(1 for n in checks if str(n.status) == s) for s in ("success", "warn", "failed", "skipped")
    }
    lines.append(
        f"test: {len(checks)} check(s): {counts['success']} passed, {counts['warn']} warned, "
        f"{counts['failed']} failed, {counts['skipped']} skipped"
    )
    return lines
