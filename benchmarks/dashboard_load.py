"""How fast the dashboard loads a large runs root: 1,000 synthetic run dirs, cold and warm.

Writes N run directories with the trainer's files (resolved config.yaml, metrics.jsonl with
`--records` lines, summary.json; 2% left unfinished, 1% malformed), then times
  cold:        a new RunStore reading everything (what a server start pays),
  warm:        a rescan with nothing changed (what every auto-refresh pays),
  incremental: a rescan after 10 runs appended metrics (a sweep in progress),
  api:         GET /api/runs through the FastAPI app (JSON of all rows), cold and warm,
  moe:         GET /api/moe/scaling (the MoE view's loss vs compute of every run), cold and warm.
10% of the runs are MoE (their granularity is counted from the model config).
Target (issue 7): cold and warm < 2 s for 1,000 runs. Exit code 1 if missed.

    python benchmarks/dashboard_load.py [--runs 1000] [--records 200] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard.stores.runs import RunStore

TARGET_S = 2.0


def write_tree(root: Path, n: int, records: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for i in range(n):
        d = root / f"sweep{i // 100:02d}" / f"run{i:04d}"
        d.mkdir(parents=True)
        lr, preset = rng.choice([1e-3, 3e-3, 1e-2]), rng.choice(["n50k", "n200k", "n800k"])
        model = {"preset": preset, "d_model": 64, "n_layers": 4, "n_heads": 4, "seq_len": 256, "vocab_size": 4096}
        if i % 10 == 5:  # 10% MoE runs: the registry counts their shape (granularity) from the model config
            model["moe"] = {
                "num_experts": 8,
                "top_k": 2,
                "d_ff": 64,
                "router": rng.choice(["softmax_topk", "aux_free_bias"]),
            }
        cfg = {
            "name": d.name,
            "model": model,
            "optim": {"name": "adamw", "lr": lr, "weight_decay": 0.1, "betas": [0.9, 0.95]},
            "schedule": {"name": "cosine", "warmup_fraction": 0.05},
            "train": {"tokens": 1e6, "micro_batch_size": 16, "global_batch_size": 16, "seed": i, "log_every_steps": 10},
            "data": {"name": "default", "tokenizer": {"kind": "bpe", "vocab_size": 4096}},
            "wandb": {"mode": "offline"},
            "extras": {"sweep": d.parent.name, "axes": {"lr": lr, "model": preset}},
        }
        (d / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        with open(d / "metrics.jsonl", "w") as f:
            for s in range(records):
                f.write(
                    json.dumps(
                        {
                            "step": 10 * s,
                            "tokens": 40960 * s,
                            "flops": 1e9 * s,
                            "loss": 8 - s / records * 3,
                            "lr": lr,
                            "grad_norm": 1.0,
                            "tokens_per_s": 3000.0,
                            "mfu": 0.3,
                            "wall_s": s,
                        }
                    )
                    + "\n"
                )
        if i % 100 == 7:  # malformed
            (d / "summary.json").write_text('{"status": "done", "tok')
        elif i % 50 != 3:  # 2% still running (no summary)
            (d / "summary.json").write_text(
                json.dumps(
                    {
                        "status": "done",
                        "steps": 10 * records,
                        "tokens": 4e7,
                        "params": 1e6,
                        "final_loss": 5.0,
                        "final_val_loss": 5.1,
                        "lr": lr,
                        "tokens_per_s": 3000.0,
                        "mfu": 0.3,
                        "wall_s": 100.0,
                        "extras": cfg["extras"],
                        "active_non_embedding_params": 2e5,
                        "flops": 6e12,
                    }
                )
            )


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--records", type=int, default=200, help="metrics.jsonl lines per run")
    ap.add_argument("--dir", help="where to write the tree (default: a temp dir, removed afterwards)")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="dashboard-load-"))
    try:
        t_write, _ = timed(lambda: write_tree(root, args.runs, args.records))
        store = RunStore(root, min_interval=0)
        t_cold, (rows, problems) = timed(store.table)
        t_warm, _ = timed(store.table)
        for p in sorted(root.glob("sweep00/run00[0-9]*"))[:10]:
            with open(p / "metrics.jsonl", "a") as f:
                f.write(json.dumps({"step": 99999, "loss": 4.0}) + "\n")
        t_incr, _ = timed(store.table)
        from fastapi.testclient import TestClient

        from dashboard.server import create_app

        client = TestClient(create_app(root, None, refresh_s=0))
        t_api_cold, r = timed(lambda: client.get("/api/runs"))
        t_api_warm, r = timed(lambda: client.get("/api/runs"))
        assert r.status_code == 200 and len(r.json()["runs"]) == len(rows)
        t_moe_cold, m = timed(
            lambda: TestClient(create_app(root, None, refresh_s=0)).get("/api/moe/scaling")
        )  # a fresh server
        t_moe_warm, m = timed(lambda: client.get("/api/moe/scaling"))
        assert m.status_code == 200 and m.json()["n_runs"] > 0
        print(f"runs: {args.runs} dirs ({args.records} metrics lines each), written in {t_write:.1f} s")
        print(
            f"rows: {len(rows)}, problems: {len(problems)} (expected "
            f"{sum(1 for i in range(args.runs) if i % 100 == 7)})"
        )
        print(f"cold load (new RunStore):        {t_cold:.3f} s")
        print(f"warm rescan (nothing changed):    {t_warm:.3f} s")
        print(f"incremental (10 runs appended):   {t_incr:.3f} s")
        print(
            f"GET /api/runs cold / warm:        {t_api_cold:.3f} s / "
            f"{t_api_warm:.3f} s  ({len(r.content) / 1e6:.2f} MB JSON)"
        )
        print(
            f"GET /api/moe/scaling cold / warm: {t_moe_cold:.3f} s / "
            f"{t_moe_warm:.3f} s  ({m.json()['n_runs']} finished runs plotted)"
        )
        ok = max(t_cold, t_warm, t_api_cold, t_api_warm, t_moe_cold, t_moe_warm) < TARGET_S
        print(f"target < {TARGET_S} s cold and warm: {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
