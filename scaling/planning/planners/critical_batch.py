"""The critical-batch law's part of the plan: B_crit at the planned run (B_crit(D) at its tokens when the
record has the data law, Zhang et al. 2024; else B_crit(N) at N_opt), and a warning when the recommended
batch exceeds it."""

from __future__ import annotations

from typing import Any

from scaling.laws.registry import from_record
from scaling.planning.planner import PlanDraft, Planner, register_planner


def plan_critical_batch(draft: PlanDraft, records: list) -> None:
    """B_crit from the last critical-batch record given."""
    c = records[-1]
    p, out = c["params"], draft.out
    run = out.get("run") or {}
    if "bcrit_coef_D" in p and p.get("bcrit_exp_D") is not None:  # Zhang et al. 2024: B_crit follows the data
        out["B_crit_tokens"] = float(p["bcrit_coef_D"] * (run.get("tokens") or out["D_opt"]) ** p["bcrit_exp_D"])
        out["B_crit_from"] = "B_crit(D) at the run's tokens"
    elif "bcrit_coef" in p:
        law: Any = from_record(c)  # a critical-batch record's B_crit(N) law
        out["B_crit_tokens"] = float(law.predict(out["N_opt"]))
        out["B_crit_from"] = "B_crit(N) at N_opt"
    if "B_crit_tokens" in out:
        bt = run.get("batch_tokens")
        if bt and bt > out["B_crit_tokens"]:
            draft.warnings.append(
                f"recommended batch {bt:.3g} tokens exceeds the critical batch "
                f"{out['B_crit_tokens']:.3g}: diminishing returns per token"
            )


PLANNER = register_planner(Planner(law="critical-batch", apply=plan_critical_batch))
