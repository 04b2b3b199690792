"""Router health metrics: flat keys for metrics.jsonl / W&B and one console line.

Per MoE layer i (from `out.router_stats`, the stats of the last micro-batch):
  moe/layer{i}/load/expert{j}  fraction of the layer's assignments that chose expert j (before dropping)
  moe/layer{i}/imbalance       max/mean of the per-expert load (1 = perfectly balanced)
  moe/layer{i}/cv              coefficient of variation (std/mean) of the per-expert load
  moe/layer{i}/dropped_frac    dropped assignments over requested ones (expert_choice: unrouted tokens)
  moe/layer{i}/entropy         mean entropy (nats) of the router distribution over experts
  moe/layer{i}/aux_loss        unweighted balance loss (1 at perfect balance), if the router has one
  moe/layer{i}/z_loss          unweighted router z-loss
  moe/layer{i}/bias_norm       L2 norm of the aux_free_bias selection bias
Aggregates (mean over MoE layers): moe/imbalance, moe/cv, moe/dropped_frac, moe/entropy,
moe/aux_loss, moe/z_loss, moe/bias_norm; plus moe/max_imbalance (worst layer).
"""
from __future__ import annotations

import torch

_SCALARS = ("dropped_frac", "entropy", "aux_loss", "z_loss", "bias_norm")


def _float(v) -> float:
    return float(v.detach().float().item()) if isinstance(v, torch.Tensor) else float(v)


def summarize(router_stats: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    per_key: dict[str, list[float]] = {}
    for s in router_stats:
        i = s["layer"]
        load = s["load"].detach().float().cpu()
        frac = load / load.sum().clamp_min(1.0)
        for j, v in enumerate(frac.tolist()):
            out[f"moe/layer{i}/load/expert{j}"] = v
        mean = frac.mean()
        layer = {
            "imbalance": float(frac.max() / mean) if mean > 0 else float("nan"),
            "cv": float(frac.std(unbiased=False) / mean) if mean > 0 else float("nan"),
        }
        layer |= {k: _float(s[k]) for k in _SCALARS if k in s}
        for k, v in layer.items():
            out[f"moe/layer{i}/{k}"] = v
            per_key.setdefault(k, []).append(v)
    for k, vs in per_key.items():
        out[f"moe/{k}"] = sum(vs) / len(vs)
    if "imbalance" in per_key:
        out["moe/max_imbalance"] = max(per_key["imbalance"])
    return out


def console_summary(metrics: dict) -> str:
    """One short line, e.g. `moe imb 1.21/1.48 drop 0.8% ent 1.93 aux 1.012 z 0.41`."""
    if "moe/imbalance" not in metrics:
        return ""
    parts = [f"moe imb {metrics['moe/imbalance']:.2f}/{metrics.get('moe/max_imbalance', float('nan')):.2f}"]
    parts.append(f"drop {100 * metrics.get('moe/dropped_frac', 0.0):.1f}%")
    if "moe/entropy" in metrics:
        parts.append(f"ent {metrics['moe/entropy']:.2f}")
    if "moe/aux_loss" in metrics:
        parts.append(f"aux {metrics['moe/aux_loss']:.3f}")
    if "moe/z_loss" in metrics:
        parts.append(f"z {metrics['moe/z_loss']:.3g}")
    if "moe/bias_norm" in metrics:
        parts.append(f"|b| {metrics['moe/bias_norm']:.3g}")
    return " ".join(parts)
