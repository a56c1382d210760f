"""Regenerate core/sagemaker/sagemaker_shapes.json from the installed botocore (review the diff!)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import botocore

from core.sagemaker.botocore_subset import extract_subset

SERVICE_MODEL = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
TARGET = Path(__file__).resolve().parent.parent / "core" / "sagemaker" / "sagemaker_shapes.json"


def main() -> None:
    with gzip.open(SERVICE_MODEL, "rt", encoding="utf-8") as handle:
        subset = extract_subset(json.load(handle))
    TARGET.write_text(json.dumps(subset, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {TARGET} ({len(subset['shapes'])} shapes) from botocore {botocore.__version__}")


if __name__ == "__main__":
    main()
