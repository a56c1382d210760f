"""InvokeEndpoint bodies as the serving engine is asked them, and its answers as the runtime returns them."""

from __future__ import annotations

import json

import pytest
from botocore.eventstream import EventStreamBuffer

from api.runtime.event_stream import model_stream_error, payload_part
from api.runtime.payloads import parse_invocation, response_document, streamed_document
from core.sagemaker.runtime_errors import ValidationError


def test_tgi_parameters_become_openai_fields() -> None:
    body = {
        "inputs": ["Hello"],
        "parameters": {"max_new_tokens": 7, "do_sample": False, "top_p": 0.9, "stop": ["\n"], "seed": 3},
    }
    call = parse_invocation(json.dumps(body).encode(), stream=False)
    assert (call.kind, call.path) == ("inputs", "/v1/completions")
    assert call.body == {
        "prompt": "Hello",
        "stream": False,
        "max_tokens": 7,
        "temperature": 0.0,
        "top_p": 0.9,
        "stop": ["\n"],
        "seed": 3,
    }
    answer = {"choices": [{"text": " world"}]}
    assert response_document(call, answer) == [{"generated_text": " world"}]


def test_return_full_text_puts_the_prompt_in_front() -> None:
    body = {"inputs": "Hello", "parameters": {"return_full_text": True}}
    call = parse_invocation(json.dumps(body).encode(), stream=True)
    assert call.body["stream"] is True
    assert response_document(call, {"choices": [{"text": " world"}]}) == [{"generated_text": "Hello world"}]
    assert streamed_document(call, " world") == [{"generated_text": "Hello world"}]


def test_openai_bodies_pass_through_without_their_model() -> None:
    chat = parse_invocation(
        b'{"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}', stream=False
    )
    assert (chat.kind, chat.path) == ("chat", "/v1/chat/completions")
    assert chat.body == {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    answer = {"object": "chat.completion", "choices": [{"message": {"content": "hey"}}]}
    assert response_document(chat, answer) == answer
    completion = parse_invocation(b'{"prompt": "Once", "max_tokens": 3}', stream=False)
    assert (completion.kind, completion.path) == ("completion", "/v1/completions")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "The request body is not valid JSON"),
        (b"[1, 2]", "The request body must be a JSON object"),
        (b'{"text": "hi"}', "The request body has none of inputs"),
        (b'{"inputs": ""}', "inputs must be a non-empty string"),
        (b'{"inputs": "x", "parameters": [1]}', "parameters must be a JSON object"),
    ],
)
def test_bodies_no_model_takes_are_validation_errors(raw: bytes, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_invocation(raw, stream=False)
    assert raised.value.message.startswith(message)


def test_event_stream_messages_parse_as_botocore_reads_them() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(
        payload_part(b'{"token": {"text": "a"}}\n') + model_stream_error("boom", "ModelStreamError")
    )
    first, second = list(buffer)
    assert first.headers == {
        ":event-type": "PayloadPart",
        ":message-type": "event",
        ":content-type": "application/octet-stream",
    }
    assert first.payload == b'{"token": {"text": "a"}}\n'
    assert second.headers[":exception-type"] == "ModelStreamError"
    assert json.loads(second.payload) == {"Message": "boom", "ErrorCode": "ModelStreamError"}
