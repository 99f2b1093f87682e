"""Tier 5 (`pz validate --connect`): connection check per instance, schema fetch for datasets without
columns (cached in .pz/target/schemas.json for tier 4), schema drift against contracts, sink permission
probe. Every finding is gathered; nothing raises for a user error."""

from __future__ import annotations

import json
from pathlib import Path

from pipelinez.compile.dag import CompiledDag
from pipelinez.compile.instances import ResolvedInstance
from pipelinez.compile.nodes import SinkWriteNode
from pipelinez.compile.work import dataset_request, endpoint, output_request
from pipelinez.config.model import SinkSpec, SourceSpec
from pipelinez.connectors.sdk import Connector
from pipelinez.core.diagnostics import Diagnostic, PzConnectorError, error, warning
from pipelinez.core.duck_types import parse_type
from pipelinez.core.state.backend import StateBackendError
from pipelinez.engine.state.shared import SCHEMA_CACHE, backend_for
from pipelinez.engine.state.statedir import state_error


def _same_type(declared: str, live: str) -> bool:
    """Whether two type names mean the same DuckDB type, as DuckDB's own parser spells them."""
    try:
        return parse_type(declared) == parse_type(live)
    except ValueError:
        return " ".join(declared.upper().split()) == " ".join(live.upper().split())


Schemas = dict[str, list[tuple[str, str]]]  # "<source>.<dataset>" -> [(column, type), ...]


def check_connectivity(dag: CompiledDag) -> tuple[list[Diagnostic], list[Diagnostic], Schemas]:
    """(errors, warnings, the schema of every dataset fetched), the schemas also cached for tier 4."""
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    redact = dag.redactor
    schemas: Schemas = {}
    for kind, instances in (("source", dag.sources), ("sink", dag.sinks)):
        for name, inst in sorted(instances.items()):
            spec = inst.spec
            try:
                connector = endpoint(dag.project, inst).connect()
            except Exception as exc:
                errors.append(error("PZ0701", redact(f"{kind} '{name}': {exc}"), file=spec.file))
                continue
            try:
                try:
                    connector.check_connection()
                except PzConnectorError as exc:
                    errors.append(
                        error("PZ0601", redact(f"{kind} '{name}': {exc.message}"), place=spec.place)
                    )
                    continue
                if kind == "source":
                    e, w = _source_checks(dag, name, inst, connector, schemas)
                else:
                    e, w = _sink_checks(dag, name, inst, connector)
                errors += e
                warnings += w
            finally:
                connector.close()
    try:
        _write_cache(dag.project.state_dir, schemas)
    except OSError as exc:
        errors += state_error(exc, dag.project.state_dir).diagnostics
    if dag.state:
        errors += _check_state_backend(dag, bool(schemas))
    return errors, warnings, schemas


def _check_state_backend(dag: CompiledDag, cached: bool) -> list[Diagnostic]:
    """Tier 5 of a shared state backend: reachable and writable (a write rolled back); the schema cache
    just written is copied there, so a fresh worker's tier 4 has it too."""
    backend = backend_for(dag.project, dag.state)
    try:
        backend.check_writable()
        cache = dag.project.state_dir / "target" / SCHEMA_CACHE
        if cached and cache.is_file():
            backend.put_blob(SCHEMA_CACHE, cache.read_bytes())
    except StateBackendError as exc:
        return list(exc.diagnostics)
    finally:
        backend.close()
    return []


def _source_checks(
    dag: CompiledDag,
    name: str,
    inst: ResolvedInstance,
    connector: Connector,
    schemas: dict[str, list[tuple[str, str]]],
) -> tuple[list[Diagnostic], list[Diagnostic]]:
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    spec = inst.spec
    assert isinstance(spec, SourceSpec)
    for ds_name, ds in sorted(spec.datasets.items()):
        request = dataset_request(dag.project, inst, ds_name)
        try:
            live = connector.fetch_schema(request)
        except PzConnectorError as exc:
            errors.append(
                error(
                    "PZ0602",
                    dag.redactor(f"source '{name}' dataset '{ds_name}': {exc.message}"),
                    place=ds.place,
                )
            )
            continue
        schemas[f"{name}.{ds_name}"] = live
        if not ds.columns:
            continue
        live_types = {c: t for c, t in live}
        for col, declared in ds.columns.items():
            if col not in live_types:
                errors.append(
                    error(
                        "PZ0603",
                        f"source '{name}' dataset '{ds_name}': column '{col}' is in the "
                        f"contract but not in the live dataset (live: "
                        f"{', '.join(live_types)})",
                        place=ds.place,
                    )
                )
            elif not _same_type(declared, live_types[col]):
                errors.append(
                    error(
                        "PZ0604",
                        f"source '{name}' dataset '{ds_name}': column '{col}' is declared "
                        f"{declared} but is {live_types[col]} in the live dataset",
                        place=ds.place,
                    )
                )
        for col in live_types:
            if col not in ds.columns:
                warnings.append(
                    warning(
                        "PZ0605",
                        f"source '{name}' dataset '{ds_name}': live column '{col}' is not in the contract",
                        place=ds.place,
                    )
                )
    return errors, warnings


def _sink_checks(
    dag: CompiledDag, name: str, inst: ResolvedInstance, connector: Connector
) -> tuple[list[Diagnostic], list[Diagnostic]]:
    errors: list[Diagnostic] = []
    spec = inst.spec
    assert isinstance(spec, SinkSpec)
    outputs = {n.output for n in dag.nodes.values() if isinstance(n, SinkWriteNode) and n.sink == name}
    for output in sorted(outputs | set(spec.outputs)):
        out = spec.outputs.get(output)
        request = output_request(dag.project, inst, output)
        try:
            connector.probe_output(request)
        except PzConnectorError as exc:
            errors.append(
                error(
                    "PZ0606",
                    dag.redactor(f"sink '{name}' output '{output}': {exc.message}"),
                    place=out.place if out else spec.place,
                )
            )
    return errors, []


def _write_cache(state_dir: Path, schemas: dict[str, list[tuple[str, str]]]) -> None:
    if not schemas:
        return
    path = state_dir / "target" / SCHEMA_CACHE
    path.parent.mkdir(parents=True, exist_ok=True)
    existing: dict[str, list[list[str]]] = {}
    try:
        existing = json.loads(path.read_text(encoding="utf-8")).get("datasets", {})
    except (OSError, ValueError, AttributeError):
        existing = {}
    existing.update({k: [list(c) for c in v] for k, v in schemas.items()})
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "datasets": existing}, indent=2), encoding="utf-8")
    tmp.replace(path)
