"""Training data: file formats, chat-template tokenisation with loss masks, draft vocabulary,
self-distillation and the built-in datasets.

Only the light pieces are imported here; ``tokenize``, ``vocab``, ``regenerate`` and
``builtin`` import torch/transformers and are imported from their modules.
"""

from trainer.data.errors import DataFormatError
from trainer.data.loader import load_conversations
from trainer.data.schema import Conversation, Message, Role, prompt_messages
from trainer.data.split import split_holdout
from trainer.data.summary import FileSummary, LoadResult, LoadSummary, SkippedRecord

__all__ = [
    "Conversation",
    "DataFormatError",
    "FileSummary",
    "LoadResult",
    "LoadSummary",
    "Message",
    "Role",
    "SkippedRecord",
    "load_conversations",
    "prompt_messages",
    "split_holdout",
]
