"""`scalelab model design`: a parameter target -> a Llama-layout model config (models/design.py).

Registered by launch/cli.py. Torch-free; exit 2 for a bad option before any work.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from rundir.files import atomic_write_text

RULE_NAMES = ("marin", "olmo-ladder")  # models.design.RULES (kept light: no import at --help)


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return v


def _positive_int(text: str) -> int:
    try:
        v = int(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1 or v != float(text):
        raise argparse.ArgumentTypeError(f"must be an integer >= 1: {text!r}")
    return v


def register(subparsers) -> None:
    model = subparsers.add_parser(
        "model",
        help="design a model shape for a parameter target",
        description="Model shapes from a parameter count (docs/model-design.md).",
    )
    msub = model.add_subparsers(dest="model_command", metavar="COMMAND")
    msub.required = True
    p = msub.add_parser(
        "design",
        help="the Llama-layout shape of a shape rule nearest a parameter target",
        description="Design a Llama-layout model (d_model, n_layers, n_heads, n_kv_heads, d_ff) "
        "whose exact parameter count is within 2%% of --params from 1e8 up (models/design.py says "
        "how close below). Exit codes: 0 ok, 2 bad option.",
    )
    p.add_argument("--params", type=_positive_float, required=True, metavar="N", help="parameter target, e.g. 7e9")
    p.add_argument(
        "--rule",
        choices=RULE_NAMES,
        default="marin",
        help="shape rule: marin (Marin's depth formula, head_dim 128, SwiGLU 4d; default) or olmo-ladder "
        "(the OLMo-2 ladder's aspect ratios, FFN ~4d by Llama's rounding)",
    )
    p.add_argument(
        "--n-kind",
        choices=("total", "non_embedding"),
        default="total",
        help="which count --params is: every parameter (default) or without the embedding and output layer",
    )
    p.add_argument(
        "--vocab-size",
        type=_positive_int,
        metavar="V",
        help="vocabulary (default: configs/data/default.yaml's tokenizer, as `scalelab plan` counts)",
    )
    p.add_argument("--seq-len", type=_positive_int, default=2048, metavar="S", help="context length (default 2048)")
    p.add_argument(
        "--kv-heads",
        type=_positive_int,
        metavar="K",
        help="grouped-query attention: min(n_heads, K) key/value heads, preferring widths whose head count "
        "K divides (default: as many as query heads)",
    )
    p.add_argument("--tie-embeddings", action="store_true", help="share the input embedding and the output layer")
    p.add_argument(
        "--out",
        metavar="model.yaml",
        help="write the model config (configs/models/ keys): train it with model=model.yaml",
    )
    p.add_argument("--json", action="store_true", help="print the design as JSON")
    p.set_defaults(func=cmd_design)


def _vocab(args) -> int:
    from scaling.planning.run_model import (
        default_vocab_size,  # deferred: imports numpy/pydantic (a fast scalelab --help)
    )

    if args.vocab_size:
        return args.vocab_size

    return default_vocab_size() or 32000


def cmd_design(args) -> int:

    from models.design import design  # deferred: imports numpy/pydantic (a fast scalelab --help)

    if args.out and Path(args.out).is_dir():
        print(f"error: --out {args.out} is a directory", file=sys.stderr)
        return 2
    try:
        d = design(
            args.params,
            args.rule,
            n_kind=args.n_kind,
            vocab_size=_vocab(args),
            seq_len=args.seq_len,
            kv_heads=args.kv_heads,
            tie_embeddings=args.tie_embeddings,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        write_model_file(d, args.out)
    if args.json:
        print(json.dumps(d.to_dict(), indent=2))
    else:
        print(describe(d))
        if args.out:
            print(f"wrote {args.out}: train it with `scalelab train CONFIG model={args.out}`")
    return 0


def describe(d) -> str:
    m, c = d.model, d.counts
    shape = (
        f"d_model {m.d_model}, n_layers {m.n_layers}, n_heads {m.n_heads} (head_dim {m.head_dim}), "
        f"n_kv_heads {m.kv_heads}, d_ff {m.ffn_dim}, vocab_size {m.vocab_size}, seq_len {m.seq_len}"
        + (", tied embeddings" if m.tie_embeddings else "")
    )
    lines = [
        f"shape rule {d.rule}: {shape}",
        f"parameters: total {c.total:,}  non-embedding {c.non_embedding:,}  active {c.active:,}",
        f"target {d.target:.4g} ({d.n_kind}): {d.rel_error:+.2%}",
        f"training FLOPs per token {c.flops_per_token:.4g} (6 x matmul params + attention at seq_len {m.seq_len})",
        f"rule at d_model {m.d_model}: {d.rule_depth} layers, d_ff {d.rule_d_ff}",
    ]
    lines += [f"note: {n}" for n in d.notes]
    return "\n".join(lines)


def write_model_file(d, path: str) -> None:
    """The `model:` mapping as a configs/models/-style file, with what it is in a header comment."""

    c = d.counts
    head = (
        f"# designed by `scalelab model design` (shape rule {d.rule}) for {d.target:.4g} {d.n_kind} parameters:\n"
        f"# total {c.total:,}, non-embedding {c.non_embedding:,} ({d.rel_error:+.2%} off the target), "
        f"{c.flops_per_token:.4g} training FLOPs per token\n"
    )
    atomic_write_text(Path(path), head + yaml.safe_dump(d.model_dict(), sort_keys=False))
