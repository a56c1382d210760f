"""Serving processes spread over the worker's GPUs: the least loaded first, freed on exit."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from worker.endpoints import gpu_placement
from worker.endpoints.gpu_placement import GpuClaim, GpuPlacement, claim_gpu, worker_gpus


def _claimed(claim: GpuClaim | None) -> str:
    assert claim is not None
    return claim.gpu


def test_each_claim_takes_the_gpu_with_the_fewest_processes() -> None:
    placement = GpuPlacement(["0", "1", "2"])
    first, second, third, fourth = (_claimed(placement.claim()) for _ in range(4))
    assert [first, second, third, fourth] == ["0", "1", "2", "0"]
    assert placement.running() == {"0": 2, "1": 1, "2": 1}


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
