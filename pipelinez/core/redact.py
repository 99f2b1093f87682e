"""The secret `Redactor`: every text that leaves pz (output, events, artifacts, errors) goes through it."""

from __future__ import annotations

from typing import Any


class Redactor:
    """Replaces secret values in any text that leaves pz (output, events, artifacts, errors)."""

    MASK = "***"

    def __init__(self, secrets: tuple[str, ...] = ()):
        # the value as declared, and the case variants a template filter (| lower, | upper) would print
        variants = {v for s in secrets if s for v in (s, s.lower(), s.upper())}
        self._secrets = tuple(sorted(variants, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, self.MASK)
        return text

    def deep(self, value: Any, key: str | None = None) -> Any:
        """Mask the free text of an event or artifact. Keys, and the values of structured fields (statuses,
        event names, ids, codes, node names), are never rewritten: a secret that happens to equal `ok` or
        a node name must not corrupt the record."""
        if isinstance(value, str):
            return value if key in STRUCTURED_FIELDS else self(value)
        if isinstance(value, dict):
            return {k: self.deep(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.deep(v, key) for v in value]
        return value


# fields whose values are identifiers or enumerations pz itself produced, never free text
STRUCTURED_FIELDS = frozenset(
    {
        "event",
        "ts",
        "run_id",
        "retry_of",
        "reused_from",
        "id",
        "name",
        "kind",
        "status",
        "code",
        "severity",
        "tier",
        "strategy",
        "provenance",
        "command",
        "instance",
        "from",
        "to",
        "deps",
        "started_at",
        "finished_at",
        "schema_version",
        "pz_version",
    }
)
