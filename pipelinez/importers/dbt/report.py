"""What the import did, in import-report.md and a stdout summary."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelinez.core.diagnostics import Diagnostic

MARKER = "<!-- written by pz import dbt -->"


@dataclass
class Report:
    converted: list[str] = field(default_factory=list)
    approximated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    needs_person: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def markdown(self, project: str, target: str) -> str:
        lines = [MARKER, f"# Import of dbt project `{project}` (target `{target}`)", ""]
        lines += [
            "Run `pz validate` in this folder, then `pz run`. Importing again rewrites these files "
            "(the import is deterministic).",
            "",
        ]
        for title, items in (
            ("Converted", self.converted),
            ("Approximated", self.approximated),
            ("Skipped (not imported)", self.skipped),
            ("Needs a person", self.needs_person),
        ):
            lines.append(f"## {title} ({len(items)})")
            lines.append("")
            lines += [f"- {item}" for item in items] or ["- nothing"]
            lines.append("")
        return "\n".join(lines)

    def summary(self, out: str) -> str:
        return (
            f"imported into {out}: {len(self.converted)} converted, {len(self.approximated)} approximated, "
            f"{len(self.skipped)} skipped, {len(self.needs_person)} need a person (see "
            f"{out}/import-report.md)"
        )
