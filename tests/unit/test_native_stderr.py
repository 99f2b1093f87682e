"""Native writes to fd 2 inside native_stderr() are captured, never shown; fd 2 is restored after."""

from __future__ import annotations

import os
import threading

import pytest

from pipelinez.core.native_stderr import native_stderr


def test_fd2_writes_are_captured_and_fd2_restored(capfd: pytest.CaptureFixture[str]) -> None:
    with native_stderr() as outer:
        os.write(2, b"thread '<unnamed>' panicked at src/x.rs:1:1:\nboom\n")
        with native_stderr() as inner:
            os.write(2, b"inner\n")
    os.write(2, b"after\n")
    assert "panicked at" in outer.text and "inner" in outer.text
    assert inner.text == "inner\n"
    assert capfd.readouterr().err == "after\n"


def test_threads_share_one_redirect(capfd: pytest.CaptureFixture[str]) -> None:
    texts: list[str] = []
    start = threading.Barrier(4)

    def work(i: int) -> None:
        start.wait()
        with native_stderr() as captured:
            os.write(2, f"t{i}\n".encode())
        texts.append(captured.text)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.write(2, b"restored\n")
    assert all(f"t{i}" in "".join(texts) for i in range(4))  # a capture may also see its neighbours' text
    assert capfd.readouterr().err == "restored\n"
