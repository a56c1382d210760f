"""One batch through target and head: cached target features, the TTT loss, evaluation.

The training loop owns the order of batches and the optimizer; this owns what a batch
costs, so the loop reads as "features, loss, step" and the planner gets its timings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import torch

from engine.heads.model import Eagle3DraftModel
from engine.heads.peagle import PEagleDraftModel
from trainer.data.tokenize import TokenizedConversation
from trainer.eagle.batching import Batch, BatchTensors, collate, epoch_order
from trainer.eagle.budget_clock import Clock
from trainer.eagle.data_parallel import DataParallel
from trainer.eagle.features import FeatureCache, TargetFeatures, TargetTeacher
from trainer.eagle.generation_features import collate_features, collated_nbytes
from trainer.eagle.peagle_ttt import parallel_loss
from trainer.eagle.reporting import EvalMetrics, acceptance_length_estimate
from trainer.eagle.schedule import StepTimer
from trainer.eagle.ttt import TTTOutput, teacher_positions, ttt_loss, ttt_step_counts

GlobalCounts = Callable[[list[int]], list[int]]


class TrainOrder:
    """Which batch each step trains on: a fixed set of batches, reshuffled per epoch."""

    def __init__(self, batches: Sequence[Batch], *, seed: int) -> None:
        self.batches = list(batches)
        self._seed = seed
        self._orders: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self.batches)

    def batch_at(self, step: int) -> tuple[str, Batch]:
        """(cache key, batch) of step ``step`` (0-based)."""
        epoch, index = divmod(step, len(self.batches))
        if epoch not in self._orders:
            self._orders[epoch] = epoch_order(len(self.batches), seed=self._seed, epoch=epoch)
        batch_id = self._orders[epoch][index]
        return f"train-{batch_id}", self.batches[batch_id]

    def upcoming(
        self, start: int, stop: int, cache: FeatureCache, bytes_per_token: int
    ) -> Iterator[tuple[int, bool]]:
        """(padded tokens, features cached) of steps ``start..stop-1``, simulating the cache filling up."""
        will_hold = cache.bytes
        will_cache: set[str] = set()
        for step in range(start, stop):
            key, batch = self.batch_at(step)
            hit = key in cache or key in will_cache
            size = batch.padded_tokens * bytes_per_token
            if not hit and will_hold + size <= cache.max_bytes:
                will_hold += size
                will_cache.add(key)
            yield batch.padded_tokens, hit


class BatchRunner:
    def __init__(
        self,
        head: Eagle3DraftModel,
        teacher: TargetTeacher,
        *,
        cache: FeatureCache,
        timer: StepTimer,
        pad_id: int,
        ttt_steps: int,
        ttt_decay: float,
        autocast_bf16: bool,
        feature_loss_weight: float = 0.0,
        peagle_keep_ratio: float = 1.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.clock = clock  # the training budget's clock, so planned steps fit the budget
        self.head = head
        self.teacher = teacher
        self.cache = cache
        self.timer = timer
        self.pad_id = pad_id
        self.ttt_steps = ttt_steps
        self.ttt_decay = ttt_decay
        self.feature_loss_weight = feature_loss_weight
        self.peagle_keep_ratio = peagle_keep_ratio
        self.autocast_bf16 = autocast_bf16

    @property
    def feature_bytes_per_token(self) -> int:
        hidden = self.head.config.target_hidden_size
        aux = 3 * hidden * torch.empty((), dtype=self.teacher.feature_dtype).element_size()
        final = hidden * torch.empty((), dtype=self.teacher.final_dtype).element_size()
        return aux + final + 8  # + the int64 argmax

    @property
    def device(self) -> torch.device:
        return self.head.fc.weight.device

    def _recorded_features(
        self, samples: Sequence[TokenizedConversation], batch: Batch
    ) -> TargetFeatures | None:
        features = collate_features(samples, batch.sample_indices, batch.length)
        return None if features is None else features.to(self.device)

    def adopt_recorded_features(
        self, keyed_batches: Sequence[tuple[str, Batch]], samples: Sequence[TokenizedConversation]
    ) -> int:
        """Cache the features recorded during distillation for these batches; returns how many.

        A batch the cache has no room left for is not collated: collating copies its features
        into one padded tensor and moves it to the head's device (the GPU), only for the cache
        to refuse it."""
        adopted = 0
        for key, batch in keyed_batches:
            if key in self.cache:
                adopted += 1
                continue
            size = collated_nbytes(samples, batch.sample_indices, batch.length)
            if size is None or not self.cache.has_room(size):
                continue
            features = self._recorded_features(samples, batch)
            if features is not None and self.cache.put(key, features):
                adopted += 1
        return adopted

    def features(
        self, key: str, samples: Sequence[TokenizedConversation], batch: Batch
    ) -> tuple[BatchTensors, TargetFeatures]:
        """The batch's tensors and target features (from the cache, or computed and cached), on the
        head's device."""
        tensors = collate(samples, batch, pad_id=self.pad_id).to(self.device)
        features = self.cache.get(key) or self._recorded_features(samples, batch)
        if features is not None:
            self.cache.put(key, features)
        else:
            began = self.clock()
            features = self.teacher.features(
                tensors.input_ids, tensors.attention_mask, needed=teacher_positions(tensors.loss_mask)
            )
            self.timer.record_features(self.clock() - began, batch.padded_tokens)
            self.cache.put(key, features)
        return tensors, features

    def loss(
        self, tensors: BatchTensors, features: TargetFeatures, *, global_counts: GlobalCounts | None = None
    ) -> TTTOutput:
        """The unrolled TTT loss of one batch (forward under bf16 autocast when enabled).

        ``global_counts`` turns this batch's per-step counts into the global batch's, when
        it is one rank's shard of it: the loss is then this shard's share of the global one."""
        teacher = self.teacher.teacher(features, self.head.t2d, needed=teacher_positions(tensors.loss_mask))
        normalizers = None
        if global_counts is not None:
            if isinstance(self.head, PEagleDraftModel):
                # TrainConfig refuses nproc > 1 for P-EAGLE: its loss has no global normalizers.
                raise ValueError("P-EAGLE heads train in one process (nproc 1)")
            normalizers = global_counts(ttt_step_counts(tensors.loss_mask, teacher, self.ttt_steps))
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast_bf16):
            if isinstance(self.head, PEagleDraftModel):
                return parallel_loss(
                    self.head,
                    input_ids=tensors.input_ids,
                    aux_hidden_states=features.aux_hidden_states.float(),
                    teacher=teacher,
                    loss_mask=tensors.loss_mask,
                    depths=self.ttt_steps,
                    decay=self.ttt_decay,
                    keep_ratio=self.peagle_keep_ratio,
                )
            return ttt_loss(
                self.head,
                input_ids=tensors.input_ids,
                aux_hidden_states=features.aux_hidden_states.float(),
                teacher=teacher,
                loss_mask=tensors.loss_mask,
                steps=self.ttt_steps,
                decay=self.ttt_decay,
                target_final_hidden=features.final_hidden if self.feature_loss_weight > 0 else None,
                feature_loss_weight=self.feature_loss_weight,
                normalizers=normalizers,
            )

    def evaluate(
        self,
        batches: Sequence[Batch],
        samples: Sequence[TokenizedConversation],
        parallel: DataParallel | None = None,
    ) -> EvalMetrics | None:
        """Loss and per-step accuracy over held-out batches, weighted by masked tokens; a
        data-parallel rank evaluates its shard of each batch and the sums are combined."""
        parallel = parallel or DataParallel.single()
        if not batches:
            return None
        began = self.clock()
        was_training = self.head.training
        self.head.eval()
        loss_sums = [0.0] * self.ttt_steps
        counts = [0] * self.ttt_steps
        hits = [0.0] * self.ttt_steps
        with torch.no_grad():
            for batch_id, batch in enumerate(batches):
                shard = parallel.shard(batch, samples)
                if shard is None:
                    continue
                out = self.loss(*self.features(f"eval-{batch_id}", samples, shard))
                for i, count in enumerate(out.step_counts):
                    loss_sums[i] += out.step_losses[i] * count
                    counts[i] += count
                    hits[i] += out.step_accuracy[i] * count
        self.head.train(was_training)
        if parallel.enabled:
            steps = self.ttt_steps
            summed = parallel.sum([*loss_sums, *counts, *hits])
            loss_sums, hits = summed[:steps], summed[2 * steps :]
            counts = [round(count) for count in summed[steps : 2 * steps]]
        self.timer.eval_seconds = self.clock() - began
        accuracy = [h / max(c, 1) for h, c in zip(hits, counts, strict=True)]
        step_means = [total / max(count, 1) for total, count in zip(loss_sums, counts, strict=True)]
        return EvalMetrics(
            # The training loss's definition: each step's mean, weighted by decay**step.
            loss=sum((self.ttt_decay**i) * mean for i, mean in enumerate(step_means)),
            step_accuracy=accuracy,
            acceptance_length_estimate=acceptance_length_estimate(accuracy),
            masked_tokens=counts[0],
        )
