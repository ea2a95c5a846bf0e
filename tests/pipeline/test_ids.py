"""Ids stay unique across processes: a forked child never reuses its parent's sequence."""

from __future__ import annotations

import os

import pytest

from toolkeeper.pipeline.ids import new_call_id, new_event_id, new_id


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_forked_child_draws_its_own_prefix() -> None:
    parent = new_call_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        try:
            os.write(write, new_call_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pipe.read().decode()
    os.waitpid(pid, 0)
    assert len(child) == len(parent) == 28
    assert child[:16] != parent[:16]  # the random prefix
    assert new_call_id()[:16] == parent[:16]  # the parent's own sequence goes on


def test_ids_are_distinct_and_prefixed() -> None:
    ids = {new_call_id(), new_event_id(), new_id("se_")}
    assert len(ids) == 3
    assert any(i.startswith("e") for i in ids) and any(i.startswith("se_") for i in ids)
