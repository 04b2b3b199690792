"""`train.compile` through DeepSpeed's engine.compile() with torch.compile's inductor backend on
CPU (generated C++, built with the system's g++): a compiled run trains, its losses are those of
the eager run up to float reassociation (inductor fuses and reorders float32 reductions: measured
~1e-7 relative; asserted within 1e-5), and it resumes from its checkpoint. Without a C++
compiler the run stops before any work with exit 2, naming the key."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import REPO, metrics, run_cli, scalelab, tiny_overrides

TINY = str(REPO / "configs/train/tiny.yaml")


def losses(run) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in metrics(run)]


@pytest.mark.slow  # compiling the tiny model takes ~1 min of CPU
def test_compiled_run_trains_like_eager_and_resumes(tiny_data, tmp_path):
    over = tiny_overrides(
        tiny_data,
        **{"train.steps": 4, "train.checkpoint_every_steps": 2, "train.eval_every_steps": 0, "train.eval_tokens": 512},
    )
    eager = run_cli(["train", TINY, *over, "--run-dir", "eager", "--no-progress"], tmp_path)
    assert eager.returncode == 0, eager.stderr[-2000:]
    args = ["train", TINY, *over, "train.compile=true", "--run-dir", "compiled", "--no-progress"]
    res = run_cli(args, tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    compiled, ref = losses(tmp_path / "compiled"), losses(tmp_path / "eager")
    assert [s for s, _ in compiled] == [1, 2, 3, 4]
    assert [v for _, v in compiled] == pytest.approx([v for _, v in ref], rel=1e-5)
    s = json.loads((tmp_path / "compiled" / "summary.json").read_text())
    assert s["status"] == "done" and s["final_val_loss"] == pytest.approx(
        json.loads((tmp_path / "eager" / "summary.json").read_text())["final_val_loss"], rel=1e-5
    )
    # resume the compiled run from its step-2 checkpoint: the same steps 3-4
    shutil.rmtree(tmp_path / "compiled" / "checkpoints" / "step_4")
    (tmp_path / "compiled" / "summary.json").unlink()
    again = run_cli(args, tmp_path)
    assert again.returncode == 0 and "resumed from checkpoint step_2" in again.stdout, again.stdout[-2000:]
    assert [v for _, v in losses(tmp_path / "compiled")] == pytest.approx([v for _, v in compiled], rel=1e-6)


def test_compile_without_a_cpp_compiler_exits_2_before_any_work(tmp_path):
    over = ["train.steps=2", "train.tokens=null", "train.compile=true", "data.out_dir=" + str(tmp_path / "nodata")]
    res = scalelab("train", TINY, *over, "--run-dir", "run", cwd=tmp_path, env={"PATH": str(tmp_path)}, unset=("CXX",))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "train.compile" in res.stderr and "no C++ compiler was found" in res.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "nodata").exists()
