"""Connector pins: URL pins compared with where a package was installed from (PEP 610), and URL credentials
masked in any text pz prints."""

from __future__ import annotations

import pytest

from pipelinez.core.pins import DirectUrl, parse_pin, redact_urls


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("pz-x @ https://user:tok3n@host.example/x.whl", "pz-x @ https://***@host.example/x.whl"),
        ("git+https://ghp_abc123@github.com/o/r@v1", "git+https://***@github.com/o/r@v1"),
        (
            "pip said: Could not fetch https://u:p@h/simple/ (x)",
            "pip said: Could not fetch https://***@h/simple/ (x)",
        ),
        (">=0.1,<0.2", ">=0.1,<0.2"),
        ("pz-x @ file:///src/pz-x", "pz-x @ file:///src/pz-x"),
    ],
)
def test_url_credentials_are_masked(text: str, shown: str) -> None:
    assert redact_urls(text) == shown


def test_a_vcs_pin_url_is_parsed_as_pip_records_it() -> None:
    pinned = DirectUrl.of_pin_url("git+https://tok@GitHub.com/o/r.git@v1.2#egg=r")
    assert pinned == DirectUrl("https://github.com/o/r.git", "git", "v1.2")
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert DirectUrl("https://github.com/o/r.git", "git", "v1.2", commit).matches(pinned)
    assert not DirectUrl("https://github.com/o/r.git", "git", "v1.3", commit).matches(pinned)
    assert not DirectUrl("https://github.com/o/other.git", "git", "v1.2", commit).matches(pinned)
    by_commit = DirectUrl.of_pin_url(f"git+https://github.com/o/r.git@{commit[:10]}")
    assert DirectUrl("https://github.com/o/r.git", "git", commit[:10], commit).matches(by_commit)
    assert DirectUrl("https://github.com/o/r.git", "git", None, commit).matches(
        DirectUrl.of_pin_url(f"git+https://github.com/o/r.git@{commit}")
    )


def test_a_url_pin_is_satisfied_only_by_that_origin() -> None:
    pin = parse_pin("numbers", "pz-numbers @ file:///wheels/pz_numbers-0.1.0-py3-none-any.whl")
    here = DirectUrl("file:///wheels/pz_numbers-0.1.0-py3-none-any.whl")
    assert pin.satisfied_by("0.1.0", "pz-numbers", here)
    assert pin.satisfied_by("9.9", "pz_numbers", here)  # the URL decides, not the version
    assert not pin.satisfied_by("0.1.0", "pz-numbers", None)  # installed from an index
    assert not pin.satisfied_by(
        "0.1.0", "pz-numbers", DirectUrl("file:///other/pz_numbers-0.1.0-py3-none-any.whl")
    )
    assert not pin.satisfied_by("0.1.0", "other-package", here)
