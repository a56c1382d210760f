"""Print the import graph between the project's packages: one line per arrow, with the number
of imports behind it; arrows that run both ways are marked CYCLE.

    python scripts/import_graph.py            # top-level packages (api, core, worker, ...)
    python scripts/import_graph.py --depth 2  # one level further (api.rest, core.services, ...)
    python scripts/import_graph.py api worker trainer db   # these packages only (e.g. an old checkout)

It reads the code with grimp (the library under import-linter, which `make lint` runs with the
contracts in pyproject.toml), so it shows every import, those inside functions included.
"""

from __future__ import annotations

import argparse
import tomllib
from collections import Counter
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]


def root_packages() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages: list[str] = config["tool"]["importlinter"]["root_packages"]
    return packages


def package_edges(packages: list[str], depth: int) -> Counter[tuple[str, str]]:
    graph = grimp.build_graph(*packages)
    edges: Counter[tuple[str, str]] = Counter()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            source, target = _prefix(module, depth), _prefix(imported, depth)
            if source != target and not _nested(source, target):
                edges[(source, target)] += 1
    return edges


def _prefix(module: str, depth: int) -> str:
    return ".".join(module.split(".")[:depth])


def _nested(a: str, b: str) -> bool:
    return a.startswith(b + ".") or b.startswith(a + ".")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depth", type=int, default=1, help="package depth to group modules by (1)")
    parser.add_argument("packages", nargs="*", help="root packages (default: import-linter's root_packages)")
    args = parser.parse_args()
    edges = package_edges(args.packages or root_packages(), args.depth)
    for (source, target), count in sorted(edges.items()):
        cycle = "  CYCLE" if (target, source) in edges else ""
        print(f"{source:32} -> {target:32} {count:4}{cycle}")
    cycles = sum(1 for source, target in edges if (target, source) in edges) // 2
    print(f"{len(edges)} arrows, {cycles} cycles")


if __name__ == "__main__":
    main()
