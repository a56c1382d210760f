"""scripts/gpu-payload.sh: the extra wheels it downloads for the GPU image are pinned in the lock,
and every built-in dataset's package travels.

The script downloads exactly the `name==version` lines of requirements.lock whose name is in
scripts/gpu-payload-extras.txt; a name the lock does not pin (renamed, dropped, another spelling)
would leave its wheel behind silently and fail the GPU check on the GPU machine, where nothing
can be installed.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainer.data.builtin import BUILTIN_DATASETS

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


def test_every_builtin_dataset_travels_to_the_gpu_image() -> None:
    # The image has none of them: without chitchat-dataset (2026-12-06, found by running the
    # uploads' scripts on a CPU with only the image's packages) the head build's evaluation and
    # the whole engine table would have failed there on their first prompt.
    listed = (REPO_ROOT / "scripts" / "gpu-payload-datasets.txt").read_text().split()
    needed = {dataset.distribution for dataset in BUILTIN_DATASETS.values()}
    assert needed <= set(listed), f"add to scripts/gpu-payload-datasets.txt: {sorted(needed - set(listed))}"
    lock = (REPO_ROOT / "requirements.lock").read_text()
    assert all(re.search(rf"^{re.escape(name)}==\S+$", lock, re.MULTILINE) for name in listed)
