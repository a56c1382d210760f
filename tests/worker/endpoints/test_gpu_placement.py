"""Serving processes spread over the worker's GPUs: the least loaded first, freed on exit."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from worker.endpoints import gpu_placement
from worker.endpoints.gpu_placement import GpuClaim, GpuPlacement, claim_gpu, worker_gpus
from worker.endpoints.model_files import ServedModel, weight_bytes


def _claimed(claim: GpuClaim | None) -> str:
    assert claim is not None
    return claim.gpu


def test_each_claim_takes_the_gpu_with_the_fewest_processes() -> None:
    placement = GpuPlacement(["0", "1", "2"])
    first, second, third, fourth = (_claimed(placement.claim()) for _ in range(4))
    assert [first, second, third, fourth] == ["0", "1", "2", "0"]
    assert placement.running() == {"0": 2, "1": 1, "2": 1}


GB = 1 << 30


def test_a_claim_takes_the_gpu_with_the_fewest_bytes_of_weights_then_the_fewest_processes() -> None:
    placement = GpuPlacement(["0", "1"])
    large = placement.claim(16 * GB)
    assert _claimed(large) == "0"
    # Counting processes would put the second small model beside the large one (1 against 1,
    # the first listed on a tie); by weights both small ones fit beside each other.
    assert [_claimed(placement.claim(GB)) for _ in range(2)] == ["1", "1"]
    assert placement.weight_bytes() == {"0": 16 * GB, "1": 2 * GB}
    assert placement.running() == {"0": 1, "1": 2}
    assert large is not None
    large.release()
    large.release()  # counted once
    assert placement.weight_bytes() == {"0": 0, "1": 2 * GB}
    assert _claimed(placement.claim(GB)) == "0"
    with pytest.raises(ValueError, match="weight_bytes must not be negative"):
        placement.claim(-1)


def test_the_weights_a_serving_process_loads_are_its_model_and_head_weight_files(tmp_path: Path) -> None:
    model, head = tmp_path / "model", tmp_path / "head"
    (model / "original").mkdir(parents=True)
    head.mkdir()
    (model / "model-00001-of-00002.safetensors").write_bytes(b"x" * 300)
    (model / "model-00002-of-00002.safetensors").write_bytes(b"x" * 200)
    # Beside the safetensors, never loaded: another format's copy and a subfolder's.
    (model / "pytorch_model.bin").write_bytes(b"x" * 7000)
    (model / "original" / "consolidated.safetensors").write_bytes(b"x" * 9000)
    (model / "tokenizer.json").write_bytes(b"x" * 5000)  # not weights
    (model / "config.json").write_bytes(b"{}")
    (head / "model.safetensors").write_bytes(b"x" * 40)
    with_head = ServedModel(model_name="m", model_dir=model, head_dir=head, num_speculative_tokens=3)
    assert weight_bytes(with_head) == 540
    alone = ServedModel(model_name="m", model_dir=model, head_dir=None, num_speculative_tokens=None)
    assert weight_bytes(alone) == 500
    missing = ServedModel(
        model_name="m", model_dir=tmp_path / "nowhere", head_dir=None, num_speculative_tokens=None
    )
    assert weight_bytes(missing) == 0


def test_a_released_gpu_is_the_next_one_claimed() -> None:
    placement = GpuPlacement(["0", "1"])
    on_zero, on_one = placement.claim(), placement.claim()
    assert on_zero is not None
    assert on_one is not None
    on_one.release()
    on_one.release()  # a second sight of the same exit changes nothing
    assert placement.running() == {"0": 1, "1": 0}
    assert _claimed(placement.claim()) == "1"


def test_no_gpus_means_no_claim() -> None:
    assert GpuPlacement([]).claim() is None


@pytest.mark.parametrize(
    ("visible", "gpus"),
    [
        ("2,3", ("2", "3")),
        ("GPU-aaaa, GPU-bbbb", ("GPU-aaaa", "GPU-bbbb")),
        ("", ()),
    ],
)
def test_the_workers_gpus_are_its_visible_devices_as_given(visible: str, gpus: tuple[str, ...]) -> None:
    assert worker_gpus({"CUDA_VISIBLE_DEVICES": visible}) == gpus


def test_without_visible_devices_torch_counts_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch  # noqa: PLC0415 - the test patches what worker_gpus imports lazily

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert worker_gpus({}) == ("0", "1")


def test_a_cpu_worker_claims_nothing_and_builds_no_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> GpuPlacement:
        raise AssertionError("a cpu worker must not look for GPUs")

    monkeypatch.setattr(gpu_placement, "worker_placement", fail)
    assert claim_gpu("cpu") is None


def test_concurrent_claims_and_releases_keep_the_counts_exact() -> None:
    placement = GpuPlacement(["0", "1", "2", "3"])

    def churn(_: int) -> GpuClaim:
        for _ in range(200):
            claim = placement.claim()
            assert claim is not None
            claim.release()
        claim = placement.claim()
        assert claim is not None
        return claim

    with ThreadPoolExecutor(max_workers=8) as pool:
        held = list(pool.map(churn, range(8)))
    # No update lost under the lock: the eight held claims are all counted, and nothing else is.
    assert sum(placement.running().values()) == 8
    for claim in held:
        claim.release()
    assert placement.running() == {"0": 0, "1": 0, "2": 0, "3": 0}
