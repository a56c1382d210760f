"""A tree of draft tokens, verified by the target in one forward (EAGLE-2's dynamic tree).

A chain bets every draft position on the head's single best token; when that token is
wrong, everything after it is wasted. A tree keeps the head's next-best tokens as
siblings, so the target can accept a runner-up and carry on down its subtree. The target
scores every node in one forward: node ``i`` sits at position ``base + depth[i]`` and
attends to the cached prefix, the pending token and its own ancestors only, so each
node's logits are those of the chain running from the root down to it.

Nodes are stored parents-first (a node's parent has a smaller index); ``parents[i]`` is
-1 for a child of the root, the pending token every round starts from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from engine.transfers import int_tables_to


@dataclass(frozen=True, slots=True)
class DraftTree:
    """``token_ids`` and ``parents`` on the drafting device. The tree's shape is also kept on
    the host (``host_parents``, given by whoever built it there, else read back once): masks,
    positions and the accepted path are worked out from it without further read-backs."""

    token_ids: torch.Tensor  # [N] target-vocabulary ids
    parents: torch.Tensor  # [N] index of the parent node, -1 for the root's children
    host_parents: tuple[int, ...] | None = None  # ``parents`` on the host, where the builder had it
    _depths: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.token_ids.shape != self.parents.shape or self.token_ids.dim() != 1:
            raise ValueError("token_ids and parents must be 1-D tensors of the same length")
        parents = tuple(self.parents.tolist()) if self.host_parents is None else tuple(self.host_parents)
        if len(parents) != self.size:
            raise ValueError(f"host_parents has {len(parents)} nodes, the tree {self.size}")
        if any(parent >= index for index, parent in enumerate(parents)):
            raise ValueError("every node's parent must come before it")
        depths: list[int] = []
        for parent in parents:
            depths.append(1 if parent < 0 else depths[parent] + 1)
        object.__setattr__(self, "host_parents", parents)
        object.__setattr__(self, "_depths", tuple(depths))

    @property
    def _parents(self) -> tuple[int, ...]:
        assert self.host_parents is not None  # set by __post_init__
        return self.host_parents

    @property
    def size(self) -> int:
        return int(self.token_ids.shape[0])

    def depths(self) -> torch.Tensor:
        """[N] depth of every node, 1 for the root's children."""
        (depths,) = int_tables_to(self.token_ids.device, self._depths)
        return depths

    @property
    def depth(self) -> int:
        """Longest root-to-leaf path, in drafts: the most one verification can accept."""
        return max(self._depths, default=0)

    def ancestry(self) -> torch.Tensor:
        """[N+1, N+1] boolean: row r may attend to column c, the root (pending token) at 0."""
        size = self.size
        visible = np.eye(size + 1, dtype=np.int64)
        visible[:, 0] = 1
        for index, parent in enumerate(self._parents):
            if parent >= 0:
                visible[index + 1] |= visible[parent + 1]
        (table,) = int_tables_to(self.token_ids.device, visible)
        return table.view(size + 1, size + 1).bool()

    def verification_mask(self, cached: int) -> torch.Tensor:
        """[1, 1, N+1, cached+N+1] boolean mask for the target's forward over [root, nodes]:
        every row sees the ``cached`` positions before the root, then its own ancestry."""
        rows = self.size + 1
        prefix = torch.ones(rows, cached, dtype=torch.bool, device=self.token_ids.device)
        return torch.cat([prefix, self.ancestry()], dim=1)[None, None]

    def position_ids(self, root_position: int) -> torch.Tensor:
        """[1, N+1] positions of the root and every node (a node sits ``depth`` after the root)."""
        (positions,) = int_tables_to(self.token_ids.device, [root_position + d for d in (0, *self._depths)])
        return positions[None]

    def greedy_path(self, target_argmax: torch.Tensor) -> tuple[list[int], int]:
        """The nodes greedy decoding accepts and the target's token after the last of them.

        ``target_argmax`` [N+1] is the target's greedy token after the root and after each
        node. From the root, follow the child whose token is the target's choice; stop where
        no child matches. Returns (accepted node indices root-to-leaf, next token).
        """
        # One read-back for the target's choices and the drafted tokens together.
        both = torch.cat([target_argmax.reshape(-1).to(self.token_ids.device), self.token_ids]).tolist()
        choices, tokens = both[: self.size + 1], both[self.size + 1 :]
        children: dict[int, dict[int, int]] = {}
        for index, parent in enumerate(self._parents):
            # First node wins a duplicate token: drafting never makes siblings with equal tokens.
            children.setdefault(parent, {}).setdefault(tokens[index], index)
        path: list[int] = []
        node = -1
        while (child := children.get(node, {}).get(choices[node + 1])) is not None:
            path.append(child)
            node = child
        return path, int(choices[node + 1])
