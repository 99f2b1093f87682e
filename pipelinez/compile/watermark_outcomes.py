"""The outcomes of the SQL route's inference (see `watermark_sql`): why a watermark() call is not recognised
(`Cause`), a recognised lower bound (`Recognized`), and a pipeline's analysis (`PipelineAnalysis`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pipelinez.core.json_types import JsonObject

Json = JsonObject  # a node of DuckDB's JSON parse tree


class Cause(StrEnum):
    """Why a watermark() call is not a recognised lower-bound comparison (PZ0224): one per bullet of
    "Validation and errors", plus the shapes the analysis cannot follow."""

    UPPER_BOUND = "upper_bound"
    EQUALITY = "equality"
    CURSOR_EXPRESSION = "cursor_expression"
    VALUE_COLUMN = "value_column"
    OUTSIDE_COMPARISON = "outside_comparison"
    NOT_A_FILTER = "not_a_filter"
    UNQUALIFIED = "unqualified"
    WRONG_DATASET = "wrong_dataset"
    NOT_SOURCED = "not_sourced"  # decided by the caller, which knows the pipeline's source() calls
    UNTRACEABLE = "untraceable"


@dataclass(frozen=True)
class Recognized:
    """A watermark() comparison recognised as a lower bound on a cursor column."""

    cursor: str  # the column as the base table's read names it
    inclusive: bool  # >=
    # the value side's parse tree (holding the placeholder): the read's lower bound is what it evaluates to
    value: Json | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Unrecognized:
    """A watermark() call that is not a lower bound pz can use, and why."""

    cause: Cause
    detail: str  # words for the message, e.g. "compares o.updated_at < watermark()"


Outcome = Recognized | Unrecognized


@dataclass
class PipelineAnalysis:
    """The outcome of every watermark() call (by its index) and the reads no recognised filter reaches."""

    calls: dict[int, list[Outcome]] = field(default_factory=dict)  # one outcome per place the call appears
    unfiltered: set[tuple[str, str]] = field(default_factory=set)  # read somewhere no filter reaches
    filtered: set[tuple[str, str]] = field(default_factory=set)  # read somewhere under a recognised filter
    gave_up: str = ""  # why the analysis stopped (every call is then unrecognised)

    def recognized(self, index: int) -> list[Recognized]:
        """Every place call `index` is a recognised lower bound (a Jinja variable may print it twice)."""
        return [o for o in self.calls.get(index, []) if isinstance(o, Recognized)]

    def outcome(self, index: int) -> Outcome:
        """One outcome per call: its first problem, else its first recognition; a call that appears nowhere
        in the query (a comment, a string, a Jinja variable never printed) is outside any comparison."""
        if self.gave_up:
            return Unrecognized(Cause.UNTRACEABLE, self.gave_up)
        found = self.calls.get(index, [])
        problems = [o for o in found if isinstance(o, Unrecognized)]
        if problems:
            return problems[0]
        if found:
            return found[0]
        return Unrecognized(Cause.OUTSIDE_COMPARISON, "does not appear in the query (a comment or a string?)")
