"""Two nodes for real: training, sweeps and data preparation on the two-node cluster of
.ci/cluster_up.sh (two namespaces on this machine, one CPU each, a Slurm of their own, sshd for pdsh).

One Slurm sweep with `nodes: 2` (a dense ZeRO-3 run and an MoE run with its experts split over the
nodes) is trained once and read by several tests; the same runs as 2 ranks on one host are the
reference its losses must equal bit for bit. Skipped with the reason when the cluster is not up;
under CI (SCALELAB_REQUIRE=multinode) that is a failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import free_port, metrics_steps, prepared_data, scalelab, summary, write_base, write_spec
from tests.helpers.data import SHARED
from tests.integration.multinode.cluster import NODES, find_cluster, losses, wait_states

pytestmark = pytest.mark.slow

# Caches torch creates under /tmp on import: neither the run nor its resume reads them.
TMP_CACHES = re.compile(r"^torchinductor_\w+$")
MOE = {"num_experts": 2, "top_k": 1, "d_ff": 64, "ep_size": 2, "capacity_factor": None}


@pytest.fixture(scope="module")
def nodes():
    return find_cluster()


@pytest.fixture(scope="module")
def mn_work(nodes):
    """A folder both nodes see (SHARED is bound into each node's private /tmp by cluster_up.sh)."""
    SHARED.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="mn-", dir=SHARED))
    probe = nodes.run("node2", ["ls", str(d)])
    assert probe.returncode == 0, f"node2 does not see {d}: {probe.stderr} (is SHARED bound by cluster_up.sh?)"
    yield d
    shutil.rmtree(d, ignore_errors=True)


def base_config(work: Path, **train) -> Path:
    """The tiny sweep base, 8 sequences per step (4 per rank), one thread per rank, every step logged."""
    train = {"threads": 1, "global_batch_size": 8, "log_every_steps": 1, "dist_timeout_s": 60, **train}
    return write_base(work / "base", prepared_data(), **train)


def one_host_reference(run_dir: Path, ref: Path) -> subprocess.Popen:
    """The same run (its launch.yaml) as 2 ranks on this host (the worker's local rank mode), started."""
    ref.mkdir(parents=True, exist_ok=True)
    shutil.copy(run_dir / "launch.yaml", ref / "launch.yaml")
    return subprocess.Popen(
        [sys.executable, "-m", "launch.run.worker", str(ref), "--mode", "local", "--gpus", "2"]
        + ["--port", str(free_port()), "--threads", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture(scope="module")
def trained(nodes, mn_work) -> dict:
    """The shared two-node sweep (dense ZeRO-3 with W&B offline; MoE ep_size 2, ZeRO-1) and its one-host twins."""
    t0 = time.time()
    base = base_config(mn_work)
    spec = write_spec(
        mn_work,
        {
            "name": "mn2",
            "base": str(base),
            "kind": "zip",
            "runs_dir": str(mn_work / "runs"),
            "axes": {"model.moe": [None, MOE], "deepspeed.zero_stage": [3, 1], "wandb.mode": ["offline", "disabled"]},
            "executor": {"slurm": {"nodes": 2, "cpus_per_task": 1, "time": "00:20:00"}},
        },
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=mn_work, env=nodes.env)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = {}
    for d in sorted(p for p in (mn_work / "runs").iterdir() if (p / "launch.yaml").is_file()):
        runs["moe" if yaml.safe_load((d / "launch.yaml").read_text())["model"].get("moe") else "dense"] = d
    assert sorted(runs) == ["dense", "moe"], runs
    # the one-host twins train while the cluster does (their waits overlap; the arithmetic is the same)
    refs = {k: mn_work / "one-host" / k for k in runs}
    procs = {k: one_host_reference(d, refs[k]) for k, d in runs.items()}
    rows = wait_states(spec, {"done", "failed"}, timeout=600, env=nodes.env)
    assert [x["state"] for x in rows] == ["done", "done"], rows
    t1 = time.time()
    for k, p in procs.items():
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out + (refs[k] / "train.log").read_text()[-3000:]
    print(f"[multinode] two-node sweep {t1 - t0:.1f}s, one-host references done {time.time() - t0:.1f}s")
    return {"spec": spec, "runs": runs, "refs": refs}


def test_slurm_sweep_on_two_nodes_records_the_rank_map_and_matches_one_host_bitwise(trained):
    for kind, d in trained["runs"].items():
        ranks = json.loads((d / "ranks.json").read_text())["ranks"]
        assert [(r["rank"], r["host"], r["addr"]) for r in ranks] == [
            (0, "node1", "10.77.0.1"),
            (1, "node2", "10.77.0.2"),
        ], ranks
        log = (d / "train.log").read_text()
        assert "ranks on node1 (10.77.0.1): 0" in log and "ranks on node2 (10.77.0.2): 1" in log
        s = summary(d)
        assert s["status"] == "done" and s["steps"] == 12 and s["world_size"] == 2
        two, one = losses(d), losses(trained["refs"][kind])
        assert [st for st, _ in two] == list(range(1, 13))
        assert two == one, f"{kind}: two nodes {two} != one host {one}"  # bitwise: same floats
    # the MoE run's experts were split over the nodes: one expert-parallel shard per rank in its checkpoint
    ck = trained["runs"]["moe"] / "checkpoints" / "step_12"
    experts = sorted(p.name for p in ck.glob("*expert*"))
    assert experts and any("expert_0" in n for n in experts) and any("expert_1" in n for n in experts), experts
    moe_cfg = yaml.safe_load((trained["runs"]["moe"] / "config.yaml").read_text())
    assert moe_cfg["model"]["moe"]["ep_size"] == 2 and moe_cfg["deepspeed"]["zero_stage"] == 1


def test_the_node_check_ran_on_every_node(trained):
    meta = trained["runs"]["dense"].parent / ".sweep"
    (out,) = meta.glob("slurm-check-*.out")
    oks = [ln for ln in out.read_text().splitlines() if ln.startswith("node check: ok")]
    assert sorted(re.search(r"\[(node\d),", ln).group(1) for ln in oks) == list(NODES), out.read_text()


def test_one_writer_per_file_shared_paths_only_and_threads_per_node(trained, nodes):
    for d in trained["runs"].values():
        # two "rank 0"s would write every row twice
        assert metrics_steps(d) == list(range(1, 13))
        assert (d / "train.log").read_text().count("done: 12 steps") == 1
        for r in json.loads((d / "ranks.json").read_text())["ranks"]:
            # threads from the ranks on that node (1 of 1 CPU), not from the world size
            assert (r["local_world_size"], r["threads"], r["cpus"]) == (1, 1, 1), r
        # checkpoint files: rank 0's, or per-rank shards named by global rank (0 and 1, once each)
        ck = d / "checkpoints" / "step_12"
        shards = sorted(p.name for p in ck.iterdir() if "rank_" in p.name)
        ranks = sorted(int(m) for n in shards for m in re.findall(r"(?:zero_pp|expp)_rank_(\d+)", n))
        assert ranks in ([0, 1], [0, 0, 1, 1]), shards
    for node in NODES:
        left = [n for n in nodes.private_tmp(node) if not TMP_CACHES.match(n)]
        assert left == [], f"{node}'s private /tmp holds {left}"


def test_wandb_offline_makes_one_run_per_training(trained):
    d = trained["runs"]["dense"]
    runs = [p for p in (d / "wandb").glob("*run-*") if p.is_dir()]
    assert len(runs) == 1, runs
    assert (d / "wandb_id").read_text().strip() in runs[0].name


def test_hostfile_executor_runs_the_dense_run_over_two_hosts(trained, nodes, mn_work):
    """`--executor deepspeed` with a two-host hostfile: DeepSpeed's pdsh launcher over the nodes' sshd."""
    hostfile = mn_work / "hostfile"
    hostfile.write_text("node1 slots=1\nnode2 slots=1\n")
    spec = yaml.safe_load(trained["spec"].read_text())
    spec.update(
        name="mnds",
        runs_dir=str(mn_work / "runs-ds"),
        axes={"model.moe": [None], "deepspeed.zero_stage": [3], "wandb.mode": ["disabled"]},
        executor={"deepspeed": {"hostfile": str(hostfile), "master_port": free_port()}},
    )
    path = write_spec(mn_work, spec)
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    r = scalelab("sweep", "launch", path, "--executor", "deepspeed", cwd=mn_work, env=env, process=True)
    (d,) = [p for p in (mn_work / "runs-ds").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert r.returncode == 0 and "done" in r.stdout, r.stdout + r.stderr + (d / "train.log").read_text()[-3000:]
    ranks = json.loads((d / "ranks.json").read_text())["ranks"]
    assert [(x["host"], x["addr"], x["local_world_size"], x["threads"]) for x in ranks] == [
        ("node1", "10.77.0.1", 1, 1),
        ("node2", "10.77.0.2", 1, 1),
    ]
    log = (d / "train.log").read_text()
    assert "node2: " in log  # pdsh prefixes each remote line with its host
    assert losses(d) == losses(trained["runs"]["dense"])


def test_slurm_with_the_deepspeed_launcher_runs_the_dense_run_over_two_nodes(trained, nodes, mn_work):
    """`executor.slurm.launcher: deepspeed`: one DeepSpeed launcher in the job, which reaches node2
    over ssh with a hostfile built from SLURM_JOB_NODELIST (the variables ranks need go along)."""
    spec = yaml.safe_load(trained["spec"].read_text())
    spec.update(
        name="mndsl",
        runs_dir=str(mn_work / "runs-dsl"),
        axes={"model.moe": [None], "deepspeed.zero_stage": [3], "wandb.mode": ["disabled"]},
    )
    spec["executor"]["slurm"].update(launcher="deepspeed", master_port=free_port())
    path = write_spec(mn_work, spec)
    env = {**nodes.env, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    r = scalelab("sweep", "launch", path, "--executor", "slurm", cwd=mn_work, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = wait_states(path, {"done", "failed"}, timeout=300, env=nodes.env)
    d = mn_work / "runs-dsl" / rows[0]["name"]
    assert rows[0]["state"] == "done", (d / "train.log").read_text()[-3000:]
    assert (d / "hostfile").read_text() == "node1 slots=1\nnode2 slots=1\n"
    ranks = json.loads((d / "ranks.json").read_text())["ranks"]
    assert [(x["host"], x["local_world_size"], x["threads"]) for x in ranks] == [("node1", 1, 1), ("node2", 1, 1)]
    assert "HF_HUB_OFFLINE=1" in (d / ".deepspeed_env").read_text().splitlines()
    assert losses(d) == losses(trained["runs"]["dense"])


def _complete(run_dir: Path, above: int = 0) -> int | None:
    steps = [int(p.parent.name[5:]) for p in (run_dir / "checkpoints").glob("step_*/COMPLETE")]
    steps = [s for s in steps if s > above]
    return max(steps) if steps else None


def _wait(cond, what: str, timeout: float, log: Path | None = None):
    t0 = time.time()
    while True:
        got = cond()
        if got:
            return got
        assert time.time() - t0 < timeout, f"timed out ({timeout}s) waiting for {what}" + (
            f"\n{log.read_text()[-3000:]}" if log and log.exists() else ""
        )
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class _Timeline:
    """What a rank did after its peer was killed, sampled by the test's wait loop: its scheduler state and
    kernel wait channel (D = blocked on I/O) as they change, and when the lost peer reached its log."""

    def __init__(self, pid: int, log: Path, t0: float):
        self.pid, self.log, self.t0, self.rows, self.seen = pid, log, t0, [], None
        self.offset = log.stat().st_size  # earlier attempts' lines do not count

    def sample(self) -> bool:
        t = time.time() - self.t0
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(f"/proc/{self.pid}/wchan").read_text().strip() or "-"
        except OSError:
            state, wchan = "gone", "-"
        if not self.rows or self.rows[-1][1:] != (state, wchan):
            self.rows.append((t, state, wchan))
        new = self.log.read_text()[self.offset :]
        if self.seen is None and any(m in new for m in ("Connection reset", "Connection closed", "lost peer")):
            self.seen = t
        return True

    def __str__(self) -> str:
        seen = "never" if self.seen is None else f"+{self.seen:.1f}s"
        return f"lost peer in the log at {seen}; rank 0: " + ", ".join(f"+{t:.1f}s {s} {w}" for t, s, w in self.rows)


def _release_requeued(nodes, task: str) -> None:
    """Slurm holds a requeued job for a while (BeginTime): let it start now (as the one-node test does)."""
    t0 = time.time()
    while time.time() - t0 < 60:
        if "JobState=PENDING" in nodes.slurm("scontrol", "show", "job", task).stdout:
            time.sleep(3)  # not in the second the predecessor's credential was revoked
            nodes.slurm("scontrol", "update", f"JobId={task}", "StartTime=now")
            return
        time.sleep(0.5)


def test_preempted_then_node_lost_resumes_exactly_on_two_nodes(nodes, mn_work):
    """SIGUSR1 (Slurm's preemption warning) checkpoints and requeues the two-node task, which resumes;
    then node2's slurmd and rank die by SIGKILL: node1's rank ends at once (a peer's closed connection;
    train.dist_timeout_s=60 is the backstop for a node that freezes, SlurmdTimeout=30 marks it down),
    the task fails naming node2, and once node2 is back a relaunch resumes from the last complete
    checkpoint with every metrics row once."""
    work = mn_work / "pre"
    base = base_config(work, steps=80, checkpoint_every_steps=10, log_every_steps=5)
    cfg = yaml.safe_load(base.read_text())
    cfg["deepspeed"] = {"zero_stage": 2}
    base.write_text(yaml.safe_dump(cfg))
    spec = write_spec(
        work,
        {
            "name": "mnpre",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": {"nodes": 2, "cpus_per_task": 1, "signal_secs": 60}},
        },
    )
    run_dir = work / "runs" / "s0"
    log = run_dir / "train.log"
    env = {**nodes.env, "SCALELAB_FAULT_CHECKPOINT_DELAY_S": "0.5"}
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    task = re.search(r"submitted job array (\d+)", r.stdout).group(1) + "_0"

    # 1. preemption: the batch shell gets SIGUSR1, the ranks on both nodes checkpoint, the task requeues
    _wait(lambda: _complete(run_dir, 20), "a checkpoint past step 20", 300, log)
    assert nodes.slurm("scancel", "--signal=USR1", "--batch", task).returncode == 0
    _wait(lambda: "=== trainer exit code 3" in log.read_text(), "the preempted attempt's exit", 120, log)
    stopped_at = int(re.search(r"received SIGUSR1: checkpoint step_(\d+)", log.read_text()).group(1))
    _release_requeued(nodes, task)
    _wait(lambda: f"resumed from checkpoint step_{stopped_at} " in log.read_text(), "the resume", 180, log)

    # 2. node loss, once the resumed attempt has checkpointed again
    last = _wait(lambda: _complete(run_dir, stopped_at + 10), "a checkpoint after the resume", 180, log)
    ranks = {r["rank"]: r for r in json.loads((run_dir / "ranks.json").read_text())["ranks"]}
    assert ranks[1]["host"] == "node2" and _alive(ranks[1]["pid"]) and _alive(ranks[0]["pid"])
    os.kill(nodes.pid("node2", "slurmd"), signal.SIGKILL)
    os.kill(ranks[1]["pid"], signal.SIGKILL)
    killed = time.time()
    try:
        last = _complete(run_dir) or last  # a checkpoint may have completed in between
        trace = _Timeline(ranks[0]["pid"], log, killed)
        _wait(lambda: trace.sample() and not _alive(ranks[0]["pid"]), "node1's rank to end", 60, log)
        ended_s = time.time() - killed
        rows = wait_states(spec, {"failed", "partial", "preempted"}, timeout=120, env=nodes.env)
        text = log.read_text().split("resumed from checkpoint", 1)[1]
        assert "srun: error: node2: task 1: Killed" in text, text[-3000:]
        error = summary(run_dir)["error"]  # what `sweep status` shows: the peer rank 0 lost, by host
        assert "rank 1 on node2 (10.77.0.2)" in error, error
        state = rows[0]["state"]
        print(f"[multinode] node1's rank ended {ended_s:.1f}s after node2 was killed; state {state}; {trace}")
        # the timeline says whether the time went to noticing the lost peer or to exiting after it
        assert ended_s < 15, f"{trace}\n{log.read_text()[-3000:]}"
    except BaseException:
        nodes.bring_up()  # node2 back, so that a failure here does not fail the next test on a down node
        raise

    # 3. node2 comes back (its slurmd restarted), a relaunch resumes from the last complete checkpoint
    nodes.bring_up()
    _wait(lambda: nodes.states().get("node2", "").rstrip("*") in ("idle", "mix"), "node2 idle again", 120)
    last = _complete(run_dir)
    attempts = log.read_text().count("=== trainer exit code")
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", "--retry-failed", cwd=work, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    # the summary says failed until the new attempt ends: wait for that attempt's exit line
    _wait(lambda: log.read_text().count("=== trainer exit code") > attempts, "the relaunched attempt", 300, log)
    rows = wait_states(spec, {"done", "failed"}, timeout=60, env=nodes.env)
    assert rows[0]["state"] == "done", log.read_text()[-3000:]
    relaunched = log.read_text().rsplit(" worker pid ", 1)[1]
    assert f"resumed from checkpoint step_{last} " in relaunched, relaunched[:3000]
    s = summary(run_dir)
    assert s["status"] == "done" and s["steps"] == 80
    assert metrics_steps(run_dir) == list(range(5, 81, 5))  # rows up to the checkpoint kept, none twice


def test_a_frozen_node_ends_its_peer_within_dist_timeout(nodes, mn_work):
    """Node2's rank stops (SIGSTOP: no closed connection, as when a node freezes or is cut off): node1's
    rank fails once `train.dist_timeout_s` passes, on DeepSpeed's own groups too, instead of torch's 30 min."""
    work = Path(tempfile.mkdtemp(prefix="freeze-", dir=mn_work))  # its own, also when repeated (--count)
    base = base_config(work, steps=100000, log_every_steps=20, checkpoint_every_steps=100000, dist_timeout_s=8)
    run_dir = work / "run"
    # the test before this one ends with a job on both nodes: srun would queue behind its completion
    seen: list[dict] = []  # the node states waited through, printed: evidence if srun still does not start

    def idle() -> bool:
        states = nodes.states()
        if not seen or seen[-1] != states:
            seen.append(states)
        return all(states.get(n, "").rstrip("*") == "idle" for n in NODES)

    t_idle = time.time()
    _wait(idle, "both nodes idle", 120)
    print(f"[multinode] frozen-node test: nodes idle after {time.time() - t_idle:.1f}s, states seen {seen}")
    srun_log = work / "srun.log"  # what srun and the ranks print, shown when the run does not start
    # the port picked as srun starts, not before the wait for idle nodes (a port can be taken meanwhile)
    env = {**os.environ, **nodes.env, "MASTER_ADDR": "node1", "MASTER_PORT": str(free_port())}
    srun = subprocess.Popen(
        ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", sys.executable, "-m"]
        + ["launch.run.worker", "--rank-shim", "--", "-m", "pretrain.cli", str(base), "--run-dir", str(run_dir)],
        env=env,
        cwd=work,
        stdout=srun_log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    ranks: dict = {}
    try:
        _wait(lambda: (run_dir / "metrics.jsonl").is_file() and metrics_steps(run_dir), "training", 180, srun_log)
        ranks = {r["rank"]: r for r in json.loads((run_dir / "ranks.json").read_text())["ranks"]}
        os.kill(ranks[1]["pid"], signal.SIGSTOP)
        t0 = time.time()
        _wait(lambda: not _alive(ranks[0]["pid"]), "node1's rank to time out", 60)
        ended_s = time.time() - t0
    finally:
        for r in ranks.values():
            if _alive(r["pid"]):
                os.kill(r["pid"], signal.SIGKILL)
        try:
            srun.wait(timeout=60)
        except subprocess.TimeoutExpired:  # ranks never seen (a failure above): end the job, not the next tests
            srun.terminate()  # srun forwards it to the ranks
            try:
                srun.wait(timeout=30)
            except subprocess.TimeoutExpired:
                srun.kill()
                srun.wait()
    out = srun_log.read_text()
    print(f"[multinode] frozen node2: node1's rank ended {ended_s:.1f}s later (train.dist_timeout_s=8)")
    assert 8 <= ended_s < 8 + 15, out[-3000:]
    s = summary(run_dir)
    assert s["status"] == "failed" and "Timed out waiting 8000ms" in s["error"], s.get("error")


def test_data_prepare_runs_its_tasks_on_both_nodes(nodes, mn_work):
    """`scalelab data prepare --executor slurm --tasks 4`: tasks on node1 and node2 (their manifests say
    which), and the same per-split sha256 as one task."""
    work = mn_work / "data"
    root = work / "root"
    root.mkdir(parents=True)
    words = "the quick brown fox jumps over a lazy dog alpha beta gamma river mountain city garden".split()
    with open(root / "a.jsonl", "w") as fh:
        for i in range(160):
            fh.write(json.dumps({"text": " ".join(words[(i * 7 + j) % len(words)] for j in range(5 + i % 50))}) + "\n")
    cfg = work / "c.yaml"
    cfg.write_text(
        yaml.safe_dump({"name": "c", "root": str(root), "sources": ["a.jsonl"], "tokenizer": {"vocab_size": 300}})
    )
    one = scalelab("data", "prepare", cfg, "--out", work / "one", cwd=work)
    assert one.returncode == 0, one.stdout + one.stderr
    r = scalelab("data", "prepare", cfg, "--executor", "slurm", "--tasks", 4, "--out", work / "four", cwd=work,
                 env=nodes.env, process=True)  # fmt: skip
    assert r.returncode == 0 and "4/4 tasks done" in r.stdout, r.stdout + r.stderr

    def splits(out: Path) -> dict:
        return {s: v["sha256"] for s, v in json.loads((out / "meta.json").read_text())["splits"].items()}

    assert splits(work / "four") == splits(work / "one")
    hosts = {
        json.loads(m.read_text())["host"] for m in (work / ".four.tasks").glob("task-*/manifest.json")
    }  # fmt: skip
    assert hosts == set(NODES), hosts
