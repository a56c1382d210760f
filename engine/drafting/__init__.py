"""Running a draft head: one sequence's chain (``draft``), a serving batch's chains over one
slot pool (``batch_draft``), draft trees (``tree``, ``tree_draft``) and the replay head that
measures the engine's ceiling (``replay``). What to do with the drafts -- verification and
the decoding loop -- is ``speculative``'s."""
