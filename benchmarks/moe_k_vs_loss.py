"""Mechanism check for variable-k routers: do tokens with higher loss run more experts?

    python benchmarks/moe_k_vs_loss.py RUN_DIR [RUN_DIR ...] [--windows 16]

For each finished run: its final weights in eval mode (controllers frozen) on the first `--windows`
validation windows; per token the cross-entropy of its next-token prediction and the experts it
ran, averaged over MoE layers (`models.moe.block.MoEFeedForward.record_routing`). Prints the
Pearson and Spearman correlations of k with loss, and the mean loss of tokens by k (rounded).
sigmoid_threshold's claim (docs/moe.md) predicts a positive correlation; fixed-k routers have k
constant (no correlation to compute).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _data_dir(run_dir: Path, cfg) -> Path:
    """The prepared data the run trained on, as it recorded it (absolute), else its config's out_dir (which
    may be relative to the folder the study ran from)."""
    import json

    from pretrain.data.prepare import output_dir
    from rundir.layout import RunDir

    try:
        return Path(json.loads(RunDir(run_dir).tokenizer_meta.read_text())["data_dir"])
    except (OSError, ValueError, KeyError):
        return output_dir(cfg.data)


def k_and_loss(run_dir: Path, windows: int = 16) -> tuple[list[float], list[float]]:
    import torch
    import torch.nn.functional as F

    from models.moe.block import MoEFeedForward
    from pretrain.config.loader import load_train_config
    from pretrain.data.prepared import load_prepared
    from rundir.layout import RunDir
    from rundir.weights import load_run

    model = load_run(run_dir).model.eval()
    cfg = load_train_config(RunDir(run_dir).config)
    val = load_prepared(_data_dir(run_dir, cfg)).token_stream("val")
    seq = cfg.model.seq_len
    n = min(windows, (len(val) - 1) // (seq + 1))
    rows = torch.tensor([[int(t) for t in val[i * (seq + 1) : (i + 1) * (seq + 1)]] for i in range(n)])
    blocks = [m for m in model.modules() if isinstance(m, MoEFeedForward)]
    for b in blocks:
        b.record_routing = True
    with torch.no_grad():
        logits = model(rows[:, :-1]).logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), rows[:, 1:].reshape(-1), reduction="none")
    k = torch.zeros(loss.numel())
    for b in blocks:
        tok, _, t = b.last_routing
        k += torch.bincount(tok, minlength=t).float()
        b.record_routing, b.last_routing = False, None
    return (k / max(1, len(blocks))).tolist(), loss.tolist()


def correlations(k: list[float], loss: list[float]) -> dict:
    from scipy import stats

    if max(k) == min(k):
        return {"pearson": None, "spearman": None, "k_mean": k[0]}
    return {
        "pearson": float(stats.pearsonr(k, loss)[0]),
        "spearman": float(stats.spearmanr(k, loss)[0]),
        "k_mean": sum(k) / len(k),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--windows", type=int, default=16)
    args = ap.parse_args()
    for run in args.runs:
        k, loss = k_and_loss(Path(run), args.windows)
        c = correlations(k, loss)
        by_k: dict[int, list[float]] = {}
        for ki, li in zip(k, loss):
            by_k.setdefault(round(ki), []).append(li)
        table = "  ".join(f"k~{j}: {sum(v) / len(v):.3f} ({len(v)})" for j, v in sorted(by_k.items()))
        corr = "constant k" if c["pearson"] is None else f"pearson {c['pearson']:+.3f} spearman {c['spearman']:+.3f}"
        print(f"{run}: {len(k)} tokens, mean k {c['k_mean']:.2f}, {corr}; loss by k: {table}")


if __name__ == "__main__":
    main()
