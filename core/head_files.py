"""The files of an EAGLE head as jobs publish it (under ``eagle_model/``) and heads ship.

Kept apart from core.output_layout, which imports S3 and the job tables, so that tools which
only read and write head folders (the shipped-head build on a GPU image) need neither.
"""

HEAD_CONFIG = "config.json"
HEAD_FILES = (HEAD_CONFIG, "model.safetensors")
# Published beside them when the trainer wrote it: an EAGLE-2 head's draft vocabulary, kept out
# of model.safetensors because vLLM fails on tensors it has no parameter for.
OPTIONAL_HEAD_FILES = ("draft_vocab.json",)
