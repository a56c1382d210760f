"""scripts/gpu-payload.sh: the extra wheels it downloads for the GPU image are pinned in the lock.

The script downloads exactly the `name==version` lines of requirements.lock whose name is in
scripts/gpu-payload-extras.txt; a name the lock does not pin (renamed, dropped, another spelling)
would leave its wheel behind silently and fail the GPU check on the GPU machine, where nothing
can be installed.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_extra_wheel_is_pinned_in_the_lock() -> None:
    extras = (REPO_ROOT / "scripts" / "gpu-payload-extras.txt").read_text().split()
    lock = (REPO_ROOT / "requirements.lock").read_text()
    # grep -E "^(name|...)==" as the script matches: case and spelling as the lock writes them.
    unpinned = [name for name in extras if not re.search(rf"^{re.escape(name)}==\S+$", lock, re.MULTILINE)]
    assert not unpinned, (
        f"scripts/gpu-payload-extras.txt names packages requirements.lock does not pin: {unpinned}"
    )
    # What the GPU steps import beyond ../shared/gpu/make-payload.sh's list.
    assert {"prometheus_client", "pytest"} <= set(extras)
