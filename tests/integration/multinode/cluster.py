"""The two-node cluster of .ci/cluster_up.sh as the multi-node tests see it: its slurm.conf, a command
run on node K (inside its namespaces, on its CPU), the pids it keeps, and the wait for a sweep."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import scalelab
from tests.helpers.ci_gate import unavailable

DEFAULT_CONF = "/var/tmp/scalelab-multinode/slurm.conf"
NODES = ("node1", "node2")
USABLE = ("idle", "mix", "alloc", "comp")


@dataclass
class Nodes:
    conf: Path

    @property
    def state(self) -> Path:
        return self.conf.parent

    @property
    def env(self) -> dict:
        """What a command needs to reach this cluster (not the one-node cluster of .ci/slurm_up.sh)."""
        return {"SLURM_CONF": str(self.conf)}

    def slurm(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env={**os.environ, **self.env})

    def states(self) -> dict[str, str]:
        r = self.slurm("sinfo", "-h", "-N", "-o", "%N %t")
        return dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)

    def pid(self, node: str, what: str) -> int:
        return int((self.state / node / f"{what}.pid").read_text())

    def run(self, node: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
        """`argv` on `node`: its network, hostname and mount namespaces, pinned to its CPU."""
        cpu = str(NODES.index(node))
        holder = str(self.pid(node, "holder"))
        return subprocess.run(
            ["taskset", "-c", cpu, "nsenter", "-t", holder, "-n", "-u", "-m", "--", *argv],
            capture_output=True,
            text=True,
            **kw,
        )

    def private_tmp(self, node: str) -> list[str]:
        """What the node's own /tmp holds, less the shared folders bound into it."""
        binds = self.run(node, ["findmnt", "-rn", "-o", "TARGET"]).stdout.split()
        names = self.run(node, ["ls", "-A", "/tmp"]).stdout.split()
        return sorted(n for n in names if f"/tmp/{n}" not in binds)

    def bring_up(self) -> None:
        """.ci/cluster_up.sh again: idempotent, it restarts only what is gone (a killed slurmd)."""
        repo = Path(__file__).resolve().parents[3]
        r = subprocess.run(["bash", str(repo / ".ci/cluster_up.sh")], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.strip().endswith(f"SLURM_CONF={self.conf}"), r.stdout + r.stderr


def find_cluster() -> Nodes:
    """The cluster, or a skip (a failure under SCALELAB_REQUIRE=multinode) saying why not."""
    conf = Path(os.environ.get("SCALELAB_MULTINODE_CONF") or DEFAULT_CONF)
    how = "run `bash .ci/cluster_up.sh` as root (CI does)"
    if not conf.is_file():
        unavailable("multinode", f"no two-node cluster: {conf} not found; {how}")
    nodes = Nodes(conf)
    try:
        states = nodes.states()
    except OSError as exc:
        unavailable("multinode", f"sinfo failed ({exc}); {how}")
    bad = {n: states.get(n, "missing") for n in NODES if states.get(n, "missing").rstrip("*~#") not in USABLE}
    if bad:
        unavailable("multinode", f"two-node cluster not usable (sinfo with SLURM_CONF={conf}: {bad}); {how}")
    if os.geteuid() != 0:
        unavailable("multinode", "the two-node tests enter the nodes' namespaces: they need root")
    return nodes


def wait_states(spec: Path, want: set[str], timeout: float, env: dict) -> list[dict]:
    t0 = time.time()
    rows: list[dict] = []
    while time.time() - t0 < timeout:
        r = scalelab("sweep", "status", spec, "--format", "json", env=env)
        rows = json.loads(r.stdout)
        if rows and all(x["state"] in want for x in rows):
            return rows
        time.sleep(1)
    pytest.fail(f"timed out waiting for {want}: {[(x['name'], x['state']) for x in rows]}")


def losses(run_dir: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [(r["step"], r["loss"]) for r in rows if "loss" in r]
