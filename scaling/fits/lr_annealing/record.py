"""The lr-annealing fit record's parts: per-curve rows, data range and hash, the holdout report and
the record's printed summary (`scalelab fit lr-annealing` without --json)."""

from __future__ import annotations

import hashlib

import numpy as np

from scaling.fits import pipeline
from scaling.fits.lr_annealing.curves import Curve
from scaling.fits.record import FitRecord
from scaling.laws.lr_annealing import PARAMS, AnnealingLaw, warmup_length


def warmup_text(rule: str) -> str:
    return (
        "the steps before the lr first reaches its maximum count at that maximum (Tissue et al. 2024, section 3.4)"
        if rule == "peak"
        else "the lrs as given, warmup included"
    )


def data_hash(curves: list[Curve]) -> str:
    """SHA-256 of what was fitted: per curve its name, lr of every update and (lo, hi, loss) of every point."""
    h = hashlib.sha256()
    for c in curves:
        h.update(c.name.encode())
        for a in (c.lr, c.lo, c.hi, c.loss):
            h.update(np.ascontiguousarray(np.asarray(a, dtype="<f8")).tobytes())
    return h.hexdigest()


def data_range(prob, curves: list[Curve]) -> dict:
    peaks = [float(c.lr.max()) for c in curves]
    return {
        "S1": [float(prob.s1.min()), float(prob.s1.max())],
        "S2": [float(prob.ws2.min()), float(prob.ws2.max())],
        "steps": [int(min(c.steps for c in curves)), int(max(c.steps for c in curves))],
        "peak_lr": [min(peaks), max(peaks)],
        "loss": [float(prob.y.min()), float(prob.y.max())],
    }


def curve_rows(curves: list[Curve], law: AnnealingLaw, prob, resid: np.ndarray) -> list[dict]:
    rows = []
    for i, c in enumerate(curves):
        r = resid[prob.curve == i]
        pred = predict_points(law, c)
        rows.append(
            {
                "run": c.name,
                "steps": c.steps,
                "n_points": int(c.loss.size),
                "peak_lr": float(c.lr.max()),
                "warmup_steps": warmup_length(c.lr),
                "lr_source": c.lr_source,
                "last_point_step": int(c.hi[-1]),
                "last_point_loss": float(c.loss[-1]),
                "last_point_predicted": float(pred[-1]),
                "residual_log_rms": float(np.sqrt(np.mean(r**2))),
                **{k: v for k, v in c.info.items() if v is not None},
            }
        )
    return rows


def predict_points(law: AnnealingLaw, c: Curve) -> np.ndarray:
    """The law's mean over each point's updates lo..hi."""
    L = law.curve(c.lr)
    cs = np.concatenate([[0.0], np.cumsum(L)])
    return (cs[c.hi] - cs[c.lo - 1]) / (c.hi - c.lo + 1)


def holdout_report(held: list[Curve], law: AnnealingLaw, rule: str, frac: float) -> dict:
    obs = np.concatenate([c.loss for c in held])
    pred = np.concatenate([predict_points(law, c) for c in held])
    text = (
        "the last run (fit on the others; its whole curve after --skip-fraction predicted)"
        if rule == "last-run"
        else f"the last {frac:.0%} of each curve's steps (fit on the earlier points)"
    )
    pts = [
        {
            "run": c.name,
            "last_point_step": int(c.hi[-1]),
            "observed": float(c.loss[-1]),
            "predicted": float(p[-1]),
            "rel_error": float(p[-1] / c.loss[-1] - 1),
        }
        for c, p in ((c, predict_points(law, c)) for c in held)
    ]
    return pipeline.holdout_report(
        int(obs.size), text, "loss", pipeline.rel_errors(pred, obs), signed=True, final_points=pts
    )


class LrAnnealingRecord(FitRecord):
    def summary(self) -> str:
        p, iv, st = self["params"], self.get("intervals") or {}, self.get("settings") or {}
        lines = [
            "law: lr-annealing  L(s) = L0 + A*S1^-alpha - C*S2  "
            f"(lambda {st.get('lambda')}, warmup at {st.get('warmup')}, "
            f"Huber delta {st.get('delta')}, skip fraction {st.get('skip_fraction', 0.1):g})",
            f"curves: {len(self.get('curves') or [])}, points: "
            f"{self['n_points']} ({self.get('input')}: {self.get('source')})",
            f"objective: {self['objective']:.10g}",
        ]
        for k in PARAMS:
            s = f"  {k:>6} = {p[k]:.6g}"
            if iv.get(k) and None not in iv[k]:
                s += f"   [{iv[k][0]:.6g}, {iv[k][1]:.6g}]"
            lines.append(s)
        for c in self.get("curves") or []:
            lines.append(
                f"  {c['run']}: {c['n_points']} points, last (step "
                f"{c['last_point_step']}) {c['last_point_loss']:.4f} vs law "
                f"{c['last_point_predicted']:.4f}, log rms {c['residual_log_rms']:.2g}"
            )
        ho = self.get("holdout")
        if ho:
            lines.append(
                f"holdout ({ho['rule']}): mean |rel err| "
                f"{ho['mean_abs_rel_error']:.4g}, max {ho['max_abs_rel_error']:.4g}"
            )
            for q in ho.get("final_points") or []:
                lines.append(
                    f"  {q['run']}: step {q['last_point_step']} observed "
                    f"{q['observed']:.4f}, predicted {q['predicted']:.4f} "
                    f"({q['rel_error']:+.2%})"
                )
        lines += [f"warning: {w}" for w in self.get("warnings", [])]
        return "\n".join(lines)
