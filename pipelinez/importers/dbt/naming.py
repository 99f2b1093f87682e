"""Relation names as dbt names them: generate_schema_name (the project's own macro when it has one)."""

from __future__ import annotations

from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import SandboxedEnvironment

from pipelinez.importers.dbt.profiles import Target


class SchemaNamer:
    def __init__(self, target: Target, macro_source: str | None):
        self.target = target
        self.macro_source = macro_source
        self.failures: list[str] = []

    def schema(self, custom: Any, resource_type: str, name: str) -> str:
        custom_name = None if custom in (None, "") else str(custom)
        if self.macro_source is not None:
            rendered = self._render(custom_name, resource_type, name)
            if rendered is not None:
                return rendered
        if custom_name is None:
            return self.target.schema
        return f"{self.target.schema}_{custom_name.strip()}"

    def _render(self, custom: str | None, resource_type: str, name: str) -> str | None:
        env = SandboxedEnvironment(extensions=["jinja2.ext.do"])
        target = {
            "name": self.target.name,
            "schema": self.target.schema,
            "type": self.target.type,
            "database": self.target.database,
        }
        node = {"resource_type": resource_type, "name": name, "config": {}}
        call = "{{ generate_schema_name(custom, node) }}"
        try:
            template = env.from_string((self.macro_source or "") + call)
            text = template.render(custom=custom, node=node, target=target).strip()
        except (TemplateError, TypeError, ValueError, AttributeError) as exc:
            self.failures.append(f"generate_schema_name could not be evaluated for '{name}': {exc}")
            return None
        return text.split()[-1] if text else None
