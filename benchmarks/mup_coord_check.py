"""μP coordinate check (Yang et al. 2022, appendix D.1): the RMS of each layer's activations after a
few training steps, across widths. Under mup (a correct implementation) every row is flat in
width; under sp the updates' contribution grows with width (AdamW moves every weight entry by
about lr whatever the fan-in), most visibly in the logits and attention outputs.

    python benchmarks/mup_coord_check.py [--widths 64,128,256,512,1024] [--steps 5] [--lr 1e-2]
        [--base-width 64] [--data corpus|random] [--png docs/figures/mup_coord_check.png] [--json PATH]
        [--threads 1]

Per parametrization it prints one row per activation (embedding, each block's attention and MLP
outputs and residual stream, logits) with its RMS at each width, and the ratio of the widest to
the narrowest; the PNG plots the same (one panel per parametrization). 2 layers, 4 heads, 32-token
sequences, batch 8, AdamW (no weight decay, clipping 1.0), constant lr: a few minutes on 2 busy cores.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mup_train import model_config, train  # noqa: E402

SEQ_LEN, BATCH, VOCAB = 32, 8, 512


def random_batches(vocab_size: int, seed: int = 0):
    """Uniform random tokens: no structure to learn, enough for the check (no data to prepare)."""

    def batch(step: int):
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        x = torch.randint(0, vocab_size, (BATCH, SEQ_LEN + 1), generator=g)
        return x[:, :-1], x[:, 1:]

    return batch


def activation_rms(model, x: torch.Tensor) -> dict[str, float]:
    """RMS of each layer's output on `x` (forward hooks; the logits are the model's, multiplier included)."""
    out: dict[str, float] = {}
    hooks = []

    def record(name):
        def hook(_module, _inputs, output):
            t = output[0] if isinstance(output, tuple) else output
            out[name] = t.detach().float().pow(2).mean().sqrt().item()

        return hook

    hooks.append(model.model.embed_tokens.register_forward_hook(record("embed")))
    for i, layer in enumerate(model.model.layers):
        hooks.append(layer.self_attn.register_forward_hook(record(f"attn{i}")))
        hooks.append(layer.mlp.register_forward_hook(record(f"mlp{i}")))
        hooks.append(layer.register_forward_hook(record(f"block{i}")))
    try:
        with torch.no_grad():
            logits = model.eval()(x).logits
    finally:
        for h in hooks:
            h.remove()
    out["logits"] = logits.float().pow(2).mean().sqrt().item()
    return out


def coord_check(
    widths: list[int], parametrization: str, steps: int, lr: float, base_width: int, batches, vocab_size: int
) -> dict[str, list[float]]:
    """{activation: [RMS at each width]} after `steps` steps on `batches`, measured on the next batch."""
    table: dict[str, list[float]] = {}
    for w in widths:
        cfg = model_config(w, parametrization, base_width, vocab_size, SEQ_LEN)
        model, _ = train(cfg, batches, steps, lr)
        for name, v in activation_rms(model, batches(steps)[0]).items():
            table.setdefault(name, []).append(v)
    return table


def growth(table: dict[str, list[float]]) -> dict[str, float]:
    """RMS at the widest / at the narrowest width, per activation."""
    return {k: v[-1] / v[0] for k, v in table.items()}


def render(widths: list[int], tables: dict[str, dict[str, list[float]]]) -> str:
    lines = []
    for par, table in tables.items():
        lines.append(f"{par}: activation RMS by width")
        lines.append(f"{'activation':<11}" + "".join(f"{w:>10}" for w in widths) + f"{'ratio':>9}")
        for name, vals in table.items():
            lines.append(f"{name:<11}" + "".join(f"{v:>10.4f}" for v in vals) + f"{vals[-1] / vals[0]:>9.2f}")
        lines.append("")
    return "\n".join(lines)


def plot(widths: list[int], tables: dict[str, dict[str, list[float]]], path: Path) -> None:
    import matplotlib  # deferred: heavy, only for the figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(5.5 * len(tables), 4), sharey=True)
    for ax, (par, table) in zip(axes, tables.items()):
        for name, vals in table.items():
            ax.plot(widths, vals, marker="o", label=name)
        ax.set(xscale="log", yscale="log", xlabel="width (d_model)", title=f"{par}: activation RMS after training")
        ax.set_xticks(widths, [str(w) for w in widths])
    axes[0].set_ylabel("RMS")
    axes[-1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--widths", default="64,128,256,512,1024")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--base-width", type=int, default=64)
    p.add_argument("--data", choices=("corpus", "random"), default="corpus")
    p.add_argument("--png", default="docs/figures/mup_coord_check.png")
    p.add_argument("--json", default=None)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: fastest on a busy shared machine)")
    args = p.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",")]
    if any(w % 8 for w in widths):
        p.error(f"--widths: every width must be a multiple of 8 (4 heads, even head dim); got {args.widths}")
    torch.set_num_threads(args.threads)
    if args.data == "corpus":
        from mup_train import corpus

        train_s, _, vocab = corpus(VOCAB, SEQ_LEN)
        batches = lambda step: train_s.batch(step * BATCH, BATCH)  # noqa: E731
    else:
        vocab, batches = VOCAB, random_batches(VOCAB)
    tables = {
        par: coord_check(widths, par, args.steps, args.lr, args.base_width, batches, vocab) for par in ("sp", "mup")
    }
    print(render(widths, tables))
    if args.png:
        plot(widths, tables, Path(args.png))
        print(f"plot: {args.png}")
    if args.json:
        Path(args.json).write_text(json.dumps({"widths": widths, "tables": tables}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
