"""The EAGLE-3 draft head: fc fusion of three target features plus one decoder layer.

Layout and tensor names follow the native EAGLE-3 checkpoint format that vLLM and
SGLang load (``fc``, ``midlayer.*``, ``norm``, ``lm_head``, ``d2t``, ``t2d``), so export
is a plain ``state_dict`` copy.

The decoder layer runs in three attention modes that share every weight:
- *cached*: inference; new positions attend to a growing key/value cache (causal).
- *slots*: inference for a padded batch of sequences whose keys and values live in one
  slot pool (``engine.heads.draft_slots``): one attention call for all of them (the serving
  engine drafts its batch this way).
- *training-time test* (TTT): step i at index t attends to step-0 keys at indices <= t
  plus the keys of steps 1..i at index t only, which is exactly what a draft chain sees
  at inference (the accepted prefix, then its own earlier drafts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name
from torch import nn
from transformers.models.llama.modeling_llama import (
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
    rotate_half,
)

from engine.heads.config import Eagle3HeadConfig
from engine.heads.draft_slots import HeadSlotStep
from engine.kv_pool import pool_dtype

# (queries, new keys, new values) -> attention output; keys/values are not yet GQA-expanded.
AttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class DraftKVCache:
    """Keys/values of the draft layer for the positions processed so far, [B, kv_heads, L, D]."""

    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[2])

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)
            self.values = torch.cat([self.values, values], dim=2)
        return self.keys, self.values

    def crop(self, length: int) -> None:
        """Forget positions from ``length`` on (rejected drafts)."""
        if self.keys is not None and self.values is not None:
            self.keys = self.keys[:, :, :length]
            self.values = self.values[:, :, :length]


@dataclass
class TTTKeyValues:
    """Keys/values of every training-time-test step so far, each [B, kv_heads, T, D]."""

    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)


def _expand_kv(tensor: torch.Tensor, groups: int) -> torch.Tensor:
    return tensor if groups == 1 else tensor.repeat_interleave(groups, dim=1)


def gather_positions(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """tensor[b, index[b, a]] for every row b: [B, T, ...] and [B, A] -> [B, A, ...]."""
    rows = torch.arange(tensor.shape[0], device=tensor.device)[:, None]
    return tensor[rows, index]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on [B, heads, L, D] with cos/sin [B, L, D]."""
    half_turned: torch.Tensor = rotate_half(x)  # type: ignore[no-untyped-call]
    return x * cos.unsqueeze(1) + half_turned * sin.unsqueeze(1)


class Float32RotaryEmbedding(LlamaRotaryEmbedding):
    """Llama's rotary embedding, whose frequencies stay float32 when the head is cast.

    ``head.to(torch.bfloat16)`` (every head beside a bfloat16 target, so every head on a GPU)
    would round ``inv_freq`` to bfloat16: frequencies off by up to 0.33 %, so a query turns
    against a key 512 positions back by up to 0.9 rad more or less than in training (float32
    under autocast) and than vLLM or SGLang turn it (float32 tables). SmolLM2's shipped head
    in bfloat16 then chose another draft than in float32 at 9.1 % of positions 1,024-2,400 of
    a prompt, against 3.5 % with float32 frequencies. cos and sin still come out in the head's
    dtype."""

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Self:
        kept = dict(self._buffers)
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        for name, before in kept.items():
            after = self._buffers[name]
            if before is not None and after is not None and after.dtype != before.dtype:
                self._buffers[name] = before.to(device=after.device)  # moved, not cast
        return self


class Eagle3Attention(nn.Module):
    """Llama attention whose q/k/v read the 2H-wide [embedding, hidden] concatenation
    (EAGLE-3), or an H-wide input when ``input_width`` says so (EAGLE-2's fc output)."""

    def __init__(self, config: Eagle3HeadConfig, input_width: int | None = None) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.scale = config.head_dim**-0.5
        width = input_width or 2 * config.hidden_size
        self.q_proj = nn.Linear(width, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attend: AttendFn,
        *,
        query_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Keys/values of every position of ``x``; queries (and the output) only at
        ``query_index`` [B, A] when given, which is all TTT needs from most positions."""
        batch, length, _ = x.shape
        k = self.k_proj(x).view(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if query_index is None:
            q = self.q_proj(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
        else:
            queries = query_index.shape[1]
            q_input = gather_positions(x, query_index)
            q = self.q_proj(q_input).view(batch, queries, self.num_heads, self.head_dim).transpose(1, 2)
            q = _rotate(q, gather_positions(cos, query_index), gather_positions(sin, query_index))
            k = _rotate(k, cos, sin)
        out = attend(q, k, v)  # [B, heads, queries, D]
        width = self.num_heads * self.head_dim
        projected: torch.Tensor = self.o_proj(out.transpose(1, 2).reshape(batch, q.shape[2], width))
        return projected

    def cached_attention(self, cache: DraftKVCache, attention_mask: torch.Tensor | None) -> AttendFn:
        """Attend over the cache plus the new positions; causal unless a mask is given.

        ``attention_mask`` is boolean [B, 1 or heads, T, L+T] (True = may attend).
        """

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            past = cache.length
            # A bfloat16 head on a CPU keeps float32 keys: the attention kernel is faster there.
            dtype = pool_dtype(k)
            keys, values = cache.append(k.to(dtype), v.to(dtype))
            groups = self.num_heads // self.num_kv_heads
            keys, values = _expand_kv(keys, groups), _expand_kv(values, groups)
            mask = attention_mask
            if mask is None:
                new = q.shape[2]
                rows = torch.arange(new, device=q.device)[:, None] + past
                mask = torch.arange(past + new, device=q.device)[None, :] <= rows
            out = F.scaled_dot_product_attention(q.to(dtype), keys, values, attn_mask=mask, scale=self.scale)
            return out.to(q.dtype)

        return attend

    def ttt_attention(self, steps: TTTKeyValues, query_index: torch.Tensor | None = None) -> AttendFn:
        """Step-0 keys causally, then each later step's key at the query's own index.

        Queries are at every index, or at ``query_index`` [B, A]; step-0 keys always
        cover the whole sequence, later steps' keys are at the queries' indices.
        """

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            steps.keys.append(k)
            steps.values.append(v)
            groups = self.num_heads // self.num_kv_heads
            k0, v0 = _expand_kv(steps.keys[0], groups), _expand_kv(steps.values[0], groups)
            length = k0.shape[2]
            scores0 = torch.matmul(q, k0.transpose(-1, -2)) * self.scale
            key_index = torch.arange(length, device=q.device)
            if query_index is None:
                causal = key_index[None, :] <= key_index[:, None]  # [T, T]
            else:
                causal = (key_index[None, None, :] <= query_index[:, :, None])[:, None]  # [B, 1, A, T]
            scores0 = scores0.masked_fill(~causal, torch.finfo(scores0.dtype).min)
            later_keys = [_expand_kv(key, groups) for key in steps.keys[1:]]
            diagonal = [(q * key).sum(-1, keepdim=True) * self.scale for key in later_keys]
            probs = torch.softmax(torch.cat([scores0, *diagonal], dim=-1), dim=-1)
            out = torch.matmul(probs[..., :length], v0)  # [B, heads, queries, D]
            for offset, value in enumerate(steps.values[1:]):
                out = out + probs[..., length + offset, None] * _expand_kv(value, groups)
            return out

        return attend


class Eagle3DecoderLayer(nn.Module):
    """One decoder layer over cat(input_layernorm(embed), hidden_norm(hidden)); residual is hidden."""

    def __init__(self, config: Eagle3HeadConfig) -> None:
        super().__init__()
        self.hidden_norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.self_attn = Eagle3Attention(config)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = LlamaMLP(config.llama_config())  # type: ignore[no-untyped-call]

    def forward(
        self,
        embeds: torch.Tensor,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attend: AttendFn,
        *,
        query_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Output at every position, or only at ``query_index`` [B, A] when given."""
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], dim=-1)
        residual = hidden if query_index is None else gather_positions(hidden, query_index)
        hidden = residual + self.self_attn(x, cos, sin, attend, query_index=query_index)
        mlp_out: torch.Tensor = self.mlp(self.post_attention_layernorm(hidden))
        return hidden + mlp_out


class Eagle3DraftModel(nn.Module):
    """The whole head. ``forward`` returns the pre-norm hidden state, which is both what the
    next draft step consumes and, through ``compute_logits``, the draft distribution."""

    # Registered buffers, declared so type checkers see tensors rather than Module | Tensor.
    d2t: torch.Tensor
    t2d: torch.Tensor

    def __init__(self, config: Eagle3HeadConfig) -> None:
        super().__init__()
        self.config = config
        # A frozen copy of the target's embeddings (loaded by ``load_target_embeddings``);
        # never trained and never exported, since engines share the target's own.
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)
        self._build_body(config)
        self.lm_head = nn.Linear(config.hidden_size, config.draft_vocab_size, bias=False)
        self.rotary_emb = Float32RotaryEmbedding(config.llama_config())
        # Draft-vocabulary maps: target_id = draft_id + d2t[draft_id]; t2d marks kept target ids.
        self.register_buffer("d2t", torch.zeros(config.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(config.vocab_size, dtype=torch.bool))

    def _build_body(self, config: Eagle3HeadConfig) -> None:
        """fc, the decoder layer and the output norm: what the variants differ in."""
        self.fc = nn.Linear(3 * config.target_hidden_size, config.hidden_size, bias=False)
        self.midlayer: nn.Module = Eagle3DecoderLayer(config)
        self.norm: nn.Module = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the head computes in: its weights' (engine.heads.draft_precision may cast a
        head away from its target's dtype)."""
        return self.lm_head.weight.dtype

    def _attention(self) -> Eagle3Attention:
        attention = self.midlayer.self_attn
        assert isinstance(attention, Eagle3Attention)
        return attention

    def load_target_embeddings(self, weight: torch.Tensor) -> None:
        if tuple(weight.shape) != tuple(self.embed_tokens.weight.shape):
            raise ValueError(
                f"target embeddings have shape {tuple(weight.shape)}, "
                f"head expects {tuple(self.embed_tokens.weight.shape)}"
            )
        with torch.no_grad():
            self.embed_tokens.weight.copy_(weight)

    def set_draft_vocab(self, d2t: torch.Tensor, t2d: torch.Tensor) -> None:
        with torch.no_grad():
            self.d2t.copy_(d2t)
            self.t2d.copy_(t2d)

    def fuse(self, aux_hidden_states: torch.Tensor) -> torch.Tensor:
        """[B, T, 3*H_target] target features -> [B, T, H] draft input."""
        return self.fc(aux_hidden_states)  # type: ignore[no-any-return]

    def _layer(
        self,
        input_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        attend: AttendFn,
        *,
        query_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        embeds = self.embed_tokens(input_ids).to(hidden.dtype)
        cos, sin = self.rotary_emb(hidden, position_ids)
        return self.midlayer(embeds, hidden, cos, sin, attend, query_index=query_index)  # type: ignore[no-any-return]

    def forward(
        self,
        input_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        cache: DraftKVCache,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Inference step: ``hidden`` is fused target features or the head's own output."""
        attend = self._attention().cached_attention(cache, attention_mask)
        return self._layer(input_ids, hidden, position_ids, attend)

    def forward_slots(
        self, input_ids: torch.Tensor, hidden: torch.Tensor, step: HeadSlotStep
    ) -> torch.Tensor:
        """Inference step for a padded batch ([B, Q] ids, [B, Q, H] hidden) whose keys and
        values live in a slot pool (``engine.heads.draft_slots``): one attention call for all."""
        attention = self._attention()

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return step.attend(q, k, v, attention.scale)

        return self._layer(input_ids, hidden, step.positions, attend)

    def forward_ttt_step(
        self,
        input_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        steps: TTTKeyValues,
        query_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One training-time-test step; ``steps`` accumulates keys/values across steps.

        Without ``query_index`` every step runs at every index ([B, T] in and out). With
        it ([B, A] indices), step 0 takes the whole sequence (its keys serve all later
        steps) but returns only the A indices, and later steps take and return those A
        indices alone: positions no loss depends on are never computed.
        """
        attend = self._attention().ttt_attention(steps, query_index)
        if query_index is not None and steps.keys:
            # Later steps: inputs are already at the query indices; their keys go on the diagonal.
            return self._layer(input_ids, hidden, position_ids, attend)
        return self._layer(input_ids, hidden, position_ids, attend, query_index=query_index)

    def compute_logits(self, prenorm_hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the draft vocabulary."""
        return self.lm_head(self.norm(prenorm_hidden))  # type: ignore[no-any-return]

    def draft_to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]
