"""Growing a draft tree with the EAGLE-3 head (EAGLE-2's dynamic tree, greedy decoding).

Each level runs the head once over the ``top_k`` most likely nodes found so far at that
depth (the frontier) and gives each of them its ``top_k`` best next tokens. A node's
score is the head's log-probability of the whole path from the root to it, an estimate
of the chance the target accepts that path. After ``depth`` levels, the ``num_nodes``
highest-scoring nodes of every level together form the tree the target verifies.

A child never scores above its parent (log-probabilities are at most 0), and ties keep
the older node first, so the chosen nodes always include every chosen node's parent.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.drafting.draft import Drafter
from engine.drafting.tree import DraftTree
from engine.heads.peagle import PEagleDraftModel
from engine.transfers import int_tables_to


@dataclass(frozen=True, slots=True)
class TreeShape:
    """How wide and deep a draft tree grows and how many of its nodes the target verifies."""

    depth: int = 5
    top_k: int = 4
    num_nodes: int = 16

    def __post_init__(self) -> None:
        for name in ("depth", "top_k", "num_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"tree {name} must be at least 1, got {getattr(self, name)}")

    @classmethod
    def parse(cls, text: str) -> TreeShape:
        """``DEPTHxTOP_KxNODES``, e.g. ``5x4x16`` (command lines)."""
        parts = text.lower().split("x")
        if len(parts) != 3 or not all(part.isdigit() for part in parts):
            raise ValueError(f"a tree shape is DEPTHxTOP_KxNODES, e.g. 5x4x16; got {text!r}")
        depth, top_k, num_nodes = (int(part) for part in parts)
        return cls(depth=depth, top_k=top_k, num_nodes=num_nodes)

    def __str__(self) -> str:
        return f"{self.depth}x{self.top_k}x{self.num_nodes}"

    def limited_to(self, depth: int) -> TreeShape:
        """The same shape, no deeper than ``depth`` (near the end of a generation)."""
        return TreeShape(depth=min(self.depth, depth), top_k=self.top_k, num_nodes=self.num_nodes)


@dataclass(slots=True)
class _Nodes:
    """Every node drafted this round, in creation order (parents first)."""

    token_ids: list[torch.Tensor]  # target ids, one [n] tensor per level
    # Each node's parent (-1: a child of the root), kept on the host: the tree's shape follows
    # from the frontiers, so only a level's frontier is read back from the device.
    parents: list[int]
    scores: list[torch.Tensor]


def propose_tree(
    drafter: Drafter, aux_hidden_states: torch.Tensor, next_token_ids: torch.Tensor, shape: TreeShape
) -> DraftTree:
    """Commit the new target features to the head's cache, grow a tree, keep its best nodes.

    Arguments are those of ``Drafter.propose``. The head's entries for tree nodes are
    dropped again before returning, as the chain's are.
    """
    head = drafter.head
    if isinstance(head, PEagleDraftModel):
        raise ValueError("a P-EAGLE head drafts a chain in one forward; draft trees need an EAGLE-3 head")
    cache = drafter.cache
    prenorm, committed = drafter.commit(aux_hidden_states, next_token_ids)
    device = next_token_ids.device
    log_probs = torch.log_softmax(head.compute_logits(prenorm)[0].float(), dim=-1)  # [1, V_draft]
    scores, draft_ids = log_probs.topk(min(shape.top_k, log_probs.shape[-1]), dim=-1)
    nodes = _Nodes(
        token_ids=[drafter.draft_to_target[draft_ids[0]]],
        parents=[-1] * draft_ids.shape[1],
        scores=[scores[0]],
    )
    frontier = torch.arange(draft_ids.shape[1], device=device)  # node indices to expand next
    frontier_nodes: list[int] = list(range(draft_ids.shape[1]))  # the same, on the host
    frontier_hidden = prenorm.expand(1, draft_ids.shape[1], -1)  # the output that drafted each
    slot_of_node: dict[int, int] = {}  # node index -> its entry in the head's cache
    for level in range(1, shape.depth):
        if level > 1:
            frontier_nodes = frontier.tolist()  # the level's one read-back: its best nodes
        count = len(frontier_nodes)
        all_tokens = torch.cat(nodes.token_ids)
        mask = torch.zeros(count, cache.length + count, dtype=torch.bool, device=device)
        mask[:, :committed] = True
        for row, node in enumerate(frontier_nodes):
            mask[row, cache.length + row] = True
            ancestor = nodes.parents[node]
            while ancestor >= 0:
                mask[row, slot_of_node[ancestor]] = True
                ancestor = nodes.parents[ancestor]
        for row, node in enumerate(frontier_nodes):
            slot_of_node[node] = cache.length + row
        positions = torch.full((1, count), committed + level - 1, dtype=torch.long, device=device)
        output = head(all_tokens[frontier][None], frontier_hidden, positions, cache, mask[None, None])
        log_probs = torch.log_softmax(head.compute_logits(output)[0].float(), dim=-1)  # [count, V]
        child_scores, child_ids = log_probs.topk(min(shape.top_k, log_probs.shape[-1]), dim=-1)
        parent_scores = torch.cat(nodes.scores)[frontier]
        level_scores = (parent_scores[:, None] + child_scores).flatten()
        first = len(nodes.parents)
        nodes.token_ids.append(drafter.draft_to_target[child_ids.flatten()])
        nodes.parents.extend(node for node in frontier_nodes for _ in range(child_ids.shape[1]))
        nodes.scores.append(level_scores)
        best = level_scores.topk(min(shape.top_k, len(level_scores))).indices
        frontier = first + best
        frontier_hidden = output[:, best // child_ids.shape[1]]
    cache.crop(committed)
    return _best_nodes(nodes, shape.num_nodes)


def _best_nodes(nodes: _Nodes, num_nodes: int) -> DraftTree:
    scores = torch.cat(nodes.scores).tolist()  # one read-back, not one per node
    # Highest score first, the older node first among equals: a parent precedes its children.
    order = sorted(range(len(scores)), key=lambda index: (-scores[index], index))
    chosen = sorted(order[:num_nodes])  # creation order is parents-first
    new_index = {old: new for new, old in enumerate(chosen)}
    parents = nodes.parents
    if any(parents[old] >= 0 and parents[old] not in new_index for old in chosen):
        raise RuntimeError("draft tree selection dropped a chosen node's parent")
    token_ids = torch.cat(nodes.token_ids)
    new_parents = [new_index[parents[old]] if parents[old] >= 0 else -1 for old in chosen]
    # Through pinned memory: a pageable copy to a GPU waits for its queue to drain.
    chosen_on_device, parents_on_device = int_tables_to(token_ids.device, chosen, new_parents)
    return DraftTree(
        token_ids=token_ids[chosen_on_device], parents=parents_on_device, host_parents=tuple(new_parents)
    )
