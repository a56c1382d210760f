"""The loader's bookkeeping: what it reports, when it refuses, how it finds files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from trainer.data import Conversation, DataFormatError, Message, load_conversations, prompt_messages

WriteFile = Callable[..., Path]

GOOD = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
CHAT = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def test_malformed_lines_are_reported_with_file_line_and_reason(write_file: WriteFile) -> None:
    path = write_file(
        "mixed.jsonl",
        text=(
            '{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}\n'
            "\n"
            '{"conversations": [ oops\n'
            "[1, 2]\n"
            '{"text": "plain"}\n'
            '{"messages": [{"role": "user", "content": "x"}]}\n'
        ),
    )
    result = load_conversations([path])
    file_summary = result.summary.files[0]
    assert (file_summary.records_read, file_summary.records_skipped, len(result.conversations)) == (5, 4, 1)
    skipped = [(s.path, s.line) for s in file_summary.skipped]
    assert skipped == [(str(path), 3), (str(path), 4), (str(path), 5), (str(path), 6)]
    reasons = [s.reason for s in file_summary.skipped]
    assert reasons[0].startswith("invalid JSON: ")
    assert reasons[1] == "record is a JSON array, expected an object"
    assert reasons[2].startswith("unknown record format: expected 'captureData', 'conversations'")
    assert reasons[2].endswith("(keys found: text)")
    assert reasons[3] == "record is openai-chat but this file is sharegpt (detected at line 1)"
    assert str(file_summary.skipped[0]).startswith(f"{path}:3: invalid JSON")


def test_format_is_fixed_by_the_first_usable_record(write_file: WriteFile) -> None:
    broken_sharegpt = {"conversations": "not a list"}
    path = write_file("late.jsonl", [broken_sharegpt, CHAT, CHAT, GOOD])
    result = load_conversations([path])
    assert result.summary.files[0].format == "openai-chat"
    assert [s.line for s in result.summary.skipped] == [1, 4]
    assert result.summary.skipped[0].reason == "'conversations' must be a list, got string"


def test_a_file_with_no_usable_record_is_an_error_naming_it(write_file: WriteFile) -> None:
    good = write_file("good.jsonl", [GOOD])
    bad = write_file("bad.jsonl", text='{"nope": 1}\n{"conversations": []}\n')
    with pytest.raises(DataFormatError) as caught:
        load_conversations([good, bad])
    message = str(caught.value)
    assert message.startswith(
        f"{bad}: no usable record (2 read, all skipped); first at line 1: unknown record format"
    )


def test_an_empty_file_is_an_error_naming_it(write_file: WriteFile) -> None:
    empty = write_file("empty.jsonl", text="\n\n")
    with pytest.raises(DataFormatError, match=r"empty\.jsonl: no records \(the file is empty\)"):
        load_conversations([empty])


def test_broken_json_array_names_the_line(write_file: WriteFile) -> None:
    path = write_file("broken.json", text='[\n  {"messages": []},\n  {"messages": [}\n]\n')
    with pytest.raises(DataFormatError, match=r"broken\.json:3: invalid JSON array"):
        load_conversations([path])


def test_not_utf8_names_the_line(write_file: WriteFile, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"prompt": "a", "completion": "b"}\n{"prompt": "caf\xe9", "completion": "b"}\n')
    with pytest.raises(DataFormatError, match=r"latin1\.jsonl:2: not UTF-8 text"):
        load_conversations([path])


def test_max_skip_fraction_names_the_first_bad_record(write_file: WriteFile) -> None:
    path = write_file("half.jsonl", [GOOD, {"conversations": [{"from": "gpt", "value": ""}]}, GOOD, {"x": 1}])
    assert load_conversations([path], max_skip_fraction=0.5).summary.records_skipped == 2
    with pytest.raises(DataFormatError) as caught:
        load_conversations([path], max_skip_fraction=0.25)
    assert str(caught.value) == (
        "2 of 4 records skipped (50.0% > max_skip_fraction 25.0%); "
        f"first: {path}:2: no user or assistant turn"
    )
    with pytest.raises(ValueError, match="max_skip_fraction must be between 0 and 1"):
        load_conversations([path], max_skip_fraction=1.5)


def test_directories_expand_recursively_to_sorted_data_files(write_file: WriteFile, tmp_path: Path) -> None:
    write_file("data/b.jsonl", [GOOD])
    write_file("data/a.json", [CHAT], as_array=True)
    write_file("data/2025/01/01/00/capture.jsonl.gz", [GOOD], gz=True)
    write_file("data/notes.txt", text="not data")
    write_file("data/catalog.json", text='{"datasets": []}')
    write_file("data/.hidden.jsonl", text="garbage")
    result = load_conversations([tmp_path / "data"])
    names = [Path(f.path).relative_to(tmp_path / "data").as_posix() for f in result.summary.files]
    assert names == ["2025/01/01/00/capture.jsonl.gz", "a.json", "b.jsonl"]
    with pytest.raises(DataFormatError, match="directory holds no data files"):
        load_conversations([_empty_dir(tmp_path)])
    with pytest.raises(DataFormatError, match=r"missing\.jsonl: no such file or directory"):
        load_conversations([tmp_path / "missing.jsonl"])


def _empty_dir(tmp_path: Path) -> Path:
    path = tmp_path / "empty-dir"
    path.mkdir()
    return path


def test_summary_to_dict_for_lineage(write_file: WriteFile) -> None:
    path = write_file("s.jsonl", [GOOD, {"x": 1}])
    summary = load_conversations([path]).summary.to_dict()
    assert summary["records_read"] == 2
    assert summary["records_skipped"] == 1
    assert summary["conversations"] == 1
    (file_entry,) = summary["files"]
    assert file_entry["path"] == str(path)
    assert file_entry["format"] == "sharegpt"
    assert file_entry["skipped"] == [{"line": 2, "reason": file_entry["skipped"][0]["reason"]}]
    assert file_entry["skipped_not_listed"] == 0


def test_trailing_empty_assistant_turn_is_dropped_but_inner_empty_turns_skip(write_file: WriteFile) -> None:
    path = write_file(
        "empty-turns.jsonl",
        [
            {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": " "}]},
            {"conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": "x"}]},
        ],
    )
    result = load_conversations([path])
    assert [(m.role, m.content) for m in result.conversations[0].messages] == [("user", "hi")]
    assert result.summary.skipped[0].reason == "turn 1 (user) is empty"


def test_prompt_messages_stops_before_the_last_assistant_turn() -> None:
    u1, a1, u2, a2 = (
        Message("user", "q1"),
        Message("assistant", "a1"),
        Message("user", "q2"),
        Message("assistant", "a2"),
    )
    system = Message("system", "s")
    assert prompt_messages(Conversation([system, u1, a1, u2, a2])) == [system, u1, a1, u2]
    assert prompt_messages(Conversation([u1, a1, u2])) == [u1]
    assert prompt_messages(Conversation([system, u1])) == [system, u1]


def test_message_rejects_unknown_roles() -> None:
    with pytest.raises(ValueError, match=r"Message\.role must be one of system, user, assistant"):
        Message("tool", "x")  # type: ignore[arg-type]
