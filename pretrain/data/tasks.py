"""One task of a preparation in K tasks: its plan, its run, its manifest.

A preparation in tasks works in `.<name>.tasks/` beside its output folder (the work folder):

    config.json            the data config, paths made absolute (every task reads the same one)
    plan.json              the tasks: their units (units.py), inputs and fingerprints
    sample-NNNN/           pass 1 (kind=bpe): the task's share of the tokenizer's training sample
    tokenizer.json         trained (or loaded) once, from the merged sample
    split.json             only for a corpus too small for the hashed split: the val positions
    task-NNNN/             pass 2: the task's token shards, keys.npz (unique-token counts), manifest.json

A task writes `manifest.json` last, with `done: true` and the fingerprint of what it read (its units,
their files' sha256, the settings and the tokenizer): a task whose manifest is there and matches is
kept; any other is run again from scratch (its folder is emptied first). Tasks run as
`python -m pretrain.data.tasks WORK PASS ID`, so any executor that can start a process can run them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from pretrain.data.config import DataConfig, SourceConfig
from pretrain.data.encode import Encoder
from pretrain.data.sample import DocumentSample
from pretrain.data.shards import ShardWriter, token_dtype
from pretrain.data.sources import ResolvedSource
from pretrain.data.split import SPLITS, doc_key
from pretrain.data.units import Unit, unit_documents
from pretrain.errors import DataError

PASSES = ("sample", "encode")
MANIFEST = "manifest.json"
PROGRESS = "progress.json"
PROGRESS_EVERY_S = 2.0


def work_dir(out_dir: Path) -> Path:
    return out_dir.parent / f".{out_dir.name}.tasks"


def task_dir(work: Path, phase: str, task: int) -> Path:
    return work / f"{'sample' if phase == 'sample' else 'task'}-{task:04d}"


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=1)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def sha256_text(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# The plan (written by the driver, read by every task)


def source_entries(sources: list[ResolvedSource] | None) -> list[dict]:
    """What a task needs to read a source without resolving (hashing) the whole corpus again."""
    return [
        {
            "config": s.config.model_dump(mode="json"),
            "files": [str(p) for p in s.files],
            "hf_target": s.hf_target,
            "fingerprint": s.fingerprint if s.config.hf_dataset is not None else {},
        }
        for s in sources or []
    ]


def sources_from(entries: list[dict]) -> list[ResolvedSource]:
    return [
        ResolvedSource(
            SourceConfig.model_validate(e["config"]),
            files=[Path(p) for p in e["files"]],
            hf_target=e["hf_target"],
            fingerprint=e["fingerprint"],
        )
        for e in entries
    ]


def unit_inputs(units: list[Unit], plan: dict) -> list[dict]:
    """The task's inputs for meta.json and its fingerprint: path, range, sha256 (stat for the quick check)."""
    out = []
    for u in units:
        src = plan[u.which][u.source]
        if u.file is None:
            out.append({"source": src["config"].get("hf_dataset") or src["config"].get("path"), **src["fingerprint"]})
            continue
        path = src["files"][u.file]
        entry = {"path": path, "sha256": plan["hashes"][path]}
        if u.kind != "whole":
            entry["range" if u.kind == "bytes" else "row_groups"] = [u.start, u.end]
        out.append(entry)
    return out


@dataclass
class Task:
    id: int
    units: list[Unit]
    bytes: int
    fingerprint: str  # of what the task reads and the settings (the tokenizer is added per pass)

    def to_json(self, plan: dict) -> dict:
        return {
            "id": self.id,
            "units": [u.to_json() for u in self.units],
            "inputs": unit_inputs(self.units, plan),
            "bytes": self.bytes,
            "fingerprint": self.fingerprint,
        }


def load_plan(work: Path) -> dict:
    plan = read_json(work / "plan.json")
    if plan is None:
        raise DataError(f"{work}/plan.json missing or corrupt: rerun `scalelab data prepare`")
    return plan


def pass_fingerprint(task: dict, phase: str, work: Path) -> str:
    """A pass-2 task depends on the tokenizer and a forced split too; pass 1 on what it reads only."""
    extra: dict[str, Any] = {"phase": phase}
    if phase == "encode":
        tok = work / "tokenizer.json"
        extra["tokenizer"] = hashlib.sha256(tok.read_bytes()).hexdigest() if tok.is_file() else None
        split = read_json(work / "split.json")
        if split is not None:
            extra["split"] = sha256_text(split)
    return sha256_text([task["fingerprint"], extra])


def is_done(work: Path, phase: str, task: dict) -> bool:
    m = read_json(task_dir(work, phase, task["id"]) / MANIFEST)
    return bool(m and m.get("done") and m.get("fingerprint") == pass_fingerprint(task, phase, work))


# ---------------------------------------------------------------------------------------------
# Running one task


class _Progress:
    """Input bytes read so far, written now and then for the driver's progress line."""

    def __init__(self, folder: Path, total: int):
        self.path, self.total, self.done_units, self.in_unit = folder / PROGRESS, total, 0, 0
        self.start = self.last = time.time()

    def doc(self, nbytes: int, unit_size: int) -> None:
        self.in_unit = min(unit_size, self.in_unit + nbytes)
        if time.time() - self.last > PROGRESS_EVERY_S:
            self.write()

    def unit_done(self, size: int) -> None:
        self.done_units += size
        self.in_unit = 0

    def write(self, done: bool = False) -> None:
        self.last = time.time()
        bytes_done = self.total if done else min(self.total, self.done_units + self.in_unit)
        write_json(self.path, {"bytes": bytes_done, "total": self.total, "start": self.start, "at": self.last})


def _config(work: Path) -> DataConfig:
    return DataConfig.model_validate(read_json(work / "config.json"))


def _check_inputs(task: dict, plan: dict) -> None:
    """size + mtime of each file as planned: a file changed since planning is an error, not wrong tokens."""
    for entry in task["inputs"]:
        path = entry.get("path")
        if path is None:
            continue
        st = os.stat(path)
        if [st.st_size, st.st_mtime_ns] != plan["stats"][path]:
            raise DataError(f"{path} changed since the tasks were planned: rerun `scalelab data prepare`")


def _documents(cfg: DataConfig, task: dict, srcs: dict, progress: _Progress):
    """(which, source, position among the task's `sources` documents, text) of the task's documents."""
    pos = 0
    for raw in task["units"]:
        unit = Unit.from_json(raw)
        for doc in unit_documents(cfg, srcs[unit.which], unit):
            yield unit.which, doc.source, pos, doc.text
            if unit.which == "sources":
                pos += 1
            progress.doc(len(doc.text), unit.size)
        progress.unit_done(unit.size)


class _Rule:
    """The split of a task's documents: the seeded hash, or (tiny corpora) the forced val positions."""

    def __init__(self, cfg: DataConfig, work: Path, task_id: int, given: bool):
        self.given, self.frac = given, cfg.val_fraction
        forced = read_json(work / "split.json")
        self.offset = forced["offsets"][task_id] if forced else 0
        self.val = set(forced["val"]) if forced else None

    def of(self, which: str, pos: int, key: int) -> str:
        if which == "val_sources":
            return "val"
        if self.given:
            return "train"
        if self.val is not None:
            return "val" if self.offset + pos in self.val else "train"
        return "val" if key / 2.0**64 < self.frac else "train"


def run_task(work: Path, phase: str, task_id: int, workers: int | None = None) -> dict:
    """Run one task of one pass (its folder is emptied first) and write its manifest last."""
    if phase not in PASSES:
        raise DataError(f"pass must be one of {', '.join(PASSES)}, got {phase!r}")
    plan = load_plan(work)
    tasks = {t["id"]: t for t in plan["tasks"]}
    if task_id not in tasks:
        raise DataError(f"no task {task_id} in {work}/plan.json (tasks {min(tasks)}..{max(tasks)})")
    task = tasks[task_id]
    cfg = _config(work)
    if workers:
        cfg.workers = workers
    _check_inputs(task, plan)
    folder = task_dir(work, phase, task_id)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    srcs = {"sources": sources_from(plan["sources"]), "val_sources": sources_from(plan["val_sources"] or [])}
    progress = _Progress(folder, task["bytes"])
    progress.write()
    rule = _Rule(cfg, work, task_id, plan["val_sources"] is not None)
    t0 = time.perf_counter()
    docs = _documents(cfg, task, srcs, progress)
    body = _sample(cfg, folder, docs, rule) if phase == "sample" else _encode(cfg, work, folder, docs, rule)
    progress.write(done=True)
    manifest = {
        "id": task_id,
        "pass": phase,
        "inputs": task["inputs"],
        **body,
        "seconds": round(time.perf_counter() - t0, 3),
        "host": socket.gethostname(),  # which node ran it (a Slurm array spreads tasks over nodes)
        "fingerprint": pass_fingerprint(task, phase, work),
        "done": True,
    }
    write_json(folder / MANIFEST, manifest)
    return manifest


def _sample(cfg: DataConfig, folder: Path, docs, rule: _Rule) -> dict:
    sample = DocumentSample(cfg.tokenizer.sample_chars, cfg.seed)
    counts = {"train": 0, "val": 0}
    documents = 0
    for which, _, pos, text in docs:
        split = rule.of(which, pos, doc_key(text, cfg.seed))
        if which == "sources":
            documents += 1
            counts[split] += 1
            if split == "train":
                sample.offer(text)
    with open(folder / "sample.jsonl", "w") as fh:
        for text in sample.texts():
            fh.write(json.dumps(text) + "\n")
    return {
        "documents": documents,
        "tally": counts,
        "sample": {"documents": len(sample), "chars": sample.chars, "seen_chars": sample.seen_chars},
    }


def _encode(cfg: DataConfig, work: Path, folder: Path, docs, rule: _Rule) -> dict:
    tok = Tokenizer.from_file(str(work / "tokenizer.json"))
    tok.encode_special_tokens = True  # as prepare: text that spells the eot token is plain text
    meta = read_json(work / "tokenizer_meta.json")
    eot, dtype = meta["eot_id"], token_dtype(tok.get_vocab_size(with_added_tokens=True))
    writers = {s: ShardWriter(folder, s, dtype, cfg.shard_tokens) for s in SPLITS}
    stats = {s: {"documents": 0, "bytes": 0, "chars": 0} for s in SPLITS}
    keys: dict[str, list[int]] = {s: [] for s in SPLITS}
    lengths: dict[str, list[int]] = {s: [] for s in SPLITS}
    n_src, n_val = len(read_json(work / "plan.json")["sources"]), len(cfg.val_sources or [])
    per = {"sources": [0] * n_src, "val_sources": [0] * n_val}
    stream = hashlib.sha256()  # the task's own stream: both splits, in document order
    documents = 0

    def items():
        for which, source, pos, text in docs:
            key = doc_key(text, cfg.seed)
            yield (which, source, rule.of(which, pos, key), key, len(text), len(text.encode("utf-8"))), text

    encoder = Encoder(tok, dtype, cfg.workers)
    for (which, source, split, key, chars, nbytes), ids in encoder.encode(items()):
        doc = np.empty(len(ids) + 1, dtype=dtype)
        doc[0] = eot
        doc[1:] = ids
        writers[split].write(doc)
        stream.update(doc.tobytes())
        st = stats[split]
        st["documents"] += 1
        st["chars"] += chars
        st["bytes"] += nbytes
        keys[split].append(key)
        lengths[split].append(len(doc))
        per[which][source] += 1
        documents += which == "sources"
    for w in writers.values():
        w.close()
    np.savez(
        folder / "keys.npz",
        **{f"keys_{s}": np.array(keys[s], dtype=np.uint64) for s in SPLITS},
        **{f"lengths_{s}": np.array(lengths[s], dtype=np.int64) for s in SPLITS},
    )
    splits = {
        s: {**stats[s], "tokens": writers[s].tokens, "sha256": writers[s].sha256, "shards": writers[s].shards}
        for s in SPLITS
    }
    return {
        "documents": documents,
        "tokens": sum(w.tokens for w in writers.values()),
        "sha256": stream.hexdigest(),
        "splits": splits,
        "per_source": per["sources"],
        "per_val_source": per["val_sources"],
        "encode_workers": encoder.pool_workers or 1,
    }


def progress(work: Path, phase: str, ids: list[int]) -> dict:
    """Over the tasks `ids` of a pass: done, input bytes read and in all, when the first started."""
    plan = read_json(work / "plan.json") or {"tasks": []}
    by_id = {t["id"]: t for t in plan["tasks"]}
    done = read = total = 0
    start = None
    for i in ids:
        t = by_id.get(i)
        if t is None:
            continue
        total += t["bytes"]
        folder = task_dir(work, phase, i)
        if is_done(work, phase, t):
            done += 1
            read += t["bytes"]
            continue
        p = read_json(folder / PROGRESS)
        if p:
            read += min(t["bytes"], p.get("bytes", 0))
            start = p["start"] if start is None else min(start, p["start"])
    return {"done": done, "total": len(ids), "bytes": read, "bytes_total": total, "start": start}


def main(argv: list[str] | None = None) -> int:
    """`python -m pretrain.data.tasks WORK PASS ID [WORKERS]`: run one task (what executors start)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (3, 4) or args[1] not in PASSES:
        print(f"usage: python -m pretrain.data.tasks WORK {{{'|'.join(PASSES)}}} ID [WORKERS]", file=sys.stderr)
        return 2
    try:
        m = run_task(Path(args[0]), args[1], int(args[2]), int(args[3]) if len(args) == 4 else None)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"task {m['id']} ({m['pass']}): {m['documents']:,} documents in {m['seconds']:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
