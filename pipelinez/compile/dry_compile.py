"""Tier 4: create the staging schema empty from the declared contracts, then bind every pipeline and check
in an in-memory DuckDB. DuckDB's parser/binder errors become PZ04xx diagnostics at the file's line:col.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pipelinez.compile.batched_ddl import BatchedDdl
from pipelinez.compile.bind_cache import BindCache, Columns
from pipelinez.compile.check_binds import BINDS, CheckBinds, _is_duck_error, _outside_message
from pipelinez.compile.duck_errors import DuckError, in_file, map_sql_error, parse_duck_error, unknown_name
from pipelinez.compile.inlining import Origin
from pipelinez.compile.name_checks import column_clash, column_clash_error
from pipelinez.compile.nodes import CheckNode, Node, PipelineNode, SourceLoadNode
from pipelinez.compile.null_columns import MAX_BIND_ERRORS, Shift, null_at, null_call_at, unshifted
from pipelinez.compile.pipeline_sql import nested_alone, without_final_semicolon
from pipelinez.compile.sql_inputs import bare_tables, line_col, outside_reads, refused_statement
from pipelinez.core import duck_connect
from pipelinez.core.diagnostics import Diagnostic, error, warning
from pipelinez.core.duck_messages import condense
from pipelinez.core.sqlnames import quote_ident

if TYPE_CHECKING:
    import duckdb

SchemaLookup = Callable[[SourceLoadNode], list[tuple[str, str]] | None]
OriginLookup = Callable[
    [str], Sequence[Origin]
]  # pipeline name -> where each line of its display SQL came from

_QUERY_START = re.compile(r"\s*(?:select|with|from|values)\b", re.I)
_NOT_IN_CTAS = re.compile(r"\b(?:describe|show|summarize)\b", re.I)
_WORD = re.compile(r"[^\W\d][\w$]*")  # a word that may name a table (quoted or not)
_TABLES = (SourceLoadNode, PipelineNode)  # the nodes that make a table (a tuple: no union built per test)


# the seam tests count binds through: pipeline or check name -> times its query was bound in this process
class DryCompiler(CheckBinds):
    def __init__(
        self,
        schema_of: SchemaLookup,
        origins: OriginLookup | None = None,
        external_access: bool = False,
        binds: BindCache | None = None,
    ):

        self.con: duckdb.DuckDBPyConnection = duck_connect.connect()
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET threads = 1")  # nothing here reads data: no worker threads to wake
        self.external_access = external_access
        if not external_access:  # binding reads nothing either: no file, URL or extension, and no SET back
            self.con.execute("SET enable_external_access = false")
            self.con.execute("SET lock_configuration = true")
        self.ddl = BatchedDdl(self.con)  # the tables of sources and pipelines, many to a transaction
        self.schema_of = schema_of
        self.origins: OriginLookup = origins or (lambda _name: [])
        self.binds = binds or BindCache(None)
        self.shapes: dict[str, Columns] = {}  # a created (or cached) table's columns and types, by node
        # pipelines the cache answered for, and sources whose table the cache knows DuckDB makes: tables not
        # created yet (`_materialize` makes one when a bind reads it)
        self.virtual: dict[str, Columns] = {}
        self._nodes: dict[str, Node] = {}
        self._tables: set[str] = set()  # the lower-cased names of every table binding may create
        self._plain = True  # every one of them is a word (else a word scan may miss one: parse)

    def close(self) -> None:
        self.con.close()

    def columns_of(self, name: str) -> list[str] | None:
        """The columns of a bound pipeline, or None when it was not bound."""
        if name in self.shapes:
            return [column for column, _ in self.shapes[name]]
        return _columns_of(self.con, name)

    def materialize_all(self) -> None:
        """Create every table the cache answered for (what reads the connection needs them all)."""
        self._materialize(list(self.virtual))
        self.ddl.commit()

    def query_columns(self, sql: str) -> list[str] | None:
        """The names a query over the bound tables gives its columns, before CREATE TABLE … AS renames a
        taken one (`a`, `"A"` → `a`, `A_1`); None when it does not bind."""
        if self.virtual:  # it may read any table: those the cache answered for are made first
            self.materialize_all()
        try:
            rows = self.con.execute("DESCRIBE " + without_final_semicolon(sql)).fetchall()
        except Exception as exc:
            if not _is_duck_error(exc):
                raise
            self._recover()
            return None
        return [str(r[0]) for r in rows]

    def run(self, nodes: dict[str, Node]) -> tuple[list[Diagnostic], list[Diagnostic]]:
        """Sources and pipelines in dependency order, each bound once against the typed empty tables of
        its inputs; then every check whose inputs bound, in batches. A check's error does not stop what
        reads its target from being bound (the check is about data, the reader's SQL stands alone)."""
        errors: list[Diagnostic] = []
        warnings: list[Diagnostic] = []
        broken: set[str] = set()
        loose: set[str] = set()
        checks: list[CheckNode] = []
        self._nodes = nodes
        self._tables = {
            (n.table if isinstance(n, SourceLoadNode) else n.name).lower()
            for n in nodes.values()
            if isinstance(n, _TABLES)
        }
        self._plain = all(_WORD.fullmatch(t) for t in self._tables)
        for name, node in nodes.items():
            if any(d in broken for d in node.deps):
                broken.add(name)
                continue
            if isinstance(node, SourceLoadNode):
                columns = self.schema_of(node)
                if columns is None:
                    loose.add(name)
                    warnings.append(
                        warning(
                            "PZ0406",
                            f"dataset '{node.source}.{node.dataset}' has no declared columns and no cached "
                            "schema: pipelines reading it are parsed, not bound",
                            place=node.place,
                        )
                    )
                    continue
                diag = self._create_source(node, columns)
                if diag is None:
                    self.shapes[name] = list(columns)
            elif isinstance(node, PipelineNode):
                if any(d in loose for d in node.deps):
                    found = self._refuse_outside(node)
                    if not found:
                        loose.add(name)
                    diags = found or _listed(self._parse_only(node))
                else:
                    diags = self._bind_cached(node)
                if diags:
                    errors += diags
                    broken.add(name)
                continue
            elif isinstance(node, CheckNode):
                if not any(d in loose for d in node.deps):
                    checks.append(node)
                continue
            else:
                continue
            if diag:
                errors.append(diag)
                broken.add(name)
        self.ddl.commit()
        errors += self._bind_checks(checks)
        return errors, warnings

    def _inputs(self, node: Node) -> list[tuple[str, Columns | None]]:
        """The tables a node reads (its deps that are loads or pipelines) with their columns."""
        return [(d, self.shapes.get(d)) for d in node.deps if isinstance(self._nodes.get(d), _TABLES)]

    def _bind_cached(self, node: PipelineNode) -> list[Diagnostic]:
        """The pipeline's result columns from the bind cache, else bound (and cached when it binds)."""
        key = self.binds.key("pipeline", node.display_sql, self._inputs(node))
        cached = self.binds.get(key)
        if cached is not None:  # kept only for SQL that reads its inputs alone: the key holds both
            self.shapes[node.name] = self.virtual[node.name] = cached
            return []
        found = self._refuse_outside(node)
        if found:
            return found
        cacheable, bare = self._bare_reads(node.display_sql, node.deps)
        self._materialize([*node.deps, *bare])
        found = self._bind_pipeline(node)
        if not found:
            columns = self.shapes.get(node.name) or _typed_columns(self.con, node.name)
            if columns:
                self.shapes[node.name] = columns
                if cacheable:
                    self.binds.put(key, columns)
        return found

    def _bare_reads(self, sql: str, deps: Sequence[str]) -> tuple[bool, list[str]]:
        """(whether the query (a pipeline's, or a check's) reads only its ref() and source() tables and
        its CTEs, so that its bind may be kept in the cache; the cached pipelines and sources it names bare,
        whose tables are then made so that it binds as without a cache). SQL that does not serialize reads
        anything: never kept. Judged on a miss only: the judgement depends on the SQL and its inputs' names
        alone, both in the key, so a kept entry's SQL is one that reads its inputs alone. Parsed only when
        its words name another table."""
        inputs = {
            (n.table if isinstance(n, SourceLoadNode) else d).lower()
            for d in deps
            if isinstance(n := self._nodes.get(d), _TABLES)
        }
        # the bind database holds only the project's tables: SQL whose words name none of them but its
        # inputs reads no other table (most pipelines: no parse)
        if self._plain and not (set(_WORD.findall(sql.lower())) & self._tables) - inputs:
            return True, []
        found = bare_tables(self.con, sql)
        if found is None:
            text = sql.lower()
            return False, [name for name in self.virtual if name.lower() in text]
        named = {name.lower() for name, _ in found} - inputs
        return not named, [name for name in self.virtual if name.lower() in named]

    def _materialize(self, names: Sequence[str]) -> None:
        """Create the tables of these cached pipelines and sources from their cached columns (a pipeline's
        that DuckDB cannot create from its type names: bound from its query, as without a cache; a source's
        is the very statement that made it when it was cached)."""
        for name in names:
            columns = self.virtual.pop(name, None)
            if columns is None:
                continue
            cols = ", ".join(f"{quote_ident(c)} {t}" for c, t in columns)
            try:
                if ";" in cols:
                    raise ValueError(cols)
                self.ddl.execute(f"CREATE TABLE {quote_ident(name)} ({cols})", name)
            except Exception as exc:
                if not (_is_duck_error(exc) or isinstance(exc, ValueError)):
                    raise
                node = self._nodes[name]
                if isinstance(node, PipelineNode):
                    self._materialize(node.deps)
                    self._bind_pipeline(node)
                # a source's table left out (its statement made it before, with this DuckDB): what reads it
                # fails to bind, and says so

    def _create_source(self, node: SourceLoadNode, columns: list[tuple[str, str]]) -> Diagnostic | None:
        unnamable = [c for c, _ in columns if "\x00" in c]
        if unnamable:  # a NUL byte in a file's header or a contract key: no SQL identifier may hold one
            return error(
                "PZ0302",
                f"dataset '{node.source}.{node.dataset}': column name {unnamable[0]!r} holds a NUL character",
                place=node.place,
                next_step="fix the file's header row, or declare the dataset's columns: contract",
            )
        clash = column_clash(c for c, _ in columns)
        if clash:  # DuckDB refuses the table ("already exists"): say why, in pz's words
            fix = "rename one of them in the dataset's columns: contract (or the file's header)"
            return column_clash_error(f"dataset '{node.source}.{node.dataset}'", clash, node.place, fix)
        cols = ", ".join(f"{quote_ident(c)} {t}" for c, t in columns) or '"__pz_no_columns" INTEGER'
        ddl = f"CREATE TABLE {quote_ident(node.table)} ({cols})"
        # made before by this very statement (the bind cache's key holds it and DuckDB's version): made when
        # a bind reads it, by `_materialize`, which writes the same statement from the same columns
        key = self.binds.key("source", ddl, []) if columns and ";" not in ddl else None
        if key is not None and self.binds.get(key) is not None:
            self.virtual[node.name] = list(columns)
            return None
        try:
            if ";" in ddl and len(self.con.extract_statements(ddl)) != 1:  # a type that ends the statement
                return self._bad_contract(node, "a column type holds more than a type (a `;`)")
            self.ddl.execute(ddl, node.table)
        except Exception as exc:
            if not _is_duck_error(exc):
                raise
            return self._bad_contract(node, condense(parse_duck_error(str(exc), "").summary))
        if key is not None:
            self.binds.put(key, [])
        return None

    @staticmethod
    def _bad_contract(node: SourceLoadNode, why: str) -> Diagnostic:
        return error(
            "PZ0302",
            f"dataset '{node.source}.{node.dataset}' columns: contract is not valid: {why}",
            place=node.place,
            next_step="use DuckDB type names such as bigint, varchar, decimal(18,2), date, timestamp",
        )

    def _refuse_outside(self, node: PipelineNode) -> list[Diagnostic]:
        """PZ0413 for every table function or foreign table the pipeline reads (none with external_access)."""
        if self.external_access:
            return []
        sql = node.display_sql
        reads = outside_reads(self.con, sql)
        origins = self.origins(node.name) if reads else []  # worked out only for an error
        diags = []
        for read in reads:
            line, col = line_col(sql, read.offset) if read.offset is not None else (None, None)
            file, line, col, where = in_file(node.place.file or "", line, col, node.name, origins)
            message = _outside_message(f"pipeline '{node.name}'", read, where)
            diags.append(error("PZ0413", message, file=file, line=line, col=col))
        return diags

    def _statement_problem(self, sql: str) -> str | None:
        import duckdb

        statements = self.con.extract_statements(sql)
        refused = [word for st in statements if (word := refused_statement(st.type.name))]
        if not self.external_access:
            # a PRAGMA is parsed as the query of its table function (`SELECT * FROM pragma_version()`)
            refused += [
                read.what
                for st in statements
                if st.type == duckdb.StatementType.SELECT
                for read in outside_reads(self.con, st.query)
            ]
        if refused and not self.external_access:
            raise _Refused(refused[0])
        if len(statements) != 1:
            return f"holds {len(statements)} statements; a pipeline is one query"
        if statements[0].type != duckdb.StatementType.SELECT:
            return f"is a {statements[0].type.name} statement, not a query"
        return None

    def _check_statement(self, node: PipelineNode) -> Diagnostic | None:
        try:
            problem = self._statement_problem(node.display_sql)
        except _Refused as refused:
            return error(
                "PZ0413",
                f"pipeline '{node.name}' runs {refused.word}: a pipeline is one query that reads only "
                "source() and ref()",
                place=node.place,
            )
        except Exception as exc:
            if not _is_duck_error(exc):
                raise
            return map_sql_error(
                parse_duck_error(str(exc), node.display_sql),
                node.place.file or "",
                0,
                node.name,
                self.origins(node.name),
            )
        if problem:
            return error("PZ0404", f"pipeline '{node.name}' {problem}", place=node.place)
        return None

    def _parse_only(self, node: PipelineNode) -> Diagnostic | None:
        return self._check_statement(node)

    def _bind_pipeline(self, node: PipelineNode) -> list[Diagnostic]:
        BINDS[node.name] += 1
        query = without_final_semicolon(node.display_sql)  # secrets masked: errors may quote SQL
        if ";" in query:  # perhaps several statements: say so rather than bind the first
            diag = self._check_statement(node)
            if diag:
                return [diag]
        # An empty table typed like the result, not a view: a view is re-bound, with every view it reads,
        # each time something reads it, which is exponential on DAGs that share upstream pipelines. A table
        # binds once; its readers bind against its column types only.
        if self._bind_typed(node, query):
            return []
        # Not bound that way (an error, or text the fast path leaves alone): CREATE TABLE AS, whose errors
        # are the ones reported. WITH NO DATA binds, never executes. Without a `;` the text is one
        # statement, and CREATE TABLE AS takes only a query.
        prefix = f"CREATE TABLE {quote_ident(node.name)} AS "
        executed = prefix + query + "\nWITH NO DATA"
        try:
            self.ddl.execute(executed, node.name)
        except Exception as exc:
            if not _is_duck_error(exc):
                raise
            self._recover()
            diag = self._check_statement(node)  # not a query: say that, not CREATE TABLE's syntax error
            if diag:
                return [diag]
            first = parse_duck_error(str(exc), executed)
            found = [self._sql_error(node, first, len(prefix))]
            if unknown_name(first):
                found += self._more_name_errors(node, executed, first, len(prefix))
            return found
        return []

    def _bind_typed(self, node: PipelineNode, query: str) -> bool:
        """Bind the query alone (DuckDB's relation: parse and bind, no plan) and create its table from the
        result's column names and types; True when both succeeded, the columns then in `shapes`. About
        half of what CREATE TABLE … AS … WITH NO DATA and a DESCRIBE of the result cost, and the same
        table: the query is read as `SELECT * FROM (query)`, which names and types the columns as CREATE
        TABLE AS does (a taken name renamed `a_1`, a NULL column INTEGER: tests/functional/
        test_bind_typed.py).
        Only text that starts as a query and names no DESCRIBE, SHOW or SUMMARIZE (which a subquery
        takes and CREATE TABLE AS refuses), and that parses alone as one query: a `)` in the text would
        otherwise close the subquery, and `q) AS t, (SELECT 2` is a query only once wrapped. Anything that
        fails goes to CREATE TABLE AS, for its error."""
        if ";" in query or not _QUERY_START.match(query) or _NOT_IN_CTAS.search(query):
            return False
        try:
            if not _one_query(self.con, query):
                return False
            relation = self.con.sql("SELECT * FROM (\n" + query + "\n)")
            columns = [(str(c), str(t)) for c, t in zip(relation.columns, relation.types, strict=True)]
        except Exception as exc:
            if not _is_duck_error(exc):
                raise
            self.ddl.commit()  # a failed statement may have aborted the open transaction: redone if so
            return False
        cols = ", ".join(f"{quote_ident(c)} {t}" for c, t in columns)
        if not cols or ";" in cols:  # a type that is text of more than a type: bound as before
            return False
        try:
            self.ddl.execute(f"CREATE TABLE {quote_ident(node.name)} ({cols})", node.name)
        except Exception as exc:  # a type DuckDB names but does not read back
            if not _is_duck_error(exc):
                raise
            self._recover()
            return False
        self.shapes[node.name] = columns
        return True

    def _sql_error(self, node: PipelineNode, err: DuckError, prefix_len: int) -> Diagnostic:
        return map_sql_error(err, node.place.file or "", prefix_len, node.name, self.origins(node.name))

    def _more_name_errors(
        self, node: PipelineNode, executed: str, err: DuckError, prefix_len: int
    ) -> list[Diagnostic]:
        """After an unknown column or function, the rest of the pipeline's: the reference (the call) is
        replaced by NULL and the query bound again, up to MAX_BIND_ERRORS in all. Only further unknown
        names are reported: another error may come from the replacement itself (a NULL in a GROUP BY)."""
        found: list[Diagnostic] = []
        shifts: list[Shift] = []
        seen = {(err.line, err.caret)}
        while len(found) + 1 < MAX_BIND_ERRORS:
            replace = null_call_at if unknown_name(err) == "function" else null_at
            replaced = replace(executed, err.line, err.caret)
            if replaced is None:
                break
            executed = replaced[0]
            shifts += replaced[1]
            try:
                self.con.execute(executed)
            except Exception as exc:
                if not _is_duck_error(exc):
                    raise
                self._recover()
                err = parse_duck_error(str(exc), executed)  # where it is in the replaced text
                written = dataclasses.replace(err, caret=unshifted(err.line, err.caret, shifts))
                diag = self._sql_error(node, written, prefix_len)
                if not unknown_name(err) or (written.line, written.caret) in seen:
                    break
                seen.add((written.line, written.caret))
                found.append(diag)
                continue
            self.con.execute(f"DROP TABLE IF EXISTS {quote_ident(node.name)}")  # bound only once replaced
            break
        return found

    def _recover(self) -> None:
        """Some failed statements (a PIVOT's hidden ones) leave a transaction aborted: end it."""
        try:
            self.con.execute("ROLLBACK")
        except Exception as exc:
            if not _is_duck_error(exc):
                raise


class _Refused(Exception):
    """A statement a pipeline may not run (ATTACH, COPY, …)."""

    def __init__(self, word: str):
        super().__init__(word)
        self.word = word


def _listed(diag: Diagnostic | None) -> list[Diagnostic]:
    return [diag] if diag else []


def _typed_columns(con: duckdb.DuckDBPyConnection, name: str) -> Columns | None:
    try:
        return [(str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE {quote_ident(name)}").fetchall()]
    except Exception as exc:
        if not _is_duck_error(exc):
            raise
        return None


def _columns_of(con: duckdb.DuckDBPyConnection, name: str) -> list[str] | None:
    try:
        return [str(r[0]) for r in con.execute(f"DESCRIBE {quote_ident(name)}").fetchall()]
    except Exception:  # not bound (loose, or broken upstream): nothing to check against
        return None


def _one_query(con: duckdb.DuckDBPyConnection, query: str) -> bool:
    """Whether DuckDB's parser reads `query` on its own as exactly one SELECT (parsed, nothing bound), or
    wrapped as `SELECT * FROM (query)` can be read only as that query (`nested_alone`: no parse)."""
    if nested_alone(query):
        return True
    statements = con.extract_statements(query)
    return len(statements) == 1 and statements[0].type.name == "SELECT"
