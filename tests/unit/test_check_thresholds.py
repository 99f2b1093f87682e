"""dbt's failure-count thresholds: warn_if / error_if compared with a check's failure count."""

from __future__ import annotations

import pytest

from pipelinez.compile.checks import outcome, threshold_hit
from pipelinez.config.model import CheckSpec
from pipelinez.core.diagnostics import Place
from pipelinez.core.vocabulary import CheckSeverity


@pytest.mark.parametrize(
    ("count", "threshold", "hit"),
    [
        (0, "!=0", False),
        (1, "!=0", True),
        (10, ">10", False),
        (11, ">10", True),
        (1, ">=1", True),
        (0, "=0", True),
        (0, "==0", True),
        (3, "<>3", False),
        (4, "<5", True),
        (5, "<=5", True),
        (7, " > 6 ", True),
    ],
)
def test_threshold_hit(count: int, threshold: str, hit: bool) -> None:
    assert threshold_hit(count, threshold) is hit


def _check(severity: str = "error", warn_if: str = "!=0", error_if: str = "!=0") -> CheckSpec:
    options = {"columns": ["id"]}
    return CheckSpec("not_null", options, severity, "n", Place("x.yml"), warn_if=warn_if, error_if=error_if)


@pytest.mark.parametrize(
    ("check", "count", "failed", "severity"),
    [
        (_check(), 0, False, None),
        (_check(), 3, True, CheckSeverity.ERROR),
        (_check("warn"), 3, True, CheckSeverity.WARN),
        (_check(warn_if=">1", error_if=">5"), 1, False, None),
        (_check(warn_if=">1", error_if=">5"), 2, True, CheckSeverity.WARN),
        (_check(warn_if=">1", error_if=">5"), 6, True, CheckSeverity.ERROR),
        (
            _check("warn", error_if=">=1"),
            6,
            True,
            CheckSeverity.WARN,
        ),  # severity warn: error_if not looked at
        (_check(error_if=">100", warn_if=">100"), 50, False, None),
    ],
)
def test_outcome_follows_dbts_order(
    check: CheckSpec, count: int, failed: bool, severity: CheckSeverity | None
) -> None:
    result = outcome(check, "t", count, None)
    assert result.failed is failed
    if severity is not None:
        assert result.severity == severity
