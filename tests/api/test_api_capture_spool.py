"""The capture spool on its own: concurrent appends, files held by a live spool, a torn last line."""

from __future__ import annotations

import threading
from pathlib import Path

from api.runtime.capture_spool import CaptureSpool, spool_directory
from db.queries.endpoint_capture import CaptureRow


def test_concurrent_appends_all_reach_the_sealed_file(tmp_path: Path) -> None:
    spool = CaptureSpool(tmp_path)

    def append(thread: int) -> None:
        for n in range(50):
            spool.append(CaptureRow(thread, f"{thread}-{n}", f"line {thread} {n}"))

    threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sealed = spool.seal()
    assert sealed is not None
    assert sorted(row.event_id for row in sealed.records()) == sorted(
        f"{t}-{n}" for t in range(8) for n in range(50)
    )
    assert spool.seal() is None  # nothing appended since
    sealed.remove()
    assert list(tmp_path.iterdir()) == []


def test_only_files_nobody_holds_are_claimed_and_a_torn_line_is_dropped(tmp_path: Path) -> None:
    writer, other = CaptureSpool(tmp_path), CaptureSpool(tmp_path)
    writer.append(CaptureRow(1, "e-1", "one"))
    assert other.claim_orphans() == []  # the writer holds its file
    writer.close()  # as a dead process would leave it: on disk, unlocked
    (path,) = tmp_path.glob("*.jsonl")
    with path.open("ab") as file:
        file.write(b'{"endpoint_id": 1, "event_id": "e-2", "li')  # killed mid-write
    (claimed,) = other.claim_orphans()
    assert claimed.records() == [CaptureRow(1, "e-1", "one")]
    assert CaptureSpool(tmp_path).claim_orphans() == []  # now held by ``other``
    claimed.remove()


def test_each_database_has_its_own_spool_and_passwords_do_not_name_it(tmp_path: Path) -> None:
    first = spool_directory(tmp_path, "postgresql+psycopg://u:secret@db/one")
    assert first == spool_directory(tmp_path, "postgresql+psycopg://u:secret@db/one")
    assert first != spool_directory(tmp_path, "postgresql+psycopg://u:secret@db/two")
    assert "secret" not in str(first)
