"""`scalelab sweep plan|launch|status|cancel|eval`.

`sweep eval` lives in `launch.commands.sweep_eval`.
Exit codes: 0 ok, 1 a run failed (or Slurm refused), 2 bad input, 3 stopped by a signal.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from launch.console_tables import human, render
from pretrain.errors import ConfigError, DataError


def register(sub) -> None:
    from launch.commands import sweep_eval as eval_jobs  # deferred: imports numpy/pydantic (a fast scalelab --help)

    p = sub.add_parser(
        "sweep",
        help="plan, launch and follow sweeps of training runs",
        description="Sweeps: a spec file (configs/sweeps/*.yaml) expanded into runs. Exit codes: 0 ok, "
        "1 failed runs, 2 bad spec, 3 stopped by a signal.",
    )
    ss = p.add_subparsers(dest="sweep_command", metavar="ACTION")
    ss.required = True

    def common(q):
        q.add_argument("spec", help="sweep spec YAML (configs/sweeps/...)")
        q.add_argument(
            "--set",
            dest="spec_overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="edit the spec, e.g. --set runs_dir=/scratch/runs/x --set set.data.out_dir=/data/v512",
        )
        q.add_argument("--only", help="comma-separated run names (default: all)")

    q = ss.add_parser("plan", help="expand a spec: runs, N, D, batch, lr, FLOPs, estimated time (dry run)")
    common(q)
    q.add_argument("--format", choices=["table", "csv", "json"], default="table")
    q.add_argument(
        "--executor",
        choices=["local", "slurm", "deepspeed"],
        action="append",
        help="pre-flight the runs against this executor (repeatable; default: those under the spec's `executor:`)",
    )
    q.add_argument(
        "--allow-repeats",
        action="store_true",
        help="plan runs that pass over their unique tokens more than "
        "train.max_epochs_warn times (repeated data on purpose)",
    )
    q.set_defaults(func=cmd_plan)

    q = ss.add_parser("launch", help="start the runs that are not done (idempotent)")
    common(q)
    q.add_argument("--executor", choices=["local", "slurm", "deepspeed"], default="local")
    q.add_argument("--workers", type=int, help="local: runs at once (default: spec executor.local.workers)")
    q.add_argument("--threads", type=int, help="local: torch threads per run (default cores / workers)")
    q.add_argument("--retry-failed", action="store_true", help="also restart runs whose summary says failed")
    q.add_argument("--dry-run", action="store_true", help="slurm/deepspeed: print the script/commands, submit nothing")
    q.add_argument("--hostfile", help="deepspeed: hostfile (overrides executor.deepspeed.hostfile)")
    q.add_argument("--no-progress", action="store_true")
    q.add_argument(
        "--allow-repeats",
        action="store_true",
        help="launch runs that pass over their unique tokens more than "
        "train.max_epochs_warn times (repeated data on purpose)",
    )
    q.set_defaults(func=cmd_launch)

    q = ss.add_parser("status", help="pending/queued/running/done/failed/preempted per run, last loss, progress")
    common(q)
    q.add_argument("--format", choices=["table", "csv", "json"], default="table")
    q.add_argument("--watch", type=float, metavar="SECONDS", help="refresh until nothing is pending or running")
    q.set_defaults(func=cmd_status)

    q = ss.add_parser("cancel", help="scancel the sweep's Slurm tasks and stop local launches (runs checkpoint first)")
    common(q)
    q.set_defaults(func=cmd_cancel)

    eval_jobs.register(ss)


def _wrap(fn):
    def run(args) -> int:
        try:
            return fn(args)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return run


PLAN_COLUMNS = [
    ("name", "run", ""),
    ("id", "id", ""),
    ("non_embedding_params", "N", ""),
    ("params", "params", ""),
    ("tokens", "D", ""),
    ("batch_tokens", "B", ""),
    ("lr", "lr", ""),
    ("steps", "steps", ""),
    ("flops", "FLOPs", "sci"),
    ("est_s", "est. time", "time"),
]


@_wrap
def cmd_plan(args) -> int:

    from launch.commands.preflight import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        configured_executors,
        preflight,
    )
    from launch.sweep.epochs import run_epochs  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.sweep.expand import load_plan  # deferred: imports numpy/pydantic (a fast scalelab --help)

    p = load_plan(args)
    preflight(p, args.executor or configured_executors(p.spec), args.allow_repeats)
    columns = PLAN_COLUMNS + [("epochs", "epochs", "")]
    if any(r.after for r in p.runs):  # kind wsd: where each branch starts
        columns = columns + [("branch_from", "branches from", "")]
    rows = [{k: getattr(r, k) for k, _, _ in PLAN_COLUMNS} for r in p.runs]
    bases = {}
    for row, r in zip(rows, p.runs):
        epochs, basis = run_epochs(r)
        row["epochs"] = "?" if epochs is None else float(f"{epochs:.3g}")
        bases.setdefault(r.cfg.data.name, basis)
        if r.after:
            row["branch_from"] = f"{r.after[0]} step {r.after[1]}"
    render(rows, columns, args.format)
    if args.format == "table":
        tot_f = sum(r.flops for r in p.runs)
        tot_s = sum(r.est_s for r in p.runs)
        workers = p.spec.executor.local.workers
        shared = sum(r.shared_flops for r in p.runs)
        print(
            f"\n{len(p.runs)} runs ({p.spec.kind}) -> {p.root}/<run>; total {tot_f - shared:.2e} FLOPs, "
            f"~{human(tot_s, 'time')} of run time (~{human(tot_s / workers, 'time')} on {workers} local workers)"
        )
        if shared:
            print(
                f"compute: {tot_f - shared:.3g} FLOPs with each stable "
                f"prefix counted once, {tot_f:.3g} as separate runs "
                f"(saving {shared:.3g}, {100 * shared / tot_f:.0f}%)"
            )
        for name, basis in bases.items():
            print(f"epochs over data '{name}': {basis}")
        for note in p.skipped:
            print(f"skipped {note}")
    return 0


@_wrap
def cmd_launch(args) -> int:

    from launch.commands.preflight import preflight  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.executors.deepspeed_multinode import (
        DeepSpeedExecutor,  # deferred: imports numpy/pydantic (a fast scalelab --help)
    )
    from launch.executors.local import LocalExecutor  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.executors.slurm import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        SlurmError,
        SlurmExecutor,
        check_spec,
        sweep_meta_dir,
    )
    from launch.run.worker import start_or_skip  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.sweep.data_jobs import data_jobs, describe  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.sweep.expand import load_plan  # deferred: imports numpy/pydantic (a fast scalelab --help)

    p = load_plan(args)
    spec = p.spec
    if args.hostfile:
        spec.executor.deepspeed.hostfile = args.hostfile
    # exit 2 before anything is queued; runs that will not start (done, stale) need nothing

    starting = [r for r in p.runs if start_or_skip(Path(r.run_dir), args.retry_failed, r.id) == "run"]
    preflight(dataclasses.replace(p, runs=starting), [args.executor], args.allow_repeats)
    if args.executor == "local":
        if args.dry_run:
            for job in data_jobs(p.runs):
                print(
                    "first: scalelab data prepare "
                    f"{job.config_path(sweep_meta_dir(p.root.resolve()))}  # {describe(job)}"
                )
            for r in p.runs:
                print(f"{r.name}: scalelab train {r.run_dir}/launch.yaml --run-dir {r.run_dir}")
            return 0

        loc = spec.executor.local
        ex = LocalExecutor(
            workers=args.workers or loc.workers,
            threads=args.threads or loc.threads,
            gpus_per_run=loc.gpus_per_run,
            progress=not args.no_progress,
            meta_dir=sweep_meta_dir(p.root.resolve()),
            warm_start=loc.warm_start,
        )
        t0 = time.time()
        res = ex.launch(p.runs, retry_failed=args.retry_failed)
        print(
            f"{spec.name}: {len(res.done)} done, {len(res.failed)} failed, {len(res.stopped)} stopped, "
            f"{len(res.skipped)} skipped in {time.time() - t0:.0f}s"
        )
        for name, why in res.skipped.items():
            print(f"  skipped {name}: {why}")
        return res.exit_code
    if args.executor == "slurm":
        check_spec(spec)
        try:
            res = SlurmExecutor(spec).launch(p.runs, retry_failed=args.retry_failed, dry_run=args.dry_run)
        except SlurmError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for name, why in res["skipped"].items():
            print(f"skipped {name}: {why}")
        if args.dry_run:
            return 0
        if res.get("check_job"):
            print(
                f"submitted node check {res['check_job']} (torch, DeepSpeed and "
                f"{spec.executor.slurm.gpus_per_node} GPU(s) on a compute node; the arrays start after it)"
            )
        for dj in res.get("data_jobs") or []:
            print(f"submitted data job {dj['job_id']} (scalelab data prepare: {dj['data']})")
        if res["job_id"]:
            deps = [d for d in res.get("depends_on") or [] if d != res.get("check_job")]
            after = f", after node check {res['check_job']}" if res.get("check_job") else ""
            after += f" and data job(s) {', '.join(deps)}" if deps else ""
            print(f"submitted job array {res['job_id']} ({len(res['runs'])} tasks{after}): {res['script']}")
        for bj in res.get("branch_jobs") or []:
            print(
                f"submitted branch job array {bj['job_id']} ({len(bj['runs'])} tasks, afterok:{bj['depends_on'][0]}: "
                f"after {bj['after']} ends): {bj['script']}"
            )
        if not res["job_id"] and not res.get("branch_jobs"):
            print("nothing to submit")
        return 0

    res = DeepSpeedExecutor(spec).launch(p.runs, retry_failed=args.retry_failed, dry_run=args.dry_run)
    return 1 if res["failed"] else (3 if res.get("stopped") else 0)


STATUS_COLUMNS = [
    ("name", "run", ""),
    ("state", "state", ""),
    ("step", "step", ""),
    ("total_steps", "of", ""),
    ("progress", "progress", "pct"),
    ("loss", "loss", ""),
    ("val_loss", "val loss", ""),
    ("epochs", "epochs", ""),
    ("wall_s", "wall", "time"),
    ("job", "job", ""),
    ("held_by", "held by", ""),
]
# json/csv also carry each run's compute (the table prints the study's in one line): planned FLOPs as a
# separate run, the parent's prefix a branch shares, and what the study computes for it (the
# difference: summed over the rows, the study's compute with each stable prefix counted once).
COMPUTE_COLUMNS = [
    ("flops", "FLOPs", ""),
    ("shared_flops", "shared FLOPs", ""),
    ("computed_flops", "computed FLOPs", ""),
    ("branch_of", "branch of", ""),
    ("branch_step", "branch step", ""),
]


def _status_rows(plan, statuses) -> list[dict]:
    rows = []
    for r, st in zip(plan.runs, statuses):
        row = st.to_dict()
        row.update(
            flops=r.flops,
            shared_flops=r.shared_flops,
            computed_flops=r.flops - r.shared_flops,
            branch_of=r.after[0] if r.after else None,
            branch_step=r.after[1] if r.after else None,
        )
        rows.append(row)
    return rows


@_wrap
def cmd_status(args) -> int:

    from launch.executors.slurm import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        node_check_failure,
        queued_jobs,
    )
    from launch.sweep.expand import load_plan  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.sweep.status import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        compute_line,
        counts,
        sweep_status,
    )

    p = load_plan(args)
    while True:
        sts = sweep_status(p, queued_jobs(p.root))
        c = counts(sts)
        if args.watch and sys.stdout.isatty():
            sys.stdout.write("\x1b[2J\x1b[H")
        if args.format == "table":
            render([s.to_dict() for s in sts], STATUS_COLUMNS, args.format)
        else:
            render(_status_rows(p, sts), STATUS_COLUMNS + COMPUTE_COLUMNS, args.format)
        if args.format == "table":
            print(f"\n{p.spec.name}: " + ", ".join(f"{v} {k}" for k, v in c.items()))
            line = compute_line(p, sts)
            if line:
                print(line)
            for s in sts:
                if s.state in ("failed", "stale") and s.error:
                    print(f"  {s.name}: {s.error.splitlines()[0][:200]}")
            for line in progress_lines(p.runs):
                print(line)

            failed = node_check_failure(p.root)
            if failed:
                print(f"the last node check failed, so its arrays did not start: {failed}")
        if not args.watch or not any(k in c for k in ("pending", "queued", "running")):
            return 0
        time.sleep(args.watch)


@_wrap
def cmd_cancel(args) -> int:

    from launch.commands.sweep_cancel import cancel_sweep  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.sweep.expand import load_plan  # deferred: imports numpy/pydantic (a fast scalelab --help)

    p = load_plan(args)
    return cancel_sweep(p, [r.name for r in p.runs] if args.only else None)


def progress_lines(runs: list, now: float | None = None) -> list[str]:
    """One line per data set of `runs` being prepared in tasks right now: pass, tasks done/total, MB/s, ETA.

    Read from the progress file the running `scalelab data prepare` keeps in its work folder
    (launch.executors.data_tasks); nothing is hashed or resolved, so `sweep status` stays fast."""
    from launch.executors.data_tasks import (  # deferred: imports numpy, pydantic, tokenizers (a fast --help)
        PROGRESS_FILE,
        fmt_seconds,
    )
    from launch.sweep.data_jobs import _data_sets  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from pretrain.data.prepare import output_dir  # deferred: imports numpy, pydantic, tokenizers
    from pretrain.data.tasks import read_json, work_dir  # deferred: imports numpy, pydantic, tokenizers

    now = time.time() if now is None else now
    lines, seen = [], set()
    for r in runs:
        try:
            sets = _data_sets(r.cfg.data)
        except DataError:  # a data section that does not resolve: sweep status names it elsewhere
            continue
        for dcfg in sets:
            out = output_dir(dcfg)
            if out in seen:
                continue
            seen.add(out)
            p = read_json(work_dir(out) / PROGRESS_FILE)
            if not p or p.get("finished"):
                continue
            name = "pass 1 (sample)" if p["pass"] == "sample" else "pass 2 (encode)"
            eta = fmt_seconds(p.get("eta_s"))
            age = now - p.get("at", now)
            stale = f" (last update {fmt_seconds(age)} ago)" if age > 120 else ""
            mb = f"{p['mb']:,.1f}/{p['mb_total']:,.1f} MB"
            rate = f"{p['mb_s']:.2f} MB/s, ETA {eta}{stale}"
            lines.append(f"data '{dcfg.name}': {name} {p['done']}/{p['total']} tasks done, {mb}, {rate}")
    return lines
