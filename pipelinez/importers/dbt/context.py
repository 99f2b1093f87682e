"""The state one import shares between its steps."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.naming import SchemaNamer
from pipelinez.importers.dbt.profiles import Target
from pipelinez.importers.dbt.project import DbtProject
from pipelinez.importers.dbt.report import Report
from pipelinez.importers.dbt.schema_files import Properties

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SINK = "warehouse"


@dataclass
class Context:
    project: DbtProject
    target: Target
    props: Properties
    namer: SchemaNamer
    report: Report
    macro_names: frozenset[str]
    files: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, JsonObject] = field(default_factory=dict)  # warehouse sink outputs
    relations: dict[tuple[str, str, str], str] = field(default_factory=dict)  # for compiled SQL
    cursor_types: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    env: dict[str, JsonObject] = field(default_factory=dict)
    errors: list[Diagnostic] = field(default_factory=list)
    pipelines: set[str] = field(default_factory=set)
    seed_datasets: JsonObject = field(default_factory=dict)
    source_readers: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    ref_readers: dict[str, set[str]] = field(default_factory=dict)
    in_warehouse: set[str] = field(default_factory=set)  # pipelines the warehouse sink writes
    disabled_seeds: set[str] = field(default_factory=set)
    seeds_read_by_sources: set[str] = field(default_factory=set)

    def table_name(self, schema: str, identifier: str, name: str) -> str | None:
        """The output's `table:` (None when pz's default, the output name in the default schema)."""
        if self.target.type == "duckdb" and schema == "main" and identifier == name:
            return None
        return f"{_quoted(schema)}.{_quoted(identifier)}"

    def relation(self, schema: str, identifier: str) -> tuple[str, str, str]:
        return (self.target.database, schema, identifier)


def _quoted(part: str) -> str:
    return part if NAME.match(part) else '"' + part.replace('"', '""') + '"'
