"""`scalelab predict-curve FIT.json CONFIG [key=value ...]`: the loss curve an lr-annealing fit predicts
for the schedule of a train config.

The top layer reads the train config (pretrain's loader: presets and overrides, validated) and
turns its schedule into the lr of every update (`rundir.schedules.lr_at`, the trainer's own
definition); scaling's `predict_curve` does the rest. Exit codes: 0 ok, 2 bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pretrain.errors import ConfigError
from rundir.schedules import lr_at, warmup_steps
from scaling.core.errors import InputError


def register(sub) -> None:
    p = sub.add_parser(
        "predict-curve",
        help="predict a train config's loss curve from an lr-annealing fit",
        description="Predict the loss after every step of CONFIG's lr "
        "schedule from a `scalelab fit lr-annealing` record, "
        "with the bootstrap interval of the fit when it has one.",
    )
    p.add_argument("fit", metavar="FIT.json", help="record written by `scalelab fit lr-annealing --out`")
    p.add_argument("config", metavar="CONFIG", help="train config YAML (e.g. configs/train/tiny.yaml)")
    p.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides, as for `scalelab train`")
    p.add_argument(
        "--out", metavar="CURVE.csv", help="write the curve: step, lr, loss (and loss_lo, loss_hi with a bootstrap)"
    )
    p.add_argument("--ci", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")
    p.set_defaults(func=cmd_predict_curve)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def cmd_predict_curve(args) -> int:

    from scaling.fits.record import FitRecord  # deferred: numpy (a fast --help)

    if not 0 < args.ci < 1:
        return _fail(f"--ci must be between 0 and 1 (got {args.ci})")
    if args.out and Path(args.out).is_dir():
        return _fail(f"--out {args.out} is a directory")
    try:
        rec = FitRecord.load(args.fit)
        if rec.get("law") != "lr-annealing":
            raise InputError(
                f"{args.fit} is a '{rec.get('law')}' fit; predict-curve "
                "needs an lr-annealing fit (scalelab fit lr-annealing)"
            )
        from pretrain.config.loader import load_train_config  # deferred: imports pydantic (a fast --help)

        cfg = load_train_config(args.config, args.overrides)
        out = predict(rec, cfg, ci=args.ci)
    except (ConfigError, InputError) as exc:
        return _fail(str(exc))
    out.update(fit=str(args.fit), config=str(args.config), overrides=list(args.overrides))
    if args.out:
        _write_csv(args.out, out.pop("_curve"))
        out["curve_csv"] = args.out
    else:
        out.pop("_curve")
    print(json.dumps(out, indent=2) if args.json else _text(out))
    return 0


def predict(rec, cfg, *, ci: float = 0.95) -> dict:
    """The prediction for a validated TrainConfig: final loss (with interval), the loss a trainer would
    log for the last window, the schedule, warnings, and the curve itself (key `_curve`)."""
    import numpy as np  # deferred: numpy (a fast --help)

    from scaling.laws.lr_annealing import predict_curve  # deferred: numpy (a fast --help)

    total, peak = cfg.total_steps(), cfg.peak_lr()
    lr = np.array([lr_at(k, total, peak, cfg.schedule) for k in range(total)], dtype=float)
    pred = predict_curve(rec, lr, ci=ci)
    window = min(cfg.train.log_every_steps, total - 1) if total > 1 else 1
    warnings = list(pred.warnings) + _model_warnings(rec, cfg)
    return {
        "law": "lr-annealing",
        "params": rec["params"],
        "steps": total,
        "peak_lr": peak,
        "tokens": total * cfg.tokens_per_step(),
        "schedule": dict(cfg.schedule.model_dump(mode="json"), warmup_steps_resolved=warmup_steps(cfg.schedule, total)),
        "final_loss": pred.final,
        "final_loss_interval": pred.final_interval,
        "ci": ci,
        "bootstrap_samples": pred.n_samples,
        "final_logged_loss": pred.window_mean(window),
        "log_window": window,
        "warnings": warnings,
        "_curve": pred,
    }


def _model_warnings(rec, cfg) -> list[str]:
    """The law is one model's at one batch size: say when the config trains another."""
    out = []
    curves = rec.get("curves") or []
    batches = {c.get("batch_tokens") for c in curves if c.get("batch_tokens")}
    if batches and cfg.tokens_per_step() not in batches:
        out.append(
            f"the config's batch ({cfg.tokens_per_step()} tokens per step) differs "
            f"from the fitted runs' ({', '.join(map(str, sorted(batches)))}): "
            "the law's steps and lr mean something else at another batch"
        )
    params = {c.get("params") for c in curves if c.get("params")}
    if params:
        try:
            from models.accounting import model_counts  # deferred: imports pydantic (a fast --help)

            n = model_counts(cfg.model, vocab_size=cfg.model.vocab_size or cfg.data.tokenizer.vocab_size).total
        except Exception:  # a count we cannot make is simply not checked
            n = None
        if n and all(abs(n / p - 1) > 0.02 for p in params):
            out.append(
                f"the config's model ({n:,} parameters) differs from the "
                f"fitted runs' ({', '.join(f'{p:,}' for p in sorted(params))}): "
                "the law describes one model"
            )
    return out


def _write_csv(path: str, pred) -> None:
    import numpy as np  # deferred: numpy (a fast --help)

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    cols = [pred.steps, pred.lr, pred.loss] + ([pred.lo, pred.hi] if pred.lo is not None else [])
    head = "step,lr,loss" + (",loss_lo,loss_hi" if pred.lo is not None else "")
    tmp = p.with_name(p.name + ".tmp")
    np.savetxt(
        tmp, np.column_stack(cols), delimiter=",", header=head, comments="", fmt=["%d"] + ["%.10g"] * (len(cols) - 1)
    )
    tmp.replace(p)


def _text(out: dict) -> str:
    s = out["schedule"]
    iv = out["final_loss_interval"]
    lines = [
        f"schedule: {s['name']}, {out['steps']} steps, peak lr "
        f"{out['peak_lr']:.4g}, warmup {s['warmup_steps_resolved']} steps"
        + (f", decay over the last {s['decay_fraction']:.0%} ({s['decay_shape']})" if s["name"] == "wsd" else "")
        + (f", min lr ratio {s['min_lr_ratio']:g}" if s["name"] != "constant" else ""),
        f"predicted final loss (after step {out['steps']}): {out['final_loss']:.4f}"
        + (
            f"  [{iv[0]:.4f}, {iv[1]:.4f}] ({out['ci']:.0%}, {out['bootstrap_samples']} bootstrap fits)"
            if iv
            else "  (no interval: fit without --bootstrap)"
        ),
        f"as metrics.jsonl would log it (mean over the last {out['log_window']} steps): {out['final_logged_loss']:.4f}",
    ]
    if out.get("curve_csv"):
        lines.append(f"wrote {out['curve_csv']} ({out['steps']} rows)")
    lines += [f"warning: {w}" for w in out["warnings"]]
    return "\n".join(lines)
