"""Router health metrics: one step's router statistics summed, then flat keys for metrics.jsonl /
W&B and one console line. Pure functions of tensors; the trainer does the cross-rank sum.

A step's statistics come from every micro-batch on every rank. Counts are summed first and the
ratios derived from the sums (a mean of per-micro-batch imbalances is not the step's imbalance):
`totals` sums a rank's micro-batches, `pack`/`unpack` turn totals into one flat tensor (so a
single all-reduce sums the ranks), `summarize_totals` derives the metrics.

Per MoE layer i:
  moe/layer{i}/load/expert{j}  fraction of the layer's assignments that chose expert j (before dropping)
  moe/layer{i}/imbalance       max/mean of the per-expert load (1 = perfectly balanced)
  moe/layer{i}/cv              coefficient of variation (std/mean) of the per-expert load
  moe/layer{i}/dropped_frac    dropped assignments over requested ones (expert_choice: unrouted tokens)
  moe/layer{i}/entropy         mean entropy (nats) of the router distribution over experts, per token
  moe/layer{i}/aux_loss        unweighted balance loss (1 at perfect balance), if the router has one
  moe/layer{i}/z_loss          unweighted router z-loss
  moe/layer{i}/bias_norm       L2 norm of the aux_free_bias selection bias
  moe/layer{i}/imbalance_micro max/mean load within each micro-batch (before the sum), averaged over
                               the step's micro-batches and ranks: what a per-micro-batch balance sees
  moe/layer{i}/load_entropy    entropy of the load fractions over ln E (1 = balanced, 0 = one expert)
  moe/layer{i}/dead_experts    experts whose load share is below 1 / (4E)
  moe/layer{i}/active_experts  realised experts per token: assignments the experts ran (after
                               capacity) over tokens; top_k for dropless top-k, variable for
                               relu_l1 / sigmoid_threshold / expert_choice
  moe/layer{i}/l1_coef, l1_loss     relu_l1: the controller's L1 coefficient, the unweighted L1 term
  moe/layer{i}/threshold_mean  sigmoid_threshold: mean of the per-expert logit thresholds
The per-token means (entropy, aux_loss, z_loss, l1_loss) weight each micro-batch by its tokens.
Aggregates (mean over MoE layers): moe/imbalance, moe/cv, moe/dropped_frac, moe/entropy,
moe/aux_loss, moe/z_loss, moe/bias_norm, moe/imbalance_micro, moe/load_entropy, moe/active_experts,
moe/l1_coef, moe/l1_loss, moe/threshold_mean; moe/max_imbalance (worst layer); moe/dead_experts
(the sum over layers); moe/k_frac/k{j} (fraction of token-layer pairs that ran j experts, j = 0..E,
over all MoE layers: the realised k distribution) and moe/k_std (its standard deviation).
"""

from __future__ import annotations

import math

import torch

_TOKEN_MEANS = ("entropy", "aux_loss", "z_loss", "l1_loss")  # per-token means of a micro-batch: token-weighted
_BATCH_MEANS = ("bias_norm", "l1_coef", "threshold_mean")  # controller state: mean over micro-batches
Totals = dict[int, dict[str, torch.Tensor]]


def _t(v, like: torch.Tensor) -> torch.Tensor:
    # torch.full launches a fill on the device: no host-to-device copy, so no sync on a GPU
    return (
        v.detach().to(torch.float64)
        if isinstance(v, torch.Tensor)
        else torch.full((), float(v), dtype=torch.float64, device=like.device)
    )


def totals(micro_batches: list[list[dict]]) -> Totals:
    """Per layer, the sums over micro-batches (each a `ModelOutput.router_stats` list), on the
    stats' device without a host sync: load (E,), dropped, assignments, tokens, token-weighted
    sums of entropy/aux_loss/z_loss, bias_norm summed with `batches` counting the micro-batches.

    Stats without counts (`tokens`, `dropped`, `dropped_of`) count as one token and one assignment."""
    out: Totals = {}
    for stats in micro_batches:
        for s in stats:
            load = s["load"].detach().to(torch.float64)
            w = _t(s.get("tokens", 1), load)
            if "dropped" in s:
                dropped, of = _t(s["dropped"], load), _t(s.get("dropped_of", 1), load)
            else:
                dropped, of = _t(s.get("dropped_frac", 0.0), load), _t(1, load)
            row = {"load": load, "dropped": dropped, "assignments": of, "tokens": w}
            row |= {k: _t(s[k], load) * w for k in _TOKEN_MEANS if k in s}
            row |= {k: _t(s[k], load) for k in _BATCH_MEANS if k in s}
            mean = load.mean()
            row["imbalance_micro"] = torch.where(mean > 0, load.max() / mean.clamp_min(1e-30), torch.ones_like(mean))
            if "routed" in s:
                row["routed"] = _t(s["routed"], load)
            if "k_hist" in s:
                row["k_hist"] = s["k_hist"].detach().to(torch.float64)
            row["batches"] = _t(1, load)
            acc = out.get(s["layer"])
            out[s["layer"]] = row if acc is None else {k: acc[k] + v for k, v in row.items()}
    return out


def merge(a: Totals, b: Totals) -> Totals:
    """Sum of two ranks' totals (what the trainer's all-reduce computes)."""
    return {i: {k: a[i][k] + b[i][k] for k in a[i]} for i in a}


def pack(t: Totals) -> torch.Tensor:
    """One flat float64 tensor; every rank has the same layers and keys, so the layouts agree."""
    parts = [v.reshape(-1) for i in sorted(t) for v in t[i].values()]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def unpack(flat: torch.Tensor, like: Totals) -> Totals:
    out: Totals = {}
    at = 0
    for i in sorted(like):
        out[i] = {}
        for k, v in like[i].items():
            n = v.numel()
            out[i][k] = flat[at : at + n].reshape(v.shape)
            at += n
    return out


def summarize_totals(t: Totals) -> dict[str, float]:
    """Metric keys from summed totals (one host transfer)."""
    flat = pack(t).tolist()
    out: dict[str, float] = {}
    per_key: dict[str, list[float]] = {}
    hist: list[float] = []
    at = 0
    for i in sorted(t):
        row: dict[str, float] = {}  # scalar totals
        per_expert: dict[str, list[float]] = {}  # load and k_hist: one value per expert (or k)
        for k, total_t in t[i].items():
            n = total_t.numel()
            if k in ("load", "k_hist"):
                per_expert[k] = flat[at : at + n]
            else:
                row[k] = flat[at]
            at += n
        total = max(1.0, sum(per_expert["load"]))
        frac = [x / total for x in per_expert["load"]]
        for j, share in enumerate(frac):
            out[f"moe/layer{i}/load/expert{j}"] = share
        mean = sum(frac) / len(frac)
        std = math.sqrt(sum((x - mean) ** 2 for x in frac) / len(frac))
        batches = max(1.0, row["batches"])
        layer = {
            "imbalance": max(frac) / mean if mean > 0 else float("nan"),
            "cv": std / mean if mean > 0 else float("nan"),
            "dropped_frac": row["dropped"] / max(1.0, row["assignments"]),
            "imbalance_micro": row["imbalance_micro"] / batches,
            "load_entropy": load_entropy(frac),
            "dead_experts": float(sum(x < 1 / (4 * len(frac)) for x in frac)),
        }
        tokens = max(1.0, row["tokens"])
        layer |= {k: row[k] / tokens for k in _TOKEN_MEANS if k in row}
        layer |= {k: row[k] / batches for k in _BATCH_MEANS if k in row}
        if "routed" in row:
            layer["active_experts"] = row["routed"] / tokens
        if "k_hist" in per_expert:
            hist = [a + b for a, b in zip(hist, per_expert["k_hist"])] if hist else list(per_expert["k_hist"])
        for k, value in layer.items():
            out[f"moe/layer{i}/{k}"] = value
            per_key.setdefault(k, []).append(value)
    for k, vs in per_key.items():
        out[f"moe/{k}"] = sum(vs) if k == "dead_experts" else sum(vs) / len(vs)
    if "imbalance" in per_key:
        out["moe/max_imbalance"] = max(per_key["imbalance"])
    if hist and sum(hist) > 0:
        seen = sum(hist)
        fr = [h / seen for h in hist]
        for j, v in enumerate(fr):
            out[f"moe/k_frac/k{j}"] = v
        mk = sum(j * v for j, v in enumerate(fr))
        out["moe/k_std"] = math.sqrt(max(0.0, sum((j - mk) ** 2 * v for j, v in enumerate(fr))))
    return out


def load_entropy(frac: list[float]) -> float:
    """Entropy of the load fractions over ln E: 1 when every expert has the same load, 0 for one expert."""
    if len(frac) < 2:
        return 1.0
    return -sum(x * math.log(x) for x in frac if x > 0) / math.log(len(frac))


def summarize(router_stats: list[dict]) -> dict[str, float]:
    """Metrics of one forward pass (one micro-batch)."""
    return summarize_totals(totals([router_stats]))


def console_summary(metrics: dict) -> str:
    """One short line, e.g. `moe imb 1.21/1.48 drop 0.8% k 1.98 ent 1.93 aux 1.012 z 0.41`."""
    if "moe/imbalance" not in metrics:
        return ""
    parts = [f"moe imb {metrics['moe/imbalance']:.2f}/{metrics.get('moe/max_imbalance', float('nan')):.2f}"]
    parts.append(f"drop {100 * metrics.get('moe/dropped_frac', 0.0):.1f}%")
    if "moe/active_experts" in metrics:  # realised experts per token (variable-k routers, capacity drops)
        parts.append(f"k {metrics['moe/active_experts']:.2f}")
    if "moe/entropy" in metrics:
        parts.append(f"ent {metrics['moe/entropy']:.2f}")
    if "moe/aux_loss" in metrics:
        parts.append(f"aux {metrics['moe/aux_loss']:.3f}")
    if "moe/z_loss" in metrics:
        parts.append(f"z {metrics['moe/z_loss']:.3g}")
    if "moe/bias_norm" in metrics:
        parts.append(f"|b| {metrics['moe/bias_norm']:.3g}")
    return " ".join(parts)
