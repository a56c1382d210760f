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

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class DraftTree:
    token_ids: torch.Tensor  # [N] target-vocabulary ids
    parents: torch.Tensor  # [N] index of the parent node, -1 for the root's children

    def __post_init__(self) -> None:
        if self.token_ids.shape != self.parents.shape or self.token_ids.dim() != 1:
            raise ValueError("token_ids and parents must be 1-D tensors of the same length")
        if any(parent >= index for index, parent in enumerate(self.parents.tolist())):
            raise ValueError("every node's parent must come before it")

    @property
    def size(self) -> int:
        return int(self.token_ids.shape[0])

    def depths(self) -> torch.Tensor:
        """[N] depth of every node, 1 for the root's children."""
        depths: list[int] = []
        for parent in self.parents.tolist():
            depths.append(1 if parent < 0 else depths[parent] + 1)
        return torch.tensor(depths, dtype=torch.long, device=self.token_ids.device)

    @property
    def depth(self) -> int:
        """Longest root-to-leaf path, in drafts: the most one verification can accept."""
        return int(self.depths().max()) if self.size else 0

    def ancestry(self) -> torch.Tensor:
        """[N+1, N+1] boolean: row r may attend to column c, the root (pending token) at 0."""
        size = self.size
        visible = torch.eye(size + 1, dtype=torch.bool, device=self.token_ids.device)
        visible[:, 0] = True
        for index, parent in enumerate(self.parents.tolist()):
            if parent >= 0:
                visible[index + 1] |= visible[parent + 1]
        return visible

    def verification_mask(self, cached: int) -> torch.Tensor:
        """[1, 1, N+1, cached+N+1] boolean mask for the target's forward over [root, nodes]:
        every row sees the ``cached`` positions before the root, then its own ancestry."""
        rows = self.size + 1
        prefix = torch.ones(rows, cached, dtype=torch.bool, device=self.token_ids.device)
        return torch.cat([prefix, self.ancestry()], dim=1)[None, None]

    def position_ids(self, root_position: int) -> torch.Tensor:
        """[1, N+1] positions of the root and every node (a node sits ``depth`` after the root)."""
        depths = torch.cat([self.depths().new_zeros(1), self.depths()])
        return (depths + root_position)[None]

    def greedy_path(self, target_argmax: torch.Tensor) -> tuple[list[int], int]:
        """The nodes greedy decoding accepts and the target's token after the last of them.

        ``target_argmax`` [N+1] is the target's greedy token after the root and after each
        node. From the root, follow the child whose token is the target's choice; stop where
        no child matches. Returns (accepted node indices root-to-leaf, next token).
        """
        choices = target_argmax.tolist()
        tokens = self.token_ids.tolist()
        children: dict[int, dict[int, int]] = {}
        for index, parent in enumerate(self.parents.tolist()):
            # First node wins a duplicate token: drafting never makes siblings with equal tokens.
            children.setdefault(parent, {}).setdefault(tokens[index], index)
        path: list[int] = []
        node = -1
        while (child := children.get(node, {}).get(choices[node + 1])) is not None:
            path.append(child)
            node = child
        return path, int(choices[node + 1])
