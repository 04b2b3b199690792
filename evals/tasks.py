"""Which lm-eval tasks exist, where their data is, and the task directory lm-eval reads.

Local task YAMLs (`evals/tasks/`) name their data files with an `@DATA_ROOT@` placeholder:
lm-eval resolves relative `data_files` against the working directory, so at run time the YAMLs
are copied to a temporary directory with absolute paths, which works from any cwd. Everything
here runs before a model is loaded, so a wrong task name or missing data fails in milliseconds.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from base.errors import UserError

TASK_DIR = Path(__file__).resolve().parent / "tasks"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = "@DATA_ROOT@"

# task -> (yaml file, data file relative to the data root, helper modules)
LOCAL_TASKS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "lambada_openai": ("lambada_openai.yaml", "lambada_openai_test.jsonl", ()),
    "hellaswag": ("hellaswag.yaml", "hellaswag_validation.jsonl.gz", ()),
    "piqa": ("piqa.yaml", "piqa_validation.jsonl", ()),
    "arc_easy": ("arc_easy.yaml", "arc_easy_test.jsonl", ()),
    "arc_challenge": ("arc_challenge.yaml", "arc_challenge_test.jsonl", ()),
    "winogrande": ("winogrande.yaml", "winogrande_validation.jsonl", ("preprocess_winogrande.py",)),
    "tinyshakespeare_bpb": ("tinyshakespeare_bpb.yaml", "tinyshakespeare_val_docs.jsonl", ("bpb.py",)),
}
NO_STOCK_EQUIVALENT = {"tinyshakespeare_bpb"}  # always local, also with --online
BLIMP_TEMPLATE = "blimp_template.yaml.in"

DATA_ORIGINS = (
    "The files are local copies of the public lm-eval task data (see shared/data/README.md): "
    "LAMBADA (EleutherAI/lambada_openai), HellaSwag (Rowan/hellaswag), PIQA (baber/piqa), ARC (allenai/ai2_arc), "
    "WinoGrande (allenai/winogrande), BLiMP (nyu-mll/blimp), TinyShakespeare (karpathy/char-rnn, last 10%). "
    "Set SCALELAB_DATA_ROOT to the folder holding evals/, or pass --online to use the stock lm-eval tasks."
)


class EvalError(UserError, ValueError):
    """Bad evaluation input (task names, data, suite); raised before any model is loaded."""


def data_root() -> Path:
    """`$SCALELAB_DATA_ROOT/evals`, else `<repo>/../shared/data/evals`."""
    env = os.environ.get("SCALELAB_DATA_ROOT")
    base = Path(env) if env else PROJECT_ROOT.parent / "shared" / "data"
    return (base / "evals").resolve()


def blimp_phenomena() -> list[str]:
    """The 67 BLiMP phenomena, as lm-eval names them (read from its installed task files)."""
    import lm_eval  # deferred: imports lm_eval

    folder = Path(lm_eval.__file__).parent / "tasks" / "blimp"
    names = sorted(p.stem for p in folder.glob("*.yaml") if not p.name.startswith("_"))
    return names or sorted(p.name.removesuffix(".jsonl.gz") for p in (data_root() / "blimp").glob("*.jsonl.gz"))


def known_tasks() -> list[str]:
    return sorted(LOCAL_TASKS) + [f"blimp_{n}" for n in blimp_phenomena()]


def data_file(task: str) -> Path:
    if task.startswith("blimp_"):
        return data_root() / "blimp" / f"{task[6:]}.jsonl.gz"
    return data_root() / LOCAL_TASKS[task][1]


def expand(names: list[str]) -> list[str]:
    """Split comma lists, expand `blimp` to every phenomenon, drop duplicates (order kept)."""
    out: list[str] = []
    for item in names:
        for n in (s.strip() for s in str(item).split(",")):
            if not n:
                continue
            for t in [f"blimp_{p}" for p in blimp_phenomena()] if n == "blimp" else [n]:
                if t not in out:
                    out.append(t)
    return out


@dataclass
class ResolvedTasks:
    """Validated task names and the lm-eval TaskManager settings that load them."""

    tasks: list[str]
    online: bool
    include_dir: Path | None = None
    local: list[str] = field(default_factory=list)
    _tmp: tempfile.TemporaryDirectory | None = None

    def task_manager(self):
        from lm_eval.tasks import TaskManager  # deferred: imports lm_eval

        return TaskManager(
            include_path=str(self.include_dir) if self.include_dir else None, include_defaults=self.online
        )

    def cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def resolve_tasks(names: list[str], online: bool = False) -> ResolvedTasks:
    """Task resolution: expand and validate task names (and their local data), materialise the local
    task YAMLs; the caller runs `cleanup()` when done."""
    tasks = expand(names)
    if not tasks:
        raise EvalError("no tasks given (use --tasks a,b or --suite NAME)")
    known = set(known_tasks())
    if online:
        local = [t for t in tasks if t in NO_STOCK_EQUIVALENT]
        stock = _stock_task_names()
        unknown = [t for t in tasks if t not in local and t not in stock]
    else:
        local = list(tasks)
        unknown = [t for t in tasks if t not in known]
    if unknown:
        hint = ", ".join(sorted(LOCAL_TASKS)) + ", blimp, blimp_<phenomenon> (67)"
        raise EvalError(f"unknown task(s): {', '.join(unknown)}. Known {'local ' if not online else ''}tasks: {hint}")
    missing = [(t, data_file(t)) for t in local if not data_file(t).exists()]
    if missing:
        lines = "\n  ".join(f"{t}: {p}" for t, p in missing)
        raise EvalError(f"evaluation data missing:\n  {lines}\n{DATA_ORIGINS}")
    p = ResolvedTasks(tasks=tasks, online=online, local=local)
    if local:
        p._tmp = tempfile.TemporaryDirectory(prefix="scalelab-tasks-")
        p.include_dir = Path(p._tmp.name)
        materialise(local, p.include_dir)
    return p


def materialise(tasks: list[str], dest: Path) -> None:
    """Write the task YAMLs (with absolute data paths) and their helper modules into `dest`."""
    root = str(data_root())
    template = (TASK_DIR / BLIMP_TEMPLATE).read_text()
    for t in tasks:
        if t.startswith("blimp_"):
            text = template.replace("@NAME@", t[6:])
            name = f"{t}.yaml"
        else:
            yaml_name, _, helpers = LOCAL_TASKS[t]
            text = (TASK_DIR / yaml_name).read_text()
            name = yaml_name
            for h in helpers:
                shutil.copyfile(TASK_DIR / h, dest / h)
        (dest / name).write_text(text.replace(PLACEHOLDER, root))


def _stock_task_names() -> set[str]:
    from lm_eval.tasks import TaskManager  # deferred: imports lm_eval

    return set(TaskManager().all_tasks)
