"""The secret `Redactor`: every text that leaves pz (output, events, artifacts, errors) goes through it."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

# fields of a connection string (`Name=value;…`) that hold a credential on their own
_CREDENTIAL_FIELDS = ("accountkey", "sharedaccesssignature", "password", "pwd")
_SAS_SIGNATURE = re.compile(r"(?:^|[?&;])sig=([^&;\s]+)", re.IGNORECASE)
MIN_PART = 8  # a shorter piece is too likely to occur in a message by chance


def credential_parts(secret: str) -> set[str]:
    """Pieces of a secret that a library may print on their own: the credential fields of a connection
    string (`AccountKey=…`, `SharedAccessSignature=…`, `Password=…`) and a SAS token's signature (`sig=…`,
    as written and URL-decoded: Arrow's Azure errors print the SAS's URL, its fields reordered)."""
    parts: set[str] = set()
    if ";" in secret:
        for field in secret.split(";"):
            name, _, value = field.partition("=")
            if name.strip().lower() in _CREDENTIAL_FIELDS:
                parts.add(value.strip())
    for match in _SAS_SIGNATURE.finditer(secret):
        parts.update((match.group(1), unquote(match.group(1))))
    return {part for part in parts if len(part) >= MIN_PART}


class Redactor:
    """Replaces secret values in any text that leaves pz (output, events, artifacts, errors): each value, the
    credential pieces of it a library may print alone (`credential_parts`), and their case variants."""

    MASK = "***"

    def __init__(self, secrets: tuple[str, ...] = ()):
        # the value as declared, and the case variants a template filter (| lower, | upper) would print
        pieces = {p for s in secrets if s for p in (s, *credential_parts(s))}
        variants = {v for p in pieces for v in (p, p.lower(), p.upper())}
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
