"""Run directories from a test's side: reading what the trainer wrote, and writing run directories
without training (`write_run`, which is `rundir.write.write_run`; synthetic runs, a synthetic IsoFLOP tree
drawn from a known law)."""

from __future__ import annotations

import json
from pathlib import Path

from rundir.write import write_run  # the one writer of stand-in runs (tests, demo, synthetic data)


def metrics(run: Path) -> list[dict]:
    """Every record of a run's metrics.jsonl, strictly (a torn line fails the test)."""
    return [json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines() if line.strip()]


def metrics_steps(run_dir: Path) -> list[int]:
    return [r["step"] for r in metrics(run_dir)]


def summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


def complete_checkpoint(run_dir: Path, min_step: int = 1) -> int | None:
    """The newest complete checkpoint at or after `min_step` (None: none yet). Waiting for one named
    step races with pruning (keep_checkpoints) when the machine is quiet and steps take milliseconds."""
    steps = [int(p.parent.name[5:]) for p in (Path(run_dir) / "checkpoints").glob("step_*/COMPLETE")]
    steps = [s for s in steps if s >= min_step]
    return max(steps) if steps else None


def small_run(root: Path, rid: str, n: int = 3, finished: bool = True) -> Path:
    """A run of `n` logged steps (loss 5.0 falling by 0.1), finished (summary.json) or still training."""
    recs = [{"step": i, "loss": 5.0 - i / 10, "lr": 1e-3} for i in range(n)]
    return write_run(
        Path(root) / rid,
        config="model: {preset: n50k, d_model: 32}\noptim: {lr: 0.003}\ntrain: {global_batch_size: 8}\n",
        metrics=recs,
        summary={"status": "done", "steps": n, "params": 1000, "final_loss": recs[-1]["loss"]} if finished else None,
    )


def isoflop_truth():
    """The law the synthetic IsoFLOP tree is drawn from (in non-embedding N)."""
    from scaling.laws.loss import ChinchillaLaw

    return ChinchillaLaw(E=2.0, A=60.0, B=400.0, alpha=0.40, beta=0.33)


def k_trainer(n_ne):
    """The trainer's FLOPs per token for a model of n_ne non-embedding parameters: 6 N plus an
    overhead (head, attention) that dominates tiny models -- deliberately not 6 N."""
    return 6.0 * n_ne * (1.0 + 2.0 * (2e4 / n_ne) ** 0.5)


def write_isoflop_tree(
    root, budgets=(1e13, 4e13, 1.6e14), sizes=None, compute="trainer_flops", unique=None, noise=0.0, seed=0, anchors=()
):
    """Run directories laid out like an IsoFLOP sweep sized in `compute`: equal C per budget, then
    one run per (n, D) of `anchors` without a budget (isoflop.anchors)."""
    import numpy as np

    truth = isoflop_truth()
    rng = np.random.default_rng(seed)
    sizes = sizes or list(np.geomspace(1e4, 1e6, 7))
    i = 0
    points = [(C, n, None) for C in budgets for n in sizes] + [(None, n, D) for n, D in anchors]
    for C, n, D in points:
        total = n + 3e4  # a 30k-parameter embedding: over half of the smallest models
        k = {"trainer_flops": k_trainer(n), "6ND_total": 6 * total, "6ND_nonembed": 6 * n}[compute]
        D = C / k if D is None else D
        loss = float(truth.predict(n, D) * np.exp(noise * rng.standard_normal()))
        axes = {"budget": C, "compute": compute} if C is not None else {"compute": compute, "anchor": True}
        summary = {
            "status": "done",
            "params": total,
            "non_embedding_params": n,
            "active_params": total,
            "tokens": D,
            "flops": k_trainer(n) * D,
            "flops_per_token": k_trainer(n),
            "final_val_loss": loss,
            "steps": 100,
            "extras": {"axes": axes},
        }
        if unique:
            summary.update(unique_tokens=unique, epochs=D / unique)
        config = json.dumps(
            {
                "name": f"r{i:02d}",
                "model": {"seq_len": 128},
                "optim": {"lr": 3e-3, "weight_decay": 0.05},
                "schedule": {"name": "cosine", "warmup_fraction": 0.07, "min_lr_ratio": 0.1},
                "train": {"global_batch_size": 8, "micro_batch_size": 8},
                "data": {"name": "toy", "sources": ["x.txt"], "tokenizer": {"vocab_size": 512}},
            }
        )
        write_run(Path(root) / "iso" / f"r{i:02d}", summary=summary, config=config)
        i += 1
    return Path(root) / "iso"
