"""`scalelab eval` and `scalelab export hf`.

Exit codes: 0 done, 1 some task failed, 2 bad input (unknown suite/task, missing data, bad path,
tokenizer mismatch) - reported before any model is loaded.
"""

from __future__ import annotations

import sys

from base.cli import ArgumentParser
from evals.export import export_checkpoint
from evals.tasks import EvalError
from rundir.checkpoints import CheckpointError


def register(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a run or checkpoint with lm-eval (suite or tasks)",
        description="Evaluate a run directory (newest checkpoint) or checkpoints/step_N with lm-eval; "
        "writes <run>/evals/<step>.json and logs eval/<task>/<metric> to the run's W&B run.",
    )
    p.add_argument("path", help="run directory or run/checkpoints/step_N")
    p.add_argument("--suite", help="suite name in configs/evals/ (tiny, standard) or a YAML path")
    p.add_argument("--tasks", help="comma-separated task names (a subset of the suite when --suite is given)")
    p.add_argument("--limit", type=float, default=None, help="documents per task (overrides the suite; <1: fraction)")
    p.add_argument("--num-fewshot", type=int, default=None, help="few-shot examples (overrides the suite)")
    p.add_argument(
        "--online", action="store_true", help="use the stock lm-eval tasks (downloads data) instead of local copies"
    )
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--batch-size", type=int, default=32, help="distinct contexts per forward pass")
    p.add_argument(
        "--rolling-context",
        type=int,
        default=1,
        help="tokens of context per loglikelihood_rolling window (1 = lm-eval's default disjoint windows)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--no-wandb", action="store_true", help="do not log to the run's W&B run")
    p.add_argument("--bootstrap-iters", type=int, default=1000, help="bootstrap samples for non-mean stderrs")
    p.set_defaults(func=cmd_eval)

    ex = sub.add_parser("export", help="export a checkpoint to another format (hf)")
    exs = ex.add_subparsers(dest="format", metavar="FORMAT")
    exs.required = True
    hf = exs.add_parser(
        "hf", help="transformers model directory (LlamaForCausalLM / MixtralForCausalLM / Qwen2MoeForCausalLM)"
    )
    hf.add_argument("path", help="run directory or run/checkpoints/step_N")
    hf.add_argument("out", help="output directory")
    hf.set_defaults(func=cmd_export_hf)


def _limit(v):
    if v is None:
        return None
    return int(v) if float(v).is_integer() and v >= 1 else v


def cmd_eval(args) -> int:

    from evals.run_eval import evaluate_run  # deferred: imports numpy/pydantic (a fast scalelab --help)

    try:
        out = evaluate_run(
            args.path,
            suite=args.suite,
            tasks=args.tasks,
            limit=_limit(args.limit),
            num_fewshot=args.num_fewshot,
            online=args.online,
            device=args.device,
            batch_size=args.batch_size,
            model_args={"rolling_context": args.rolling_context, "threads": args.threads},
            wandb=not args.no_wandb,
            bootstrap_iters=args.bootstrap_iters,
        )
    except (EvalError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if out["failed"] else 0


def cmd_export_hf(args) -> int:
    from models.hf_export import ExportError  # deferred: imports torch

    try:
        out = export_checkpoint(args.path, args.out)
    except (ExportError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out} (load with AutoModelForCausalLM.from_pretrained / AutoTokenizer.from_pretrained)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="python -m evals.cli")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
