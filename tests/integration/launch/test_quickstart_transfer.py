"""Tune once, transfer (`transfer.enabled`), end to end at a tiny scale: the main job's lr sweep on the
smallest IsoFLOP model under μP trains, its lr is chosen, recorded and plotted, and the IsoFLOP spec it
then launches carries the chosen lr and the μP keys (with the depth warning its 4-layer size earns)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers import REPO, requires_corpus

pytestmark = requires_corpus
LRS = [3e-3, 1e-2, 3e-2]  # the fewest a parabola takes: one round of runs


def test_transfer_stage_sweeps_chooses_and_transfers(tiny_data, tmp_path, capsys):
    from launch.quickstart.job import MainJob, load_config
    from launch.quickstart.transfer import planned_configs

    cfg = load_config(
        str(REPO / "configs/quickstart-test.yaml"),
        [
            f"out={tmp_path / 'qs'}",
            "data.overrides=[name=tiny512, tokenizer.vocab_size=512]",  # the session's prepared corpus
            "transfer.enabled=true",
            f"transfer.lrs={LRS}",
            "transfer.tokens=1.0e4",
            "workers=3",  # start-up (torch) dominates these 20-step runs: start them together
        ],
    )
    job = MainJob(cfg)
    job.tune([f"set.data={json.dumps(job.data_section(tiny_data))}", "set.train.seed=0"])
    out = capsys.readouterr().out

    rec = json.loads((tmp_path / "qs" / "transfer" / "lr-sweep.json").read_text())
    assert rec["model"] == "n50k" and [r["lr"] for r in rec["runs"]] == LRS  # the test ladder's smallest
    assert all(r["status"] == "done" and r["val_loss"] > 0 for r in rec["runs"])
    assert rec["mup"] == {"model.parametrization": "mup", "model.mup_base_width": 48, "model.mup_base_head_dim": 12}
    lr = float(f"{rec['lr']:.4g}")
    assert LRS[0] <= rec["lr"] <= LRS[-1] and rec["method"] in ("vertex", "best")
    assert (rec["method"] == "best") == (rec["warning"] is not None and "best grid point" in rec["warning"])
    assert (tmp_path / "qs" / "transfer" / "lr-sweep.png").stat().st_size > 1000
    assert f"transfer: lr {lr:.4g}" in out and "on n50k under μP, model.mup_base_width 48" in out

    path, sets = job.iso_spec()
    spec = yaml.safe_load(path.read_text())
    assert sets == [] and path.name == "isoflop-tiny-mup.yaml" and spec["kind"] == "isoflop"
    assert {k: spec["set"][k] for k in rec["mup"]} == rec["mup"] and spec["set"]["optim.lr"] == lr
    assert job.runs_dir(cfg.isoflop).name == "isoflop-tiny-mup"
    # n200k has 4 layers, the lr sweep's n50k 2: width-μP does not cover that, and the job says so
    assert (
        "warning: the lr sweep and the IsoFLOP runs: 11 runs under model.parametrization mup differ in "
        "model.n_layers (2, 4)" in capsys.readouterr().out
    )

    # the runs it plans (as `sweep plan` would; its data-repetition estimate would cost 20 s here)
    cfgs = planned_configs(path)
    assert len(cfgs) == 10  # 9 at the budgets and the anchor
    assert {(c.optim.lr, c.model.parametrization, c.model.mup_base_width, c.model.mup_base_head_dim) for c in cfgs} == {
        (lr, "mup", 48, 12)
    }


def test_transfer_needs_one_lr_source():
    from launch.quickstart.job import load_config
    from pretrain.errors import ConfigError

    with pytest.raises(ConfigError, match="set hparams_law: false and plan.hparams_from_fit: false"):
        load_config(str(REPO / "configs/quickstart-test.yaml"), ["transfer.enabled=true", "plan.hparams_from_fit=true"])
    with pytest.raises(ConfigError, match="batch_lr.run: false skips the batch-lr law"):
        load_config(str(REPO / "configs/quickstart-test.yaml"), ["batch_lr.run=false", "hparams_law=true"])
    with pytest.raises(ConfigError, match="transfer.lrs"):
        load_config(str(REPO / "configs/quickstart-test.yaml"), ["transfer.lrs=[1e-3, 2e-3]"])
