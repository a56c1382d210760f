"""``RankWatch`` over real child processes, with recording actions in place of the NCCL abort
and ``os._exit`` (neither can run here: gloo's abort does not unblock a collective)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import torch.distributed.distributed_c10d as c10d

from trainer.eagle.rank_watch import RankWatch, abort_every_group

POLL = 0.05
ABORT_GRACE = 0.2
EXIT_GRACE = 0.3
# Longer than a poll and both graces together: an action not taken by then never is.
SETTLE = POLL + ABORT_GRACE + EXIT_GRACE + 1.0

Start = Callable[[str], subprocess.Popen[bytes]]


@pytest.fixture
def start() -> Iterator[Start]:
    """Starts ``python -c CODE`` children, killed at the end of the test."""
    children: list[subprocess.Popen[bytes]] = []

    def start_child(code: str) -> subprocess.Popen[bytes]:
        children.append(subprocess.Popen([sys.executable, "-c", code]))
        return children[-1]

    yield start_child
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


SLEEPER = "import time; time.sleep(60)"
EXITS_WITH_3 = "import sys; sys.exit(3)"


class Recorder:
    def __init__(self) -> None:
        self.actions: list[str] = []
        self.done = threading.Event()

    def abort(self) -> None:
        self.actions.append("abort")

    def end_process(self) -> None:
        self.actions.append("end_process")
        self.done.set()


def watch(
    helpers: list[subprocess.Popen[bytes]],
    backend: str,
    recorder: Recorder,
    *,
    abort: Callable[[], None] | None = None,
    abort_grace_seconds: float = ABORT_GRACE,
) -> RankWatch:
    return RankWatch(
        helpers,
        backend,
        poll_seconds=POLL,
        abort_grace_seconds=abort_grace_seconds,
        exit_grace_seconds=EXIT_GRACE,
        abort=abort or recorder.abort,
        end_process=recorder.end_process,
    )


def test_a_lost_rank_on_nccl_aborts_then_ends_the_process(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="trainer.eagle.rank_watch")
    recorder = Recorder()
    sleeper, exits = start(SLEEPER), start(EXITS_WITH_3)
    with watch([sleeper, exits], "nccl", recorder).watching():
        assert recorder.done.wait(30)
    assert recorder.actions == ["abort", "end_process"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors[0] == f"data-parallel rank 2 (pid {exits.pid}) exited with 3 while rank 0 is in the group"
    assert [r.levelno for r in caplog.records].count(logging.CRITICAL) == 1
    assert "lost rank 2" in caplog.records[-1].getMessage()


def test_the_grace_comes_before_the_abort(start: Start) -> None:
    recorder = Recorder()
    aborted = threading.Event()
    exits = start(EXITS_WITH_3)
    exits.wait()
    began = time.monotonic()
    with watch([exits], "nccl", recorder, abort=aborted.set, abort_grace_seconds=1.0).watching():
        assert aborted.wait(30)
        assert time.monotonic() - began >= 1.0


def test_a_lost_rank_on_gloo_is_only_logged(start: Start, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="trainer.eagle.rank_watch")
    recorder = Recorder()
    exits = start(EXITS_WITH_3)
    with watch([exits], "gloo", recorder).watching():
        time.sleep(SETTLE)
    assert recorder.actions == []
    assert [r.getMessage() for r in caplog.records] == [
        f"data-parallel rank 1 (pid {exits.pid}) exited with 3 while rank 0 is in the group"
    ]


def test_nothing_fires_after_the_watch_stops(start: Start, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="trainer.eagle.rank_watch")
    recorder = Recorder()
    sleeper = start(SLEEPER)
    rank_watch = watch([sleeper], "nccl", recorder)
    rank_watch.start()
    time.sleep(3 * POLL)
    rank_watch.stop()  # rank 0 left the group; now its helpers exit
    sleeper.kill()
    sleeper.wait()
    time.sleep(SETTLE)
    assert recorder.actions == []
    assert caplog.records == []


def test_rank_0_leaving_after_the_abort_keeps_the_process(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="trainer.eagle.rank_watch")
    recorder = Recorder()
    exits = start(EXITS_WITH_3)
    leaving: list[threading.Thread] = []

    def abort_and_leave() -> None:
        # As in production: the abort fails rank 0's collective and its main thread leaves
        # the group, which stops the watch.
        recorder.abort()
        leaving.append(threading.Thread(target=rank_watch.stop))
        leaving[0].start()

    rank_watch = watch([exits], "nccl", recorder, abort=abort_and_leave)
    rank_watch.start()
    time.sleep(SETTLE)
    leaving[0].join(30)
    assert recorder.actions == ["abort"]
    assert not [r for r in caplog.records if r.levelno == logging.CRITICAL]


def test_an_abort_that_fails_still_ends_the_process(start: Start, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="trainer.eagle.rank_watch")
    recorder = Recorder()

    def failing_abort() -> None:
        recorder.abort()
        raise RuntimeError("not an NCCL group")

    with watch([start(EXITS_WITH_3)], "nccl", recorder, abort=failing_abort).watching():
        assert recorder.done.wait(30)
    assert recorder.actions == ["abort", "end_process"]
    assert "aborting the NCCL group failed" in caplog.text


def test_the_default_abort_is_torchs_looked_up_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    aborted = threading.Event()
    monkeypatch.setattr(c10d, "_abort_process_group", aborted.set)
    abort_every_group()
    assert aborted.is_set()
    # A torch without the private API (the GPU image pins its own) fails the call, which the
    # watch logs before its fallback; importing the trainer does not fail.
    monkeypatch.delattr(c10d, "_abort_process_group")
    with pytest.raises(AttributeError):
        abort_every_group()
