"""Real inputs for worker tests, small enough to train on in seconds.

- a tiny random Llama target (trainer.models.tiny) with SmolLM2's real tokenizer and chat
  template, saved as a Hugging Face directory;
- an untrained EAGLE-3 head in the native format that fits that target (an "existing head");
- ShareGPT conversations, as JSONL text;
- helpers that put directories and files on S3 (SeaweedFS).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, GenerationConfig

from trainer.eagle.random_head import write_random_head
from trainer.models.tiny import build_tiny_target

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
HEAD_DRAFT_VOCAB_SIZE = 512


def write_tiny_target(tokenizer_dir: Path, out_dir: Path) -> Path:
    """A tiny LlamaForCausalLM sized to the tokenizer's vocabulary, with that tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    model = build_tiny_target("LlamaForCausalLM", vocab_size=len(tokenizer), seed=0)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config = GenerationConfig(bos_token_id=1, eos_token_id=eos, pad_token_id=eos)  # type: ignore[no-untyped-call]
    model.save_pretrained(out_dir)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copy(tokenizer_dir / name, out_dir / name)
    return out_dir


def write_tiny_head(
    target_dir: Path, out_dir: Path, *, draft_vocab_size: int = HEAD_DRAFT_VOCAB_SIZE
) -> Path:
    """A randomly initialised EAGLE-3 head for the target, exported as an engine would load it."""
    return write_random_head(target_dir, out_dir, draft_vocab_size=draft_vocab_size)


def conversation(index: int) -> dict[str, Any]:
    topics = ("rivers", "prime numbers", "bread", "volcanoes", "chess", "the moon", "tea", "bicycles")
    topic = topics[index % len(topics)]
    return {
        "conversations": [
            {"from": "human", "value": f"Tell me one fact about {topic} (question {index})."},
            {
                "from": "gpt",
                "value": f"Here is a fact about {topic}: it has been studied for a long time, "
                f"and people still write about {topic} today. Number {index} is noted.",
            },
        ]
    }


def sharegpt_jsonl(count: int, *, start: int = 0) -> str:
    return "".join(json.dumps(conversation(start + i)) + "\n" for i in range(count))


def upload_directory(s3_client: Any, directory: Path, bucket: str, prefix: str) -> str:
    """Every file of ``directory`` under ``prefix``; returns the prefix's S3 URI (with '/')."""
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        s3_client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(directory).as_posix()}")
    return f"s3://{bucket}/{prefix}/"


def put_text(s3_client: Any, bucket: str, key: str, text: str) -> str:
    s3_client.put_object(Bucket=bucket, Key=key, Body=text.encode())
    return f"s3://{bucket}/{key}"
