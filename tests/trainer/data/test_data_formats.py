"""Every supported record format is read into the same conversation shape."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainer.data import Message, load_conversations

WriteFile = Callable[..., Path]


def _roles_and_text(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


def test_sharegpt_maps_the_speaker_names_found_in_the_wild(write_file: WriteFile) -> None:
    path = write_file(
        "sharegpt.jsonl",
        [
            {
                "id": "a",
                "conversations": [
                    {"from": "system", "value": "Be brief."},
                    {"from": "human", "value": "Hi"},
                    {"from": "gpt", "value": "Hello"},
                    {"from": "user", "value": "Again"},
                    {"from": "chatgpt", "value": "Hello again"},
                ],
            },
            {"conversations": [{"from": "human", "value": "Q"}, {"from": "bing", "value": "A1"}]},
            {"conversations": [{"from": "human", "value": "Q"}, {"from": "bard", "value": "A2"}]},
            {"conversations": [{"from": "user", "value": "Q"}, {"from": "assistant", "value": "A3"}]},
        ],
    )
    result = load_conversations([path])
    assert result.summary.files[0].format == "sharegpt"
    assert _roles_and_text(result.conversations[0].messages) == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello"),
        ("user", "Again"),
        ("assistant", "Hello again"),
    ]
    assert [c.messages[-1].content for c in result.conversations[1:]] == ["A1", "A2", "A3"]
    assert result.conversations[0].source == f"{path}:1"
    assert result.conversations[3].source == f"{path}:4"


def test_sharegpt_tool_and_unknown_speakers_are_skipped_with_a_reason(write_file: WriteFile) -> None:
    path = write_file(
        "tools.jsonl",
        [
            {"conversations": [{"from": "human", "value": "ok"}, {"from": "gpt", "value": "fine"}]},
            {"conversations": [{"from": "human", "value": "x"}, {"from": "function_call", "value": "{}"}]},
            {"conversations": [{"from": "human", "value": "x"}, {"from": "narrator", "value": "y"}]},
            {
                "conversations": [
                    {"from": "human", "value": "x"},
                    {"from": "gpt", "value": ""},
                    {"from": "human"},
                ]
            },
        ],
    )
    summary = load_conversations([path]).summary
    reasons = {s.line: s.reason for s in summary.skipped}
    assert reasons[2] == "turn 2 is from 'function_call' (tool turns are not supported)"
    assert reasons[3].startswith("turn 2 has unknown speaker 'narrator'")
    assert reasons[4] == "turn 3 (human) has no string 'value'"
    assert summary.records_read == 4
    assert summary.records_skipped == 3


def test_openai_chat_joins_text_parts_and_skips_messages_with_only_images(write_file: WriteFile) -> None:
    image = {"type": "image_url", "image_url": {"url": "http://x/y.png"}}
    path = write_file(
        "chat.jsonl",
        [
            {
                "messages": [
                    {"role": "developer", "content": "Rules"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Look"},
                            image,
                            {"type": "text", "text": "here"},
                        ],
                    },
                    {"role": "assistant", "content": [{"type": "output_text", "text": "A cat."}]},
                ]
            },
            {"messages": [{"role": "user", "content": [image]}, {"role": "assistant", "content": "?"}]},
            {"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}]},
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": None, "tool_calls": [{}]},
                ]
            },
        ],
    )
    result = load_conversations([path])
    assert result.summary.files[0].format == "openai-chat"
    assert _roles_and_text(result.conversations[0].messages) == [
        ("system", "Rules"),
        ("user", "Look\nhere"),
        ("assistant", "A cat."),
    ]
    reasons = {s.line: s.reason for s in result.summary.skipped}
    assert reasons == {
        2: "message 1 (user) has no text parts (non-text parts: image_url)",
        3: "message 2 has role 'tool' (tool turns are not supported)",
        4: "message 2 (assistant) is a tool call (not supported)",
    }


def test_openai_completions_plain_and_conversational(write_file: WriteFile) -> None:
    path = write_file(
        "completions.jsonl",
        [
            {"prompt": "2+2=", "completion": " 4"},
            {
                "prompt": [{"role": "user", "content": "Capital of France?"}],
                "completion": [{"role": "assistant", "content": "Paris."}],
            },
            {"prompt": "x", "completion": 5},
        ],
    )
    result = load_conversations([path])
    assert result.summary.files[0].format == "openai-completions"
    assert _roles_and_text(result.conversations[0].messages) == [("user", "2+2="), ("assistant", " 4")]
    assert _roles_and_text(result.conversations[1].messages) == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]
    assert result.summary.skipped[0].reason == "'completion' must be a string, got number"


def _capture_line(request: Any, response: Any | None, *, encoding: str = "JSON") -> dict[str, Any]:
    def section(body: Any, mode: str) -> dict[str, Any]:
        text = body if isinstance(body, str) else json.dumps(body)
        data = base64.b64encode(text.encode()).decode() if encoding == "BASE64" else text
        return {"observedContentType": "application/json", "mode": mode, "data": data, "encoding": encoding}

    capture: dict[str, Any] = {"endpointInput": section(request, "INPUT")}
    if response is not None:
        capture["endpointOutput"] = section(response, "OUTPUT")
    return {
        "captureData": capture,
        "eventMetadata": {
            "eventId": "0f4c1a2b-0000-4000-8000-000000000000",
            "inferenceTime": "2025-01-01T00:00:00Z",
        },
        "eventVersion": "0",
    }


@pytest.mark.parametrize("encoding", ["JSON", "BASE64"])
def test_capture_lines_with_chat_and_completion_bodies(write_file: WriteFile, encoding: str) -> None:
    chat_request = {"messages": [{"role": "user", "content": "Hi?"}], "max_tokens": 64}
    chat_response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}}]}
    completion_request = {"prompt": "Once upon", "max_tokens": 8}
    completion_response = {"choices": [{"text": " a time"}]}
    tgi_request = {"inputs": "Tell me a joke", "parameters": {"max_new_tokens": 20}}
    tgi_response = [{"generated_text": "Tell me a joke. Why did the chicken cross the road?"}]
    path = write_file(
        f"capture-{encoding}.jsonl",
        [
            _capture_line(chat_request, chat_response, encoding=encoding),
            _capture_line(completion_request, completion_response, encoding=encoding),
            _capture_line(tgi_request, tgi_response, encoding=encoding),
            _capture_line({"inputs": "Hi"}, {"generated_text": "Hey"}, encoding=encoding),
            _capture_line(chat_request, None, encoding=encoding),
        ],
    )
    result = load_conversations([path])
    assert result.summary.files[0].format == "sagemaker-capture"
    assert result.summary.records_skipped == 0
    assert [_roles_and_text(c.messages) for c in result.conversations] == [
        [("user", "Hi?"), ("assistant", "Hello!")],
        [("user", "Once upon"), ("assistant", " a time")],
        # TGI's return_full_text repeats the prompt; only the answer is kept.
        [("user", "Tell me a joke"), ("assistant", ". Why did the chicken cross the road?")],
        [("user", "Hi"), ("assistant", "Hey")],
        # Captured without output: a prompt for self-distillation to answer.
        [("user", "Hi?")],
    ]


def test_capture_streamed_response_and_bad_bodies(write_file: WriteFile) -> None:
    stream = (
        'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n'
        'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
        'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n'
        "data: [DONE]\n\n"
    )
    good = _capture_line({"messages": [{"role": "user", "content": "Hi"}]}, stream, encoding="BASE64")
    bad_base64 = _capture_line({"prompt": "x"}, {"choices": [{"text": "y"}]})
    bad_base64["captureData"]["endpointInput"].update(encoding="BASE64", data="%%%not base64%%%")
    no_prompt = _capture_line({"instances": [[1, 2]]}, {"predictions": [0.5]})
    no_answer = _capture_line({"prompt": "x"}, {"error": "overloaded"})
    path = write_file("capture.jsonl", [good, bad_base64, no_prompt, no_answer])
    result = load_conversations([path])
    assert _roles_and_text(result.conversations[0].messages) == [("user", "Hi"), ("assistant", "Hello")]
    reasons = {s.line: s.reason for s in result.summary.skipped}
    assert reasons[2].startswith("'endpointInput.data' is not valid base64 UTF-8 text")
    assert reasons[3] == "request body has no 'messages', 'prompt' or 'inputs' (keys: instances)"
    assert reasons[4] == "response body holds no answer text (keys: error)"


def test_gzip_and_json_array_files(write_file: WriteFile) -> None:
    records = [
        {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
        for i in range(3)
    ]
    jsonl_gz = write_file("a.jsonl.gz", records, gz=True)
    array = write_file("b.json", records, as_array=True)
    array_gz = write_file("c.json.gz", records, as_array=True, gz=True)
    result = load_conversations([jsonl_gz, array, array_gz])
    assert [f.records_read for f in result.summary.files] == [3, 3, 3]
    assert [c.messages[1].content for c in result.conversations] == ["a0", "a1", "a2"] * 3
    # Array elements report the line they start on (indent=2 puts each on its own block).
    array_lines = [c.source.rsplit(":", 1)[1] for c in result.conversations[3:6]]
    expected = [str(i + 1) for i, line in enumerate(array.read_text().split("\n")) if line == "  {"]
    assert array_lines == expected


def test_single_pretty_printed_object_and_unicode_line_separators(write_file: WriteFile) -> None:
    record = {"conversations": [{"from": "human", "value": "a\u2028b"}, {"from": "gpt", "value": "c\u2029d"}]}
    pretty = write_file("one.json", text=json.dumps(record, indent=2, ensure_ascii=False))
    raw_separators = write_file("sep.jsonl", text=json.dumps(record, ensure_ascii=False) + "\n")
    result = load_conversations([pretty, raw_separators])
    assert len(result.conversations) == 2
    assert result.conversations[1].messages[0].content == "a\u2028b"
    assert result.conversations[1].source.endswith("sep.jsonl:1")
