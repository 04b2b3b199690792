"""Compute and parameter-count conventions: one of each per fit record, stated in its output.

N kind (`n_kind`): which parameter count is N.
- total: every trainable parameter (Chinchilla's convention);
- non_embedding: total minus the token embedding and output projection (Kaplan's);
- active: parameters touched per token (MoE; equals total for dense models).

Compute kind (`compute`): what "C FLOPs" means, for IsoFLOP groups, approach 2's D_opt, the plan
and the emitted config.
- 6ND_total:    C = 6 * total params * D (Chinchilla);
- 6ND_nonembed: C = 6 * non-embedding params * D (Kaplan);
- trainer_flops: the trainer's own count: 6 * (matmul params incl. the output head) + attention
  (12 * n_layers * d_model * seq_len) per token, i.e. what the hardware spends (DeepSeek's M * D
  adds attention but drops the head). On tiny models it is up to ~3x 6ND_nonembed.

A run's tokens per unit of compute, k = C / D, is what converts between the two: k = 6 N for the
6ND kinds and the trainer's FLOPs per token otherwise. Fits keep (N, k) of their runs so that plans
can price any model size in the same convention (`TokenCost`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.core.errors import InputError

N_KINDS = ("total", "non_embedding", "active")
COMPUTE_KINDS = ("6ND_total", "6ND_nonembed", "trainer_flops")

# The summary.json / registry column holding each N kind.
N_COLUMNS = {"total": "params", "non_embedding": "non_embedding_params", "active": "active_params"}
# The parameter count each 6ND compute kind multiplies.
COMPUTE_N_KIND = {"6ND_total": "total", "6ND_nonembed": "non_embedding"}
EMBEDDING_WARN_FRACTION = 0.5


def default_compute(n_kind: str) -> str:
    """The convention that goes with an N kind when nothing else says: 6 N D of that same N
    (closed-form frontier), and the trainer's FLOPs for active (MoE) parameters."""
    return {"total": "6ND_total", "non_embedding": "6ND_nonembed"}.get(n_kind, "trainer_flops")


def check_kinds(n_kind: str, compute: str | None) -> None:
    if n_kind not in N_KINDS:
        raise InputError(f"unknown N kind '{n_kind}' (choose from {', '.join(N_KINDS)})")
    if compute is not None and compute not in COMPUTE_KINDS:
        raise InputError(f"unknown compute convention '{compute}' (choose from {', '.join(COMPUTE_KINDS)})")


def param_column(df, kind: str, n_kind: str) -> np.ndarray | None:
    """Parameter counts of `kind` per row: its own column, or N when N is of that kind."""
    col = N_COLUMNS[kind]
    if col in df.columns:
        v = df[col].to_numpy(float)
        if np.all(np.isfinite(v) & (v > 0)):
            return v
    if kind == n_kind:
        return df["N"].to_numpy(float)
    return None


def compute_column(df, compute: str, n_kind: str) -> np.ndarray:
    """C per row under `compute`. Raises InputError naming what is missing."""
    D = df["D"].to_numpy(float)
    if compute == "trainer_flops":
        if "flops" not in df.columns:
            raise InputError(
                "compute convention trainer_flops needs a 'flops' column (the trainer's FLOPs; run directories have it)"
            )
        f = df["flops"].to_numpy(float)
        bad = ~(np.isfinite(f) & (f > 0))
        if bad.any():
            raise InputError(f"compute convention trainer_flops: {int(bad.sum())} row(s) lack a positive 'flops' value")
        return f
    kind = COMPUTE_N_KIND[compute]
    n = param_column(df, kind, n_kind)
    if n is None:
        raise InputError(
            f"compute convention {compute} needs {kind} parameter counts: a '{N_COLUMNS[kind]}' column, "
            f"or N of kind {kind} (--n-kind {kind})"
        )
    return 6.0 * n * D


def isoflop_budget_convention(df) -> str | None:
    """The compute convention the runs' IsoFLOP sweep sized them with, when all agree."""
    if "isoflop_compute" not in df.columns:
        return None
    vals = {v for v in df["isoflop_compute"].dropna().astype(str) if v in COMPUTE_KINDS}
    return vals.pop() if len(vals) == 1 else None


def embedding_warning(df) -> str | None:
    """Tiny models are embedding-dominated; total vs non-embedding N then disagree (Kaplan vs
    Chinchilla: Pearce & Song 2024, Porian et al. 2024)."""
    if not {"params", "non_embedding_params"} <= set(df.columns):
        return None
    tot, ne = df["params"].to_numpy(float), df["non_embedding_params"].to_numpy(float)
    ok = np.isfinite(tot) & np.isfinite(ne) & (tot > 0)
    if not ok.any():
        return None
    frac = 1.0 - ne[ok] / tot[ok]
    heavy = int((frac > EMBEDDING_WARN_FRACTION).sum())
    if not heavy:
        return None
    return (
        f"embeddings are over half the parameters in {heavy} of {int(ok.sum())} runs (up to {frac.max():.0%}): "
        "fits on total and non-embedding N disagree at this scale (Kaplan vs Chinchilla; Pearce & Song 2024, "
        "Porian et al. 2024); the record states which N it used"
    )


def drop_embedding_dominated(df, max_fraction: float | None):
    """Leave out runs whose embeddings are more than `max_fraction` of their parameters: their
    capacity sits in the embedding tables (bigram statistics), which neither N kind describes, and
    they saturate early -- a law fitted through them bends too soon. Returns (df, note or None)."""
    if max_fraction is None:
        return df, None
    if not 0 < max_fraction < 1:
        raise InputError(f"--max-embedding-fraction must be in (0, 1) (got {max_fraction})")
    if not {"params", "non_embedding_params"} <= set(df.columns):
        raise InputError(
            "--max-embedding-fraction needs params and non_embedding_params per run (run directories have them)"
        )
    frac = 1.0 - df["non_embedding_params"].to_numpy(float) / df["params"].to_numpy(float)
    keep = ~(frac > max_fraction)
    if keep.all():
        return df, None
    note = (
        f"left out {int((~keep).sum())} of {len(df)} runs whose "
        f"embeddings exceed {max_fraction:.0%} of their parameters "
        f"(--max-embedding-fraction; up to {frac.max():.0%})"
    )
    return df[keep].reset_index(drop=True), note


@dataclass(frozen=True)
class TokenCost:
    """k(N) = C / D under the record's convention, as a log-log interpolation over fitted runs
    (linear extrapolation beyond them). Exactly 6 N when the convention is 6 N D of the same N."""

    compute: str
    n_kind: str
    logN: tuple[float, ...] = ()
    logk: tuple[float, ...] = ()

    @property
    def exact(self) -> bool:
        return COMPUTE_N_KIND.get(self.compute) == self.n_kind

    @classmethod
    def from_runs(cls, N: np.ndarray, C: np.ndarray, D: np.ndarray, compute: str, n_kind: str) -> TokenCost:
        if COMPUTE_N_KIND.get(compute) == n_kind:
            return cls(compute, n_kind)
        logN, logk = np.log(np.asarray(N, float)), np.log(np.asarray(C, float) / np.asarray(D, float))
        ux = np.unique(np.round(logN, 9))
        ky = np.array([logk[np.abs(logN - x) < 1e-6].mean() for x in ux])
        return cls(compute, n_kind, tuple(map(float, ux)), tuple(map(float, ky)))

    @classmethod
    def from_record(cls, rec) -> TokenCost:
        conv = rec.get("conventions") or {}
        tc = conv.get("token_cost") or {}
        return cls(
            conv.get("compute", "6ND_total"),
            conv.get("n_kind", "total"),
            tuple(tc.get("logN", ())),
            tuple(tc.get("logk", ())),
        )

    def to_dict(self) -> dict:
        return {"logN": list(self.logN), "logk": list(self.logk), "exact_6N": self.exact}

    def __call__(self, N) -> np.ndarray:
        N = np.asarray(N, dtype=float)
        if self.exact or not self.logN:
            return 6.0 * N
        x, y = np.asarray(self.logN), np.asarray(self.logk)
        if x.size == 1:
            return np.exp(y[0] + np.log(N) - x[0])  # k proportional to N
        lx = np.log(N)
        out = np.interp(lx, x, y)
        lo, hi = lx < x[0], lx > x[-1]  # extrapolate with the end slopes
        out = np.where(lo, y[0] + (lx - x[0]) * (y[1] - y[0]) / (x[1] - x[0]), out)
        out = np.where(hi, y[-1] + (lx - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2]), out)
        return np.exp(out)


def compute_C(df, compute: str | None = None, n_kind: str = "total") -> np.ndarray:
    """Compute per run under the convention `compute` (above); without one, the
    legacy rule: the `flops` column where valid, else 6 N D."""
    if compute is not None:
        return compute_column(df, compute, n_kind)
    c6 = 6.0 * df["N"].to_numpy(float) * df["D"].to_numpy(float)
    if "flops" in df.columns:
        f = df["flops"].to_numpy(float)
        return np.where(np.isfinite(f) & (f > 0), f, c6)
    return c6


def conventions_of(rec: dict, warnings: list[str] | None = None) -> dict:
    """A fit record's conventions; records written before they were stated are read as 6 N D."""
    conv = rec.get("conventions")
    if conv and conv.get("compute"):
        return conv
    kind = next((k for k in N_KINDS if str(rec.get("n_kind") or "total").startswith(k)), "total")
    if warnings is not None:
        warnings.append(f"{rec['law']} fit states no compute convention (an older record): read as 6*N*D with {kind} N")
    return {
        "compute": {"total": "6ND_total", "non_embedding": "6ND_nonembed"}.get(kind, "trainer_flops"),
        "n_kind": kind,
    }
