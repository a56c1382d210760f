"""``RankWatch`` over a hung group: rank 0's ``CollectiveClock`` inside a collective past the
stall limit, the helpers' counts in their files, real child processes as the helpers, and
recording actions in place of the NCCL abort and ``os._exit``."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.trainer.test_rank_watch import Recorder
from trainer.eagle.collective_clock import CollectiveClock, count_file_for, read_count
from trainer.eagle.rank_watch import RankWatch

POLL = 0.05
STALL = 0.3
# Past the stall, a poll and both graces: an action not taken by then never is.
SETTLE = STALL + POLL + 0.2 + 0.3 + 1.0


@pytest.fixture
def helpers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two sleeping children as ranks 1 and 2, killed at the end of the test."""
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    yield children
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


def counted(tmp_path: Path, counts: list[int | None]) -> tuple[CollectiveClock, list[Path]]:
    """Rank 0's clock and the helpers' count files, holding ``counts`` (None: not written yet)."""
    store = tmp_path / "store"
    clock = CollectiveClock(count_file_for(store, 0))
    files = [count_file_for(store, rank) for rank in range(1, len(counts) + 1)]
    for path, count in zip(files, counts, strict=True):
        if count is not None:
            path.write_text(str(count))
    return clock, files


def watch(
    helpers: list[subprocess.Popen[bytes]],
    backend: str,
    clock: CollectiveClock,
    files: list[Path],
    recorder: Recorder,
) -> RankWatch:
    return RankWatch(
        helpers,
        backend,
        clock=clock,
        count_files=files,
        stall_seconds=STALL,
        poll_seconds=POLL,
        abort_grace_seconds=0.2,
        exit_grace_seconds=0.3,
        abort=recorder.abort,
        end_process=recorder.end_process,
    )


def enter_collectives(clock: CollectiveClock, count: int) -> None:
    """Rank 0 through ``count - 1`` collectives; the caller then waits in the last one."""
    for _ in range(count - 1):
        with clock.collective():
            pass


def test_a_rank_that_never_reached_the_collective_is_named_and_the_helpers_killed(
    helpers: list[subprocess.Popen[bytes]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="trainer.eagle.rank_watch")
    recorder = Recorder()
    clock, files = counted(tmp_path, [4, 5])
    enter_collectives(clock, 5)
    rank_watch = watch(helpers, "gloo", clock, files, recorder)
    with rank_watch.watching(), clock.collective():
        deadline = time.monotonic() + 30
        while rank_watch.hung is None and time.monotonic() < deadline:
            time.sleep(POLL)
        assert all(helper.wait(30) is not None for helper in helpers)  # killed: gloo's collective fails
    assert read_count(count_file_for(tmp_path / "store", 0)) == 5
    assert rank_watch.hung is not None
    assert re.fullmatch(
        rf"data-parallel rank 1 \(pid {helpers[0].pid}\) did not reach collective 5 in \d+ s while rank 0 "
        r"waited in it: hung",
        rank_watch.hung,
    )
    assert recorder.actions == []  # gloo: the killed peers fail the collective, no abort needed
    assert caplog.records[0].getMessage().startswith(rank_watch.hung)


def test_a_collective_every_rank_reached_that_never_completes_is_aborted_on_nccl(
    helpers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    recorder = Recorder()
    clock, files = counted(tmp_path, [3, 3])
    enter_collectives(clock, 3)
    rank_watch = watch(helpers, "nccl", clock, files, recorder)
    with rank_watch.watching(), clock.collective():
        assert recorder.done.wait(30)
    assert recorder.actions == ["abort", "end_process"]
    assert rank_watch.hung is not None
    assert re.fullmatch(
        r"collective 3 did not complete in \d+ s though every data-parallel rank reached it", rank_watch.hung
    )


@pytest.mark.parametrize("starting", [0, None], ids=["at zero", "no file yet"])
def test_a_helper_still_loading_before_its_first_collective_is_not_hung(
    helpers: list[subprocess.Popen[bytes]], tmp_path: Path, starting: int | None
) -> None:
    """Rank 0 waits in the first collective while a helper loads the target (minutes, for a
    large one): that is the join's and the collective timeout's business, not a hang."""
    recorder = Recorder()
    clock, files = counted(tmp_path, [starting, 1])
    rank_watch = watch(helpers, "nccl", clock, files, recorder)
    with rank_watch.watching(), clock.collective():
        time.sleep(SETTLE)
    assert rank_watch.hung is None
    assert recorder.actions == []
    assert all(helper.poll() is None for helper in helpers)


def test_rank_0_busy_between_collectives_is_not_a_hang(
    helpers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """Rank 0's checkpoints and uploads happen between collectives, however long they take."""
    recorder = Recorder()
    clock, files = counted(tmp_path, [2, 1])
    enter_collectives(clock, 3)
    with watch(helpers, "nccl", clock, files, recorder).watching() as rank_watch:
        time.sleep(SETTLE)
    assert rank_watch.hung is None
    assert recorder.actions == []
    assert all(helper.poll() is None for helper in helpers)


def test_the_clock_writes_the_count_before_the_collective_and_times_only_inside_it(tmp_path: Path) -> None:
    clock = CollectiveClock(tmp_path / "count")
    assert read_count(tmp_path / "count") == 0
    assert clock.seconds_inside() is None
    with clock.collective():
        assert read_count(tmp_path / "count") == 1
        time.sleep(0.05)
        inside = clock.seconds_inside()
        assert inside is not None
        assert inside >= 0.05
    assert clock.seconds_inside() is None
    (tmp_path / "count").write_text("")  # a reader mid-write sees nothing yet
    assert read_count(tmp_path / "count") is None
    assert read_count(tmp_path / "missing") is None
