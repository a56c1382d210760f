"""Tree drafting: the tree's masks and greedy walk, the head growing it, and lossless decoding."""

from __future__ import annotations

import pytest
import torch

from engine.capture import TargetFeatureCapture
from engine.drafting.draft import Drafter
from engine.drafting.tree import DraftTree
from engine.drafting.tree_draft import TreeShape, propose_tree
from engine.sampling import SamplingParams
from speculative import SpeculativeDecoder
from tests.fixtures.torch_calls import CountingCalls
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]
FULL_ATTENTION = ["LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"]

#        root
#       /    \
#     0:7    1:9
#    /   \      \
#  2:4   3:5    4:4
#   |
#  5:8
TREE = DraftTree(token_ids=torch.tensor([7, 9, 4, 5, 4, 8]), parents=torch.tensor([-1, -1, 0, 0, 1, 2]))


def test_tree_masks_and_positions_follow_ancestry() -> None:
    assert TREE.depths().tolist() == [1, 1, 2, 2, 2, 3]
    assert TREE.depth == 3
    assert TREE.position_ids(10).tolist() == [[10, 11, 11, 12, 12, 12, 13]]
    mask = TREE.verification_mask(cached=2)
    assert mask.shape == (1, 1, 7, 9)
    assert mask[0, 0, :, :2].all()  # the cached prefix is visible to every row
    visible = [[int(c) for c in row] for row in mask[0, 0, :, 2:].tolist()]
    assert visible == [
        [1, 0, 0, 0, 0, 0, 0],  # root
        [1, 1, 0, 0, 0, 0, 0],  # node 0
        [1, 0, 1, 0, 0, 0, 0],  # node 1
        [1, 1, 0, 1, 0, 0, 0],  # node 2 under 0
        [1, 1, 0, 0, 1, 0, 0],  # node 3 under 0
        [1, 0, 1, 0, 0, 1, 0],  # node 4 under 1
        [1, 1, 0, 1, 0, 0, 1],  # node 5 under 2
    ]


@pytest.mark.parametrize(
    ("argmax", "path", "next_token"),
    [
        ([7, 4, 0, 8, 0, 0, 3], [0, 2, 5], 3),  # all the way down the deepest branch
        ([9, 0, 4, 0, 0, 6, 0], [1, 4], 6),  # the runner-up at depth 1, then its child
        ([7, 5, 0, 0, 2, 0, 0], [0, 3], 2),  # the second child of node 0
        ([3, 0, 0, 0, 0, 0, 0], [], 3),  # nothing matches: the target's own token only
    ],
)
def test_greedy_path_follows_the_targets_choices(argmax: list[int], path: list[int], next_token: int) -> None:
    assert TREE.greedy_path(torch.tensor(argmax)) == (path, next_token)


def test_tree_rejects_a_child_before_its_parent() -> None:
    with pytest.raises(ValueError, match="parent must come before"):
        DraftTree(token_ids=torch.tensor([1, 2]), parents=torch.tensor([1, -1]))


def test_tree_shape_parses_and_refuses_bad_text() -> None:
    assert TreeShape.parse("5x4x16") == TreeShape(depth=5, top_k=4, num_nodes=16)
    with pytest.raises(ValueError, match="DEPTHxTOP_KxNODES"):
        TreeShape.parse("5x4")
    with pytest.raises(ValueError, match="num_nodes must be at least 1"):
        TreeShape(depth=2, top_k=2, num_nodes=0)


def _drafter_and_features() -> tuple[Drafter, torch.Tensor, torch.Tensor]:
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=3)
    with torch.inference_mode(), TargetFeatureCapture(target, head.config.aux_layer_ids) as capture:
        target(torch.tensor([PROMPT]))
        features = capture.aux_hidden_states()[0]
    return Drafter(head, int(target.config.vocab_size)), features, torch.tensor([*PROMPT[1:], 50])


def test_a_one_wide_tree_is_the_chain() -> None:
    drafter, features, next_ids = _drafter_and_features()
    with torch.inference_mode(), drafter.session():
        chain = drafter.propose(features, next_ids, num_tokens=4, params=SamplingParams(), generator=None)
    with torch.inference_mode(), drafter.session():
        tree = propose_tree(drafter, features, next_ids, TreeShape(depth=4, top_k=1, num_nodes=4))
        assert drafter.length == len(PROMPT)  # the tree's own entries are dropped again
    assert tree.token_ids.tolist() == chain.token_ids.tolist()
    assert tree.parents.tolist() == [-1, 0, 1, 2]


def test_a_wide_tree_keeps_its_best_nodes_parents_first() -> None:
    drafter, features, next_ids = _drafter_and_features()
    shape = TreeShape(depth=4, top_k=3, num_nodes=10)
    with torch.inference_mode(), drafter.session():
        chain = drafter.propose(features, next_ids, num_tokens=1, params=SamplingParams(), generator=None)
    with torch.inference_mode(), drafter.session():
        tree = propose_tree(drafter, features, next_ids, shape)
    assert tree.size == 10
    assert all(parent < index for index, parent in enumerate(tree.parents.tolist()))
    assert 1 < tree.depth <= 4
    assert tree.token_ids[0] == chain.token_ids[0]  # the head's best first token leads the tree
    siblings: dict[int, list[int]] = {}
    for token, parent in zip(tree.token_ids.tolist(), tree.parents.tolist(), strict=True):
        siblings.setdefault(parent, []).append(token)
    assert all(len(tokens) == len(set(tokens)) for tokens in siblings.values())
    assert max(len(tokens) for tokens in siblings.values()) <= 3


READ_BACKS = {
    torch.Tensor.tolist,
    torch.Tensor.item,
    torch.Tensor.cpu,
    torch.Tensor.numpy,
    torch.Tensor.__float__,
    torch.Tensor.__int__,
    torch.Tensor.__bool__,
    torch.Tensor.__index__,
}


def test_a_tree_round_reads_back_once_a_level_and_once_to_walk_it() -> None:
    # On a GPU every read-back waits for the device: the tree's shape stays on the host, so a
    # round reads each level's frontier (from the second level on), the scores once to choose
    # the nodes, and the target's choices with the drafted tokens once to walk the tree.
    drafter, features, next_ids = _drafter_and_features()
    shape = TreeShape(depth=5, top_k=3, num_nodes=12)
    with (
        torch.inference_mode(),
        drafter.session(),
        CountingCalls(lambda func, args, kwargs: func in READ_BACKS) as read_backs,
    ):
        tree = propose_tree(drafter, features, next_ids, shape)
        tree.verification_mask(len(PROMPT))
        tree.position_ids(len(PROMPT))
        assert tree.depth > 1
        tree.greedy_path(torch.zeros(tree.size + 1, dtype=torch.long))
    assert read_backs.count == (shape.depth - 2) + 1 + 1


@pytest.mark.parametrize("architecture", FULL_ATTENTION)
def test_tree_decoding_with_a_random_head_equals_hf_generate(architecture: str) -> None:
    target = tiny_target(architecture)
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 40)
    decoder = SpeculativeDecoder(target, random_head(target))

    result = decoder.generate(PROMPT, max_new_tokens=40, tree=TreeShape(depth=4, top_k=3, num_nodes=10))

    assert result.token_ids == expected
    assert result.num_speculative_tokens == 4
    # Every verification scores the root plus 10 nodes, except a step one draft from the
    # end of the generation, whose depth-1 tree has only top_k = 3 nodes (7 fewer).
    assert 11 * result.num_verify_steps - result.verified_tokens in (0, 7, 14)
    assert max(result.proposed_per_step) <= 4


def test_tree_accepts_what_a_chain_misses_and_stays_exact() -> None:
    """A head wrong at some positions: the chain stops there, the tree's runners-up may not."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = hf_greedy(target, PROMPT, 60)
    wrong = {len(PROMPT) + i for i in range(60) if i % 5 == 2}
    head = oracle_head(target, PROMPT + expected, wrong_at=wrong)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=4)

    chain = decoder.generate(PROMPT, max_new_tokens=60)
    tree = decoder.generate(PROMPT, max_new_tokens=60, tree=TreeShape(depth=4, top_k=4, num_nodes=16))

    assert chain.token_ids == expected
    assert tree.token_ids == expected
    assert tree.tau >= chain.tau
    assert max(tree.accepted_per_step) == 4


def test_tree_drafting_refuses_sampling() -> None:
    target = tiny_target("LlamaForCausalLM")
    decoder = SpeculativeDecoder(target, random_head(target))
    with pytest.raises(ValueError, match="verifies greedily"):
        decoder.generate(PROMPT, max_new_tokens=8, temperature=0.7, tree=TreeShape())


def test_sliding_window_targets_fall_back_to_a_chain_with_the_reason_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A draft tree cannot keep its accepted path in GPT-OSS's sliding-window cache: the
    decoder drafts a chain of the tree's depth instead, says why (once), and its output is
    still the target's greedy output."""
    gpt_oss = tiny_target("GptOssForCausalLM")
    gpt_oss.generation_config.eos_token_id = None
    expected = hf_greedy(gpt_oss, PROMPT, 24)
    decoder = SpeculativeDecoder(gpt_oss, oracle_head(gpt_oss, PROMPT + expected))
    shape = TreeShape(depth=3)
    with caplog.at_level("WARNING", logger="speculative.decoder"):
        first = decoder.generate(PROMPT, max_new_tokens=24, tree=shape)
        second = decoder.generate(PROMPT, max_new_tokens=24, tree=shape)

    assert first.token_ids == expected
    assert second.token_ids == expected
    assert max(first.accepted_per_step) == 3
    assert max(first.proposed_per_step) == 3
    fallbacks = [r.getMessage() for r in caplog.records if "falls back to a chain" in r.getMessage()]
    assert len(fallbacks) == 1
    assert "GptOssForCausalLM has sliding-window" in fallbacks[0]
