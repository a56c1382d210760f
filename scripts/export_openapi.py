"""Write the api's OpenAPI document to openapi.yaml (`make openapi`); a test keeps the two equal."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from api.app import create_app
from db.settings import Settings

TARGET = Path(__file__).resolve().parent.parent / "openapi.yaml"


def main() -> int:
    # Building the schema touches no database; default settings are enough.
    document = create_app(Settings()).openapi()
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    if "--check" in sys.argv[1:]:
        if TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} is out of date; run `make openapi`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
