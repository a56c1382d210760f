"""The OpenAI-compatible front over a real server: a tiny target and an exported head."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.heads.export import export_head
from serving import start_server
from tests.speculative.engine_doubles import random_head
from trainer.models.tiny import write_tiny_target

PROMPT = "Hello there"


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("serving")
    model_dir = write_tiny_target("LlamaForCausalLM", root / "tiny-llama", seed=3)
    target = AutoModelForCausalLM.from_pretrained(model_dir)
    head_dir = export_head(random_head(target), root / "head")
    return model_dir, head_dir


@pytest.fixture(scope="module")
def base_url(model_dirs: tuple[Path, Path]) -> Iterator[str]:
    model_dir, head_dir = model_dirs
    with start_server(model_dir, head_dir, num_speculative_tokens=2, served_model_name="tiny") as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        yield client


def expected_greedy_text(model_dir: Path, prompt: str, max_tokens: int) -> str:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    target = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    output = target.generate(ids, do_sample=False, max_new_tokens=max_tokens, pad_token_id=0)
    return str(tokenizer.decode(output[0, ids.shape[1] :], skip_special_tokens=True))


def sse_chunks(response: httpx.Response) -> list[dict[str, object]]:
    lines = [line for line in response.text.split("\n\n") if line]
    assert lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


def test_completion_is_greedy_decoding_with_usage(
    client: httpx.Client, model_dirs: tuple[Path, Path]
) -> None:
    body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 20, "temperature": 0, "ignore_eos": True}
    response = client.post("/v1/completions", json=body)

    assert response.status_code == 200, response.text
    payload = response.json()
    assert payload["object"] == "text_completion"
    assert payload["choices"][0]["text"] == expected_greedy_text(model_dirs[0], PROMPT, 20)
    assert payload["choices"][0]["finish_reason"] == "length"
    assert payload["usage"]["completion_tokens"] == 20
    assert payload["usage"]["total_tokens"] == payload["usage"]["prompt_tokens"] + 20


def test_streamed_chat_equals_the_whole_answer(client: httpx.Client) -> None:
    body = {
        "messages": [{"role": "user", "content": "Say something"}],
        "max_tokens": 24,
        "temperature": 0,
        "ignore_eos": True,
    }
    whole = client.post("/v1/chat/completions", json=body).json()
    streamed = client.post("/v1/chat/completions", json={**body, "stream": True})
    chunks = sse_chunks(streamed)

    assert whole["object"] == "chat.completion"
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]  # type: ignore[index]
    assert deltas[0]["role"] == "assistant"
    assert "".join(delta["content"] for delta in deltas) == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"  # type: ignore[index]
    assert chunks[-1]["usage"] == whole["usage"]


def test_stop_string_cuts_the_text(client: httpx.Client) -> None:
    body = {"prompt": PROMPT, "max_tokens": 30, "temperature": 0, "ignore_eos": True}
    full = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
    stop = full[7:9]
    cut = client.post("/v1/completions", json={**body, "stop": [stop]}).json()["choices"][0]
    streamed = sse_chunks(client.post("/v1/completions", json={**body, "stop": stop, "stream": True}))

    assert cut["text"] == full[: full.index(stop)]
    assert cut["finish_reason"] == "stop"
    assert "".join(c["choices"][0]["text"] for c in streamed) == cut["text"]  # type: ignore[index]


def test_seeded_sampling_is_reproducible(client: httpx.Client) -> None:
    body = {"prompt": PROMPT, "max_tokens": 16, "temperature": 1.0, "top_p": 0.9, "seed": 11}
    first = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
    second = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
    assert first == second


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"prompt": "x", "temperature": -1}, "temperature", "greater than or equal to 0"),
        ({"prompt": "x", "top_p": 0}, "top_p", "greater than 0"),
        ({"prompt": "x", "n": 2}, "n", "less than or equal to 1"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
        ({"prompt": "x", "max_tokens": 100_000}, "max_tokens", "exceeds the model's context"),
        ({"prompt": "x", "stop": [""]}, "stop", "must not be empty"),
        ({"prompt": ""}, "prompt", "must not be empty"),
        ({"max_tokens": 3}, "prompt", "Field required"),
    ],
)
def test_bad_fields_get_openai_errors(
    client: httpx.Client, body: dict[str, object], param: str, message: str
) -> None:
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert message in error["message"]


def test_unknown_model_is_404(client: httpx.Client) -> None:
    response = client.post("/v1/completions", json={"model": "gpt-9", "prompt": "x"})
    assert response.status_code == 404
    assert "gpt-9" in response.json()["error"]["message"]


def test_models_health_and_speculation_metrics(client: httpx.Client) -> None:
    assert client.get("/health").status_code == 200
    models = client.get("/v1/models").json()
    assert [card["id"] for card in models["data"]] == ["tiny"]
    client.post(
        "/v1/completions", json={"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    )

    metrics = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in client.get("/metrics").text.splitlines()
        if line.startswith("eaglenest:")
    }
    drafts = metrics["eaglenest:spec_decode_num_drafts_total"]
    assert drafts > 0
    assert metrics["eaglenest:spec_decode_num_draft_tokens_total"] > drafts  # K = 2 per verification
    accepted = metrics["eaglenest:spec_decode_num_accepted_tokens_total"]
    by_position = sum(
        metrics[f'eaglenest:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}}']
        for i in range(2)
    )
    assert by_position == accepted
    assert metrics["eaglenest:spec_decode_mean_k"] == 2.0
