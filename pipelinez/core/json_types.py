"""JSON data at pz's edges, named so the edges can be found.

`JsonObject` is a JSON (or YAML) object as a loader returns it or as it is about to be dumped: a parsed
project file and the raw connector-owned blocks it holds (connection, dataset and output options, before a
connector reads them), a JSON Schema, a connector manifest's option schema, DuckDB's serialized SQL tree, and
the artifacts pz writes (run_results.json, events, the docs site's data, staging manifests). Inside, pz works
on typed dataclasses and enums (`core.vocabulary`); a value of this type is converted at the edge it crossed.
`grep -rn JsonObject pipelinez` lists every such edge.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]
