"""Data preparation speed and memory: `scalelab data prepare` vs a plain one-process tokenizers loop.

    python benchmarks/data_prepare.py                      # gutenberg100 + a synthetic ~1 GB corpus
    python benchmarks/data_prepare.py --synthetic-mb 200   # a quicker run
    python benchmarks/data_prepare.py --synthetic-mb 0     # gutenberg100 only
    python benchmarks/data_prepare.py --scale-out-only --tasks 1,2,4 --tasks-mb 60   # K tasks only

Each measurement is a separate process whose peak memory is the RSS summed over its process tree
(the encoding workers included; shared pages count once per process, so this overstates a
little), sampled every 200 ms. Throughput is MB of UTF-8 text (after normalisation, both splits)
per second of wall time, end to end: reading, the tokenizer's training sample, BPE training,
encoding and writing. The reference, measured right after each prepare on the same machine (its
speed drifts with other load), is the simplest correct pipeline: one process, `Tokenizer.encode`
per document with TOKENIZERS_PARALLELISM=false, on the first `--reference-mb` MB of the same
corpus, with the tokenizer that prepare trained. The synthetic corpus is gutenberg100's
lines drawn at random (seeded) into ~100 KB documents, gzip-compressed, to show that memory
stays flat as the corpus grows.

Scale-out (`--tasks 1,2,4`): the same preparation in K tasks on the local executor (a process pool:
`scalelab data prepare --tasks K`) of an uncompressed synthetic corpus (one plain-text file, cut into
byte ranges at its delimiter lines), measured as MB of text per CPU-second of the whole process tree
(the driver, its task processes and their tokenizer workers) and per wall second; the scaling
efficiency is MB/cpu-s at K over MB/cpu-s at 1 task. Every K must give the same sha256 per split.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REFERENCE = r"""
import gzip, sys, time
import numpy as np
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
tok.encode_special_tokens = True
limit, done, tokens, doc = float(sys.argv[3]) * 1e6, 0, 0, []
t0 = time.perf_counter()
def flush():
    global done, tokens
    text = "".join(doc).strip()
    if text:
        ids = np.asarray(tok.encode(text, add_special_tokens=False).ids, dtype=np.uint16)
        done += len(text.encode()); tokens += len(ids) + 1
with gzip.open(sys.argv[2], "rt", encoding="utf-8") as fh:
    for line in fh:
        if line.strip() == "<|endoftext|>":
            flush(); doc = []
            if done >= limit:
                break
        else:
            doc.append(line)
print(done, tokens, time.perf_counter() - t0)
"""


def run_measured(argv: list[str], env: dict | None = None) -> tuple[float, int, str, float, float]:
    """(wall seconds, peak RSS of the process tree in bytes, stdout, CPU seconds of the tree, mean load average)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    ps, peak = psutil.Process(proc.pid), 0
    out: list[str] = []
    import threading

    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    reader.start()
    loads = []
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # usage covers the child and what it waited for
        if pid:
            break
        try:
            tree = [ps, *ps.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        loads.append(os.getloadavg()[0])
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    wall = time.perf_counter() - t0
    text = "".join(out)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{text[-3000:]}")
    return wall, peak, text, usage.ru_utime + usage.ru_stime, sum(loads) / max(1, len(loads))


def prepare(config: Path, out: Path, overrides: list[str], options: list[str] | None = None) -> dict:
    argv = [
        sys.executable,
        "-m",
        "launch.cli",
        "data",
        "prepare",
        str(config),
        *overrides,
        "--out",
        str(out),
        "--force",
        *(options or []),
    ]
    wall, peak, log, cpu, load = run_measured(argv)
    meta = json.loads((out / "meta.json").read_text())
    text_mb = sum(s["bytes"] for s in meta["splits"].values()) / 1e6
    encode = [ln for ln in log.splitlines() if "encoded" in ln and " in " in ln and "MB/s" in ln]
    return {
        "wall": wall,
        "peak": peak,
        "mb": text_mb,
        "tokens": sum(s["tokens"] for s in meta["splits"].values()),
        "cpu": cpu,
        "load": load,
        "encode_line": encode[-1].strip() if encode else "",
        "workers": meta.get("encode_workers"),
        "log": log,
    }


def synthetic_corpus(folder: Path, megabytes: float, seed: int = 0) -> Path:
    """gutenberg100's train lines drawn at random into ~100 KB documents, gzip level 1."""
    from pretrain.data.config import DataConfig
    from pretrain.data.sources import data_root

    src = data_root(DataConfig(sources=["x"])).path / "corpus/gutenberg100/train.txt.gz"
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        lines = [ln for ln in fh if ln.strip() and ln.strip() != "<|endoftext|>"]
    rng = np.random.default_rng(seed)
    path = folder / "synthetic.txt.gz"
    written, target = 0, megabytes * 1e6
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as out:
        while written < target:
            doc = "".join(lines[i] for i in rng.integers(0, len(lines), 1500))
            out.write(doc + "<|endoftext|>\n")
            written += len(doc.encode())
    return path


def plain_corpus(folder: Path, megabytes: float, seed: int = 1) -> Path:
    """Uncompressed plain text (~20 KB documents between delimiter lines): byte ranges can cut it."""
    from pretrain.data.config import DataConfig
    from pretrain.data.sources import data_root

    src = data_root(DataConfig(sources=["x"])).path / "corpus/gutenberg100/train.txt.gz"
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        lines = [ln for ln in fh if ln.strip() and ln.strip() != "<|endoftext|>"]
    rng = np.random.default_rng(seed)
    path = folder / "plain.txt"
    written, target = 0, megabytes * 1e6
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            doc = "".join(lines[i] for i in rng.integers(0, len(lines), 300))
            out.write(doc + "<|endoftext|>\n")
            written += len(doc.encode())
    return path


def scale_out(work: Path, megabytes: float, tasks: list[int], extra: list[str]) -> None:
    """MB per CPU-second and per wall second for 1 and K tasks (local executor), and the sha256 check."""
    corpus = plain_corpus(work, megabytes)
    config = work / "plain.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "plain",
                "sources": [str(corpus)],
                "doc_chars": None,
                "val_fraction": 0.01,
                "tokenizer": {"kind": "bpe", "vocab_size": 512, "sample_chars": 5_000_000},
            }
        )
    )
    print(f"\nscale-out: {corpus.stat().st_size / 1e6:,.0f} MB plain text, tasks {tasks}, local executor", flush=True)
    rows, shas = [], set()
    for k in tasks:
        out = work / f"plain-k{k}"
        r = prepare(config, out, [*extra, f"tasks={k}"])
        meta = json.loads((out / "meta.json").read_text())
        shas.add(tuple(v["sha256"] for v in meta["splits"].values()))
        rows.append((k, r))
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work / f".plain-k{k}.tasks", ignore_errors=True)
        print(f"  {k} task(s): {r['wall']:.1f}s wall, {r['cpu']:.1f} CPU-s (load average {r['load']:.2f})", flush=True)
    base = rows[0][1]["mb"] / rows[0][1]["cpu"]
    print(
        f"\n{'tasks':>5} {'text MB':>9} {'wall s':>8} {'CPU s':>8} {'MB/s':>7} {'MB/cpu-s':>9} "
        f"{'efficiency':>10} {'load':>6}"
    )
    for k, r in rows:
        eff = r["mb"] / r["cpu"] / base
        print(
            f"{k:>5} {r['mb']:>9,.1f} {r['wall']:>8.1f} {r['cpu']:>8.1f} {r['mb'] / r['wall']:>7.2f} "
            f"{r['mb'] / r['cpu']:>9.2f} {eff:>10.2f} {r['load']:>6.2f}"
        )
    print(f"same sha256 per split for every K: {len(shas) == 1}")
    print(
        "MB/cpu-s counts every process (driver, tasks, tokenizer workers); efficiency = MB/cpu-s at K over 1 task. "
        "Each pass of K tasks starts K processes (~1 s of imports each on this machine) and the driver trains "
        "the BPE and merges (hashing every shard once) alone."
    )


def engines(work: Path, megabytes: float, k: int, names: list[str]) -> None:
    """Wall seconds of the same K-task preparation on each executor (the engines' start and wait costs)."""
    corpus = plain_corpus(work, megabytes, seed=2)
    config = work / "engines.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "engines",
                "sources": [str(corpus)],
                "doc_chars": None,
                "val_fraction": 0.01,
                "tokenizer": {"kind": "bpe", "vocab_size": 512, "sample_chars": 2_000_000},
            }
        )
    )
    print(f"\nengines: {corpus.stat().st_size / 1e6:,.1f} MB plain text in {k} tasks", flush=True)
    shas = set()
    for name in names:
        out = work / f"engines-{name}"
        try:
            r = prepare(config, out, [f"tasks={k}"], ["--executor", name])
        except SystemExit as exc:
            print(f"  {name:<6} not measured: {str(exc).splitlines()[-1][:200]}")
            continue
        meta = json.loads((out / "meta.json").read_text())
        shas.add(tuple(v["sha256"] for v in meta["splits"].values()))
        print(
            f"  {name:<6} {r['wall']:7.1f}s wall, {r['cpu']:6.1f} CPU-s of this process tree "
            f"(Slurm tasks run under slurmd, outside it), load {r['load']:.2f}",
            flush=True,
        )
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work / f".engines-{name}.tasks", ignore_errors=True)
    print(f"same sha256 per split on every engine: {len(shas) <= 1}")


def reference(tokenizer: Path, corpus: Path, megabytes: float) -> dict:
    wall, peak, out, cpu, load = run_measured(
        [sys.executable, "-c", REFERENCE, str(tokenizer), str(corpus), str(megabytes)],
        env={"TOKENIZERS_PARALLELISM": "false"},
    )
    done, tokens, loop_s = out.split()[-3:]
    return {
        "wall": wall,
        "peak": peak,
        "mb": int(done) / 1e6,
        "tokens": int(tokens),
        "loop_s": float(loop_s),
        "cpu": cpu,
        "load": load,
    }


def row(name: str, r: dict, seconds: float | None = None) -> str:
    s = seconds or r["wall"]
    return (
        f"{name:<34} {r['mb']:>9,.1f} {s:>9.1f} {r['mb'] / s:>8.2f} {r['mb'] / r['cpu']:>8.2f} "
        f"{r['peak'] / 2**20:>10,.0f} {r['tokens'] / 1e6:>9.1f} {r['load']:>6.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--synthetic-mb", type=float, default=1000, help="size of the synthetic corpus in MB of text (0: skip)"
    )
    ap.add_argument("--reference-mb", type=float, default=30, help="MB of text the reference loop encodes")
    ap.add_argument("--workers", type=int, help="data.workers for prepare (default: all cores)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary folder, removed)")
    ap.add_argument("--tasks", default="1,2,4", help="scale-out: the task counts to measure (comma-separated)")
    ap.add_argument("--tasks-mb", type=float, default=60, help="scale-out: MB of plain text (0: skip the section)")
    ap.add_argument("--scale-out-only", action="store_true", help="run only the scale-out section (and --engines)")
    ap.add_argument("--engines", default="", help="executors to time on a small corpus, e.g. local,slurm,ray")
    ap.add_argument("--engines-mb", type=float, default=5, help="MB of plain text for --engines")
    args = ap.parse_args()
    extra = [f"workers={args.workers}"] if args.workers else []
    work_ctx = tempfile.TemporaryDirectory(prefix="data-bench-") if not args.keep else None
    work = Path(args.keep or work_ctx.name)
    work.mkdir(parents=True, exist_ok=True)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"data prepare benchmark: {cores} cores, load average {os.getloadavg()[0]:.2f}, work dir {work}")

    from pretrain.data.config import DataConfig
    from pretrain.data.sources import data_root

    if args.scale_out_only:
        if args.tasks_mb > 0:
            scale_out(work, args.tasks_mb, [int(k) for k in args.tasks.split(",")], extra)
        if args.engines:
            engines(work, args.engines_mb, max(int(k) for k in args.tasks.split(",")), args.engines.split(","))
        if work_ctx is not None:
            work_ctx.cleanup()
        return
    corpora = [
        (
            "gutenberg100",
            ROOT / "configs/data/gutenberg100.yaml",
            data_root(DataConfig(sources=["x"])).path / "corpus/gutenberg100/train.txt.gz",
        )
    ]
    if args.synthetic_mb > 0:
        t0 = time.perf_counter()
        corpus = synthetic_corpus(work, args.synthetic_mb)
        print(
            f"synthetic corpus: {corpus.stat().st_size / 1e6:,.0f} MB gzip written in {time.perf_counter() - t0:.0f}s"
        )
        config = work / "synthetic.yaml"
        config.write_text(
            json.dumps(
                {
                    "name": "synthetic",
                    "sources": [str(corpus)],
                    "doc_chars": None,
                    "val_fraction": 0.01,
                    "tokenizer": {"kind": "bpe", "vocab_size": 512},
                }
            )
        )
        corpora.append((f"synthetic {args.synthetic_mb:g} MB", config, corpus))
    results = []
    for name, config, text in corpora:
        r = prepare(config, work / name.split()[0], extra)
        print(f"{name}: prepared in {r['wall']:.1f}s (load average {os.getloadavg()[0]:.2f})", flush=True)
        ref = reference(work / name.split()[0] / "tokenizer.json", text, args.reference_mb)
        results.append((name, r, ref))

    print(
        f"\n{'':<34} {'text MB':>9} {'wall s':>9} {'MB/s':>8} "
        f"{'MB/cpu-s':>8} {'peak MiB':>10} {'Mtokens':>9} {'load':>6}"
    )
    for name, r, ref in results:
        print(row(f"{name}: prepare", r) + f"   {r['mb'] / r['wall'] / (ref['mb'] / ref['wall']):.2f}x reference")
        print(row(f"{name}: reference loop", ref))
    print(
        "\nMB/s: text per second of wall time; MB/cpu-s: per CPU second of the whole process tree; load: mean 1-min "
        f"load average during the measurement (above {cores} the machine was shared and wall-time ratios understate)"
    )
    print("prepare: end to end (read, sample, BPE training, encode, write), encode workers = cores unless --workers")
    print(
        f"reference loop: one process, Tokenizer.encode per document, TOKENIZERS_PARALLELISM=false, gzip read "
        f"included, the first {args.reference_mb:g} MB of the same corpus"
    )
    for name, r, _ in results:
        print(f"{name}: {r['encode_line'] or '(no encode line)'}; encode workers {r['workers']}")
    if args.tasks_mb > 0:
        scale_out(work, args.tasks_mb, [int(k) for k in args.tasks.split(",")], extra)
    if work_ctx is not None:
        work_ctx.cleanup()


if __name__ == "__main__":
    main()
