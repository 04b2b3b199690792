"""In-loop evaluation: scalelab's checkpoint evaluator, which the trainer calls on checkpoints as
they are saved (the `eval:` section of a train config).

The trainer owns the interface and the cadence (pretrain/checkpoint/evaluators.py,
pretrain/callbacks/inloop_eval.py); this module registers itself as the entry point
`scalelab.checkpoint_evaluators: eval = evals.inloop:EVALUATOR` (pyproject.toml), so pretrain
never imports evals. It stays light to import: the trainer's config schema loads it.

Isolation (users' most common complaint is an eval that kills a training run): by default each
evaluation is a child process (`python -m evals.inloop`) on the just-saved checkpoint, so an
exception, OOM kill or hang (timeout) only produces a `failed` entry in `evals/<step>.json`;
per-task failures are recorded by the child and the other tasks still run. The trainer keeps the
time out of training throughput (`summary.json` `eval_s`); it is logged as `eval/time_s`. Only
rank 0 evaluates; other ranks wait at the trainer's next barrier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from evals import results as res
from evals.config import EvalSection
from evals.run_eval import FAULT_ENV, evaluate_run, resolve_suite
from evals.tasks import resolve_tasks
from rundir.layout import RunDir


class LmEvalEvaluator:
    section = EvalSection

    def check(self, section: EvalSection) -> None:
        """Suite/task names and data, before training starts (raises EvalError, a ValueError)."""

        s = resolve_suite(section.suite, section.tasks, section.limit, section.num_fewshot)
        resolve_tasks([e.task for e in s.entries()], online=section.online).cleanup()

    def done(self, section: EvalSection, run_dir: Path, step: int) -> bool:
        """Results of this suite at this step, none failed (a resumed run saves its final checkpoint again)."""
        try:
            doc = json.loads(RunDir(run_dir).eval_file(step).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        return (section.suite or "custom") in doc.get("suites", []) and not doc.get("failed")

    def evaluate(self, section: EvalSection, job) -> None:
        """Evaluate `job.checkpoint` (a `pretrain.checkpoint.evaluators.EvalJob`) and record the results or the
        failure."""
        t0 = time.perf_counter()
        error = None
        try:
            doc = self.run(section, Path(job.checkpoint), Path(job.run_dir))
        except Exception as exc:  # never let evaluation stop training
            doc, error = None, f"{type(exc).__name__}: {exc}"
        self._record(section, job, doc, error, time.perf_counter() - t0)

    # ----------------------------------------------------------------- evaluation
    def run(self, s: EvalSection, ckpt: Path, run_dir: Path) -> dict:
        """Results document of this checkpoint (`evals/<step>.json`) after evaluating it."""
        if not s.subprocess:
            import torch  # deferred: imports torch

            from evals.run_eval import evaluate_run  # deferred: imports pydantic, lm-eval

            threads = torch.get_num_threads()
            try:
                evaluate_run(
                    ckpt,
                    suite=s.suite,
                    tasks=s.tasks,
                    limit=s.limit,
                    num_fewshot=s.num_fewshot,
                    online=s.online,
                    device=s.device,
                    batch_size=s.batch_size,
                    model_args={"threads": s.threads},
                    wandb=False,
                    log=lambda m: None,
                )
            finally:
                torch.set_num_threads(threads)  # the trainer's setting
        else:
            cmd = [sys.executable, "-m", "evals.inloop", str(ckpt), s.model_dump_json()]
            env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT")}
            root = str(Path(__file__).resolve().parents[1])
            env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
            try:
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=s.timeout_s)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"evaluation timed out after {s.timeout_s:.0f}s (eval.timeout_s)") from None
            if proc.returncode not in (0, 1):  # 1: some task failed, recorded by the child
                tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
                raise RuntimeError(f"evaluation process exited with code {proc.returncode}: {' | '.join(tail)}")
        step = int(ckpt.name.removeprefix("step_"))
        return json.loads(RunDir(run_dir).eval_file(step).read_text())

    def _record(self, section: EvalSection, job, doc: dict | None, error: str | None, dt: float) -> None:

        step, tokens = job.step, job.tokens
        if error is not None:  # the whole evaluation failed: record it in the results file
            failed = [{"task": "*", "error": error}]
            res.write_results(
                job.run_dir,
                step,
                [],
                failed,
                {
                    "suite": section.suite or "custom",
                    "tokens": tokens,
                    "eval_s": dt,
                    "checkpoint": str(job.checkpoint),
                    "config": {"eval": section.model_dump(mode="json")},
                },
            )
            job.log(f"eval at step {step} FAILED after {dt:.1f}s ({error}); training continues")
            recs = []
        else:
            recs, failed = doc.get("results", []), doc.get("failed", [])
            shown = ", ".join(
                f"{r['task']}/{r['metric']}={r['value']:.4g}"
                for r in recs
                if r["value"] is not None and r["metric"] in ("acc", "bits_per_byte", "perplexity")
            )[:300]
            job.log(f"eval at step {step} ({dt:.1f}s): {shown}" + (f"; {len(failed)} task(s) failed" if failed else ""))
        try:
            res.log_to_wandb(
                job.run_dir, step, tokens, res.wandb_metrics(recs, failed), dt, mode=None if job.wandb else "disabled"
            )
        except Exception as exc:
            job.log(f"warning: eval W&B logging failed ({exc})")


EVALUATOR = LmEvalEvaluator()


def main(argv: list[str] | None = None) -> int:
    """Child process: `python -m evals.inloop CKPT SECTION_JSON` (exit 0 ok, 1 task failures)."""

    argv = sys.argv[1:] if argv is None else argv
    ckpt, section = Path(argv[0]), EvalSection.model_validate_json(argv[1])
    if os.environ.get(FAULT_ENV) == "crash":
        os._exit(137)  # what an OOM kill looks like to the parent

    out = evaluate_run(
        ckpt,
        suite=section.suite,
        tasks=section.tasks,
        limit=section.limit,
        num_fewshot=section.num_fewshot,
        online=section.online,
        device=section.device,
        batch_size=section.batch_size,
        model_args={"threads": section.threads},
        wandb=False,
    )
    return 1 if out["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
