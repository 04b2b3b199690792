"""Evaluate one checkpoint on a suite or task list: validate, load, run lm-eval, record.

`evaluate_run` is the one entry point for `scalelab eval`, `scalelab sweep eval` and the in-loop
evaluator's subprocess. Order: everything that can be wrong with the input (suite, task names,
data, checkpoint path, tokenizer) is checked before the model is loaded; each task then runs in
its own lm-eval call, so one failing task is recorded as failed and the others still run.
"""

from __future__ import annotations

import os
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from evals import results as res
from evals.gold import gold_records
from evals.suites import Suite, adhoc, load_suite
from evals.tasks import EvalError, resolve_tasks
from rundir.checkpoints import resolve_checkpoint
from rundir.config import run_model
from rundir.tokenizer import load_tokenizer

FAULT_ENV = "SCALELAB_EVAL_FAULT"  # test hook: "task:<name>" makes that task raise


def resolve_suite(
    suite: str | Suite | None, tasks: list[str] | str | None, limit=None, num_fewshot: int | None = None
) -> Suite:
    if isinstance(tasks, str):
        tasks = [t for t in tasks.split(",") if t.strip()]
    if suite is None and not tasks:
        raise EvalError("give --suite NAME or --tasks a,b,c")
    if suite is None:
        return adhoc(tasks, limit, num_fewshot or 0)
    s = suite if isinstance(suite, Suite) else load_suite(suite)
    if tasks:  # a subset of the suite's tasks (or extra ones) with the suite's settings
        names = {e if isinstance(e, str) else e.task for e in s.tasks}
        extra = [t for t in tasks if t not in names]
        s = s.model_copy(
            update={"tasks": [e for e in s.tasks if (e if isinstance(e, str) else e.task) in tasks] + extra}
        )
    if num_fewshot is not None:
        s = s.model_copy(update={"num_fewshot": num_fewshot})
    return s


def evaluate_run(
    run_dir: str | Path,
    suite: str | Suite | None = None,
    tasks: list[str] | str | None = None,
    limit: int | float | None = None,
    *,
    num_fewshot: int | None = None,
    online: bool = False,
    device: str | None = None,
    batch_size: int = 32,
    model_args: dict | None = None,
    wandb: bool = True,
    bootstrap_iters: int = 1000,
    lm=None,
    task_cache: dict | None = None,
    log=print,
) -> dict:
    """Evaluate a run directory (newest checkpoint) or a `checkpoints/step_N` directory.

    Returns {"path", "step", "results", "failed", "eval_s"}; writes `<run>/evals/<step>.json` and,
    unless `wandb=False`, logs `eval/<task>/<metric>` to the run's W&B run.
    `task_cache` (a dict the caller keeps) holds built lm-eval task objects across calls, so a
    process evaluating many checkpoints loads each task's data once (about 1 s per task).
    """
    import lm_eval  # deferred: imports lm_eval

    t0 = time.perf_counter()
    _env_info_once()
    s = resolve_suite(suite, tasks, limit, num_fewshot)
    entries = s.entries(limit_override=limit)
    run_path, ckpt, step = resolve_checkpoint(run_dir)
    rm = run_model(run_path)
    load_tokenizer(run_path, rm.model.vocab_size)  # tokenizer mismatch: fail before loading weights
    resolved = resolve_tasks([e.task for e in entries], online=online)
    margs = {"batch_size": batch_size, **(model_args or {})}
    try:
        if lm is None:
            from evals.adapter import ScalelabLM  # deferred: imports torch, lm-eval

            log(f"loading {ckpt} (step {step})")
            lm = ScalelabLM(path=str(ckpt), device=device, **margs)
        tm = resolved.task_manager()
        task_cache = {} if task_cache is None else task_cache  # the task object tells the gold answer
        records, failed = [], []
        for e in entries:
            t1 = time.perf_counter()
            try:
                if os.environ.get(FAULT_ENV) == f"task:{e.task}":
                    raise RuntimeError(f"injected fault ({FAULT_ENV})")
                task = _task(e.task, tm, task_cache)
                out = lm_eval.simple_evaluate(  # samples: the gold continuation's loss (evals.gold)
                    model=lm,
                    tasks=[task],
                    task_manager=tm,
                    limit=e.limit,
                    num_fewshot=e.num_fewshot,
                    bootstrap_iters=bootstrap_iters,
                    log_samples=True,
                    verbosity="WARNING",
                )
                if out is None or e.task not in out.get("results", {}):
                    raise RuntimeError("lm-eval returned no results for this task")
                recs = res.records_from_lm_eval(out, s.name, e.limit) + gold_records(out, task, lm, s.name, e.limit)
                records += recs
                shown = ", ".join(f"{r['metric']}={r['value']:.4g}" for r in recs if r["value"] is not None)
                log(f"  {e.task}: {shown} (n={recs[0]['n'] if recs else '?'}, {time.perf_counter() - t1:.1f}s)")
            except Exception as exc:  # a failing task must not stop the others
                failed.append(
                    {
                        "task": e.task,
                        "error": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc(limit=5),
                    }
                )
                log(f"  {e.task}: FAILED ({type(exc).__name__}: {exc})")
    finally:
        resolved.cleanup()
    records += res.aggregate_blimp(records, s.name)
    eval_s = time.perf_counter() - t0
    meta = {
        "suite": s.name,
        "checkpoint": str(ckpt),
        "tokens": None if rm.tokens_per_step is None else step * rm.tokens_per_step,
        "lm_eval_version": lm_eval.__version__ if hasattr(lm_eval, "__version__") else _version("lm_eval"),
        "eval_s": eval_s,
        "config": {
            "suite": s.model_dump(mode="json"),
            "limit_override": limit,
            "online": online,
            "model_args": {**margs, "device": str(getattr(lm, "device", device))},
            "bootstrap_iters": bootstrap_iters,
        },
    }
    path = res.write_results(run_path, step, records, failed, meta)
    logged = False
    if wandb:
        try:
            logged = res.log_to_wandb(run_path, step, meta["tokens"], res.wandb_metrics(records, failed), eval_s)
        except Exception as exc:  # results are on disk; W&B is best effort
            log(f"warning: W&B logging failed ({type(exc).__name__}: {exc})")
    log(
        f"wrote {path} ({len(records)} results, {len(failed)} failed, {eval_s:.1f}s)"
        + (", logged to W&B" if logged else "")
    )
    return {"path": path, "step": step, "results": records, "failed": failed, "eval_s": eval_s}


def _env_info_once() -> None:
    """Compute lm-eval's environment report once per process instead of once per task.

    `simple_evaluate` ends with `add_env_info`, which runs torch's `collect_env` (several pip and
    shell subprocesses, about 0.5 s). We call `simple_evaluate` once per task so that one failing
    task cannot sink the others, which made the report most of the cost of a tiny-model eval.
    The report is the same for the whole process, so the first one is reused.
    """
    import lm_eval.evaluator as evaluator  # deferred: imports lm_eval

    if getattr(evaluator.add_env_info, "scalelab_once", False):
        return
    compute, saved = evaluator.add_env_info, {}

    def add_env_info(storage: dict) -> None:
        if not saved:
            compute(saved)
        storage.update(saved)

    add_env_info.scalelab_once = True
    evaluator.add_env_info = add_env_info


def _task(name: str, tm, cache: dict | None):
    """The task by name, or its built object from `cache` (built and stored on first use)."""
    if cache is None:
        return name
    if name not in cache:
        from lm_eval.tasks import get_task_dict  # deferred: imports lm_eval

        built = get_task_dict([name], tm)
        if name not in built:  # a group, not a single task: let lm-eval expand it each time
            return name
        cache[name] = built[name]
    return cache[name]


def _version(pkg: str) -> str | None:

    try:
        return version(pkg)
    except PackageNotFoundError:
        return None
