"""What the benchmark hands guidellm (command, prompt rows) and how it reads guidellm back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from guidellm.backends.openai.request_handlers import TextCompletionsRequestHandler
from guidellm.schemas import GenerationRequest
from guidellm.settings import Settings as GuidellmSettings
from transformers import AutoTokenizer

from servebench.guidellm_run import (
    GuidellmError,
    guidellm_arguments,
    guidellm_environment,
    parse_guidellm_report,
)
from servebench.prompts import chat_prompt_texts, write_guidellm_data
from tests.worker.tiny_inputs import sharegpt_jsonl
from trainer.data.loader import load_conversations
from trainer.models.tiny import write_tiny_target


def _command(tmp_path: Path, concurrency: list[int], **options: Any) -> list[str]:
    return guidellm_arguments(
        target="http://127.0.0.1:8000",
        model_name="smol",
        tokenizer_dir=tmp_path,
        data_path=tmp_path / "prompts.jsonl",
        output_path=tmp_path / "out.json",
        concurrency=concurrency,
        requests_per_level=16,
        **options,
    )


def test_command_runs_every_level_in_one_concurrent_profile_greedily(tmp_path: Path) -> None:
    command = _command(tmp_path, [1, 2, 4, 8])

    backend = json.loads(command[command.index("--backend") + 1])
    assert backend["request_format"] == "/v1/completions"
    assert backend["extras"] == {"body": {"temperature": 0}}
    assert command[command.index("--profile") + 1] == "kind=concurrent,streams=1"
    assert command[command.index("--override") + 1 : command.index("--override") + 3] == [
        "profile.streams",
        "1,2,4,8",
    ]
    assert command[command.index("--constraint") + 1] == "kind=max_requests,count=16"
    assert command[command.index("--output") + 1] == f"kind=json,path={tmp_path / 'out.json'}"


def test_guidellm_drives_every_stream_from_one_forkserver_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # guidellm ignores GUIDELLM__ names it does not know: its own Settings must read ours.
    for name in [name for name in os.environ if name.startswith("GUIDELLM__")]:
        monkeypatch.delenv(name)
    for name, value in guidellm_environment({}).items():
        monkeypatch.setenv(name, value)
    settings = GuidellmSettings()
    assert settings.max_worker_processes == 1
    assert settings.mp_context_type == "forkserver"


def test_an_operators_guidellm_settings_win_over_ours() -> None:
    environment = guidellm_environment({"GUIDELLM__MAX_WORKER_PROCESSES": "4", "HOME": "/root"})
    assert environment["GUIDELLM__MAX_WORKER_PROCESSES"] == "4"
    assert environment["GUIDELLM__MP_CONTEXT_TYPE"] == "forkserver"
    assert environment["HOME"] == "/root"


def test_a_deadline_adds_a_duration_constraint_beside_the_request_count(tmp_path: Path) -> None:
    command = _command(tmp_path, [1, 2], max_seconds_per_level=7.5)

    constraints = [command[i + 1] for i, part in enumerate(command) if part == "--constraint"]
    assert constraints == ["kind=max_requests,count=16", "kind=max_duration,seconds=7.5"]


def _request_body(command: list[str]) -> dict[str, Any]:
    """The body guidellm's own /v1/completions handler builds from our backend arguments."""
    backend = json.loads(command[command.index("--backend") + 1])
    request = GenerationRequest(columns={"text_column": ["Hello"]})
    request.output_metrics.text_tokens = 96  # what guidellm sets for a fixed output length
    handler = TextCompletionsRequestHandler()
    return dict(handler.format(request, model=backend["model"], extras=backend["extras"]).body)


def test_replies_run_to_max_tokens_unless_asked_to_stop_at_eos(tmp_path: Path) -> None:
    fixed = _request_body(_command(tmp_path, [1]))
    ending = _request_body(_command(tmp_path, [1], stop_at_eos=True))

    assert fixed["ignore_eos"] is True
    assert ending["ignore_eos"] is False
    for body in (fixed, ending):
        assert body["max_tokens"] == 96
        assert body["temperature"] == 0


def test_prompts_are_rendered_in_the_chat_template_and_repeat_to_fill_a_level(tmp_path: Path) -> None:
    target = write_tiny_target("LlamaForCausalLM", tmp_path / "target")
    tokenizer = AutoTokenizer.from_pretrained(target)
    data = tmp_path / "heldout.jsonl"
    data.write_text(sharegpt_jsonl(2))
    conversations = load_conversations([data]).conversations

    texts = chat_prompt_texts(tokenizer, conversations, max_prompt_tokens=10_000)
    distinct = write_guidellm_data(texts, tmp_path / "rows.jsonl", requests=5, output_tokens=32)

    assert len(texts) == 2
    assert all(text.endswith("<|im_start|>assistant\n") for text in texts)
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert distinct == 2
    assert [row["prompt"] for row in rows] == [texts[0], texts[1], texts[0], texts[1], texts[0]]
    assert {row["output_tokens_count"] for row in rows} == {32}
    assert chat_prompt_texts(tokenizer, conversations, max_prompt_tokens=3) == []


def test_a_level_without_successful_requests_is_an_error() -> None:
    benchmark = {
        "config": {"strategy": {"streams": 4}},
        "metrics": {"request_totals": {"successful": 0, "errored": 3, "incomplete": 0, "total": 3}},
        "requests": {"successful": [], "errored": []},
    }

    with pytest.raises(GuidellmError, match="no successful request at concurrency 4"):
        parse_guidellm_report({"benchmarks": [benchmark]})
    with pytest.raises(GuidellmError, match="unexpected guidellm JSON"):
        parse_guidellm_report({"runs": []})


def _guidellm_level(requests: list[dict[str, Any]], incomplete: int = 0) -> dict[str, Any]:
    """One level of guidellm's JSON with just what parse_guidellm_report reads."""
    summary = {"successful": {"mean": 1.0}}
    names = ("time_to_first_token_ms", "requests_per_second", "output_tokens_per_second")
    return {
        "config": {"strategy": {"streams": 1}},
        "metrics": {
            "request_totals": {
                "successful": len(requests),
                "errored": 0,
                "incomplete": incomplete,
                "total": len(requests) + incomplete,
            },
            **dict.fromkeys((*names, "output_token_count", "prompt_token_count"), summary),
        },
        "requests": {"successful": requests, "errored": []},
    }


def _request(tpot_ms: float | None, tokens_per_chunk: float | None) -> dict[str, Any]:
    return {
        "inter_token_latency_ms": tpot_ms,
        "iter_tokens_per_iteration": tokens_per_chunk,
        "output_tokens_per_second": 10.0,
        "request_start_time": 1.0,
        "request_end_time": 2.0,
    }


def test_tpot_and_itl_mean_what_sagemaker_table_means() -> None:
    # Plain decoding streams one token a chunk: ITL = TPOT. A speculative request that streamed
    # 2.5 tokens a chunk after the first has ITL = 2.5 x TPOT. A one-token request has neither.
    plain = parse_guidellm_report(
        {"benchmarks": [_guidellm_level([_request(20.0, 1.0), _request(30.0, 1.0)])]}
    )
    eagle = parse_guidellm_report(
        {"benchmarks": [_guidellm_level([_request(10.0, 2.5), _request(12.0, 2.0), _request(None, None)])]}
    )

    assert plain[0].tpot_ms == pytest.approx(25.0)
    assert plain[0].itl_ms == pytest.approx(25.0)
    assert eagle[0].tpot_ms == pytest.approx(11.0)
    assert eagle[0].itl_ms == pytest.approx((25.0 + 24.0) / 2)


def test_a_level_its_time_limit_ended_before_any_request_finished_is_left_out() -> None:
    measured = _guidellm_level([_request(20.0, 1.0)])
    cut = {
        "config": {"strategy": {"streams": 8}},
        "metrics": {"request_totals": {"successful": 0, "errored": 0, "incomplete": 8, "total": 8}},
        "requests": {"successful": [], "errored": [], "incomplete": []},
    }

    levels = parse_guidellm_report({"benchmarks": [measured, cut]})

    assert [level.concurrency for level in levels] == [1]


def test_requests_guidellm_cut_off_at_the_end_of_a_level_are_counted() -> None:
    cut = _guidellm_level([_request(20.0, 1.0)] * 2, incomplete=1)
    [level] = parse_guidellm_report({"benchmarks": [cut]})

    assert (level.successful_requests, level.errored_requests, level.incomplete_requests) == (2, 0, 1)
