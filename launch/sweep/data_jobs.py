"""`scalelab data prepare` as a job of its own in sweeps.

Before a launch starts runs, the data sets they train on (for a mixture, each component that is
prepared from a config) are checked against their prepared folders (`prepared_state`: input
hashes and settings, nothing is built). Each one that is missing or out of date becomes one
job: `scalelab data prepare <config>` on a data config written to `<runs_dir>/.sweep/`. The
local executor runs these jobs before its first run; the Slurm executor submits each as its
own sbatch job and makes the run array depend on them (`--dependency=afterok:...`). The
trainers then find their data prepared and only check it, instead of each preparing it
behind a lock.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pretrain.data.config import DataConfig
from pretrain.data.mixture import component_configs
from pretrain.errors import ConfigError, DataError


@dataclass
class DataJob:
    name: str
    config: DataConfig  # out_dir made absolute: the job and the runs agree on the folder
    reason: str
    runs: list[str] = field(default_factory=list)  # runs that need it

    @property
    def key(self) -> str:
        text = json.dumps(self.config.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    @property
    def out_dir(self) -> Path:
        return Path(self.config.out_dir)

    def config_path(self, meta_dir: Path) -> Path:
        return meta_dir / f"data-{self.name}-{self.key}.yaml"

    def log_path(self, meta_dir: Path) -> Path:
        return meta_dir / f"data-{self.name}-{self.key}.log"


def _data_sets(cfg: DataConfig) -> list[DataConfig]:
    """The data configs a run's `data` section prepares: itself, or a mixture's config components."""
    if cfg.mixture is None:
        return [cfg]

    return [c for _, c in component_configs(cfg)]


def data_jobs(runs: list) -> list[DataJob]:
    """The distinct data sets of `runs` (planned runs) that are not prepared and up to date."""
    from pretrain.data.prepare import output_dir, prepared_state  # deferred: imports tokenizers

    jobs: dict[str, DataJob] = {}
    checked: dict[str, bool] = {}
    for r in runs:
        try:
            sets = _data_sets(r.cfg.data)
        except DataError as exc:
            raise ConfigError(f"run {r.name}: {exc}") from None
        for dcfg in sets:
            dcfg = dcfg.model_copy(update={"out_dir": str(output_dir(dcfg))})
            job = DataJob(dcfg.name, dcfg, "")
            if job.key not in checked:
                try:
                    ok, reason = prepared_state(dcfg)
                except DataError as exc:
                    raise ConfigError(f"run {r.name}: data '{dcfg.name}': {exc}") from None
                checked[job.key] = ok
                if not ok:
                    job.reason = reason
                    jobs[job.key] = job
            if job.key in jobs:
                jobs[job.key].runs.append(r.name)
    return list(jobs.values())


def write_config(job: DataJob, meta_dir: Path) -> Path:
    meta_dir.mkdir(parents=True, exist_ok=True)
    path = job.config_path(meta_dir)
    text = f"# written by scalelab sweep: data '{job.name}' for {len(job.runs)} run(s); do not edit\n" + yaml.safe_dump(
        job.config.model_dump(mode="json"), sort_keys=False
    )
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def prepare_argv(config_path: Path, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "launch.cli", "data", "prepare", str(config_path)]


def describe(job: DataJob) -> str:
    return f"data '{job.name}' -> {job.out_dir} for {len(job.runs)} run(s) ({job.reason})"


def run_locally(jobs: list[DataJob], meta_dir: Path, say) -> dict[str, str]:
    """Prepare each data set in turn (a `scalelab data prepare` process each, output in its log).

    Returns {run name: why it cannot start} for the runs whose data failed to prepare."""
    blocked: dict[str, str] = {}
    for job in jobs:
        path = write_config(job, meta_dir)
        log = job.log_path(meta_dir)
        argv = prepare_argv(path)
        say(f"prepare {describe(job)}; log {log}")
        with open(log, "ab") as fh:
            fh.write(f"=== {' '.join(shlex.quote(a) for a in argv)}\n".encode())
            fh.flush()
            code = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        if code != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            say(f"FAILED data '{job.name}' (exit {code}): " + " | ".join(tail))
            for name in job.runs:
                blocked[name] = f"data '{job.name}' could not be prepared (see {log})"
        else:
            say(f"prepared data '{job.name}'")
    return blocked


def is_local_path(name: str | None) -> bool:
    """A data set or tokenizer given as a path (./x, /x, ~/x), not as a name on the Hugging Face Hub."""
    return (name or "").startswith((".", "/", "~"))


def reads_the_hub(dcfg: DataConfig) -> str | None:
    """What a data job would fetch from the Hugging Face Hub (a data set name, a tokenizer name), or None."""
    hub = [
        src.hf_dataset
        for which in ("sources", "val_sources")
        for src in (getattr(dcfg, which) or [])
        if src.path is None and src.hf_dataset and not is_local_path(src.hf_dataset)
    ]
    tok = dcfg.tokenizer
    if tok.kind == "hf" and tok.path and not is_local_path(tok.path) and not Path(tok.path).expanduser().exists():
        hub.append(f"tokenizer {tok.path}")
    return ", ".join(hub) or None
