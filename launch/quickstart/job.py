"""`scalelab quickstart`: the main job. A real scaling study on the bundled corpus, end to end.

1. prepare the data (BPE trained on a sample of the corpus);
2. a batch-size x learning-rate sweep through the local executor (live progress) and its law, when
   something uses it (`batch_lr.run: auto`); with `transfer.enabled`, an lr sweep on the smallest
   model under μP whose chosen lr trains every later run under μP (launch.quickstart.transfer);
3. an IsoFLOP sweep whose budgets take lr and batch from that law (DeepSeek's procedure), or
   (`isoflop.schedule: wsd`) the same study from WSD cooldown branches: per size one stable run to
   the largest budget's tokens and a branch at each smaller budget's (launch.quickstart.wsd);
4. Chinchilla approach 2 and 3 fits, with bootstrap intervals, in stated conventions;
5. a plan for a larger budget and one run of it (trained with the recipe the law was fitted
   on: with wsd, a WSD run with the branches' cooldown), while the sweeps' final checkpoints are evaluated
   with an lm-eval suite on the other core;
6. the plan run's evaluation and its predicted loss (prediction interval) vs measured;
7. report.md (with the plots) and the command that opens the dashboard.

Every step is the ordinary `scalelab` command a user would type, run as a subprocess, and every
step is idempotent: sweeps skip finished runs, evaluations skip evaluated checkpoints, and the fits
and the plan are `Step`s (launch.quickstart.steps: command, inputs, outputs) that rerun only when a
hash of their command line and their inputs' contents changes, so a rerun finishes in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from launch.quickstart.evals import already_done
from launch.quickstart.report import write_report
from launch.quickstart.steps import Step
from launch.quickstart.study import isoflop_study
from launch.quickstart.transfer import (
    choose,
    isoflop_spec,
    lr_spec,
    planned_configs,
    transferred_settings,
    write_record,
    write_spec,
)
from launch.quickstart.wsd import plan_run_schedule, write_wsd_spec
from launch.sweep.mup_check import mup_transfer_warning
from pretrain.errors import ConfigError
from rundir.layout import RunDir
from rundir.read import find_run_dirs
from rundir.summary import read_summary
from scaling.planning.emit import run_name
from scaling.planning.record import PlanRecord

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # launch/quickstart/job.py


def register(sub) -> None:
    p = sub.add_parser(
        "quickstart",
        help="run the main job: sweeps, evals, fits, plan, report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "config", nargs="?", default=str(PROJECT_ROOT / "configs/quickstart.yaml"), help="main-job config YAML"
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, e.g. out=/tmp/qs workers=1")
    p.set_defaults(func=cmd_quickstart)


def load_config(path: str, overrides: list[str]):

    from pydantic import ValidationError  # deferred: imports numpy/pydantic (a fast scalelab --help)

    from launch.quickstart.config import QuickstartConfig  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from pretrain.config.loader import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        apply_overrides,
        format_validation_error,
        read_yaml,
    )

    raw = apply_overrides(read_yaml(path), overrides)
    try:
        return QuickstartConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, QuickstartConfig)) from None


def cmd_quickstart(args) -> int:
    if "=" in args.config and not Path(args.config).exists():
        # `scalelab quickstart seed=1 out=q1`: argparse gave the first override to the optional config
        args.overrides, args.config = [args.config, *args.overrides], str(PROJECT_ROOT / "configs/quickstart.yaml")
    try:
        cfg = load_config(args.config, args.overrides)
        return MainJob(cfg).run()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StepFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


class StepFailed(RuntimeError):
    pass


def _children_cpu() -> float:
    """User + system CPU seconds of every finished (waited-for) subprocess so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _batch_lr_law(path: Path) -> str | None:
    """None when `path` is a batch-lr record holding a law; else why not (missing, or per-group
    optima only: fewer than three groups)."""
    from scaling.fits.record import FitRecord, has_exponents  # deferred: imports numpy (a fast scalelab --help)

    if not path.exists():
        return f"{path.name} missing"

    rec = FitRecord.load(path)
    return None if has_exponents(rec) else (rec.get("settings") or {}).get("exponents", "no exponents")


class MainJob:
    def __init__(self, cfg):
        self.cfg = cfg
        self.out = Path(cfg.out).resolve()
        self.timings: dict[str, float] = {}
        self.cumulative: dict[str, float] = {}  # summed over invocations, as saved in timings.json
        self.cpu: dict[str, float] = {}  # subprocesses' CPU seconds, summed over invocations
        self.wsd = cfg.isoflop.schedule == "wsd"
        self.transfer = cfg.transfer.enabled
        self.transferred: dict | None = None  # the keys every run after the lr sweep takes (transfer.enabled)
        self.transfer_result: dict | None = None  # transfer/lr-sweep.json
        self.base_cfgs: list = []  # the lr sweep's run configs: what the μP transfer starts from
        self.batch_lr_skipped: str | None = None  # why stage 2 did not run (batch_lr.run)

    # ----------------------------------------------------------------- helpers
    def scalelab(self, *args: str, allow_fail: bool = False) -> int:
        cmd = [sys.executable, "-m", "launch.cli", *map(str, args)]
        print(f"\n$ scalelab {' '.join(shlex.quote(str(a)) for a in args)}", flush=True)
        code = subprocess.run(cmd, cwd=PROJECT_ROOT).returncode
        if code != 0 and not allow_fail:
            raise StepFailed(f"`scalelab {args[0]} {args[1] if len(args) > 1 else ''}` exited with {code}")
        return code

    def step(self, name: str):
        job = self

        class _Timer:
            def __enter__(self):
                print(f"\n=== {name} ===", flush=True)
                self.t0, self.cpu0 = time.perf_counter(), _children_cpu()

            def __exit__(self, *exc):
                job.record_time(name, time.perf_counter() - self.t0, _children_cpu() - self.cpu0)

        return _Timer()

    def record_time(self, name: str, seconds: float, cpu_seconds: float | None = None) -> None:
        """This invocation's seconds for a step, and the sum over every invocation in `timings.json`
        (a rerun reuses finished work, so its own seconds alone would hide what the study cost);
        also the CPU seconds its subprocesses used (user + system), summed the same way."""
        self.timings[name] = round(seconds, 1)
        path = self.out / "timings.json"
        try:
            saved = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            saved = {}
        cumulative = saved.setdefault("cumulative_seconds", {})
        cumulative[name] = round(cumulative.get(name, 0.0) + seconds, 1)
        if cpu_seconds is not None:
            cpu = saved.setdefault("cumulative_cpu_seconds", {})
            cpu[name] = round(cpu.get(name, 0.0) + cpu_seconds, 1)
            self.cpu[name] = cpu[name]
        path.write_text(json.dumps(saved, indent=1) + "\n")
        self.cumulative = cumulative

    def _spec(self, step) -> dict:
        spec = yaml.safe_load(
            (PROJECT_ROOT / step.spec).read_text() if not Path(step.spec).is_absolute() else Path(step.spec).read_text()
        )
        return spec

    def runs_dir(self, step) -> Path:
        name = self._spec(step)["name"]
        if step is self.cfg.isoflop:
            name += ("-wsd" if self.wsd else "") + (f"-{self.cfg.transfer.parametrization}" if self.transfer else "")
        return self.out / "runs" / name

    def lr_runs_dir(self) -> Path:
        """Where the μP lr sweep's runs go (transfer.enabled)."""
        return self.out / "runs" / f"{self._spec(self.cfg.isoflop)['name']}-{self.cfg.transfer.parametrization}-lr"

    def iso_spec(self) -> tuple[Path, list[str]]:
        """The IsoFLOP sweep to launch and its `--set` edits: the spec as it is, or (schedule wsd)
        its conversion to WSD branches, written to specs/ in the output folder."""
        step = self.cfg.isoflop
        spec = Path(step.spec) if Path(step.spec).is_absolute() else PROJECT_ROOT / step.spec
        if self.transferred is not None:  # every run under μP with the lr the sweep chose
            data = isoflop_spec(spec, step.set, self.transferred, step.wsd if self.wsd else None)
            what = "the IsoFLOP study under μP with the lr of the lr sweep on its smallest model"
            path = write_spec(data, self.out / "specs", spec, what)
            self.warn_mup(planned_configs(path), "the IsoFLOP runs")
            return path, []
        if not self.wsd:
            return spec, list(step.set)

        return write_wsd_spec(spec, step.set, step.wsd, self.out / "specs"), []

    def data_settings(self) -> tuple[str, int, Path]:
        dcfg = self.data_config()
        return dcfg.name, dcfg.tokenizer.vocab_size, self.out / "data" / dcfg.name

    def data_config(self):

        from pretrain.data.load import load_data_config  # deferred: imports pydantic (a fast scalelab --help)

        return load_data_config(PROJECT_ROOT / self.cfg.data.config, self.cfg.data.overrides)

    def data_section(self, data_dir: Path) -> dict:
        """The whole data section every run trains on (the prepared folder included), so no run
        re-resolves a preset on its own and the fits' recipe names the data exactly."""
        return {**self.data_config().model_dump(mode="json", exclude_defaults=True), "out_dir": str(data_dir)}

    def done_runs(self, root: Path) -> list[Path]:

        return [d for d in find_run_dirs(root) if (read_summary(d) or {}).get("status") == "done"]

    # ------------------------------------------------------------------- steps
    def run(self) -> int:
        t0, cpu0 = time.perf_counter(), _children_cpu()
        self.out.mkdir(parents=True, exist_ok=True)
        name, vocab, data_dir = self.data_settings()
        data_set = [f"set.data={json.dumps(self.data_section(data_dir))}", f"set.train.seed={self.cfg.seed}"]

        with self.step("1. data"):
            self.scalelab(
                "data", "prepare", PROJECT_ROOT / self.cfg.data.config, *self.cfg.data.overrides, f"out_dir={data_dir}"
            )

        iso_runs, bslr_runs = self.runs_dir(self.cfg.isoflop), self.runs_dir(self.cfg.batch_lr)
        fits = self.out / "fits"
        boot = [str(self.cfg.fit.bootstrap), "--seed", str(self.cfg.seed)]
        self.batch_lr_skipped = None if self.cfg.batch_lr_runs() else self.skip_note()
        if self.batch_lr_skipped:
            print(
                f"\n=== 2. batch-size x learning-rate sweep and law: skipped ===\n{self.batch_lr_skipped}", flush=True
            )
        else:
            with self.step("2. batch-size x learning-rate sweep and law"):
                self.sweep(self.cfg.batch_lr, PROJECT_ROOT / self.cfg.batch_lr.spec, self.cfg.batch_lr.set, data_set)
                self.fit(
                    ["batch-lr", bslr_runs, "--bootstrap", *boot, "--optimum", self.cfg.fit.batch_lr_optimum],
                    fits / "batch-lr",
                    bslr_runs,
                    required=False,
                )
        if self.transfer:
            with self.step("2b. μP lr sweep on the smallest model (tune once, transfer)"):
                self.tune(data_set)

        iso_step = "3. IsoFLOP sweep" + (" (WSD branches)" if self.wsd else "")
        with self.step(iso_step):
            hparams = []
            law_note = _batch_lr_law(fits / "batch-lr.json")
            if self.cfg.hparams_law and law_note is None:
                # DeepSeek's procedure: each budget's runs train with the lr and batch the law gives there
                hparams = [f"isoflop.hparams_fit={fits / 'batch-lr.json'}"]
            elif self.cfg.hparams_law:
                print(f"warning: no batch-lr law ({law_note}): the IsoFLOP runs keep the spec's lr and batch")
            self.sweep(self.cfg.isoflop, *self.iso_spec(), data_set, hparams)

        with self.step("4. scaling-law fits"):
            # approach 3 drives the plan; approach 2 needs interior IsoFLOP minima and may not find them
            emb = self.cfg.fit.max_embedding_fraction
            a3_only = ["--max-embedding-fraction", str(emb)] if emb else []
            for approach in ("3", "2"):
                self.fit(
                    [
                        "chinchilla",
                        iso_runs,
                        "--approach",
                        approach,
                        "--bootstrap",
                        *boot,
                        *(a3_only if approach == "3" else []),
                    ],
                    fits / f"chinchilla-a{approach}",
                    iso_runs,
                    required=approach == "3",
                )

        with self.step("5. plan, its run, and evaluation of the sweeps (in parallel)"):
            # A tiny model's training gains little from a second thread, so the sweeps' checkpoints
            # are evaluated on the other core while the plan's run trains on one.
            evals = self.start_evaluation(
                self.done_runs(iso_runs) + (self.done_runs(bslr_runs) if not self.batch_lr_skipped else []), workers=1
            )
            plan_run = self.plan_and_train(fits, iso_runs, threads=self.cfg.plan.threads or (1 if evals else None))
            self.wait_evaluation(evals)

        with self.step("6. evaluation of the plan's run, predicted vs measured"):
            self.wait_evaluation(self.start_evaluation([plan_run]))
            comparison = self.compare(fits / "chinchilla-a3.json", plan_run)

        study = isoflop_study(iso_runs, self.cfg.isoflop, self.cumulative.get(iso_step), self.cpu.get(iso_step))
        if self.cfg.plan.next_sweep:
            with self.step("6b. the proposed next sweep, refit and re-plan"):
                self.next_sweep(fits, iso_runs, study)
        self.record_time("total", time.perf_counter() - t0, _children_cpu() - cpu0)
        with self.step("7. report"):
            report = write_report(
                self.out,
                iso_runs,
                bslr_runs,
                fits,
                plan_run,
                comparison,
                self.timings,
                self.cumulative,
                study=study,
                cpu=self.cpu,
                batch_lr_skipped=self.batch_lr_skipped,
                transfer=self.transfer_result,
            )
        self.announce(report, study["line"], comparison, fits)
        return 0

    def announce(self, report: Path, study_line: str, comparison: dict, fits: Path) -> None:
        """The closing lines: where the report is, the study, predicted vs measured, the dashboard command."""
        print(f"\nreport: {report}")
        print(study_line)
        print(
            f"predicted loss {comparison['predicted']:.4f} (95% prediction interval "
            f"{comparison['interval'][0]:.4f}-{comparison['interval'][1]:.4f})"
            f" vs measured {comparison['measured']:.4f}: relative error {comparison['rel_error']:+.2%}"
        )
        print(f"open the dashboard:  scalelab dashboard --runs {self.out / 'runs'} --fits {fits}")

    def skip_note(self) -> str:
        """Why stage 2 does not run, for the log and the report."""
        if self.cfg.batch_lr.run is False:
            return "batch_lr.run: false: the batch-size x lr sweep and its law are not run"
        return (
            "batch_lr.run: auto: nothing uses the batch-lr law (hparams_law: false, plan.hparams_from_fit: false), "
            "so its sweep is not run; set batch_lr.run: true to run it anyway"
        )

    def tune(self, data_set: list[str]) -> None:
        """Tune once: the lr sweep on the smallest IsoFLOP model under μP, the lr chosen from it, and
        the keys every later run takes (self.transferred)."""
        t = self.cfg.transfer
        iso = self.cfg.isoflop
        src = Path(iso.spec) if Path(iso.spec).is_absolute() else PROJECT_ROOT / iso.spec
        data, model, mup = lr_spec(src, iso.set, t)
        base = mup["model.mup_base_width"]
        what = f"lr sweep of {model} under μP (model.mup_base_width {base}) for the IsoFLOP study"
        path = write_spec(data, self.out / "specs", src, what)
        self.base_cfgs = planned_configs(path)[:1]  # the runs differ in lr only
        runs = self.lr_runs_dir()
        self.scalelab(
            "sweep",
            "launch",
            path,
            "--executor",
            "local",
            "--workers",
            self.cfg.workers,
            *[a for s in [f"runs_dir={runs}", *data_set] for a in ("--set", s)],
            allow_fail=True,
        )
        result = choose(runs, t.lrs, model, mup)
        write_record(result, self.out / "transfer")
        self.transfer_result = result
        self.transferred = transferred_settings(mup, result["lr"])
        how = "the vertex of a parabola in log lr" if result["method"] == "vertex" else "the best grid point"
        print(
            f"transfer: lr {self.transferred['optim.lr']:.4g} ({how}) on {model} under μP, "
            f"model.mup_base_width {base}: every IsoFLOP run, anchor and the plan's run train with it"
        )
        if result.get("warning"):
            print(f"warning: lr sweep: {result['warning']}")

    def warn_mup(self, cfgs: list, what: str) -> None:
        """The main job's μP check across sweeps: what the lr was tuned on vs the runs it is used for."""
        warning = mup_transfer_warning(self.base_cfgs + list(cfgs))
        if warning:
            print(f"warning: the lr sweep and {what}: {warning.removeprefix('warning: ')}")

    def sweep(self, step, spec: Path, spec_set: list[str], data_set: list[str], extra: list[str] = ()) -> None:
        sets = [f"runs_dir={self.runs_dir(step)}", *data_set, *spec_set, *extra]
        code = self.scalelab(
            "sweep",
            "launch",
            spec,
            "--executor",
            "local",
            "--workers",
            self.cfg.workers,
            *[a for s in sets for a in ("--set", s)],
            allow_fail=True,
        )
        if code != 0:
            print(f"warning: some runs of {spec} did not finish (exit {code}); continuing with the finished ones")

    def start_evaluation(self, runs: list[Path], workers: int | None = None) -> list[subprocess.Popen]:
        """Start `scalelab eval` on the runs not yet evaluated, batched into one process per worker
        (lm-eval, torch and each task's data are loaded once per process)."""

        todo = [r for r in runs if not already_done(r, self.cfg.eval.suite)]
        if not todo:
            print(f"evaluations up to date ({len(runs)} runs)")
            return []
        workers = max(1, min(workers or self.cfg.workers, len(todo)))
        limit = [] if self.cfg.eval.limit is None else ["--limit", str(self.cfg.eval.limit)]
        if self.cfg.eval.tasks:
            limit += ["--tasks", ",".join(self.cfg.eval.tasks)]
        procs = []
        for w in range(workers):
            chunk = todo[w::workers]
            cmd = [
                sys.executable,
                "-m",
                "launch.quickstart.evals",
                *map(str, chunk),
                "--suite",
                self.cfg.eval.suite,
                *limit,
                "--threads",
                str(max(1, (os.cpu_count() or 1) // max(2, workers))),
            ]
            print(
                f"\n$ scalelab eval <{len(chunk)} runs> --suite "
                f"{self.cfg.eval.suite} {' '.join(limit)}  (worker {w + 1}/{workers})",
                flush=True,
            )
            # lm-eval's per-task progress bars would bury the study's own output
            procs.append(subprocess.Popen(cmd, cwd=PROJECT_ROOT, env={**os.environ, "TQDM_DISABLE": "1"}))
        return procs

    def wait_evaluation(self, procs: list[subprocess.Popen]) -> None:
        if any(p.wait() != 0 for p in procs):
            print("warning: some evaluations failed; the study goes on without them")

    def fit(self, args: list, stem: Path, runs: Path, required: bool = True) -> None:
        out = stem.with_suffix(".json")
        conv = ["--n-kind", self.cfg.fit.n_kind] + (
            ["--compute-kind", self.cfg.fit.compute_kind] if self.cfg.fit.compute_kind else []
        )
        step = Step.of(
            out.name,
            ["fit", *args, *conv, "--out", out, "--plot", stem.with_suffix(".png")],
            inputs=[RunDir(p).summary for p in self.done_runs(runs)],  # a run added, removed or changed refits
            outputs=[out],
        )
        code = step.run(self.scalelab, allow_fail=not required)
        if code not in (None, 0):
            print(f"warning: the {args[0]} fit failed; the plan goes on without it")

    def next_sweep(self, fits: Path, iso_runs: Path, study: dict) -> None:
        """Train the runs `scalelab study next` proposes (plan/next.yaml, launch.quickstart.next_sweep),
        refit approach 3 on the IsoFLOP runs and them, and re-plan (plan/next-replan.json)."""
        from launch.quickstart.next_sweep import propose_next, refit_and_replan

        got = propose_next(self.out, fits, study)
        if isinstance(got, str):
            print(f"warning: plan.next_sweep: {got}")
            return
        runs = self.out / "runs" / "next"
        self.scalelab(
            "sweep", "launch", got[1], "--executor", "local", "--workers", self.cfg.workers, "--set", f"runs_dir={runs}"
        )
        d = refit_and_replan(self.out, fits, iso_runs, runs)
        for b in d["budgets"]:
            print(f"{b['multiplier']:g}x: verdict {b['before']['status']} -> {b['after']['status']}")

    def plan_and_train(self, fits: Path, iso_runs: Path, threads: int | None = None) -> Path:
        """Plan for `compute_multiplier` x the largest IsoFLOP budget (in the fit's own compute
        convention), then train the emitted config as it is: it carries the sweep runs' recipe
        and data, so the run is trained like the runs the law was fitted on."""

        from scaling.fits.record import FitRecord  # deferred: imports numpy (a fast scalelab --help)
        from scaling.planning.plan import budget  # deferred: imports numpy (a fast scalelab --help)

        a3 = fits / "chinchilla-a3.json"
        if not a3.exists():
            raise StepFailed(f"no approach-3 fit ({a3}): nothing to plan with")
        compute = budget(FitRecord.load(a3), self.cfg.plan.compute_multiplier)
        plan_dir = self.out / "plan"
        plan_dir.mkdir(parents=True, exist_ok=True)
        emitted = plan_dir / "emitted.yaml"
        fit_args = ["--fit", a3]
        if self.cfg.plan.hparams_from_fit and _batch_lr_law(fits / "batch-lr.json") is None:
            fit_args += ["--fit", fits / "batch-lr.json"]
        if (fits / "chinchilla-a2.json").exists():  # the verdict compares the approaches' exponents
            fit_args += ["--fit", fits / "chinchilla-a2.json"]
        Step.of(
            "plan",
            [
                "plan",
                *fit_args,
                "--compute",
                f"{compute:.6g}",
                "--emit-config",
                emitted,
                "--force",  # the run is the honest test of the law whatever its verdict; the report states the verdict
                "--out",
                plan_dir / "plan.json",
            ],
            # the batch-lr record even when unused: a new law may now be used; approach 2's: the verdict reads it
            inputs=[a3, fits / "batch-lr.json", fits / "chinchilla-a2.json"],
            outputs=[plan_dir / "plan.json", emitted],
        ).run(self.scalelab)
        # `scalelab plan --emit-config` wrote the config by scaling.planning.emit.to_train_config, which names it so
        run_dir = (
            self.out
            / "runs"
            / "plan"
            / (
                run_name(PlanRecord.load(plan_dir / "plan.json"))
                + ("-wsd" if self.wsd else "")
                + (f"-{self.cfg.transfer.parametrization}" if self.transfer else "")
            )
        )
        extra = [f"train.threads={threads}"] if threads else []
        if self.transferred is not None:  # the plan's run trains as the IsoFLOP runs did: μP, the chosen lr
            from pretrain.config.loader import load_train_config  # deferred: imports pydantic (a fast scalelab --help)

            extra += [f"{k}={v}" for k, v in self.transferred.items()]
            self.warn_mup([load_train_config(emitted, extra)], "the plan's run")
        if self.wsd:  # the law is tested on a run trained like its points: WSD with the branches' cooldown
            extra += plan_run_schedule(self.cfg.isoflop.wsd)
        self.scalelab(
            "train",
            emitted,
            "wandb.mode=offline",
            "wandb.group=plan",
            f"train.seed={self.cfg.seed}",
            *extra,
            "--run-dir",
            run_dir,
        )
        return run_dir

    def compare(self, fit_path: Path, run: Path) -> dict:
        """Approach 3's prediction for the run actually trained (its N of the fit's kind and its
        tokens) with the 95% prediction interval, vs its measured validation loss."""
        from scaling.core.conventions import N_COLUMNS  # deferred: imports numpy (a fast scalelab --help)
        from scaling.fits.record import FitRecord  # deferred: imports numpy (a fast scalelab --help)
        from scaling.laws.prediction import predict_loss  # deferred: imports numpy (a fast scalelab --help)

        rec = FitRecord.load(fit_path)
        s = json.loads(RunDir(run).summary.read_text())
        kind = (rec.get("conventions") or {}).get("n_kind", "total")
        n, d = float(s[N_COLUMNS[kind]]), float(s["tokens"])
        measured = s["final_val_loss"] if s.get("final_val_loss") is not None else s["final_loss"]
        pred = predict_loss(rec, n, d)
        out = {
            "run": str(run),
            "N": n,
            "n_kind": kind,
            "D": d,
            "params": s["params"],
            "predicted": pred["loss"],
            "interval": pred["interval"],
            "interval_kind": pred["interval_kind"],
            "parameter_interval": pred.get("parameter_interval"),
            "measured": measured,
            "rel_error": (measured - pred["loss"]) / pred["loss"],
            "inside": pred["interval"][0] <= measured <= pred["interval"][1],
            "epochs": s.get("epochs"),
            "conventions": rec.get("conventions"),
        }
        (self.out / "plan" / "comparison.json").write_text(json.dumps(out, indent=2) + "\n")
        return out
