"""No training start waits forever on a C++ extension build lock (a build killed mid-way leaves
torch's lock file behind; DeepSpeed used to build its CPU comm op on every start and wait on it)."""

from __future__ import annotations

from pretrain.engine import extensions
from tests.helpers import REPO, run_cli, tiny_overrides

TINY = str(REPO / "configs/train/tiny.yaml")


def test_stale_build_lock_does_not_hang_train(tiny_data, tmp_path):
    ext = tmp_path / "ext"
    lock = ext / extensions.SHM_OP / "lock"  # where torch's FileBaton takes it for DeepSpeed's op
    lock.parent.mkdir(parents=True)
    lock.touch()
    over = tiny_overrides(
        tiny_data, **{"train.steps": 2, "train.eval_every_steps": 0, "train.checkpoint_every_steps": 0}
    )
    # before the fix this waited on the lock forever (TimeoutExpired)
    res = run_cli(
        ["train", TINY, *over, "--run-dir", "run", "--no-progress"],
        tmp_path,
        env={"TORCH_EXTENSIONS_DIR": str(ext)},
        timeout=240,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").exists()
    assert lock.exists()  # somebody else's lock is never deleted
