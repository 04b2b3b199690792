"""SYNTHETIC training curves with a known critical batch: for tests and demos, never real results.

`CurveTruth` defines, per model size N, how many optimizer steps a run with batch B (tokens)
needs to first reach loss L, exactly in McCandlish's form

    S(B, L) = S_min(L) (1 + B_crit(L) / B),  with u = (L - L_floor(N)) / (L0 - L_floor(N)),
    S_min(L) = s0 (u^-p - 1),  B_crit(N, L) = bc_coef N^bc_exp u^-q,  L_floor(N) = E + F / N^f,

so each curve starts at L0 (step 0) and is the inverse of S(B, .). `write_curve_runs` lays runs
out as scalelab run directories (config.yaml, summary.json, metrics.jsonl) whose logged training
loss is that curve at the centre of each logging window (what the trainer logs) times log-normal
noise, and, optionally, a `grad_noise_scale` equal to the true B_crit at the current loss times
`noise_scale_ratio` (measurement noise aside), carried forward between probes like the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rundir.write import write_run


@dataclass(frozen=True)
class CurveTruth:
    L0: float = 7.0
    E: float = 2.0
    F: float = 40.0
    f: float = 0.25
    s0: float = 40.0
    p: float = 1.5
    bc_coef: float = 30.0
    bc_exp: float = 0.3
    q: float = 1.0

    def floor(self, N):
        return self.E + self.F / np.asarray(N, dtype=float) ** self.f

    def _u(self, N, L):
        fl = self.floor(N)
        return (np.asarray(L, dtype=float) - fl) / (self.L0 - fl)

    def b_crit(self, N, L):
        return self.bc_coef * np.asarray(N, dtype=float) ** self.bc_exp * self._u(N, L) ** -self.q

    def s_min(self, N, L):
        return self.s0 * (self._u(N, L) ** -self.p - 1.0)

    def steps(self, N, B, L):
        """Optimizer steps to first reach loss L at batch B (tokens)."""
        return self.s_min(N, L) * (1.0 + self.b_crit(N, L) / np.asarray(B, dtype=float))

    def loss(self, N, B, x):
        """Loss after x optimizer steps at batch B: the inverse of `steps` (bisection on log u)."""
        x = np.asarray(x, dtype=float)
        lo, hi = np.full(x.shape, -40.0), np.zeros(x.shape)  # log u; steps fall as u rises
        fl = self.floor(N)
        for _ in range(80):
            mid = (lo + hi) / 2
            L = fl + np.exp(mid) * (self.L0 - fl)
            above = self.steps(N, B, L) > x  # needs more steps than x: the loss at x is higher
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
        return fl + np.exp((lo + hi) / 2) * (self.L0 - fl)


def write_curve_runs(
    root,
    *,
    truth: CurveTruth = CurveTruth(),
    models=(1e6, 4e6, 1.6e7),
    batches=(512, 1024, 2048, 4096, 8192, 16384, 32768),
    tokens_per_param: float | None = 40.0,
    steps: int | None = None,
    log_every: int | None = None,
    noise: float = 0.003,
    noise_scale_every: int = 0,
    noise_scale_ratio: float = 1.0,
    seq_len: int = 256,
    lr: float = 3e-3,
    schedule: str = "constant",
    sweep: str = "synthetic-critical-batch",
    seed: int = 0,
) -> Path:
    """One run per (model, batch). Length: `tokens_per_param * N` tokens (a fixed-token sweep,
    so large batches take fewer steps), or exactly `steps` steps for every run. `log_every`
    (steps between records; default: ~200 records per run). Returns root."""
    rng = np.random.default_rng(seed)
    root = Path(root)
    for n in models:
        for b in batches:
            total = int(steps) if steps else max(20, int(np.ceil(tokens_per_param * n / b)))
            every = log_every or max(1, total // 200)
            run = root / sweep / f"n{n:.3g}-b{int(b)}"
            rec_steps = np.arange(every, total + 1, every)
            if rec_steps[-1] != total:
                rec_steps = np.append(rec_steps, total)
            prev = np.concatenate([[0], rec_steps[:-1]])
            x = (prev + rec_steps - 1) / 2.0  # the trainer's loss record: mean over its window
            loss = truth.loss(n, b, x) * np.exp(noise / np.sqrt(rec_steps - prev) * rng.standard_normal(x.size))
            probes = (
                np.arange(noise_scale_every, total + 1, noise_scale_every) if noise_scale_every else np.array([], int)
            )
            measured = (
                truth.b_crit(n, truth.loss(n, b, probes))
                * noise_scale_ratio
                * np.exp(0.05 * rng.standard_normal(probes.size))
            )
            records = []
            for s, v in zip(rec_steps, loss):
                rec = {"step": int(s), "tokens": float(s * b), "loss": float(v), "lr": lr}
                k = int(np.searchsorted(probes, s, side="right"))  # the trainer logs its latest probe
                if k:
                    rec["grad_noise_scale"] = float(measured[k - 1])
                records.append(rec)
            gbs = max(1, int(round(b / seq_len)))
            cfg = {
                "name": run.name,
                "model": {"seq_len": seq_len},
                "optim": {"lr": lr},
                "schedule": {"name": schedule},
                "train": {"steps": total, "global_batch_size": gbs, "noise_scale_every_steps": noise_scale_every},
            }
            summary = {
                "status": "done",
                "steps": total,
                "tokens": float(total * b),
                "params": float(n),
                "non_embedding_params": 0.8 * n,
                "active_params": float(n),
                "flops": 6.0 * n * total * b,
                "batch_tokens": float(b),
                "lr": lr,
                "final_loss": float(loss[-1]),
                "wall_s": 1.0,
            }
            write_run(run, config=cfg, summary=summary, metrics=records)
    return root
