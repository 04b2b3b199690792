"""Two nodes against one: the same data-parallel run as 2 nodes x 1 rank and as 1 node x 2 ranks.

    sudo bash .ci/cluster_up.sh && .venv/bin/python benchmarks/multinode.py [--steps 40] [--model n1600k] [--keep]

Runs on the two-node cluster of .ci/cluster_up.sh (two network namespaces on this machine, one CPU
each, a veth pair per node on a bridge; needs root). Each configuration trains the same run
(ZeRO-1, fp32, gloo, one thread per rank, 8 sequences per step) and reports, over the timed log
steps after the first (warm-up):

- step_s: median `time/step_s` (the trainer's whole-step time, max over ranks);
- comm_s: median `time/comm_s` (seconds in DeepSpeed's collectives: ZeRO-1's gradient all-reduce);
- grad MB: gradient bytes all-reduced per step (every trainable parameter, fp32: 4 bytes each;
  a ring all-reduce moves about twice that per rank);
- vs 1 node: step_s over the one-node configuration's step_s measured in the same invocation.

Configurations, in this order (the one-node reference is measured first and last, averaged, as
the machine's speed drifts with other load): 1 node x 2 ranks (this host's namespace, pinned to the
two CPUs the nodes use); 2 nodes x 1 rank (`srun`, one rank per node, over the virtual network);
the same with each node's link limited to 1 Gbit/s (`tc qdisc add dev eth0 root tbf rate 1gbit
burst 256kb latency 50ms` in each node, removed afterwards). The node-to-node TCP bandwidth is
measured before each two-node configuration (200 MB from node1 to node2, Python sockets).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from base.ports import free_port  # noqa: E402
from tests.helpers.data import SHARED, prepared_data  # noqa: E402  (the repository's packages, from any directory)

CONF = Path(os.environ.get("SCALELAB_MULTINODE_CONF") or "/var/tmp/scalelab-multinode/slurm.conf")
TBF = ["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "1gbit", "burst", "256kb", "latency", "50ms"]


def node_run(node: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
    holder = (CONF.parent / node / "holder.pid").read_text().strip()
    cpu = str(int(node[-1]) - 1)
    return subprocess.run(
        ["taskset", "-c", cpu, "nsenter", "-t", holder, "-n", "-u", "-m", "--", *argv],
        capture_output=True,
        text=True,
        **kw,
    )


SERVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 5201)); s.listen(1)
print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = None
while True:
    b = c.recv(1 << 20)
    if not b: break
    t0 = t0 or time.perf_counter(); n += len(b)
print(n / (time.perf_counter() - t0), flush=True)
"""
CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5201)); buf = b"x" * (1 << 20)
for _ in range(200): c.sendall(buf)
c.close()
"""


def bandwidth() -> float:
    """Bytes/s of one TCP stream node1 -> node2."""
    holder = (CONF.parent / "node2" / "holder.pid").read_text().strip()
    srv = subprocess.Popen(
        ["taskset", "-c", "1", "nsenter", "-t", holder, "-n", "-u", "-m", "--", sys.executable, "-c", SERVER],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert srv.stdout.readline().strip() == "ready"
    node_run("node1", [sys.executable, "-c", CLIENT, "10.77.0.2"], check=True)
    out, _ = srv.communicate(timeout=120)
    return float(out.strip())


def config(work: Path, model: str, steps: int) -> Path:
    cfg = {
        "model": {"preset": model, "seq_len": 128},
        "data": {
            "name": "tv512",
            "sources": ["corpus/tinyshakespeare.txt"],
            "tokenizer": {"kind": "bpe", "vocab_size": 512},
            "out_dir": str(prepared_data()),
        },
        "optim": {"lr": 1e-3},
        "schedule": {"name": "cosine", "warmup_steps": 2},
        "train": {
            "steps": steps,
            "micro_batch_size": 4,
            "global_batch_size": 8,
            "log_every_steps": 5,
            "eval_every_steps": 0,
            "eval_tokens": 512,
            "checkpoint_every_steps": 100000,
            "keep_checkpoints": 1,
            "threads": 1,
            "max_epochs_warn": None,
        },
        "deepspeed": {"zero_stage": 1},
        "wandb": {"mode": "disabled"},
    }
    path = work / "bench.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def one_node(cfg: Path, run_dir: Path, port: int) -> None:
    """2 ranks on this host, pinned to the nodes' two CPUs (the worker's local rank mode)."""
    run_dir.mkdir(parents=True)
    (run_dir / "launch.yaml").write_text(cfg.read_text())
    subprocess.run(
        ["taskset", "-c", "0,1", sys.executable, "-m", "launch.run.worker", str(run_dir), "--mode", "local"]
        + ["--gpus", "2", "--port", str(port), "--threads", "1"],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )


def two_nodes(cfg: Path, run_dir: Path, port: int) -> None:
    """1 rank on each node, started by srun (the Slurm executor's rank mode for nodes > 1)."""
    run_dir.mkdir(parents=True)
    env = {**os.environ, "SLURM_CONF": str(CONF), "MASTER_ADDR": "node1", "MASTER_PORT": str(port)}
    r = subprocess.run(
        ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", sys.executable, "-m"]
        + ["launch.run.worker", "--rank-shim", "--", "-m", "pretrain.cli", str(cfg), "--run-dir", str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if r.returncode != 0:
        raise SystemExit(f"two-node run failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


def measure(run_dir: Path) -> dict:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    timed = [r for r in rows if "time/step_s" in r][1:]  # the first log step warms up
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "step_s": statistics.median(r["time/step_s"] for r in timed),
        "comm_s": statistics.median(r.get("time/comm_s", 0.0) for r in timed),
        "grad_mb": summary["params"] * 4 / 1e6,
        "final_loss": summary["final_loss"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--model", default="n1600k")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (removed by default)")
    args = ap.parse_args()
    if os.geteuid() != 0 or not CONF.is_file():
        print(f"needs root and the two-node cluster ({CONF}): run `sudo bash .ci/cluster_up.sh` first")
        return 2
    SHARED.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-multinode-", dir=SHARED))  # bound into both nodes
    cfg = config(work, args.model, args.steps)
    rows = []
    one_a = work / "one-a"
    one_node(cfg, one_a, free_port())
    ref = measure(one_a)
    bw = bandwidth()
    two = work / "two"
    two_nodes(cfg, two, free_port())
    rows.append(("2 nodes x 1 rank", bw, measure(two)))
    for node in ("node1", "node2"):
        node_run(node, TBF, check=True)
    try:
        bw_slow = bandwidth()
        slow = work / "two-1gbit"
        two_nodes(cfg, slow, free_port())
        rows.append(("2 nodes x 1 rank, 1 Gbit/s links", bw_slow, measure(slow)))
    finally:
        for node in ("node1", "node2"):
            node_run(node, ["tc", "qdisc", "del", "dev", "eth0", "root"])
    one_b = work / "one-b"
    one_node(cfg, one_b, free_port())
    ref_b = measure(one_b)
    ref_step = (ref["step_s"] + ref_b["step_s"]) / 2
    ref_comm = (ref["comm_s"] + ref_b["comm_s"]) / 2
    table = [("1 node x 2 ranks (reference)", None, {**ref, "step_s": ref_step, "comm_s": ref_comm})] + rows
    print(f"model {args.model} (seq 128, 8 sequences/step, ZeRO-1 fp32, gloo), {args.steps} steps, median of log steps")
    print(
        f"{'configuration':36} {'link MB/s':>9} {'step_s':>7} {'comm_s':>7} {'grad MB':>7} {'vs 1 node':>9} final loss"
    )
    out = []
    for name, link, m in table:
        vs = m["step_s"] / ref_step
        link_s = f"{link / 1e6:9.0f}" if link else f"{'-':>9}"
        print(
            f"{name:36} {link_s} {m['step_s']:7.3f} {m['comm_s']:7.3f} {m['grad_mb']:7.2f} {vs:8.2f}x "
            f"{m['final_loss']:.6f}"
        )
        out.append({"configuration": name, "link_bytes_per_s": link, **m, "vs_one_node": vs})
    print(f"(the reference's two runs: step_s {ref['step_s']:.3f} and {ref_b['step_s']:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    if args.keep:
        print(f"run directories: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
