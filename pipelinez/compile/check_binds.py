"""Tier 4's checks: every check query bound over the tables of what it checks, those the bind cache
knows bound already skipped. A mixin of `DryCompiler` (`dry_compile.py`), which holds the connection, the
cache and the tables."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelinez.compile.batched_ddl import BatchedDdl
from pipelinez.compile.bind_cache import BindCache, Columns
from pipelinez.compile.check_types import TypeLookups, check_label, type_problem
from pipelinez.compile.duck_errors import parse_duck_error
from pipelinez.compile.nodes import CheckNode, Node
from pipelinez.compile.sql_inputs import OutsideRead, outside_reads
from pipelinez.core.diagnostics import Diagnostic, error
from pipelinez.core.duck_messages import condense

if TYPE_CHECKING:
    import duckdb

CHECK_BATCH = 25  # check queries bound per statement

# the seam tests count binds through: pipeline or check name -> times its query was bound in this process
BINDS: Counter[str] = Counter()


def _outside_message(what: str, read: OutsideRead, where: str) -> str:
    return (
        f"{what} reads {read.what}{where}, which is not one of its inputs: it reads only source() and ref()"
    )


def _is_duck_error(exc: Exception) -> bool:
    import duckdb

    return isinstance(exc, duckdb.Error)


class CheckBinds(ABC):
    """The check half of tier 4's binds (`DryCompiler` supplies what is declared here)."""

    con: duckdb.DuckDBPyConnection
    external_access: bool
    binds: BindCache
    ddl: BatchedDdl
    _lookups: TypeLookups

    @abstractmethod
    def _recover(self) -> None:
        """A fresh bind connection after DuckDB invalidated this one."""

    @abstractmethod
    def _materialize(self, names: Sequence[str]) -> None:
        """Create the tables of these cached pipelines from their cached columns."""

    @abstractmethod
    def _inputs(self, node: Node) -> list[tuple[str, Columns | None]]:
        """The node's input tables with their columns (the bind cache's key)."""

    @abstractmethod
    def _bare_reads(self, sql: str, deps: Sequence[str]) -> tuple[bool, list[str]]:
        """(whether `sql` reads only the tables of `deps`, so its bind may be cached; the cached tables it
        names bare, to be made before it binds)."""

    def _bind_checks(self, checks: list[CheckNode]) -> list[Diagnostic]:
        """Every check query not in the bind cache bound (those that bind and read only their own inputs are
        cached: a check that names another project table bare, `src_<source>__<dataset>` say, has that
        table made and is bound every time, since the key holds only its inputs' columns)."""
        keys = {c.name: self.binds.key("check", c.sql, self._inputs(c)) for c in checks}
        todo = [c for c in checks if self.binds.get(keys[c.name]) is None]
        judged = {c.name: self._bare_reads(c.sql, c.deps) for c in todo}
        needed = [d for c in todo for d in (*c.deps, *judged[c.name][1])]
        self._materialize(list(dict.fromkeys(needed)))
        self.ddl.commit()
        found = self._bind_uncached(todo)
        failed = {d.place for d in found}
        for check in todo:
            assert check.check is not None
            if check.check.place not in failed and judged[check.name][0]:
                self.binds.put(keys[check.name], [])
        return found

    def _bind_uncached(self, checks: list[CheckNode]) -> list[Diagnostic]:
        """Every check query bound: CHECK_BATCH at a time in one statement (one bind instead of a
        hundred); a batch that fails is bound check by check, so each error names its check."""
        self._lookups = TypeLookups(self.con)  # no table changes while checks bind: answers kept
        single: list[CheckNode] = []
        suspects: list[CheckNode] = []  # bound one by one: _bind_check words their error
        refused: list[Diagnostic] = []
        for check in checks:
            BINDS[check.name] += 1
            found = self._check_outside(check)
            if found:
                refused += found
                continue
            (single if self._single_statement(check) and self._types_fit(check) else suspects).append(check)
        for start in range(0, len(single), CHECK_BATCH):
            batch = single[start : start + CHECK_BATCH]
            union = "\nUNION ALL\n".join(f"(\n{c.sql}\n)" for c in batch)
            try:
                self.con.execute("PREPARE __pz_checks AS " + union)
            except Exception as exc:
                if not _is_duck_error(exc):
                    raise
                self._recover()
                suspects += batch
        return refused + [d for d in map(self._bind_check, suspects) if d]

    def _check_outside(self, node: CheckNode) -> list[Diagnostic]:
        assert node.check is not None
        if self.external_access:
            return []
        what = check_label(node)
        return [
            error("PZ0413", _outside_message(what, read, ""), place=node.check.place)
            for read in outside_reads(self.con, node.sql)
        ]

    def _single_statement(self, node: CheckNode) -> bool:
        try:
            self._assert_single(node)
        except Exception as exc:
            if not (_is_duck_error(exc) or isinstance(exc, ValueError)):
                raise
            return False
        return True

    def _types_fit(self, node: CheckNode) -> bool:
        """Whether the check's options fit its columns' types (else it is bound alone, to say why)."""
        try:
            return type_problem(self._lookups, node) is None
        except Exception as exc:
            if not _is_duck_error(exc):
                raise
            self._recover()
            return False

    def _assert_single(self, node: CheckNode) -> None:
        assert node.check is not None
        if node.check.type == "expression":
            # the expression alone must be one expression: `x) OR (1=1` or `x; DROP …` are refused
            alone = self.con.extract_statements("SELECT " + str(node.check.options["sql"]) + "\n")
            if len(alone) != 1:
                raise ValueError("the check expression must be a single SQL expression")
        if node.check.where is not None:
            # as the expression: `x) OR (1=1` or `x; DROP …` in config.where are refused
            alone = self.con.extract_statements("SELECT 1 WHERE " + node.check.where + "\n")
            if len(alone) != 1:
                raise ValueError("config.where must be a single SQL predicate")
        if len(self.con.extract_statements(node.sql)) != 1:
            raise ValueError("the check expression must be a single SQL expression")

    def _bind_check(self, node: CheckNode) -> Diagnostic | None:
        assert node.check is not None
        try:
            self._assert_single(node)
            problem = type_problem(self._lookups, node)  # before binding: its words beat DuckDB's
            if problem:
                raise ValueError(problem)
            self.con.execute("EXPLAIN " + node.sql)
        except Exception as exc:
            if not (_is_duck_error(exc) or isinstance(exc, ValueError)):
                raise
            summary = parse_duck_error(str(exc), node.sql).summary if _is_duck_error(exc) else str(exc)
            return error(
                "PZ0405",
                f"{check_label(node)}: {condense(summary)}",
                place=node.check.place,
            )
        return None
