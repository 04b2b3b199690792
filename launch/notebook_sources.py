"""Where the notebooks (notebooks/*.ipynb) get their runs: the main job's output, bundled published
data, or a small study the notebook launches itself. Never synthetic data.

Order (`SCALELAB_NB_SOURCE=auto`, the default): the user's own run tree (`runs=` in the notebook's
first cell, or `SCALELAB_NB_RUNS`), then the main job's folder (`SCALELAB_QUICKSTART`, default
`<repo>/quickstart`: `runs/<sweep>/`, `fits/*.json`), then the published data the notebook names
(Epoch's Chinchilla table), then the notebook's study under notebooks/studies/, launched with
`scalelab sweep launch` into `SCALELAB_NB_STUDIES` (default `<repo>/notebooks/.studies`). A sweep
skips finished runs, so a launched study is cached and an interrupted one resumes. The tests pin
`SCALELAB_NB_SOURCE` so that a local quickstart/ folder is never picked up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from rundir.read import find_run_dirs
from rundir.summary import read_summary

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STUDIES = PROJECT_ROOT / "notebooks" / "studies"
SOURCES = ("auto", "runs", "quickstart", "published", "study")


@dataclass(frozen=True)
class Source:
    """What a notebook reads: `kind` (runs | quickstart | published | study), the run tree (None for a
    published table), the main job's fits folder (quickstart only) and a line saying where it came from."""

    kind: str
    runs: Path | None
    fits: Path | None
    note: str

    def fit(self, name: str) -> Path | None:
        """The main job's fit record `fits/<name>.json`, when this source has it."""
        p = self.fits / f"{name}.json" if self.fits else None
        return p if p is not None and p.exists() else None


def quickstart_dir() -> Path:
    return Path(os.environ.get("SCALELAB_QUICKSTART") or PROJECT_ROOT / "quickstart").resolve()


def studies_dir() -> Path:
    return Path(os.environ.get("SCALELAB_NB_STUDIES") or PROJECT_ROOT / "notebooks" / ".studies").resolve()


def _has_done_runs(root: Path) -> bool:
    return root.is_dir() and any((read_summary(d) or {}).get("status") == "done" for d in find_run_dirs(root))


def find_source(
    *,
    runs: str | Path | None = None,
    quickstart: str | None = None,
    published: str | None = None,
    study: str | None = None,
    evaluate: list[str] | None = None,
    launch: bool = True,
) -> Source:
    """The first source that exists, in the module's order. `quickstart`: the sweep's folder name under
    the main job's runs/ ('' when the notebook only needs its fits/); `published`: a line naming the
    bundled data (the notebook loads it); `study`: a spec name under notebooks/studies/ (launched here
    when `launch`, else only located), its finished runs then evaluated by `scalelab sweep eval` with the
    arguments `evaluate` when given."""
    want = os.environ.get("SCALELAB_NB_SOURCE", "auto")
    if want not in SOURCES:
        raise ValueError(f"SCALELAB_NB_SOURCE={want!r}: use one of {', '.join(SOURCES)}")
    runs = runs or os.environ.get("SCALELAB_NB_RUNS")
    if runs and want in ("auto", "runs"):
        root = Path(runs).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"runs={runs}: no such folder")
        return Source("runs", root, None, f"your run tree {root}")
    qs = quickstart_dir()
    if quickstart is not None and want in ("auto", "quickstart"):
        qs_root = qs / "runs" / quickstart if quickstart else None
        fits = qs / "fits"
        if (qs_root is None and fits.is_dir()) or (qs_root is not None and _has_done_runs(qs_root)):
            return Source(
                "quickstart",
                qs_root,
                fits if fits.is_dir() else None,
                f"the main job's output {_shown(qs_root or fits)}",
            )
    if want == "quickstart" and quickstart is not None:
        raise FileNotFoundError(f"SCALELAB_NB_SOURCE=quickstart: no main-job output under {qs} (run `make quickstart`)")
    if published is not None and want in ("auto", "published"):
        return Source("published", None, None, published)
    if study is None:
        raise FileNotFoundError(f"no source for this notebook under SCALELAB_NB_SOURCE={want}")
    root = launch_study(study, evaluate=evaluate) if launch else study_runs(study)
    return Source(
        "study",
        root,
        None,
        f"this notebook's study {_shown(study_spec(study))}, run in {_shown(root)}",
    )


def _shown(path: Path) -> str:
    """A path as the notebook prints it: relative to the repository when inside it (outputs are committed)."""
    try:
        return str(path.relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def study_runs(study: str) -> Path:
    return studies_dir() / "runs" / _spec_name(study)


def study_spec(study: str) -> Path:
    """<study>.yaml from the folder SCALELAB_NB_STUDY_SPECS names (your own version of a study: larger on a GPU
    machine, or shorter), else notebooks/studies/<study>.yaml, else a shipped spec configs/sweeps/<study>.yaml
    (reused as it is)."""
    mine = os.environ.get("SCALELAB_NB_STUDY_SPECS")
    if mine and (Path(mine).expanduser() / f"{study}.yaml").exists():
        return (Path(mine).expanduser() / f"{study}.yaml").resolve()
    own = STUDIES / f"{study}.yaml"
    return own if own.exists() else PROJECT_ROOT / "configs" / "sweeps" / f"{study}.yaml"


def _spec_name(study: str) -> str:
    return yaml.safe_load(study_spec(study).read_text())["name"]


def launch_study(study: str, workers: int = 2, evaluate: list[str] | None = None) -> Path:
    """`scalelab sweep launch <spec>` into the studies folder (its data prepared there too), then, with
    `evaluate`, `scalelab sweep eval <spec> *evaluate`. Finished runs and evaluated runs are skipped, so a
    second call returns in seconds. Returns the run tree; the commands' output goes to <study>.log."""
    root = study_runs(study)
    edits = ["--set", f"runs_dir={root}", "--set", f"set.data.out_dir={studies_dir() / 'data' / 'v512'}"]
    spec = str(study_spec(study))
    _scalelab(
        study, ["sweep", "launch", spec, "--executor", "local", "--workers", str(workers), "--no-progress", *edits]
    )
    if evaluate is not None:
        _scalelab(study, ["sweep", "eval", spec, "--workers", str(workers), "--no-wandb", *edits, *evaluate])
    return root


def _scalelab(study: str, args: list[str]) -> None:
    log = studies_dir() / f"{study}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(f"$ scalelab {' '.join(args)}\n")
        fh.flush()
        cmd = [sys.executable, "-m", "launch.cli", *args]
        env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **os.environ}  # local tasks only: never download
        code = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise RuntimeError(f"`scalelab {args[0]} {args[1]}` of {args[2]} exited {code}: see {log}")
