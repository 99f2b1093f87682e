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

    def deep(self, value: Any) -> Any:
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {k: self.deep(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.deep(v) for v in value]
        return value
