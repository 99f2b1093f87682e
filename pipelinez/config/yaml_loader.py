"""Parsing project YAML, keeping where every key and value is: the plainest files by `config.yaml_fast`, the
others by ruamel.yaml's round-trip loader (`config.yaml_ruamel`, imported only then), with the same result.

`parse_yaml` turns text into a `YamlDoc`: plain Python data (dict, list, str, int, float, bool, None) for
the schema to check, and the 1-based line/column of every mapping key, mapping value and sequence item.
Nothing here raises on bad input: broken YAML is a PZ0101 diagnostic, an unreadable file a PZ0108.
Timestamps stay the text the user wrote (`2024-01-01` is the string "2024-01-01"); types are the
compile layer's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipelinez.config.positions import JsonPath, LineCol, Positions
from pipelinez.config.textfile import read_text
from pipelinez.config.yaml_fast import MAX_DEPTH, MAX_NODES, read_plain
from pipelinez.core.diagnostics import Diagnostic
from pipelinez.core.json_types import JsonObject

__all__ = ["MAX_DEPTH", "MAX_NODES", "YamlDoc", "load_yaml_file", "parse_yaml", "position_of"]


@dataclass(frozen=True)
class YamlDoc:
    """One parsed project YAML file: its top-level mapping as plain data, and where everything is."""

    file: str  # project-relative POSIX path
    data: JsonObject
    positions: Positions

    def locate(self, path: JsonPath, *, at: str = "key") -> LineCol:
        return self.positions.locate(path, at=at)


def position_of(doc: YamlDoc, path: JsonPath, *, at: str = "key") -> LineCol:
    """1-based (line, col) of `path` in `doc` (`at`: "key"/"value"); nearest existing ancestor if absent."""
    return doc.positions.locate(path, at=at)


def load_yaml_file(path: Path, file: str) -> tuple[YamlDoc | None, list[Diagnostic]]:
    """Read and parse `path`, shown to users as `file` (project-relative). Never raises."""
    text, problems = read_text(path, file)
    if text is None:
        return None, problems
    return parse_yaml(text, file)


def parse_yaml(text: str, file: str) -> tuple[YamlDoc | None, list[Diagnostic]]:
    """Parse `text` whose top level must be a mapping. Never raises: problems come back as PZ0101. The
    plainest YAML is read by `yaml_fast` (the same data and positions, several times faster), the rest by
    ruamel."""
    plain = read_plain(text)
    if plain is not None:
        return YamlDoc(file, plain[0], Positions(file, plain[1], plain[2])), []
    return _parse_ruamel(text, file)


def _parse_ruamel(text: str, file: str) -> tuple[YamlDoc | None, list[Diagnostic]]:
    """ruamel's round-trip reading (`config.yaml_ruamel`, imported on first use: a project whose files are
    all plain never imports ruamel)."""
    from pipelinez.config.yaml_ruamel import parse_ruamel

    return parse_ruamel(text, file)
