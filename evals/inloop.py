"""In-loop evaluation: a trainer callback that runs lm-eval on checkpoints as they are saved.

Isolation (users' most common complaint is an eval that kills a training run): by default each
evaluation is a child process (`python -m evals.inloop`) on the just-saved checkpoint, so an
exception, OOM kill or hang (timeout) only produces a `failed` entry in `evals/<step>.json`;
per-task failures are recorded by the child and the other tasks still run. Evaluation time is
added to the trainer's `eval_s`, which `summary.json` excludes from training throughput, and is
logged as `eval/time_s`. Only rank 0 evaluates; other ranks wait at the trainer's next barrier.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from evals.config import EvalSection

from evals.run_eval import FAULT_ENV  # test hook: "task:<name>" raises in that task, "crash" kills the child


def validate(section: EvalSection) -> None:
    """Suite/task names and data are checked when the config is loaded, before training starts."""
    from evals.run_eval import resolve_suite
    from evals.tasks import plan

    s = resolve_suite(section.suite, section.tasks, section.limit, section.num_fewshot)
    plan([e.task for e in s.entries()], online=section.online).cleanup()


class InLoopEval:
    def __init__(self, section: EvalSection):
        self.section = section
        self._prev_tokens: int | None = None

    # ----------------------------------------------------------------- trainer hooks
    def on_checkpoint(self, trainer, step: int, path) -> None:
        if not trainer.dist.is_main:
            return
        tps = trainer.cfg.tokens_per_step()
        tokens = step * tps
        if self._prev_tokens is None:  # first checkpoint of this attempt (also after a resume)
            every_steps = trainer.cfg.train.checkpoint_every_steps or step
            self._prev_tokens = max(0, step - every_steps) * tps
        every = self.section.every_tokens
        due = bool(every) and tokens // every > self._prev_tokens // every
        final = step >= trainer.total_steps and self.section.at_end
        self._prev_tokens = tokens
        if not (due or final) or self._already_done(trainer.rd.path, step):
            return
        t0 = time.perf_counter()
        error = None
        try:
            out = self.evaluate(Path(path), trainer.rd.path)
        except Exception as exc:  # noqa: BLE001 - never let evaluation stop training
            out, error = None, f"{type(exc).__name__}: {exc}"
        dt = time.perf_counter() - t0
        trainer.state.eval_s += dt  # excluded from tokens_per_s in summary.json
        self._record(trainer, step, tokens, out, error, dt)

    # ----------------------------------------------------------------- evaluation
    def evaluate(self, ckpt: Path, run_dir: Path) -> dict:
        """Results document of this checkpoint (`evals/<step>.json`) after evaluating it."""
        s = self.section
        if not s.subprocess:
            import torch

            from evals.run_eval import evaluate_run

            threads = torch.get_num_threads()
            try:
                evaluate_run(ckpt, suite=s.suite, tasks=s.tasks, limit=s.limit, num_fewshot=s.num_fewshot,
                             online=s.online,
                             device=s.device, batch_size=s.batch_size, model_args={"threads": s.threads}, wandb=False,
                             log=lambda m: None)
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
        return json.loads((run_dir / "evals" / f"{step}.json").read_text())

    def _already_done(self, run_dir: Path, step: int) -> bool:
        """After a resume the final checkpoint may be saved again: do not evaluate twice."""
        p = Path(run_dir) / "evals" / f"{step}.json"
        try:
            doc = json.loads(p.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        return (self.section.suite or "custom") in doc.get("suites", []) and not doc.get("failed")

    def _record(self, trainer, step: int, tokens: int, doc: dict | None, error: str | None, dt: float) -> None:
        from evals import results as res

        if error is not None:  # the whole evaluation failed: record it in the results file
            failed = [{"task": "*", "error": error}]
            res.write_results(trainer.rd.path, step, [], failed, {
                "suite": self.section.suite or "custom", "tokens": tokens, "eval_s": dt,
                "checkpoint": str(trainer.rd.checkpoints / f"step_{step}"),
                "config": {"eval": self.section.model_dump(mode="json")}})
            trainer._log(f"eval at step {step} FAILED after {dt:.1f}s ({error}); training continues")
            recs = []
        else:
            recs, failed = doc.get("results", []), doc.get("failed", [])
            shown = ", ".join(f"{r['task']}/{r['metric']}={r['value']:.4g}" for r in recs
                              if r["value"] is not None and r["metric"] in ("acc", "bits_per_byte", "perplexity"))[:300]
            trainer._log(f"eval at step {step} ({dt:.1f}s): {shown}" + (f"; {len(failed)} task(s) failed" if failed else ""))
        try:
            res.log_to_wandb(trainer.rd.path, step, tokens, res.wandb_metrics(recs, failed), dt, mode="disabled"
                             if trainer.cfg.wandb.mode == "disabled" else None)
        except Exception as exc:  # noqa: BLE001
            trainer._log(f"warning: eval W&B logging failed ({exc})")


def build(cfg) -> list:
    """Callbacks for a train config (`pretrain.cli._callbacks`)."""
    if getattr(cfg, "eval", None) is None:
        return []
    validate(cfg.eval)
    return [InLoopEval(cfg.eval)]


def main(argv: list[str] | None = None) -> int:
    """Child process: `python -m evals.inloop CKPT SECTION_JSON` (exit 0 ok, 1 task failures)."""
    argv = sys.argv[1:] if argv is None else argv
    ckpt, section = Path(argv[0]), EvalSection.model_validate_json(argv[1])
    if os.environ.get(FAULT_ENV) == "crash":
        os._exit(137)  # what an OOM kill looks like to the parent
    from evals.run_eval import evaluate_run

    out = evaluate_run(ckpt, suite=section.suite, tasks=section.tasks, limit=section.limit, num_fewshot=section.num_fewshot,
                       online=section.online, device=section.device, batch_size=section.batch_size,
                       model_args={"threads": section.threads}, wandb=False)
    return 1 if out["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
