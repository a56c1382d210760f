"""Every knob of an EAGLE-3 training run, in one pydantic model.

The worker builds it from an optimization job, the CLI from its flags; both call
``trainer.train.train(config)``. Defaults suit a small target on a few CPU cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

TorchDType = Literal["float32", "bfloat16", "float16"]

# The default recipe is the one measured best per CPU-minute on prompts unlike the training data
# (docs/measurements.md, "The default recipe by budget"): the target writes every reply it is trained on
# (regenerate, replies up to 128 tokens) and, with no data of its own, about 1000 prompts per 30
# budget-minutes (fewer are not enough to fill the budget, more are not answered in it). On a
# slower machine writing stops earlier, at a share of the budget (trainer/eagle/data.py).
SELF_INSTRUCT_PER_BUDGET_MINUTE = 1000 / 30
SELF_INSTRUCT_WITHOUT_BUDGET = 1000


def self_instruct_for_budget(minutes: float | None) -> int:
    """Self-instruct prompts the default recipe writes for a run of ``minutes`` (None: no budget)."""
    if minutes is None:
        return SELF_INSTRUCT_WITHOUT_BUDGET
    return max(1, round(SELF_INSTRUCT_PER_BUDGET_MINUTE * minutes))


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # --- inputs and outputs
    model_dir: Path = Field(description="Target model directory (Hugging Face format, safetensors).")
    data_paths: list[Path] = Field(
        default_factory=list,
        description="Training data files or directories (ShareGPT, OpenAI chat, completions); may be "
        "empty when self_instruct_conversations has the target write the prompts.",
    )
    out_dir: Path = Field(
        description="Run directory: metrics.jsonl, checkpoints/, prepared/, heldout.jsonl, eagle_model/."
    )
    distilled_paths: list[Path] = Field(
        default_factory=list,
        description="Conversations this target already distilled from the same data with the same "
        "generation settings (regenerated.jsonl files of earlier runs, e.g. from a distillation cache): "
        "trained on as the target's replies without regenerating them; the data's conversations they "
        "answer are skipped, and those held out by this run's split are left out.",
    )
    distilled_elsewhere: bool = Field(
        default=False,
        description="The replies were written before this run (a fanned-out job's shards, given in "
        "distilled_paths): the run distils nothing and writes no self-instruct prompts; the data's "
        "conversations distilled_paths do not answer are not trained on. Needs regenerate.",
    )
    init_head_dir: Path | None = Field(
        default=None,
        description="Existing EAGLE-3 head to fine-tune; its draft vocabulary (d2t/t2d) and aux layers "
        "are kept.",
    )
    resume: bool = Field(
        default=True,
        description="Continue from out_dir's latest checkpoint when there is one; false starts over.",
    )

    # --- data
    max_length: int = Field(
        default=2048, ge=16, description="Longest tokenised conversation; longer ones are cut."
    )
    max_conversations: int | None = Field(
        default=None, ge=1, description="Use at most this many conversations (a seeded random subset)."
    )
    holdout_fraction: float = Field(
        default=0.05,
        ge=0.0,
        lt=1.0,
        description="Conversations never trained on (hash split), written to heldout.jsonl for benchmarking.",
    )
    eval_fraction: float = Field(
        default=0.02,
        ge=0.0,
        lt=1.0,
        description="Prepared samples kept out of training to measure held-out loss and pick the best "
        "checkpoint.",
    )
    max_eval_samples: int = Field(
        default=32,
        ge=1,
        description="At most this many held-out samples are evaluated at each checkpoint: evaluation "
        "is paid from the same time budget as training.",
    )
    regenerate: bool = Field(
        default=True,
        description="Self-distillation: replace assistant turns with the target's own answers before "
        "training (the default: a head learns the target's replies, not the data's; on SmolLM2 the "
        "data's own replies gave tau 1.17 on unlike prompts).",
    )
    regenerate_temperature: float = Field(
        default=0.0, ge=0.0, description="Sampling temperature of regeneration; 0 is greedy."
    )
    regenerate_top_p: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Nucleus sampling cut-off of regeneration."
    )
    regenerate_max_new_tokens: int = Field(
        default=128,
        ge=1,
        description="Longest regenerated answer, in tokens (128: twice the conversations of 256 in the same "
        "budget; distillation is most of a CPU run's cost).",
    )
    regenerate_batch_size: int = Field(
        default=48,
        ge=1,
        description="Conversations generated together (48 gave ~3x the tokens/s of 16 on 2 CPU cores).",
    )
    regenerate_turns: Literal["last", "all"] = Field(
        default="last",
        description="last: keep each conversation's turns as context and let the target write only its "
        "final reply, as a benchmark or deployment asks it to (one generation per conversation). "
        "all: regenerate every assistant turn in order (up to regenerate_max_turns).",
    )
    regenerate_max_prompt_tokens: int = Field(
        default=256,
        ge=16,
        description="With regenerate_turns=last: longest context handed to the target; longer ones lose "
        "their earliest exchanges. Context tokens cost as much target compute as reply tokens but "
        "carry no loss, so long chat histories are cut.",
    )
    regenerate_max_turns: int | None = Field(
        default=2,
        ge=1,
        description="With regenerate_turns=all: keep at most this many assistant turns per conversation "
        "(more conversations per minute instead of long chats).",
    )
    context_loss: bool = Field(
        default=False,
        description="The head also learns the target's next token at every context position (past the "
        "template's fixed opening), not only in the replies: with regenerate_turns=last the context before "
        "the distilled reply, without regenerate every turn of the data, the other speaker's too. The "
        "target's features there are computed anyway, so this adds training positions at no target cost. "
        "Default: on without regenerate, off with it.",
    )
    self_instruct_conversations: int = Field(
        default=0,
        ge=0,
        description="Prompts the target writes itself from its chat template's user-turn prefix (the "
        "Magpie recipe), mixed with the data's conversations and answered by regeneration; 0: none. "
        "Default: none when data_paths are given (or regenerate is off); without data, about 33 per "
        "minute of time_budget_minutes (1000 for 30), or 1000 without a budget.",
    )
    self_instruct_temperature: float = Field(
        default=1.0, gt=0.0, description="Sampling temperature of self-instruct prompts (variety)."
    )
    self_instruct_top_p: float = Field(
        default=0.95, gt=0.0, le=1.0, description="Nucleus sampling cut-off of self-instruct prompts."
    )
    self_instruct_max_prompt_tokens: int = Field(
        default=64, ge=8, description="Longest self-instruct prompt; longer ones are dropped as truncated."
    )
    self_instruct_openings: Literal["tasks", "tasks_and_chat", "chat", "none"] = Field(
        default="tasks",
        description="tasks: each self-instruct prompt starts with the first words of a kind of task drawn "
        "from a built-in list (code, maths, reasoning, science, writing, advice, knowledge, chat; a sixth "
        "left open) and the target writes the rest, for data as broad as the tasks users ask of it. "
        "none: the target writes whole prompts (mostly one kind). On SmolLM2, tasks raised tau on code and "
        "maths prompts from 1.41 to 1.53 and lowered it on human chit-chat from 1.74 to 1.61. "
        "tasks_and_chat: the task openings, and a third of the prompts opening like casual conversation "
        "(greetings, news, opinions, small talk). chat: every prompt opens like casual conversation.",
    )
    regenerate_budget_fraction: float = Field(
        default=0.7,
        gt=0.0,
        lt=1.0,
        description="Share of time_budget_minutes given to regeneration; the rest trains.",
    )

    # --- head
    variant: Literal["eagle3", "eagle2", "peagle"] | None = Field(
        default=None,
        description="Draft head. eagle3: a chain over three fused target layers, its own lm_head, one head "
        "forward per draft token. eagle2: the target's last hidden state, feature regression, the target's "
        "lm_head. peagle: P-EAGLE parallel drafting on the EAGLE-3 head, every draft token of a step from "
        "one head forward (slots 1..K-1 read a learnt mask hidden state and the mask token); ttt_steps is "
        "then the number of depths trained. Default: eagle2 for Qwen3NextForCausalLM, eagle3 otherwise.",
    )
    peagle_keep_ratio: float = Field(
        default=0.75,
        gt=0.0,
        le=1.0,
        description="P-EAGLE drop-token sampling: depth d trains a random r**d of its positions (r this "
        "ratio), so deep drafts, rarely reached at inference, cost less of each step. 1 keeps them all.",
    )
    draft_vocab_size: int | None = Field(
        default=None,
        ge=1,
        description="Tokens the head can propose. Default: the smallest of 1024, 2048, ..., 32000 (and "
        "the target's vocabulary) that covers 99.9% of the tokens the head learns to predict.",
    )
    aux_layer_ids: list[int] | None = Field(
        default=None,
        min_length=3,
        max_length=3,
        description="Target layers whose input hidden states feed the head; default (2, N//2, N-3).",
    )
    init_from_target: Literal["lm_head", "random"] = Field(
        default="random",
        description="Starting point of a new head. lm_head: its norm and lm_head are the target's final "
        "norm and lm_head rows of the draft vocabulary. random: nothing copied.",
    )

    # --- optimisation
    ttt_steps: int = Field(
        default=3,
        ge=1,
        le=16,
        description="Draft steps unrolled by training-time test (cost grows linearly).",
    )
    ttt_decay: float = Field(
        default=0.8, gt=0.0, le=1.0, description="Loss weight of step i is ttt_decay**i."
    )
    feature_loss_weight: float | None = Field(
        default=None,
        ge=0.0,
        description="Weight of feature regression: each draft step's normed hidden state is also pulled "
        "(smooth L1) onto the target's final hidden state at the position it predicts from, as EAGLE-1 "
        "trains. Pairs with init_from_target=lm_head, whose output layer reads that space; 0: off. "
        "Default: 1 for eagle2, 0 for eagle3.",
    )
    optimizer: Literal["adamw", "muon"] = Field(
        default="adamw",
        description="adamw: AdamW on every weight. muon: Muon on the head's hidden matrices (fc, attention, "
        "MLP) and AdamW on lm_head and norms, with one learning rate (Muon's update scaled to AdamW's RMS).",
    )
    lr: float = Field(
        default=1.5e-3,
        gt=0.0,
        description="Peak AdamW learning rate (high for EAGLE, matched to the small default batches: on "
        "SmolLM2, 512-token steps at 1.5e-3 beat 4096-token steps at 5e-4 for the same compute).",
    )
    warmup_steps: int = Field(default=20, ge=0, description="Linear warm-up steps (at most 10% of the run).")
    min_lr_ratio: float = Field(
        default=0.1, ge=0.0, le=1.0, description="Cosine decay ends at lr * min_lr_ratio."
    )
    weight_decay: float = Field(
        default=0.0, ge=0.0, description="AdamW weight decay on matrices (not norms)."
    )
    grad_clip: float = Field(default=0.5, gt=0.0, description="Clip the global gradient norm to this.")
    batch_tokens: int = Field(
        default=512,
        ge=16,
        description="Padded tokens per step (rows x longest row) of length-sorted batches. Small: a CPU "
        "budget buys few tokens, and more optimizer steps learn more from them.",
    )
    max_batch_size: int = Field(default=64, ge=1, description="At most this many conversations per step.")
    epochs: float = Field(
        default=10.0, gt=0.0, description="Passes over the training samples (may be fractional)."
    )
    max_steps: int | None = Field(default=None, ge=1, description="Stop after this many optimizer steps.")
    time_budget_minutes: float | None = Field(
        default=None,
        gt=0.0,
        description="Budget of the whole run (regeneration + training + export) on budget_clock; the lr "
        "schedule is sized to the steps that fit.",
    )
    budget_clock: Literal["wall", "cpu"] = Field(
        default="wall",
        description="What time_budget_minutes measures. wall: elapsed time. cpu: this process's CPU time, "
        "all threads summed (a budget in CPU-minutes, independent of other load on the machine).",
    )

    # --- bookkeeping
    checkpoint_every: int = Field(default=100, ge=1, description="Checkpoint (and evaluate) every N steps.")
    keep_checkpoints: int = Field(
        default=2, ge=1, description="Recent checkpoints kept besides the best one."
    )
    export_dtype: TorchDType = Field(default="float32", description="Weight dtype of the exported head.")
    feature_cache: bool = Field(
        default=True,
        description="Keep the target's features in memory after the first epoch instead of recomputing.",
    )
    feature_cache_gb: float = Field(default=4.0, ge=0.0, description="Memory limit of the feature cache.")
    feature_dtype: TorchDType = Field(
        default="bfloat16", description="Dtype of cached aux hidden states (the final state uses float16)."
    )
    compute_dtype: Literal["auto", "bfloat16", "float32"] = Field(
        default="auto",
        description="Matmul precision (autocast) of the target's feature pass and the head's forward; "
        "weights and optimizer state stay float32. auto: bfloat16 where the CPU multiplies bf16 natively "
        "(AVX512-BF16/AMX, ~2.5x faster), else float32.",
    )
    seed: int = Field(
        default=0, description="Seed of data order, splits, regeneration sampling and initialisation."
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="cpu",
        description="Where the target and the head run: cpu, cuda (an error without a GPU; data-parallel "
        "ranks take one GPU each) or auto (cuda when torch sees a GPU). On CUDA, compute_dtype auto is "
        "bfloat16 where the GPU supports it.",
    )
    num_threads: int | None = Field(
        default=None, ge=1, description="torch CPU threads (of each process); default all cores."
    )
    nproc: int = Field(
        default=1,
        ge=1,
        description="Data-parallel training processes (torch.distributed: gloo on CPU, NCCL on CUDA, one GPU "
        "each). Each trains on its share of every batch and the gradients are summed, so the loss curve is "
        "one process's; rank 0 prepares the data, writes checkpoints, metrics and the head, and decides "
        "when all stop (the time budget is on its clock: with budget_clock cpu, rank 0's CPU time).",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_self_instruct(cls, values: object) -> object:
        """With no data, the default recipe has the target write prompts for its budget."""
        if not isinstance(values, dict) or "self_instruct_conversations" in values:
            return values
        if values.get("data_paths") or values.get("regenerate", True) is False:
            return values
        minutes = values.get("time_budget_minutes")
        return {**values, "self_instruct_conversations": self_instruct_for_budget(minutes)}

    @model_validator(mode="before")
    @classmethod
    def _default_context_loss(cls, values: object) -> object:
        """Data trained on as written learns every turn: against speculators' trainer on the same
        chats and wall budget it raised tau on unlike prompts (docs/measurements.md). Distilled
        replies keep it off, where it measured no gain."""
        if not isinstance(values, dict) or "context_loss" in values:
            return values
        return {**values, "context_loss": values.get("regenerate", True) is False}

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        if self.init_head_dir is not None and self.draft_vocab_size is not None:
            raise ValueError(
                "draft_vocab_size cannot be set with init_head_dir: fine-tuning keeps the head's vocabulary"
            )
        if self.self_instruct_conversations and not self.regenerate:
            raise ValueError(
                "self_instruct_conversations needs regenerate: the target's own prompts have no reply "
                "until the target writes one"
            )
        if self.distilled_paths and not self.regenerate:
            raise ValueError(
                "distilled_paths needs regenerate: they stand in for conversations the target would "
                "otherwise distil"
            )
        if self.distilled_elsewhere and not self.regenerate:
            raise ValueError(
                "distilled_elsewhere needs regenerate: it says where the distilled replies came from"
            )
        if not self.data_paths and not self.self_instruct_conversations:
            raise ValueError("no training data: give data_paths, self_instruct_conversations, or both")
        if self.variant == "peagle" and (self.feature_loss_weight or 0.0) > 0:
            raise ValueError("feature_loss_weight is an EAGLE-3 chain loss; variant peagle does not train it")
        if self.variant == "peagle" and self.nproc > 1:
            raise ValueError("variant peagle trains in one process (nproc 1): its loss is not split")
        if self.aux_layer_ids is not None and self.variant == "eagle2":
            raise ValueError("aux_layer_ids choose EAGLE-3's fused layers; an eagle2 head reads the last one")
        if self.aux_layer_ids is not None and len(set(self.aux_layer_ids)) != 3:
            raise ValueError(f"aux_layer_ids must be 3 distinct layers, got {self.aux_layer_ids}")
        return self

    def generation_rows(self, device: torch.device) -> int:
        """Rows distillation and prompt writing run at once on ``device``. A GPU step costs about
        the same for 48 rows as for 256 (it is launch-bound), so on CUDA at least
        ``CUDA_GENERATION_ROWS`` run unless the config names its own ``regenerate_batch_size``."""
        if device.type == "cuda" and "regenerate_batch_size" not in self.model_fields_set:
            return max(self.regenerate_batch_size, CUDA_GENERATION_ROWS)
        return self.regenerate_batch_size


CUDA_GENERATION_ROWS = 256
