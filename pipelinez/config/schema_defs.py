"""The JSON Schemas (draft 2020-12) of project files, built in Python: the single source of truth.

The files shipped in `pipelinez/config/schemas/` are generated from here
(`python -m pipelinez.config.schema_defs`); a unit test keeps them in sync.

Engine-owned keys are closed (`additionalProperties: false`). Connector-owned keys stay open: the
`connection:` block, and the connector keys of dataset and output blocks (table, path, format, ...), which
tier 3 checks against each connector's manifest. The engine keys inside datasets and outputs are typed.
"""

from __future__ import annotations

import json

from pipelinez.config.checks import check_defs
from pipelinez.config.model import STAGING_COMPRESSIONS, STRATEGIES, VAR_TYPES
from pipelinez.core.durations import DURATION_PATTERN
from pipelinez.core.json_types import JsonObject
from pipelinez.core.sqlnames import NAME_PATTERN
from pipelinez.core.vocabulary import Duplicates, Materialization

DIALECT = "https://json-schema.org/draft/2020-12/schema"
KINDS = ("project", "source", "sink", "sidecar")
SYNC_MODES = ("full", "incremental")
DUPLICATES = tuple(d.value for d in Duplicates)
MATERIALIZATIONS = tuple(m.value for m in Materialization)
FOLDER_PATTERN = r"^(\.|[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*)$"
DEFAULT_KEEP_LAST = 10


def _duration(description: str) -> JsonObject:
    return {
        "type": "string",
        "pattern": DURATION_PATTERN,
        "description": f"{description} (500ms, 2s, 5m, 1h, 1d)",
    }


def _names(values: JsonObject, description: str) -> JsonObject:
    """A mapping whose keys are names (letters, digits, _; not starting with a digit)."""
    return {
        "type": ["object", "null"],
        "description": description,
        "propertyNames": {"pattern": NAME_PATTERN},
        "additionalProperties": values,
    }


RETRY: JsonObject = {
    "description": "retry policy; unset fields cascade from the enclosing level (nearest wins)",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_attempts": {"type": "integer", "minimum": 1, "description": "attempts in all, first included"},
        "base_delay": _duration("delay before the first retry; doubles each attempt, with full jitter"),
        "max_delay": _duration("cap of any one delay"),
    },
}

BREAKER: JsonObject = {
    "description": "circuit breaker per source/sink instance",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "failure_threshold": {
            "type": "integer",
            "minimum": 1,
            "description": "consecutive transient failures that open the breaker",
        },
        "cool_down": _duration("wait before one half-open probe"),
    },
}

INSTANCE_ENGINE: JsonObject = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "force_universal": {
            "type": "boolean",
            "description": "force the universal data-plane tier for this instance",
        }
    },
}


STATE: JsonObject = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["backend"],
    "description": "where pz remembers things between runs (watermarks, run history, the project lock): "
    "the project's .pz/ folder (local, the default) or a shared backend (docs/deploying.md)",
    "properties": {
        "backend": {
            "type": "string",
            "minLength": 1,
            "description": "local (default, .pz/), postgres, s3, azureblob, or a backend a plugin registers "
            "(entry-point group pipelinez.state_backends)",
        },
        "url": {
            "type": "string",
            "minLength": 1,
            "description": "s3 and azureblob: where the state lives, s3://<bucket>/<prefix> or "
            "az://<container>/<prefix> (the bucket or container must exist)",
        },
        "connection": {
            "type": ["object", "null"],
            "additionalProperties": True,
            "description": "the backend's connection: the connection keys of the connector of the same name "
            "(postgres: host, port, database, user, password, sslmode, options, dsn; s3: endpoint, region, "
            "url_style, use_ssl, access_key_id, secret_access_key, session_token; azureblob: "
            "connection_string, or account_name, account_key, endpoint); secrets through env()",
        },
        "schema": {
            "type": "string",
            "minLength": 1,
            "description": "postgres: the schema of pz's own tables, created on first use (default pz_state)",
        },
        "lease_seconds": {
            "type": "number",
            "minimum": 0.5,
            "description": "how long the project lock outlives a holder that stopped renewing it (a worker "
            "that died); default 60",
        },
    },
}


STAGING: JsonObject = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "description": "staging on shared storage: `url` (where, when neither --staging nor PZ_STAGING_URL says) "
    "and, for an s3:// staging, where the bucket is and how to sign in (the keys of the s3 connector's "
    "connection block, without bucket: from the URL)",
    "properties": {
        "url": {
            "type": "string",
            "minLength": 1,
            "description": "a folder every worker mounts (a path or file://) or s3://bucket/prefix: the ray "
            "executor's staging (default .pz/staging); with the local executor a shared staging each source "
            "load is also published to, so pz retry on another worker reuses it (default: none)",
        },
        "endpoint": {
            "type": "string",
            "minLength": 1,
            "description": "host:port or http(s)://host:port of an S3-compatible server (default: AWS S3)",
        },
        "region": {
            "type": "string",
            "minLength": 1,
            "description": "the bucket's region (default us-east-1)",
        },
        "url_style": {
            "enum": ["path", "vhost"],
            "description": "path or vhost (default path with an endpoint, else vhost)",
        },
        "use_ssl": {
            "type": "boolean",
            "description": "use https (default: the endpoint's scheme, else true)",
        },
        "access_key_id": {"type": "string", "minLength": 1, "description": "access key id"},
        "secret_access_key": {
            "type": "string",
            "minLength": 1,
            "description": "secret access key, from a secret env var: \"{{ env('NAME') }}\"",
        },
        "session_token": {
            "type": "string",
            "minLength": 1,
            "description": "session token of temporary credentials, from a secret env var",
        },
    },
}


def _ref(name: str) -> JsonObject:
    return {"$ref": f"#/$defs/{name}"}


def _document(title: str, properties: JsonObject, required: list[str], defs: JsonObject) -> JsonObject:
    schema: JsonObject = {
        "$schema": DIALECT,
        "title": title,
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    if required:
        schema["required"] = required
    schema["$defs"] = defs
    return schema


def _var_schema() -> JsonObject:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["type"],
        "properties": {
            "type": {"enum": list(VAR_TYPES), "description": "the variable's type"},
            "default": {"type": ["string", "number", "boolean", "null"], "description": "value unless --var"},
            "description": {"type": "string"},
        },
    }


def _env_schema() -> JsonObject:
    return {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "required": {"type": "boolean", "description": "refuse to run when unset and without default"},
            "secret": {"type": "boolean", "description": "never printed in plans, errors or events"},
            "default": {"type": ["string", "number", "boolean"], "description": "value when unset"},
            "description": {"type": "string"},
        },
    }


def _engine_schema() -> JsonObject:
    return {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "threads": {"type": "integer", "minimum": 1, "description": "nodes run at once (default: CPUs)"},
            "fail_fast": {"type": "boolean", "description": "any node failure cancels the whole run"},
            "force_universal": {"type": "boolean", "description": "force the universal data-plane tier"},
            "external_access": {
                "type": "boolean",
                "description": "let pipelines and checks read files, URLs and other databases themselves "
                "(read_csv, postgres_scan, query, ...); off: source() and ref() are their only inputs",
            },
            "memory_limit": {
                "type": "string",
                "pattern": r"^\s*\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$",
                "description": "the process's DuckDB memory budget (e.g. 1GB, at least 64MB), shared by the "
                "DuckDB instances open at once; larger work spills to disk",
            },
            "staging_compression": {
                "enum": list(STAGING_COMPRESSIONS),
                "description": "how staged source loads are compressed: fast (text as is, numbers DuckDB's "
                "light codecs: the least CPU), zstd (text zstd: about half fast's file, more CPU), auto "
                "(DuckDB picks per segment: smallest, slowest) or uncompressed",
            },
            "retry": _ref("retry"),
            "breaker": _ref("breaker"),
            "staging": STAGING,
        },
    }


def _folder_schema() -> JsonObject:
    """A folder's defaults under `pipelines:` in project.yml."""
    return {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "materialized": {
                "enum": list(MATERIALIZATIONS),
                "description": "the default of the folder's pipelines (a sidecar's own key wins)",
            },
            "tags": {
                "type": ["array", "null"],
                "items": {"type": "string", "minLength": 1},
                "uniqueItems": True,
                "description": "added to every pipeline under the folder (the union with deeper folders')",
            },
            "sink": {
                "type": "string",
                "pattern": NAME_PATTERN,
                "description": "every pipeline under the folder without its own INSERT INTO sink(...) "
                "clause writes to output <pipeline name> of this sink instance",
            },
        },
    }


def project_schema() -> JsonObject:
    properties = {
        "name": {"type": "string", "minLength": 1, "description": "the project's name"},
        "pipelines": {
            "type": ["object", "null"],
            "description": "folder config: defaults per folder under pipelines/ (`marts`, `marts/finance`, "
            "`.` for all); deeper folders win",
            "propertyNames": {"pattern": FOLDER_PATTERN},
            "additionalProperties": _folder_schema(),
        },
        "vars": _names(_var_schema(), "typed variables: {{ var('name') }}, overridden with --var name=value"),
        "env": _names(_env_schema(), "every environment variable the project reads: {{ env('NAME') }}"),
        "connectors": {
            "type": ["object", "null"],
            "description": "pins of connector package versions",
            "propertyNames": {"minLength": 1},
            "additionalProperties": {"type": "string", "minLength": 1},
        },
        "engine": _engine_schema(),
        "state": STATE,
        "retention": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {
                "keep_last": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"run staging databases kept (default {DEFAULT_KEEP_LAST})",
                }
            },
        },
    }
    return _document("PipelineZ project.yml", properties, ["name"], {"retry": RETRY, "breaker": BREAKER})


def _instance_properties(kind: str) -> JsonObject:
    return {
        "connector": {"type": "string", "minLength": 1, "description": "the connector, e.g. postgres"},
        "connection": {
            "type": ["object", "null"],
            "additionalProperties": True,
            "description": "connector-owned; checked against the connector's schema (tier 3)",
        },
        "max_concurrency": {
            "type": "integer",
            "minimum": 1,
            "description": f"nodes using this {kind} instance at once",
        },
        "retry": _ref("retry"),
        "engine": INSTANCE_ENGINE,
    }


def source_schema() -> JsonObject:
    sync = {
        "description": "how the dataset is read: full (default) or incremental on a cursor column",
        "type": "object",
        "additionalProperties": False,
        "required": ["mode"],
        "properties": {
            "mode": {"enum": list(SYNC_MODES)},
            "cursor": {"type": "string", "minLength": 1, "description": "the cursor column"},
            "start": {"type": ["string", "number"], "description": "the watermark before the first commit"},
            "window": _duration("windowed backfill: at most this much per run"),
            "lag": _duration("re-read this trailing overlap below the watermark (late-committing rows)"),
        },
        "if": {"properties": {"mode": {"const": "incremental"}}, "required": ["mode"]},
        "then": {"required": ["cursor"]},
    }
    dataset = {
        "description": "a dataset of the source; its connector keys (table, query, path, ...) are open",
        "type": ["object", "null"],
        "additionalProperties": True,
        "properties": {
            "description": {"type": "string", "description": "what the dataset holds (pz docs)"},
            "columns": {
                "type": ["object", "null"],
                "description": "the contract: column name -> DuckDB type, or { type, description }",
                "propertyNames": {"minLength": 1},
                "additionalProperties": {
                    "if": {"type": "string"},
                    "then": {"minLength": 1},
                    "else": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["type"],
                        "properties": {
                            "type": {"type": "string", "minLength": 1},
                            "description": {"type": "string"},
                            "tests": _ref("column_tests"),
                            "data_tests": _ref("column_tests"),
                        },
                    },
                },
            },
            "sync": sync,
            "retry": _ref("retry"),
            "checks": _ref("checks"),
            "data_tests": {
                **_ref("checks"),
                "description": "dbt-style table-level tests (they become checks)",
            },
        },
    }
    properties = _instance_properties("source")
    properties["datasets"] = _names(dataset, "datasets of this source, by name")
    return _document(
        "PipelineZ source (sources/<name>.yml)", properties, ["connector"], {"retry": RETRY, **check_defs()}
    )


def sink_schema() -> JsonObject:
    output = {
        "description": "options of an output; its connector keys (table, path, format, ...) are open",
        "type": ["object", "null"],
        "additionalProperties": True,
        "properties": {
            "strategy": {
                "enum": list(STRATEGIES),
                "description": "replace (default) | merge | append | view (database sinks: a view)",
            },
            "description": {"type": "string", "description": "what the output holds (pz docs)"},
            "keys": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "uniqueItems": True,
                "description": "merge keys",
            },
            "on_delete": {
                "type": "object",
                "additionalProperties": False,
                "required": ["column"],
                "properties": {"column": {"type": "string", "minLength": 1}},
                "description": "merge only: rows with this column true are deleted by key",
            },
            "duplicates": {"enum": list(DUPLICATES), "description": "append only: accept re-sent rows"},
            "allow_empty": {"type": "boolean", "description": "allow a replace to empty the target"},
            "retry": _ref("retry"),
            "input": {"not": {}, "description": "removed: load is inline in pipeline SQL (PZ0112)"},
        },
    }
    properties = _instance_properties("sink")
    properties["outputs"] = _names(output, "options per output; outputs are created by sink() calls")
    return _document("PipelineZ sink (sinks/<name>.yml)", properties, ["connector"], {"retry": RETRY})


def sidecar_schema() -> JsonObject:
    properties = {
        "description": {"type": "string", "description": "what the pipeline computes"},
        "materialized": {
            "enum": list(MATERIALIZATIONS),
            "description": "table (default) | view (a view in staging) | ephemeral (inlined into consumers)",
        },
        "tags": {
            "type": ["array", "null"],
            "items": {"type": "string", "minLength": 1},
            "uniqueItems": True,
            "description": "selectable with --select tag:<t>",
        },
        "checks": _ref("checks"),
        "data_tests": {**_ref("checks"), "description": "dbt-style model-level tests (they become checks)"},
        "columns": {
            "type": ["object", "null"],
            "description": "columns of the pipeline's result: name -> { description, tests }",
            "propertyNames": {"minLength": 1},
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "minProperties": 1,
                "properties": {
                    "description": {"type": "string"},
                    "tests": _ref("column_tests"),
                    "data_tests": _ref("column_tests"),
                },
            },
        },
    }
    return _document("PipelineZ pipeline sidecar (pipelines/<name>.yml)", properties, [], check_defs())


BUILDERS = {
    "project": project_schema,
    "source": source_schema,
    "sink": sink_schema,
    "sidecar": sidecar_schema,
}


def build_schema(kind: str) -> JsonObject:
    return BUILDERS[kind]()


def render(kind: str) -> str:
    return json.dumps(build_schema(kind), indent=2) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    folder = Path(__file__).parent / "schemas"
    for name in KINDS:
        (folder / f"{name}.schema.json").write_text(render(name), encoding="utf-8")
        print(folder / f"{name}.schema.json")
