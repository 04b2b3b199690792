"""What a multi-node run needs from the process environment: ranks per node from either launcher's
variable, a lost peer named by host, the variables the hostfile executor forwards to remote ranks."""

from __future__ import annotations

import torch

from launch.run.ds_env import write_env_file
from pretrain.engine.distributed import DistInfo, env_local_world_size, name_peers


def test_local_ranks_from_srun_or_the_deepspeed_launcher(monkeypatch):
    for k in ("LOCAL_WORLD_SIZE", "LOCAL_SIZE"):
        monkeypatch.delenv(k, raising=False)
    assert env_local_world_size(4) == 4  # neither set: every rank is local
    monkeypatch.setenv("LOCAL_SIZE", "1")  # the DeepSpeed launcher, one rank on each of 4 nodes
    assert env_local_world_size(4) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # torchrun / the srun shim
    assert env_local_world_size(4) == 2


def test_a_failed_collective_names_the_lost_peer_by_host():
    info = DistInfo(0, 3, 0, 1, torch.device("cpu"))
    info.ranks = [
        {"rank": 0, "host": "node1", "addr": "10.77.0.1"},
        {"rank": 1, "host": "node2", "addr": "10.77.0.2"},
        {"rank": 2, "host": "node2", "addr": "10.77.0.2"},
    ]
    err = "RuntimeError: [pair.cc:537] Read error [10.77.0.2]:62173: Connection reset by peer"
    assert name_peers(err, info) == f"lost peer ranks 1, 2 on node2 (10.77.0.2): {err}"
    assert name_peers("ValueError: something else", info) == "ValueError: something else"
    assert name_peers(err, DistInfo(0, 1, 0, 1, torch.device("cpu"))) == err  # no rank map yet


def test_the_hostfile_executor_forwards_what_ranks_need(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / ".deepspeed_env").write_text("MY_VAR=mine\nHF_HUB_OFFLINE=0\n")  # the user's own file wins
    env = {
        "SCALELAB_DATA_ROOT": "/data",
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "offline",
        "OMP_NUM_THREADS": "1",
        "PATH": "/venv/bin:/usr/bin",
        "SECRET_TOKEN": "x",  # not forwarded
        "WANDB_NOTES": 'has "quotes"',  # would break the launcher's quoting: left out
    }
    (tmp_path / "run").mkdir()
    path = write_env_file(tmp_path / "run", env)
    lines = dict(line.split("=", 1) for line in path.read_text().splitlines())
    assert lines == {
        "HF_HUB_OFFLINE": "0",
        "OMP_NUM_THREADS": "1",
        "PATH": "/venv/bin:/usr/bin",
        "SCALELAB_DATA_ROOT": "/data",
        "WANDB_MODE": "offline",
        "MY_VAR": "mine",
    }
