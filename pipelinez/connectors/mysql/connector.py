"""The mysql connector (MySQL and MariaDB), universal tier only: the class the registry loads.

By concern: `settings.py` (the connection block, error classification, identifier quoting), `session.py`
(opening a PyMySQL session), `source.py` (describing, partitioning and reading datasets), `cxread.py` (the
ConnectorX reads), `sink.py` (the writes by strategy, LOAD DATA LOCAL INFILE), `types.py` and
`target_types.py` (the type mapping both ways). This module holds what is neither: static validation (tier
3), output identity, the tier-5 checks, and the sink entry points that hand a write to `sink.Writer`.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelinez.connectors.mysql import target_types
from pipelinez.connectors.mysql.settings import Settings, TableName, connector_error, sql_literal
from pipelinez.connectors.mysql.sink import Writer
from pipelinez.connectors.mysql.source import MySQLSource
from pipelinez.connectors.sdk import ConnectorIssue, OutputRequest, OutputTarget, TargetColumn, WriteResult
from pipelinez.core.diagnostics import PzConnectorError

if TYPE_CHECKING:
    import pyarrow as pa

_CONNECTION_KEYS = ("host", "port", "database", "user", "password")


class MySQLConnector(MySQLSource):
    # -- static --------------------------------------------------------------------------------------
    @classmethod
    def validate(
        cls,
        connection: dict[str, Any],
        datasets: dict[str, dict[str, Any]],
        outputs: dict[str, dict[str, Any]],
    ) -> list[ConnectorIssue]:
        issues: list[ConnectorIssue] = []
        if connection.get("dsn") is not None:
            for key in _CONNECTION_KEYS:
                if key in connection:
                    issues.append(
                        ConnectorIssue(f"connection has both dsn and {key}; give one or the other", (key,))
                    )
            dsn = str(connection["dsn"])
            if "{{" not in dsn and not re.match(r"^(mysql|mariadb)://", dsn):
                issues.append(
                    ConnectorIssue("connection dsn must start with mysql:// (or mariadb://)", ("dsn",))
                )
        elif not connection.get("host"):
            issues.append(ConnectorIssue("connection needs host (or a dsn)", ()))
        for name, block in datasets.items():
            has_table, has_query = "table" in block, "query" in block
            if has_table == has_query:
                issues.append(
                    ConnectorIssue(
                        "dataset needs exactly one of table or query"
                        if not has_table
                        else "dataset has both table and query; keep one",
                        (),
                        "dataset",
                        name,
                    )
                )
            issues += _name_issues(block.get("table"), "dataset", name)
            if has_query and not re.match(r"^\s*(\(|select\b|with\b)", str(block["query"]), re.IGNORECASE):
                issues.append(
                    ConnectorIssue(
                        "dataset query must be a SELECT (or WITH … SELECT) statement",
                        ("query",),
                        "dataset",
                        name,
                    )
                )
        for name, block in outputs.items():
            issues += _name_issues(block.get("table", name), "output", name)  # the name is the default
        return issues

    @classmethod
    def output_target(
        cls, project_dir: Path, connection: dict[str, Any], output: str, options: dict[str, Any]
    ) -> OutputTarget | None:
        """Server (host, port) and (database, table), case-folded: whether MySQL tells `Orders` from
        `orders` depends on the server's lower_case_table_names, so pz treats them as one table."""
        issue = ""
        try:
            settings = Settings.from_connection(connection)
        except (PzConnectorError, ValueError):
            return None  # tier 3 reports it
        try:
            table = TableName.parse(str(options.get("table") or output))
        except PzConnectorError as exc:
            if "table" in options:
                return None  # tier 3 reports the table: key
            # the output's own name is the table: refused here, not when the write runs (too long...)
            issue, table = exc.message.removeprefix("table: "), TableName(None, output)
        database = (table.database or settings.database or "").lower()
        host = str(settings.host or "localhost").lower()
        return OutputTarget(
            ("mysql", host, str(settings.port)),
            (database, table.table.lower()),
            f"table {database}.{table.table} on {host}:{settings.port}",
            issue=issue,
        )

    # -- sink --------------------------------------------------------------------------------------------
    def write_batches(self, output: OutputRequest, reader: pa.RecordBatchReader) -> WriteResult:
        import pymysql

        table = TableName.parse(str(output.options.get("table") or output.name))
        what = f"sink '{self.context.instance}' output '{output.name}' ({table.display()})"
        if output.strategy not in ("replace", "merge", "append"):
            raise PzConnectorError(f"{what}: unknown strategy '{output.strategy}'", code="PZ0305")
        for name in reader.schema.names:
            if len(name) > 64 or not name:
                raise PzConnectorError(
                    f"{what}: column name '{name[:80]}' is not a valid MySQL column name (1-64 characters)",
                    code="PZ0501",
                )
        con = self._connect(what, "PZ0501", local_infile=True)
        writer = Writer(self.settings, con, table, output, reader, what)
        try:
            if output.strategy == "append":
                return writer.append()
            with writer.locked():
                return writer.replace() if output.strategy == "replace" else writer.merge()
        except pymysql.MySQLError as exc:
            with contextlib.suppress(Exception):
                con.rollback()
            raise connector_error(
                self.settings, f"{what}: {output.strategy} failed", exc, code="PZ0501"
            ) from None
        finally:
            with contextlib.suppress(Exception):
                con.close()

    def target_columns(self, output: OutputRequest) -> list[TargetColumn] | None:
        """Merge and append write into the existing table; replace renames in a table created from the
        result's types, so it keeps nothing of the old definition."""
        if output.strategy == "replace":
            return None
        import pymysql

        table = TableName.parse(str(output.options.get("table") or output.name))
        what = f"sink '{self.context.instance}' output '{output.name}' ({table.display()})"
        con = self._connect(what, "PZ0501")
        db = sql_literal(table.database) if table.database else "DATABASE()"
        try:
            with con.cursor() as cur:
                cur.execute(
                    "SELECT COLUMN_NAME, COLUMN_TYPE, COLLATION_NAME, "
                    "IS_NULLABLE = 'NO' AND COLUMN_DEFAULT IS NULL "
                    "AND EXTRA NOT LIKE '%auto_increment%' AND EXTRA NOT LIKE '%GENERATED%' "
                    "AND EXTRA NOT LIKE '%VIRTUAL%' AND EXTRA NOT LIKE '%STORED%' "
                    f"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} "
                    f"AND TABLE_NAME = {sql_literal(table.table)} ORDER BY ORDINAL_POSITION"
                )
                rows = cur.fetchall()
        except pymysql.MySQLError as exc:
            raise connector_error(
                self.settings, f"{what}: cannot read the target's columns", exc, code="PZ0501"
            ) from None
        finally:
            con.close()
        if not rows:
            return None
        return target_types.target_columns(
            {str(name): str(kind) for name, kind, _, _ in rows},
            {str(name) for name, _, _, req in rows if req},
            {str(name): None if coll is None else str(coll) for name, _, coll, _ in rows},
        )

    # -- tier 5 -------------------------------------------------------------------------------------------
    def check_connection(self) -> None:
        import pymysql

        con = self._connect(f"mysql '{self.context.instance}'", "PZ0601")
        try:
            with con.cursor() as cur:
                cur.execute("SELECT 1")
        except pymysql.MySQLError as exc:
            raise connector_error(
                self.settings, f"mysql '{self.context.instance}': connection check failed", exc, code="PZ0601"
            ) from None
        finally:
            con.close()

    def probe_output(self, output: OutputRequest) -> None:
        import pymysql

        table = TableName.parse(str(output.options.get("table") or output.name))
        what = f"sink '{self.context.instance}' output '{output.name}' ({table.display()})"
        con = self._connect(what, "PZ0606")
        tag = secrets.token_hex(4)
        probe, renamed = table.sibling(f"__pz_probe_{tag}"), table.sibling(f"__pz_probe2_{tag}")
        try:
            with con.cursor() as cur:
                cur.execute(f"CREATE TABLE {probe.sql()} (x INT)")
                try:
                    cur.execute(f"INSERT INTO {probe.sql()} VALUES (1)")
                    con.commit()
                    cur.execute(f"RENAME TABLE {probe.sql()} TO {renamed.sql()}")
                    cur.execute(f"DROP TABLE {renamed.sql()}")
                finally:
                    cur.execute(f"DROP TABLE IF EXISTS {probe.sql()}")
        except pymysql.MySQLError as exc:
            raise connector_error(
                self.settings,
                f"{what}: cannot create, rename and drop tables next to the target",
                exc,
                code="PZ0606",
            ) from None
        finally:
            con.close()


def _name_issues(value: object, block: str, name: str) -> list[ConnectorIssue]:
    """A malformed `table:` is refused at validate (tier 3), never repaired."""
    if not isinstance(value, str) or "{{" in value:
        return []
    try:
        TableName.parse(value)
    except PzConnectorError as exc:
        return [ConnectorIssue(exc.message, ("table",), block, name)]
    return []
