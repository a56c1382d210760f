"""Built-in datasets from packaged data, prepare-data, and the held-out split."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest

from trainer.cli import main
from trainer.data import Conversation, Message, load_conversations, split_holdout
from trainer.data.builtin import BUILTIN_DATASETS, UnknownDatasetError, load_builtin, prepare_builtin


def test_builtin_datasets_have_the_documented_sizes_and_shapes() -> None:
    chitchat = load_builtin("chitchat")
    assert len(chitchat) == 7168
    for conversation in chitchat:
        roles = [m.role for m in conversation.messages]
        assert roles[0] == "user"
        assert all(a != b for a, b in itertools.pairwise(roles))  # strictly alternating
        assert all(m.content.strip() for m in conversation.messages)
    assert sum(1 for c in chitchat if len(c.messages) == 1) == 3151  # openings nobody answered

    humaneval = load_builtin("humaneval")
    assert len(humaneval) == 164
    first = humaneval[0]
    assert first.source == "humaneval:HumanEval/0"
    assert (
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:" in first.messages[0].content
    )
    assert first.messages[1].content.endswith("    return False\n```")

    champ = load_builtin("champ")
    assert len(champ) == 270
    assert champ[0].messages[0].content.startswith("Let a string consist of digit 1, 2, 3.")
    assert champ[0].messages[1].content.endswith("Final answer: 239")

    with pytest.raises(
        UnknownDatasetError, match="unknown built-in dataset 'nope'; known: champ, chitchat, humaneval"
    ):
        load_builtin("nope")


def test_prepare_data_command_writes_sharegpt_and_a_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prepare-data", "humaneval", "champ", "--out", str(tmp_path)]) == 0
    assert "humaneval.jsonl: 164 records" in capsys.readouterr().out
    catalog = json.loads((tmp_path / "catalog.json").read_text())
    entries = {entry["name"]: entry for entry in catalog["datasets"]}
    assert sorted(entries) == ["champ", "humaneval"]
    for name, records in (("humaneval", 164), ("champ", 270)):
        entry = entries[name]
        path = tmp_path / entry["file"]
        assert entry["records"] == records
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert entry["source_package"] == BUILTIN_DATASETS[name].distribution
        assert entry["source_version"]
        assert entry["description"] == BUILTIN_DATASETS[name].description

    # Reads back through the normal loader as ShareGPT, identical to the in-memory version.
    result = load_conversations([tmp_path])
    assert [f.format for f in result.summary.files] == ["sharegpt", "sharegpt"]
    assert result.summary.records_skipped == 0
    reread = [c.messages for c in result.conversations]
    assert reread == [c.messages for c in load_builtin("champ")] + [
        c.messages for c in load_builtin("humaneval")
    ]

    # Preparing another one later keeps the earlier entries.
    prepare_builtin(["chitchat"], tmp_path)
    catalog = json.loads((tmp_path / "catalog.json").read_text())
    assert [entry["name"] for entry in catalog["datasets"]] == ["champ", "chitchat", "humaneval"]
    assert load_conversations([tmp_path / "chitchat.jsonl"]).summary.conversations == 7168


def test_prepare_data_rejects_unknown_names_before_writing(tmp_path: Path) -> None:
    with pytest.raises(UnknownDatasetError):
        prepare_builtin(["champ", "bogus"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit):
        main(["prepare-data", "bogus", "--out", str(tmp_path)])


def _conversation(i: int) -> Conversation:
    return Conversation(
        [Message("user", f"question {i}"), Message("assistant", f"answer {i}")], source=f"f:{i}"
    )


def test_split_holdout_is_stable_by_content() -> None:
    conversations = [_conversation(i) for i in range(2000)]
    train, heldout = split_holdout(conversations, holdout_fraction=0.1, seed=7)
    assert len(train) + len(heldout) == 2000
    assert 150 < len(heldout) < 250
    assert not {c.source for c in train} & {c.source for c in heldout}
    # Same record, same side: regardless of order, neighbours, or where it was stored.
    _, reversed_heldout = split_holdout(conversations[::-1], holdout_fraction=0.1, seed=7)
    assert {c.source for c in reversed_heldout} == {c.source for c in heldout}
    moved = Conversation(heldout[0].messages, source="elsewhere:1")
    assert split_holdout([moved], holdout_fraction=0.1, seed=7) == ([], [moved])
    # Order is kept within each side.
    assert [c.source for c in train] == [c.source for c in conversations if c in train]
    # Another seed gives another split; the extremes hold out nothing or everything.
    assert split_holdout(conversations, holdout_fraction=0.1, seed=8)[1] != heldout
    assert split_holdout(conversations, holdout_fraction=0.0, seed=7) == (conversations, [])
    assert split_holdout(conversations, holdout_fraction=1.0, seed=7) == ([], conversations)
    with pytest.raises(ValueError, match="holdout_fraction must be between 0 and 1"):
        split_holdout(conversations, holdout_fraction=1.2, seed=7)
