"""profiles.yml: the active target of the project's profile, as a pz sink (and source connection)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelinez.core.diagnostics import PzError, error
from pipelinez.core.json_types import JsonObject
from pipelinez.importers.dbt.yamlio import load_yaml, mapping

_ENV_VAR = re.compile(r"env_var\(\s*['\"](\w+)['\"]\s*(?:,\s*['\"]([^'\"]*)['\"]\s*)?\)")
_SECRET_KEYS = {"password", "pass", "token", "private_key", "motherduck_token"}


@dataclass
class Target:
    name: str
    type: str
    schema: str
    database: str
    connection: JsonObject
    env: dict[str, JsonObject] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _profiles_file(root: Path, environ: dict[str, str]) -> Path | None:
    places = [root]
    if environ.get("DBT_PROFILES_DIR"):
        places.append(Path(environ["DBT_PROFILES_DIR"]))
    places.append(Path(environ.get("HOME", str(Path.home()))) / ".dbt")
    for place in places:
        if (place / "profiles.yml").is_file():
            return place / "profiles.yml"
    return None


def env_calls(text: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in _ENV_VAR.finditer(text)]


def to_pz_env(text: str) -> str:
    """`env_var('X', 'd')` → `env('X', 'd')` (pz's spelling; env_var is also accepted by pz)."""
    return re.sub(r"\benv_var\(", "env(", text)


def read_target(root: Path, profile: str, wanted: str | None, environ: dict[str, str]) -> Target:
    path = _profiles_file(root, environ)
    if path is None:
        raise PzError([error("PZ0141", f"no profiles.yml for profile '{profile}'", file="profiles.yml")])
    rel = "profiles.yml" if path.parent == root else str(path)
    entry = mapping(mapping(load_yaml(path, rel)).get(profile))
    name = wanted or str(entry.get("target") or "dev")
    outputs = mapping(entry.get("outputs"))
    if name not in outputs:
        known = ", ".join(sorted(outputs)) or "none"
        message = f"profile '{profile}' has no target '{name}' (targets: {known})"
        raise PzError([error("PZ0141", message, file=rel)])
    return _target(name, mapping(outputs[name]), rel)


def _target(name: str, spec: JsonObject, rel: str) -> Target:
    kind = str(spec.get("type") or "")
    env: dict[str, JsonObject] = {}
    for key, value in spec.items():
        for var, default in env_calls(str(value)):
            decl: JsonObject = {}
            if key in _SECRET_KEYS:
                decl["secret"] = True
            if default is None:
                decl["required"] = True
            else:
                decl["default"] = default
            env[var] = decl
    if kind == "duckdb":
        return _duckdb(name, spec, env)
    if kind == "postgres":
        return _postgres(name, spec, env)
    message = (
        f"target '{name}' is a {kind or 'typeless'} target; pz import dbt reads duckdb and postgres targets"
    )
    raise PzError([error("PZ0142", message, file=rel)])


def _value(value: Any) -> Any:
    if isinstance(value, str) and "{{" in value:
        text = to_pz_env(value)
        return re.sub(r"\s*\|\s*(int|as_number|as_text|string)\s*(?=}})", " ", text)
    return value


def _duckdb(name: str, spec: JsonObject, env: dict[str, JsonObject]) -> Target:
    path = str(spec.get("path") or ":memory:")
    notes = []
    if path == ":memory:" or path.startswith("md:"):
        notes.append(
            f"target '{name}' writes to {path}; the import writes to the file warehouse.duckdb instead"
        )
        path = "warehouse.duckdb"
    database = str(spec.get("database") or Path(path).stem)
    schema = str(spec.get("schema") or "main")
    return Target(name, "duckdb", schema, database, {"path": _value(path)}, env, notes)


def _postgres(name: str, spec: JsonObject, env: dict[str, JsonObject]) -> Target:
    database = str(spec.get("dbname") or spec.get("database") or "")
    connection: JsonObject = {}
    for pz_key, keys in (("host", ["host"]), ("port", ["port"]), ("database", ["dbname", "database"])):
        for key in keys:
            if key in spec:
                connection[pz_key] = _value(spec[key])
                break
    connection["user"] = _value(spec.get("user") or spec.get("username") or "postgres")
    notes = []
    password = spec.get("password", spec.get("pass"))
    if isinstance(password, str) and "env_var" in password:
        connection["password"] = _value(password)
    elif password not in (None, ""):
        var = re.sub(r"\W", "_", f"{name}_PASSWORD").upper()
        env[var] = {"required": True, "secret": True}
        connection["password"] = "{{ env('" + var + "') }}"
        notes.append(f"the password of target '{name}' is not copied: set the environment variable {var}")
    if spec.get("sslmode"):
        connection["sslmode"] = spec["sslmode"]
    schema = str(_value(spec.get("schema") or "public"))
    return Target(name, "postgres", schema, database, connection, env, notes)


def default_environ() -> dict[str, str]:
    return dict(os.environ)
