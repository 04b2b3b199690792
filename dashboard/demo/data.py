"""SYNTHETIC inputs for the demo's fits (never results): tables and run trees drawn from stated laws,
so that `scalelab fit moe | task-loss | accuracy | lr-annealing` have something they can identify
in seconds. The demo's runs, metrics, router statistics and evaluations are real; these are not.

- `moe_table`: Krajewski et al. 2024's published law (scaling.synthetic.moe), dense and MoE rows.
- `clark_table`: Clark et al. 2022's published S-BASE law, one token count.
- `chain_runs`: finished run directories (summary.json + evals/<step>.json) of two tasks whose
  gold bits per byte follow CHAIN_LOSS and whose accuracy follows the sigmoid CHAIN_ACC (what
  `scalelab eval` writes: acc, gold_bpb, gold_nats with the task's chance).
- `optimizer_table`: IsoFLOP runs of two optimizers, "muon" drawn from the "adamw" law with every
  token worth 1.5 (a compute multiplier of 1.5 at every scale), for `fit chinchilla --by optimizer`.
- `annealing_table`: loss curves of constant, two WSD and a cosine schedule (the last: held out)
  (rundir.schedules.lr_at)
  drawn from the lr-annealing law ANNEALING (Tissue et al. 2024 form).

One exception, the spec of a real sweep: `wsd_spec` (a stable run and its cooldown branches, trained
by `scalelab sweep launch` for the Curves view; its losses are measured, not drawn).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

from rundir.schedules import lr_at
from rundir.write import write_run
from scaling.fits.accuracy import SigmoidAccuracy
from scaling.laws.loss import ChinchillaLaw
from scaling.laws.lr_annealing import AnnealingLaw
from scaling.synthetic.moe import clark_table as table
from scaling.synthetic.moe import krajewski_table
from scaling.synthetic.runs import TRUE_CHINCHILLA, chinchilla_table, data_multiplied

CHAIN_LOSS = {
    "synthetic_2choice": {"E": 0.9, "A": 60.0, "B": 900.0, "alpha": 0.35, "beta": 0.45},
    "synthetic_4choice": {"E": 1.1, "A": 80.0, "B": 1200.0, "alpha": 0.33, "beta": 0.42},
}
CHAIN_ACC = {
    "synthetic_2choice": ({"a": 0.45, "b": 0.5, "k": -6.0, "L0": 1.6}, 0.5),
    "synthetic_4choice": ({"a": 0.6, "b": 0.25, "k": -3.0, "L0": 3.3}, 0.25),
}
ANNEALING = {"L0": 2.7, "A": 0.8, "alpha": 0.55, "C": 0.4}
SCHEDULES = (
    ("constant", "constant", "linear"),
    ("wsd-linear", "wsd", "linear"),
    ("wsd-sqrt", "wsd", "sqrt"),
    ("cosine", "cosine", "linear"),
)


def moe_table(path: Path, noise: float = 0.003) -> Path:

    krajewski_table(
        sizes=(1e8, 3e8, 1e9, 3e9), tokens_per_param=(4.0, 16.0, 64.0), granularities=(2, 4, 8), noise=noise
    ).to_csv(path, index=False)
    return path


def optimizer_table(path: Path, k: float = 1.5, noise: float = 0.003) -> Path:
    import pandas as pd  # deferred: imports pandas

    budgets = (1e15, 1e16, 1e17)
    pd.concat(
        [
            chinchilla_table(budgets=budgets, n_per_budget=6, noise=noise, seed=1).assign(optimizer="adamw"),
            chinchilla_table(
                data_multiplied(TRUE_CHINCHILLA, k), budgets=budgets, n_per_budget=6, noise=noise, seed=2
            ).assign(optimizer="muon"),
        ],
        ignore_index=True,
    ).to_csv(path, index=False)
    return path


def clark_table(path: Path, noise: float = 0.005) -> Path:

    table(noise=noise).to_csv(path, index=False)
    return path


def chain_runs(root: Path, noise: float = 0.01, acc_noise: float = 0.01, seed: int = 0) -> Path:
    """5 sizes x 4 token counts of finished runs, each evaluated once at its last step."""

    rng = np.random.default_rng(seed)
    for N in np.geomspace(2e5, 3e6, 5):
        for D in np.geomspace(2e6, 5e7, 4):
            results = []
            for task, law in CHAIN_LOSS.items():
                (sig, chance) = CHAIN_ACC[task]
                bpb = float(ChinchillaLaw(**law).predict(N, D)) * float(np.exp(rng.normal(0, noise)))
                acc = float(np.clip(SigmoidAccuracy(**sig).predict(bpb) + rng.normal(0, acc_noise), 0, 1))
                results += [
                    {"task": task, "metric": "acc", "value": acc, "n": 1000},
                    {"task": task, "metric": "gold_bpb", "value": bpb, "n": 1000, "chance": chance},
                    {"task": task, "metric": "gold_nats", "value": 0.9 * bpb, "n": 1000, "chance": chance},
                ]
            write_run(
                Path(root) / f"n{N:.3g}-d{D:.3g}",
                summary={
                    "status": "done",
                    "params": float(N),
                    "tokens": float(D),
                    "steps": 100,
                    "flops_per_token": 6 * float(N),
                    "final_val_loss": 1.5 + 400 / N**0.34 + 2000 / D**0.37,
                },
                evals={100: {"step": 100, "tokens": float(D), "results": results, "failed": []}},
            )
    return Path(root)


def annealing_table(
    path: Path, steps: int = 1000, peak: float = 3e-3, every: int = 10, sigma: float = 0.004, seed: int = 0
) -> Path:
    import pandas as pd  # deferred: imports pandas

    law, rng, parts = AnnealingLaw(**ANNEALING), np.random.default_rng(seed), []
    for run, name, shape in SCHEDULES:
        cfg = SimpleNamespace(
            name=name, warmup_steps=None, warmup_fraction=0.05, min_lr_ratio=0.1, decay_fraction=0.2, decay_shape=shape
        )
        lr = np.array([lr_at(k, steps, peak, cfg) for k in range(steps)])
        step = np.arange(1, steps + 1)
        loss = np.where(step % every == 0, law.curve(lr) * np.exp(rng.normal(0, sigma, steps)), np.nan)
        parts.append(pd.DataFrame({"run": run, "step": step, "lr": lr, "loss": loss}))
    pd.concat(parts, ignore_index=True).to_csv(path, index=False)
    return path


# A REAL sweep (not synthetic: `scalelab sweep launch` trains it) for the Curves view's branches:
# one stable n50k run of 32 steps (512 tokens each) and cooldown branches at 1/4 and 1/2 of its
# tokens (branch points: steps 6 and 12).
WSD_RUNS = {"n50k-stable": None, "n50k-d4.1k": ("n50k-stable", 6), "n50k-d8.19k": ("n50k-stable", 12)}


def wsd_spec(path: Path, runs_dir: Path, data_dir: Path) -> Path:
    """A `wsd` sweep spec on the demo's prepared data (its runs go to `runs_dir`)."""

    repo = Path(__file__).resolve().parents[2]
    spec = {
        "name": "wsd-demo",
        "base": str(repo / "configs/train/tiny.yaml"),
        "runs_dir": str(runs_dir),
        "kind": "wsd",
        "set": {
            "model.seq_len": 64,
            "data.name": "tiny512",
            "data.out_dir": str(data_dir),
            "data.tokenizer.vocab_size": 512,
            "train.micro_batch_size": 8,
            "train.global_batch_size": 8,
            "train.log_every_steps": 2,
            "train.eval_every_steps": 4,
            "train.eval_tokens": 2048,
            "train.checkpoint_every_steps": 1000,
            "schedule.min_lr_ratio": 0.0,
            "wandb.mode": "disabled",
        },
        "wsd": {
            "models": ["n50k"],
            "tokens": 32 * 512,
            "fractions": [0.25, 0.5, 1.0],
            "cooldown": 0.25,
            "warmup_steps": 2,
        },
    }
    Path(path).write_text(yaml.safe_dump(spec, sort_keys=False))
    return Path(path)
