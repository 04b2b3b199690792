"""What tests share, by concern: the CLI in or out of process (cli, inprocess), the data they train
on and sweep folders (data), run directories read and written (runs), tiny models (models), 2-rank
runs in one launch (ranks), the trainer with a recording callback (trainer), CI's service gate
(ci_gate), a notebook executed in a fresh kernel (notebooks), a script outside the packages imported
for its functions (cli.load_script). Fixtures and collection hooks are in tests/conftest.py."""

from base.ports import free_port
from tests.helpers.cli import (
    REPO,
    SCALELAB,
    children,
    holders,
    kill_after_step,
    load_script,
    run_cli,
    scalelab,
    spawn,
    start,
    wait_for_step,
)
from tests.helpers.data import (
    SHARED,
    data_root,
    epoch_csv,
    prepared_data,
    requires_corpus,
    tiny_overrides,
    write_base,
    write_spec,
)
from tests.helpers.models import EOT, SAMPLE_TEXT, tiny_model, tiny_model_config, tiny_tokenizer, write_run_dir
from tests.helpers.ranks import two_rank_group
from tests.helpers.runs import (
    complete_checkpoint,
    isoflop_truth,
    k_trainer,
    metrics,
    metrics_steps,
    small_run,
    summary,
    write_isoflop_tree,
    write_run,
)

__all__ = [
    "REPO",
    "SCALELAB",
    "SHARED",
    "EOT",
    "SAMPLE_TEXT",
    "children",
    "complete_checkpoint",
    "data_root",
    "epoch_csv",
    "free_port",
    "holders",
    "isoflop_truth",
    "k_trainer",
    "kill_after_step",
    "load_script",
    "metrics",
    "metrics_steps",
    "prepared_data",
    "requires_corpus",
    "run_cli",
    "scalelab",
    "small_run",
    "spawn",
    "start",
    "summary",
    "tiny_model",
    "tiny_model_config",
    "tiny_overrides",
    "tiny_tokenizer",
    "two_rank_group",
    "wait_for_step",
    "write_base",
    "write_isoflop_tree",
    "write_run",
    "write_run_dir",
    "write_spec",
]
