"""The http source's resume spool: a later attempt replays exactly the batches of the pages earlier attempts
completed, in order, across several failed attempts, never a batch of a page that failed midway."""

from __future__ import annotations

import pyarrow as pa

from pipelinez.connectors.http import resume


def batch(*ids: int) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array(ids, pa.int64())})


def state(pages: int) -> resume.WalkState:
    return resume.WalkState(f"next-{pages}", pages, pages, frozenset(), "", (("id", "BIGINT"),), frozenset())


def ids(spool: resume.Spool) -> list[int]:
    return [i for b in spool.replay() for i in b.column("id").to_pylist()]


def test_replay_holds_the_complete_pages_of_every_attempt_in_order() -> None:
    key = resume.read_key("run-1", "api", "items", {"path": "/x"}, None)
    spool = resume.spool_for(key)
    try:
        # attempt 1: pages 1 and 2 complete (page 2 in two batches), page 3 fails after one batch
        spool.begin()
        spool.write(batch(1))
        spool.commit(state(1))
        spool.write(batch(2))
        spool.write(batch(3))
        spool.commit(state(2))
        spool.write(batch(99))  # page 3, never completed
        resume.release(spool)

        again = resume.spool_for(key)
        assert again is spool and again.state == state(2)
        assert ids(again) == [1, 2, 3]
        # attempt 2: page 3 completes, page 4 fails midway
        again.begin()
        again.write(batch(4))
        again.commit(state(3))
        again.write(batch(98))
        resume.release(again)

        third = resume.spool_for(key)
        assert ids(third) == [1, 2, 3, 4]  # neither 99 nor 98
        third.begin()
        third.write(batch(5))
        third.commit(state(4))
        assert ids(third) == [1, 2, 3, 4, 5]
        folder = third.folder
        resume.finished(third)
        assert not folder.exists()
        assert resume.spool_for(key).state is None  # a fresh read after a finished one
    finally:
        resume.finished(resume.spool_for(key))


def test_a_new_run_drops_the_spools_of_other_runs() -> None:
    old = resume.spool_for(resume.read_key("run-a", "api", "items", {}, None))
    old.begin()
    old.write(batch(1))
    old.commit(state(1))
    resume.release(old)
    fresh = resume.spool_for(resume.read_key("run-b", "api", "items", {}, None))
    try:
        assert not old.folder.exists()
        assert fresh.state is None
        other_options = resume.spool_for(resume.read_key("run-b", "api", "items", {"limit": 5}, None))
        assert other_options is not fresh  # another read of the same run
        resume.finished(other_options)
    finally:
        resume.finished(fresh)
