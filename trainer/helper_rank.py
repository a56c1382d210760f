"""``python -m trainer.helper_rank CONFIG STORE RANK WORLD_SIZE``: one helper rank of a
data-parallel training run, started by rank 0 (``trainer.eagle.process_group``), never by hand.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

# Before torch loads OpenMP, as in `trainer train`: idle threads sleep instead of spinning.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from trainer.config import TrainConfig
from trainer.device import resolve_device
from trainer.eagle.process_group import join, leave
from trainer.train import train_as_helper


def main(argv: list[str]) -> int:
    config_path, store_path, rank, world_size = argv
    config = TrainConfig.model_validate_json(Path(config_path).read_text())
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s rank {rank} %(levelname)s %(message)s")
    parallel = join(int(rank), int(world_size), Path(store_path), resolve_device(config.device))
    train_as_helper(config, parallel)
    leave()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
