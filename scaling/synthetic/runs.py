"""SYNTHETIC data with known parameters: for tests, notebooks and demos -- never real results.

Each generator draws from a stated law plus multiplicative log-normal noise, deterministically
from a seed, so a fit can be checked against the truth. `write_run_tree` lays the rows out as
scalelab run directories (config.yaml + summary.json), the contract the trainer writes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rundir.write import write_run
from scaling.laws.hparams import STEP_LAW_2025, ComputeHParamLaw, StepsExamplesLaw
from scaling.laws.loss import ChinchillaLaw, DataConstrainedLaw

TRUE_CHINCHILLA = ChinchillaLaw(E=1.8, A=480.0, B=2100.0, alpha=0.35, beta=0.37)
TRUE_DATA_CONSTRAINED = DataConstrainedLaw(E=1.8, A=480.0, B=2100.0, alpha=0.35, beta=0.37, R_D_star=15.4)


def data_multiplied(law: ChinchillaLaw, k: float) -> ChinchillaLaw:
    """The law of an optimizer whose every token is worth k of `law`'s: L(N, D) = law(N, k D).
    Its compute-optimal loss at C is `law`'s at k C, so the compute multiplier over `law` is k at every scale."""
    return ChinchillaLaw(E=law.E, A=law.A, B=law.B * k**-law.beta, alpha=law.alpha, beta=law.beta)


def chinchilla_table(
    law: ChinchillaLaw = TRUE_CHINCHILLA,
    *,
    budgets=(1e17, 1e18, 1e19, 1e20),
    n_per_budget: int = 9,
    noise: float = 0.005,
    seed: int = 0,
):
    """IsoFLOP design: at each budget C, N log-spaced around the law's N_opt(C) (x1/8..x8),
    D = C/(6N), loss = law(N, D) * exp(noise * z). Columns N, D, flops, loss."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    rows = []
    for C in budgets:
        n_opt, _ = law.compute_optimal(C)
        for n in n_opt * np.geomspace(1 / 8, 8, n_per_budget):
            d = C / (6 * n)
            rows.append(
                {
                    "N": float(n),
                    "D": float(d),
                    "flops": float(C),
                    "loss": float(law.predict(n, d) * np.exp(noise * rng.standard_normal())),
                }
            )
    return pd.DataFrame(rows)


def data_constrained_table(
    law: DataConstrainedLaw = TRUE_DATA_CONSTRAINED,
    *,
    budgets=(1e17, 1e18, 1e19, 1e20),
    n_per_budget: int = 7,
    unique=(3e8, 1e9, 3e9),
    models=(3e7, 1e8, 3e8),
    epochs=(1, 2, 4, 8, 12, 16, 20),
    noise: float = 0.0,
    seed: int = 0,
):
    """Fresh-data IsoFLOP runs (U = D) plus repeated-data runs: every model in `models` trained for
    each of `epochs` passes over each unique-token budget in `unique` (D = U * epochs). loss =
    law(N, D, U) * exp(noise * z). Columns N, D, U, flops, loss."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    rows = []
    for C in budgets:
        n_opt, _ = law.compute_optimal(C)
        for n in n_opt * np.geomspace(1 / 8, 8, n_per_budget):
            d = C / (6 * n)
            rows.append({"N": float(n), "D": float(d), "U": float(d)})
    for u in unique:
        for n in models:
            rows.extend({"N": float(n), "D": float(u * ep), "U": float(u)} for ep in epochs)
    for r in rows:
        r["flops"] = 6.0 * r["N"] * r["D"]
        r["loss"] = float(law.predict(r["N"], r["D"], r["U"]) * np.exp(noise * rng.standard_normal()))
    return pd.DataFrame(rows)


def batch_lr_sweep(
    law: ComputeHParamLaw = ComputeHParamLaw(lr_coef=0.3118, lr_exp_C=-0.125, bs_coef=0.292, bs_exp_C=0.3271),
    *,
    budgets=(1e17, 1e18, 1e19),
    lr_mults=(0.25, 0.5, 1, 2, 4),
    bs_mults=(0.25, 0.5, 1, 2, 4),
    curvature: float = 0.02,
    noise: float = 0.0005,
    seed: int = 0,
    chinchilla: ChinchillaLaw = TRUE_CHINCHILLA,
):
    """lr x batch grid per compute budget around the true optimum; loss is the Chinchilla loss at
    the compute-optimal (N, D) plus a quadratic penalty in (log lr, log B) around the optimum."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    rows = []
    for C in budgets:
        n, d = chinchilla.compute_optimal(C)
        base = float(chinchilla.predict(n, d))
        lr0, b0 = law.predict(C=C)
        for lm in lr_mults:
            for bm in bs_mults:
                pen = curvature * (np.log(lm) ** 2 + 0.5 * np.log(bm) ** 2)
                rows.append(
                    {
                        "N": float(n),
                        "D": float(d),
                        "flops": float(C),
                        "lr": float(lr0 * lm),
                        "batch_tokens": float(b0 * bm),
                        "loss": float((base + pen) * np.exp(noise * rng.standard_normal())),
                    }
                )
    return pd.DataFrame(rows)


def critical_batch_table(
    *,
    models=(1e7, 3e7, 1e8, 3e8),
    coef: float = 50.0,
    exp: float = 0.45,
    s_min_at_1e7: float = 2000.0,
    batches=None,
    noise: float = 0.01,
    seed: int = 0,
):
    """Steps-to-target vs batch (tokens) per model size with B_crit = coef * N^exp exactly and
    S = S_min (1 + B_crit/B) times log-normal noise. Columns N, batch_tokens, steps."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    rows = []
    for n in models:
        bcrit = coef * n**exp
        s_min = s_min_at_1e7 * (n / 1e7) ** 0.3
        law = StepsExamplesLaw(S_min=s_min, E_min=s_min * bcrit)
        for b in batches or bcrit * np.geomspace(1 / 16, 16, 9):
            rows.append(
                {"N": n, "batch_tokens": float(b), "steps": float(law.steps(b) * np.exp(noise * rng.standard_normal()))}
            )
    return pd.DataFrame(rows)


def write_run_tree(
    root,
    df,
    *,
    sweep: str = "synthetic-isoflop",
    seq_len: int = 256,
    extra_broken: bool = True,
    optim: str | None = None,
) -> Path:
    """Write rows (N, D, loss, optional lr, batch_tokens) as runs/<sweep>/<run>/ directories with
    the trainer's files. With `extra_broken`, also a failed run, a half-written run (no summary)
    and a malformed summary, which readers must skip with a warning. `optim`: the config's
    optim.name (None: no key, as configs written before the key existed)."""
    root = Path(root)
    sdir = root / sweep
    for i, r in enumerate(df.to_dict("records")):
        run = sdir / f"run{i:03d}"
        bt = float(r.get("batch_tokens", seq_len * 16))
        gbs = max(1, int(round(bt / seq_len)))
        cfg = {
            "name": run.name,
            "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "seq_len": seq_len, "vocab_size": 4096},
            "optim": {"lr": float(r.get("lr", 3e-3)), **({"name": optim} if optim else {})},
            "train": {"tokens": int(r["D"]), "global_batch_size": gbs, "micro_batch_size": 1},
        }
        n = float(r["N"])
        summary = {
            "status": "done",
            "steps": int(r["D"] // bt) or 1,
            "tokens": float(r["D"]),
            "params": n,
            "non_embedding_params": 0.8 * n,
            "active_params": n,
            "flops": 6.0 * n * float(r["D"]),
            "flops_per_token": 6.0 * n,
            "batch_tokens": bt,
            "lr": float(r.get("lr", 3e-3)),
            "final_loss": float(r["loss"]) * 1.01,
            "final_val_loss": float(r["loss"]),
            "wall_s": 1.0,
        }
        # a training curve consistent with the final loss: the true law at the tokens seen so far
        ratio = float(r["loss"]) / float(TRUE_CHINCHILLA.predict(n, float(r["D"])))
        curve = [
            {"step": k, "tokens": t, "loss": float(TRUE_CHINCHILLA.predict(n, t)) * ratio}
            for k, t in ((k, float(r["D"]) * k / 20) for k in range(1, 21))
        ]
        write_run(run, config=cfg, summary=summary, metrics=curve)
    if extra_broken:
        write_run(sdir / "failed-run", config="name: failed-run\n", summary={"status": "failed", "final_loss": None})
        write_run(sdir / "half-written", config="name: half-written\n", metrics='{"step": 1, "loss": 9.0}\n')
        write_run(sdir / "broken-summary", summary='{"status": "done", "tokens": ')
    return root


def step_law_sweep(
    *,
    models=(1e7, 3e7, 1e8),
    tokens=(1e9, 3e9, 1e10),
    lr_mults=(0.25, 0.5, 1, 2, 4),
    bs_mults=(0.25, 0.5, 1, 2, 4),
    curvature: float = 0.02,
    noise: float = 0.0003,
    seed: int = 0,
    chinchilla: ChinchillaLaw = TRUE_CHINCHILLA,
):
    """lr x batch grid per (N, D) cell with N and D varied independently, optimum at Step Law's
    published lr_opt = 1.79 N^-0.713 D^0.307, B_opt = 0.58 D^0.571 (tokens)."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    rows = []
    for n in models:
        for d in tokens:
            base = float(chinchilla.predict(n, d))
            lr0, b0 = STEP_LAW_2025.predict(N=n, D=d)
            for lm in lr_mults:
                for bm in bs_mults:
                    pen = curvature * (np.log(lm) ** 2 + 0.5 * np.log(bm) ** 2)
                    rows.append(
                        {
                            "N": n,
                            "D": d,
                            "lr": float(lr0 * lm),
                            "batch_tokens": float(b0 * bm),
                            "loss": float((base + pen) * np.exp(noise * rng.standard_normal())),
                        }
                    )
    return pd.DataFrame(rows)
