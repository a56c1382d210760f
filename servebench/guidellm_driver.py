"""The process behind ``servebench.guidellm_process.ResidentGuidellm``: guidellm imported once,
then one ``guidellm run`` after another, as its parent asks.

A request is a JSON line on stdin, ``{"arguments": [...], "log": path}``: the arguments of
``guidellm`` (from ``run``), and the file that gets everything the run prints, as a
``guidellm`` process's output would be. The reply is a JSON line ``{"status": N}`` on what was
stdout when the process started (``N`` is the exit status the ``guidellm`` command would have
had). Between runs, what guidellm or its worker processes print goes to this process's stderr.

Run as ``python -m servebench.guidellm_driver``; imported, it runs nothing (the forkserver that
guidellm's scheduler starts its worker from imports this module).
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.forkserver
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click
from guidellm.cli import cli
from guidellm.settings import settings

# What guidellm's worker processes need, imported once by the forkserver they are forked from
# (otherwise each worker would import them itself).
FORKSERVER_PRELOAD = ["guidellm.__main__", "guidellm.scheduler"]


def main() -> None:
    # The reply channel is the stdout this process was started with; guidellm's own prints to
    # stdout go to stderr from here on, and to a run's log while it runs.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    if settings.mp_context_type == "forkserver":
        # Started now, while its output goes to this process's stderr: started inside a run,
        # every later run's worker processes would print into that first run's log.
        multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)
        multiprocessing.forkserver.ensure_running()
    print(f"guidellm process {os.getpid()} ready", file=sys.stderr, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        with _output_to(Path(request["log"])):
            status = run(request["arguments"])
        replies.write(json.dumps({"status": status}) + "\n")


def run(arguments: Sequence[str]) -> int:
    """One ``guidellm`` command in this process; its exit status."""
    try:
        cli.main(list(arguments), prog_name="guidellm", standalone_mode=False)
    except click.exceptions.ClickException as error:
        error.show()
        return error.exit_code
    except click.exceptions.Exit as error:
        return int(error.exit_code)
    except click.exceptions.Abort:
        return 1
    except SystemExit as error:
        return error.code if isinstance(error.code, int) else (0 if error.code is None else 1)
    except Exception:  # what the guidellm command would die of: its traceback ends the log
        traceback.print_exc()
        return 1
    return 0


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """File descriptors 1 and 2 (so Python's streams, and anything that writes to them) into
    ``log`` for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log.open("w") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


if __name__ == "__main__":
    main()
