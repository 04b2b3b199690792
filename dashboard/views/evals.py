"""evals/<step>.json files of many runs -> one flat table for the task x run matrix.

Tolerant of the evaluation engineer's schema growing: a record needs `task` and `value`;
metric/stderr/n are optional. Each row also carries an estimate of the training FLOPs at that
checkpoint (flops_per_token x tokens, or the summary's flops scaled by step/steps) for the
accuracy-vs-compute plot.
"""

from __future__ import annotations


def _flops(row: dict, step, tokens):
    fpt = row.get("flops_per_token")
    if fpt and tokens:
        return float(fpt) * float(tokens)
    if row.get("flops") and row.get("steps") and step is not None:
        return float(row["flops"]) * float(step) / float(row["steps"])
    return None


def rows_for_run(row: dict, evals: list[dict]) -> tuple[list[dict], list[dict]]:
    out, problems = [], []
    for e in evals:
        if e["problem"]:
            problems.append({"id": row["id"], "problem": f"evals/{e['problem']}"})
            continue
        doc = e["doc"]
        tokens = doc.get("tokens")
        for r in doc.get("results") or []:
            if not isinstance(r, dict) or r.get("task") is None:
                continue
            out.append(
                {
                    "run": row["id"],
                    "step": e["step"],
                    "tokens": tokens,
                    "flops": _flops(row, e["step"], tokens),
                    "task": r.get("task"),
                    "metric": r.get("metric") or "value",
                    "value": r.get("value"),
                    "stderr": r.get("stderr"),
                    "n": r.get("n"),
                    "suite": r.get("suite"),
                    "status": r.get("status", "ok"),
                }
            )
        for f in doc.get("failed") or []:
            if isinstance(f, dict):
                out.append(
                    {
                        "run": row["id"],
                        "step": e["step"],
                        "tokens": tokens,
                        "flops": _flops(row, e["step"], tokens),
                        "task": f.get("task"),
                        "metric": "failed",
                        "value": None,
                        "stderr": None,
                        "n": None,
                        "suite": f.get("suite"),
                        "status": "failed",
                        "error": f.get("error"),
                    }
                )
    return out, problems
