"""The engine: runs the target model for every caller (distillation, prompt writing,
speculative decoding, `trainer eval`, serving). docs/engine.md lists what each file does.

It keeps one preallocated key/value pool per decoder layer (``kv_pool``), runs one batched
attention call per layer over it (``slot_attention``), and drives continuous batching for
distillation and prompt writing (``generation``): rows join and leave while the batch's
shapes stay put, and the only host sync in a step is reading which rows finished.

It also holds the draft heads' definitions and formats (``heads``), which the trainer trains
and every decoder loads. It sits below the trainer (``trainer`` imports it, never the
reverse), so it knows nothing of datasets or training.
"""
