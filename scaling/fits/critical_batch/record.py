"""The critical-batch fit record: a FitRecord whose printed summary has one line per (model, target)."""

from __future__ import annotations

from scaling.fits.record import FitRecord


class CriticalBatchRecord(FitRecord):
    """A FitRecord whose summary shows one line per (model, target) with the noise scale."""

    def summary(self) -> str:
        s = self.get("settings") or {}
        lines = [f"law: critical-batch ({s.get('input', '')})", f"runs/points: {self.get('n_points')}"]
        if s.get("metric"):
            lines.append(
                f"steps to target from '{s['metric']}', smoothing: "
                f"{s.get('smoothing')}; targets: {s['targets']['mode']}"
            )
        ivs = self.get("intervals") or {}
        for k, v in self["params"].items():
            iv = ivs.get(k)
            lines.append(f"  {k:>18} = {v:.6g}" + (f"   [{iv[0]:.6g}, {iv[1]:.6g}]" if iv and None not in iv else ""))
        lines.append(
            f"  {'N':>10} {'target':>8} {'S_min':>9} {'E_min':>10} {'B_crit':>10} "
            f"{'interval':>23} {'B_20%':>9} {'D=2E_min':>10}  noise scale (B_simple)"
        )
        for m in self.get("models") or []:
            iv = m.get("B_crit_interval")
            ivs_ = f"[{iv[0]:.4g}, {iv[1]:.4g}]" if iv else "-"
            t = "-" if m.get("target_loss") is None else f"{m['target_loss']:.4g}"
            if m.get("noise_scale") is not None:
                ns = f"{m['noise_scale']:.4g} (median of {m['noise_scale_runs']} runs)"
            else:
                ns = "not measured" if "noise_scale_note" in m else "-"
            flag = "" if m.get("in_laws", True) else "  (extrapolated; not in laws)"
            lines.append(
                f"  {m['N']:>10.4g} {t:>8} {m['S_min']:>9.4g} {m['E_min']:>10.4g} {m['B_crit']:>10.4g} {ivs_:>23} "
                f"{m['B_overhead20']:>9.4g} {m['D_at_B_crit']:>10.4g}  {ns}{flag}"
            )
        ho = self.get("holdout")
        if ho and ho.get("B_crit_fitted") is not None:
            parts = [
                f"{src}: {ho[f'predicted_from_{src}']:.4g} ({ho[f'rel_error_from_{src}']:+.1%})"
                for src in ("N", "D")
                if f"predicted_from_{src}" in ho
            ]
            lines.append(
                f"holdout (largest model N={ho['model_N']:.4g}): B_crit "
                f"fitted {ho['B_crit_fitted']:.4g}; predicted from "
                + ("; ".join(parts) if parts else "no law (too few other model sizes)")
            )
        elif ho:
            lines.append(f"holdout: {ho.get('note', '')}")
        b = self.get("bootstrap")
        if b:
            lines.append(
                f"bootstrap: {b['n']} resamples, {b['failed']} failed"
                + (f" ({'; '.join(f'{n}x {w}' for w, n in b['failed_reasons'].items())})" if b["failed"] else "")
            )
        for w in self.get("warnings", []):
            lines.append(f"warning: {w}")
        return "\n".join(lines)
