"""Ids from a page of the OS's randomness: version 4, all different, and different in a child
process forked mid-page."""

import os

from app.ids import uuid4


def test_ids_are_random_version_4_uuids_all_different() -> None:
    ids = [uuid4() for _ in range(10_000)]  # several pages

    assert {i.version for i in ids} == {4}
    assert len(set(ids)) == len(ids)


def test_a_forked_child_hands_out_ids_of_its_own() -> None:
    uuid4()  # the parent is mid-page
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its next ids, to the parent
        os.close(read)
        os.write(write, b"".join(uuid4().bytes for _ in range(8)))
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        theirs = pipe.read()
    os.waitpid(child, 0)
    ours = b"".join(uuid4().bytes for _ in range(8))

    assert len(theirs) == 128
    assert {theirs[i : i + 16] for i in range(0, 128, 16)}.isdisjoint(
        {ours[i : i + 16] for i in range(0, 128, 16)}
    )
