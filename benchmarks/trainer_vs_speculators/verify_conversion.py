"""Check a converted head against speculators' own forward on the same input.

Two steps, one in each venv (RUN_DIR is a run_speculators.sh output directory):

    $BENCH_DIR/spec-venv/bin/python verify_conversion.py spec RUN_DIR REF.pt   # speculators side
    .venv/bin/python verify_conversion.py ours RUN_DIR REF.pt                  # eaglenest side + compare

Speculators side: loads the final checkpoint with speculators' Eagle3DraftModel (fp32, sdpa),
takes training rows from the dumped data through speculators' own ArrowDataset + shift_batch
(feature g_t with token x_{t+1}, positions from 1), runs its forward with 3 TTT steps and
records each step's draft-vocab logits (lm_head output).
Eaglenest side: loads RUN_DIR/head with eaglenest's load_head (the evaluator's loader), runs
fuse + forward_ttt_step for the same 3 steps (same shifted teacher-forced ids, positions +k,
pre-norm hidden fed back), compares logits and top-1 (in target ids via d2t), and repeats
with two deliberately wrong layouts (fc aux blocks reversed; d2t read as indices) to show the
check catches them. The report is printed and written to RUN_DIR/verify_conversion.json.

The two sides import from different venvs (speculators is not in eaglenest's, eaglenest is not
in the speculators one), so each side imports its packages inside its own function.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
N_ROWS = 3
TTT_STEPS = 3
TRAIN_RATIO = 0.9  # which split the rows come from does not matter: both sides read the same rows


def last_checkpoint(run: Path) -> Path:
    checkpoints = (run / "checkpoints").iterdir()
    return max(
        (path for path in checkpoints if path.name.isdigit() and not path.is_symlink()),
        key=lambda path: int(path.name),
    )


def spec_side(run: Path, ref: Path) -> None:
    from speculators.models.eagle3 import Eagle3SpeculatorConfig  # type: ignore[import-not-found]  # noqa: PLC0415
    from speculators.models.eagle3.core import Eagle3DraftModel  # type: ignore[import-not-found]  # noqa: PLC0415
    from speculators.models.eagle3.data import shift_batch  # type: ignore[import-not-found]  # noqa: PLC0415
    from speculators.train.data import ArrowDataset  # type: ignore[import-not-found]  # noqa: PLC0415

    checkpoint = last_checkpoint(run)
    config = Eagle3SpeculatorConfig.from_pretrained(checkpoint)
    config.transformer_layer_config._attn_implementation = "sdpa"
    model = Eagle3DraftModel.from_pretrained(checkpoint, config=config).float().eval()
    dataset = ArrowDataset(
        max_len=512,
        datapath=run / "spec_data",
        on_missing="raise",
        train_ratio=TRAIN_RATIO,
        split="train",
        hidden_states_dtype=torch.float32,
    )
    logits: list[torch.Tensor] = []
    model.lm_head.register_forward_hook(lambda module, args, output: logits.append(output.detach().clone()))
    rows = []
    for i in range(N_ROWS):
        batch = shift_batch(dataset[i])
        logits.clear()
        with torch.no_grad():
            draft = model(
                hidden_states=batch["hidden_states"][None].float(),
                input_ids=batch["input_ids"][None],
                document_ids=torch.zeros(1, batch["input_ids"].numel(), dtype=torch.long),
                position_ids=batch["position_ids"][None],
                ttt_steps=TTT_STEPS,
            )
        rows.append(
            {
                "hidden_states": batch["hidden_states"].float(),
                "input_ids": batch["input_ids"],
                "position_ids": batch["position_ids"],
                "logits": [step_logits[0] for step_logits in logits],
                "draft_ids": [step_ids[0] for step_ids in draft],
            }
        )
    torch.save({"checkpoint": str(checkpoint), "rows": rows, "d2t": model.d2t.clone()}, ref)
    positions = sum(row["input_ids"].numel() for row in rows)
    print(f"speculators side: {checkpoint}, {N_ROWS} rows, {positions} positions")


def run_native_head(
    head: Any, row: dict[str, Any], fc_reverse: bool = False, d2t_as_index: bool = False
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per TTT step: draft-vocab logits and top-1 in target ids, as eaglenest's head computes them."""
    from engine.heads.model import TTTKeyValues  # noqa: PLC0415

    ids, positions = row["input_ids"][None], row["position_ids"][None]
    aux = row["hidden_states"][None]
    if fc_reverse:
        width = aux.shape[-1] // 3
        aux = torch.cat([aux[..., 2 * width :], aux[..., width : 2 * width], aux[..., :width]], dim=-1)
    key_values = TTTKeyValues()
    hidden = head.fuse(aux)
    steps = []
    for k in range(TTT_STEPS):
        step_ids = torch.cat([ids[:, k:], ids.new_zeros(1, k)], dim=-1)
        hidden = head.forward_ttt_step(step_ids, hidden, positions + k, key_values)
        step_logits = head.compute_logits(hidden)[0]
        top = step_logits.argmax(-1)
        target_ids = head.d2t[top] if d2t_as_index else head.draft_to_target_ids(top)
        steps.append((step_logits, target_ids))
    return steps


def compare(head: Any, data: dict[str, Any], **layout: bool) -> dict[str, dict[str, float | int]]:
    """Largest logit difference and top-1 agreement per TTT step, over the positions with real ids."""
    max_diff, agree, total = [0.0] * TTT_STEPS, [0] * TTT_STEPS, [0] * TTT_STEPS
    d2t_ref = data["d2t"]
    with torch.no_grad():
        for row in data["rows"]:
            ours = run_native_head(head, row, **layout)
            for k in range(TTT_STEPS):
                step_logits, target_ids = ours[k]
                ref_logits = row["logits"][k]
                ref_target_ids = row["draft_ids"][k] + d2t_ref[row["draft_ids"][k]]
                n = step_logits.shape[0] - k  # positions whose step-k input ids are real
                diff = float((step_logits[:n] - ref_logits[:n]).abs().max())
                max_diff[k] = max(max_diff[k], diff)
                agree[k] += int((target_ids[:n] == ref_target_ids[:n]).sum())
                total[k] += n
    return {
        f"step{k}": {
            "max_abs_logit_diff": round(max_diff[k], 5),
            "top1_target_id_agreement": round(agree[k] / total[k], 5),
            "positions": total[k],
        }
        for k in range(TTT_STEPS)
    }


def ours_side(run: Path, ref: Path, model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    from engine.heads.export import load_head  # noqa: PLC0415

    data = torch.load(ref, weights_only=False)
    target = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    head = load_head(run / "head", target)
    report: dict[str, Any] = {"checkpoint": data["checkpoint"], "head": str(run / "head")}
    layouts: dict[str, dict[str, bool]] = {
        "converted": {},
        "wrong_fc_order": {"fc_reverse": True},
        "wrong_d2t_as_index": {"d2t_as_index": True},
    }
    for label, layout in layouts.items():
        report[label] = compare(head, data, **layout)
    print(json.dumps(report, indent=1))
    (run / "verify_conversion.json").write_text(json.dumps(report, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["spec", "ours"])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("ref", type=Path, help="the speculators side's outputs (written by spec)")
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.mode == "spec":
        spec_side(args.run_dir, args.ref)
    else:
        ours_side(args.run_dir, args.ref, args.model)


if __name__ == "__main__":
    main()
