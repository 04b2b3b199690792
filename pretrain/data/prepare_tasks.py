"""`prepare` in K tasks: plan, pass 1 (tokenizer sample), tokenizer, pass 2 (encode), merge.

The driver (this module) runs in one process; the tasks run wherever a `Runner` starts them
(`launch.executors.data_tasks`: a local process pool or a Slurm array): the trainer's data code
knows no executor. What needs the whole corpus is done by the driver between the passes: the
tokenizer's sample is merged from the tasks' samples (each task keeps the smallest-key documents of
its part; the smallest-key documents of the whole corpus are among them), the split is the seeded
hash of each document (layout-free; a corpus too small for it gets SplitPlan's positions), and the
merge counts unique tokens, hashes each split's stream and writes meta.json.

The rule that makes the tokens independent of the layout: the document stream is ordered by
(source, file, offset in the file), tasks are runs of consecutive units of that stream
(units.py: documents are never cut), and each split's stream is the tasks' streams concatenated
in task order. One task or K, local or Slurm: the same tokens and the same sha256 per split.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from pretrain.data.config import DataConfig
from pretrain.data.encode import pieces
from pretrain.data.prepare import (
    Log,
    _fallback_plan,
    _lock,
    _remove_leftovers,
    _resolve,
    _reusable,
    _sample_pass,
    _swap_into_place,
    _umask,
    _why_rebuild,
    _write_json,
    assemble_meta,
    output_dir,
    split_entry,
    tokenizer_meta,
)
from pretrain.data.prepared import META_FILE, TOKENIZER_FILE, PreparedData, load_prepared
from pretrain.data.sample import DocumentSample
from pretrain.data.shards import token_dtype
from pretrain.data.sources import data_root
from pretrain.data.split import SPLITS, StreamSplit
from pretrain.data.tasks import (
    MANIFEST,
    Task,
    is_done,
    read_json,
    run_task,
    sha256_text,
    source_entries,
    task_dir,
    unit_inputs,
    work_dir,
    write_json,
)
from pretrain.data.tokenizer import build_tokenizer
from pretrain.data.units import Unit, file_units, group_units, plan_units
from pretrain.errors import DataError, TasksFailed

# runner(pass, task ids, work folder): runs those tasks, raises DataError naming the ones that failed
Runner = Callable[[str, list[int], Path], None]
COPY_BYTES = 16 << 20


def prepare_in_tasks(
    cfg: DataConfig, tasks: int, runner: Runner, log: Log = print, force: bool = False
) -> PreparedData:
    """Build (or reuse) the prepared folder of `cfg` in `tasks` tasks run by `runner`."""
    out_dir = output_dir(cfg)
    sources, val_sources, inputs, key = _resolve(cfg)
    if not force and (cached := _reusable(out_dir, key)) is not None:
        log(f"reusing prepared data in {out_dir} (fingerprint {key[:12]}, inputs unchanged)")
        return cached
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with _lock(out_dir, log):
        if not force and (cached := _reusable(out_dir, key)) is not None:
            log(f"reusing prepared data in {out_dir} (built by another process)")
            return cached
        reason = "forced (--force)" if force else _why_rebuild(out_dir, inputs)
        log(f"building {out_dir} in {tasks} task(s): {reason}")
        work = work_dir(out_dir)
        if force:
            shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        plan = _plan(cfg, work, sources, val_sources, inputs, tasks, log)
        ids = [t["id"] for t in plan["tasks"]]
        given = val_sources is not None
        (work / "split.json").unlink(missing_ok=True)
        sample_info = None
        if cfg.tokenizer.kind == "bpe":
            _run(runner, "sample", plan, work, log)
            sample_info = _tokenizer_from_samples(cfg, work, plan, sources, given, log)
        else:
            _save_tokenizer(cfg, work, None, log)
        _run(runner, "encode", plan, work, log)
        manifests = [read_json(task_dir(work, "encode", i) / MANIFEST) for i in ids]
        tally = {s: sum(m["splits"][s]["documents"] for m in manifests) for s in SPLITS}
        if not given and sum(tally.values()) and 0 in tally.values() and cfg.tokenizer.kind != "bpe":
            _force_split(cfg, work, sources, [m["documents"] for m in manifests])  # tiny corpus
            _run(runner, "encode", plan, work, log)
        _remove_leftovers(out_dir)
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
        os.chmod(tmp, 0o777 & ~_umask())
        try:
            meta = _merge(cfg, work, tmp, plan, key, inputs, sources, val_sources, sample_info, log)
            meta["build_seconds"] = round(time.perf_counter() - start, 3)
            _write_json(tmp / META_FILE, meta)
            _swap_into_place(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log(f"merged {len(ids)} tasks in {time.perf_counter() - t0:.1f}s (shards linked, each split's stream hashed)")
    prepared = load_prepared(out_dir)
    prepared.reason = reason
    log(f"built {out_dir} in {prepared.meta['build_seconds']:.1f}s ({len(ids)} tasks)")
    return prepared


def _run(runner: Runner, phase: str, plan: dict, work: Path, log: Log) -> None:
    pending = [t["id"] for t in plan["tasks"] if not is_done(work, phase, t)]
    kept = len(plan["tasks"]) - len(pending)
    name = "pass 1 (tokenizer sample)" if phase == "sample" else "pass 2 (encode)"
    log(f"{name}: {len(pending)} task(s) to run" + (f", {kept} done before (kept)" if kept else ""))
    t0 = time.perf_counter()
    if pending:
        runner(phase, pending, work)
        log(f"{name}: done in {time.perf_counter() - t0:.1f}s")
    missing = [t["id"] for t in plan["tasks"] if not is_done(work, phase, t)]
    if missing:
        raise TasksFailed(
            f"{name}: task(s) {', '.join(map(str, missing))} did not finish (logs: {work}/logs); rerun to run only them"
        )


# ---------------------------------------------------------------------------------------------
# The plan: units grouped into tasks, kept across runs for the files that did not change


def _plan(cfg: DataConfig, work: Path, sources, val_sources, inputs: dict, k: int, log: Log) -> dict:
    every = [*sources, *(val_sources or [])]
    files = [str(p) for s in every for p in s.files]
    plan = {
        "sources": source_entries(sources),
        "val_sources": source_entries(val_sources) if val_sources is not None else None,
        "hashes": {str(p): s.fingerprint[str(p)] for s in every for p in s.files},
        "stats": {f: [os.stat(f).st_size, os.stat(f).st_mtime_ns] for f in files},
    }
    same = {"k": k, "files": files, "settings": inputs["settings"], "tokenizer": inputs["tokenizer"]}
    same["specs"] = [e["config"] for e in plan["sources"] + (plan["val_sources"] or [])]
    old = read_json(work / "plan.json")
    if old is not None and old.get("same") == same:
        groups = _replan_changed(cfg, old, plan, sources, val_sources)
    else:
        groups = group_units(plan_units(cfg, sources, val_sources, k), k)
    plan["same"] = same
    settings = {"settings": inputs["settings"], "tokenizer": inputs["tokenizer"], "given": val_sources is not None}
    plan["tasks"] = []
    for i, units in enumerate(groups):
        ins = unit_inputs(units, plan)
        specs = [plan[u.which][u.source]["config"] for u in units]
        t = Task(i, units, sum(u.size for u in units), sha256_text([settings, ins, specs]))
        plan["tasks"].append(t.to_json(plan))
    write_json(work / "config.json", _task_config(cfg))
    write_json(work / "plan.json", plan)
    if len(groups) < k:
        log(f"  {len(groups)} task(s): the input has only {len(groups)} unit(s) it can be cut into")
    return plan


def _replan_changed(cfg: DataConfig, old: dict, plan: dict, sources, val_sources) -> list[list[Unit]]:
    """The old tasks; a file whose content changed is cut again into as many pieces, in the same tasks."""
    srcs = {"sources": sources, "val_sources": val_sources or []}
    groups = [[Unit.from_json(u) for u in t["units"]] for t in old["tasks"]]
    changed = {p for p, h in plan["hashes"].items() if old["hashes"].get(p) != h}
    if not changed:
        return groups
    where: dict[tuple, list[int]] = {}  # (which, source, file) -> the task of each old piece
    for g, units in enumerate(groups):
        for u in units:
            if u.file is not None and str(srcs[u.which][u.source].files[u.file]) in changed:
                where.setdefault((u.which, u.source, u.file), []).append(g)
    new_groups: list[list[Unit]] = [[] for _ in groups]
    placed = set()
    for g, units in enumerate(groups):
        for u in units:
            ident = (u.which, u.source, u.file)
            if ident not in where:
                new_groups[g].append(u)
            elif ident not in placed:
                placed.add(ident)
                path = srcs[u.which][u.source].files[u.file]
                for j, piece in enumerate(file_units(cfg, u.which, u.source, u.file, path, len(where[ident]))):
                    new_groups[where[ident][min(j, len(where[ident]) - 1)]].append(piece)
    return [g for g in new_groups if g]


def _task_config(cfg: DataConfig) -> dict:
    """The config every task reads: the data root made absolute (tasks may start elsewhere)."""
    return cfg.model_copy(update={"root": str(data_root(cfg).path), "out_dir": str(output_dir(cfg))}).model_dump(
        mode="json"
    )


# ---------------------------------------------------------------------------------------------
# Between the passes: the tokenizer, and the split of a tiny corpus


def _tokenizer_from_samples(cfg: DataConfig, work: Path, plan: dict, sources, given: bool, log: Log) -> dict:
    ids = [t["id"] for t in plan["tasks"]]
    manifests = [read_json(task_dir(work, "sample", i) / MANIFEST) for i in ids]
    train = sum(m["tally"]["train"] for m in manifests)
    val = sum(m["tally"]["val"] for m in manifests)
    if train + val == 0:
        raise DataError("empty corpus: the sources hold no text documents")
    if not given and (train == 0 or val == 0):  # tiny corpus: SplitPlan's guarantees, and its sample
        rule = _force_split(cfg, work, sources, [m["documents"] for m in manifests])
        sample, tally = _sample_pass(cfg, sources, rule, given)
        train = tally.train
    else:
        sample = DocumentSample(cfg.tokenizer.sample_chars, cfg.seed)
        for i in ids:
            with open(task_dir(work, "sample", i) / "sample.jsonl") as fh:
                for line in fh:
                    sample.offer(json.loads(line))
        sample.seen_chars = sum(m["sample"]["seen_chars"] for m in manifests)
    texts = sample.texts()
    info = {
        "documents": len(texts),
        "chars": sample.chars,
        "train_documents": train,
        "train_chars": sample.seen_chars,
        "sample_chars": cfg.tokenizer.sample_chars,
    }
    log(f"training byte-level BPE (vocab {cfg.tokenizer.vocab_size}) on {len(texts)} of {train} train documents")
    t0 = time.perf_counter()
    _save_tokenizer(cfg, work, (p for t in texts for p in pieces(t)), log)
    log(f"  BPE trained in {time.perf_counter() - t0:.1f}s")
    return info


def _save_tokenizer(cfg: DataConfig, work: Path, texts, log: Log) -> None:
    """tokenizer.json in the work folder, rewritten only when it changes (pass 2's fingerprints hash it)."""
    tok, eot = build_tokenizer(cfg.tokenizer, data_root(cfg).path, texts, log)
    path = work / TOKENIZER_FILE
    text = tok.to_str()
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_name(".tokenizer.json.tmp")
        tok.save(str(tmp))
        os.replace(tmp, path)
    write_json(work / "tokenizer_meta.json", {"eot_id": eot})


def _force_split(cfg: DataConfig, work: Path, sources, documents: list[int]) -> StreamSplit:
    """SplitPlan by position over the whole stream (tiny corpora): each task gets its offset."""
    plan = _fallback_plan(cfg, sources)
    offsets = np.concatenate([[0], np.cumsum(documents)[:-1]]).astype(int).tolist()
    write_json(work / "split.json", {"val": sorted(plan.val), "offsets": offsets})
    return StreamSplit(cfg.val_fraction, cfg.seed, plan)


# ---------------------------------------------------------------------------------------------
# The merge: shards moved into one folder, each split's stream hashed, meta.json


def _merge(cfg, work: Path, tmp: Path, plan: dict, key: str, inputs: dict, sources, val_sources, sample_info, log):
    ids = [t["id"] for t in plan["tasks"]]
    manifests = [read_json(task_dir(work, "encode", i) / MANIFEST) for i in ids]
    shutil.copyfile(work / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
    tok = Tokenizer.from_file(str(tmp / TOKENIZER_FILE))
    vocab = tok.get_vocab_size(with_added_tokens=True)
    dtype = token_dtype(vocab)
    eot = read_json(work / "tokenizer_meta.json")["eot_id"]
    given = val_sources is not None
    if sum(m["documents"] for m in manifests) == 0 and not any(m["splits"]["val"]["documents"] for m in manifests):
        raise DataError("empty corpus: the sources hold no text documents")
    splits = {}
    for s in SPLITS:
        sha, shards = hashlib.sha256(), []
        stats = {k: sum(m["splits"][s][k] for m in manifests) for k in ("documents", "bytes", "chars")}
        for i, m in zip(ids, manifests):
            for shard in m["splits"][s]["shards"]:
                name = f"{s}_{len(shards):04d}.bin"
                _link(task_dir(work, "encode", i) / shard["file"], tmp / name)
                _hash_file(sha, tmp / name)
                shards.append({"file": name, "tokens": shard["tokens"]})
        keys, lengths = [], []
        for i in ids:
            with np.load(task_dir(work, "encode", i) / "keys.npz") as z:
                keys.append(z[f"keys_{s}"])
                lengths.append(z[f"lengths_{s}"])
        unique, dups = _unique(np.concatenate(keys), np.concatenate(lengths))
        tokens = sum(sh["tokens"] for sh in shards)
        splits[s] = split_entry(stats, tokens, unique, dups, sha.hexdigest(), shards, log, s)
    if given and splits["train"]["documents"] == 0:
        raise DataError("empty train split: data.sources hold no text documents")
    if given and splits["val"]["documents"] == 0:
        raise DataError("empty validation split: data.val_sources hold no text documents")
    per_source = np.sum([m["per_source"] for m in manifests], axis=0).astype(int).tolist()
    per_val = np.sum([m["per_val_source"] for m in manifests], axis=0).astype(int).tolist() if given else []
    tok_meta = tokenizer_meta(tmp, tok, eot, vocab, cfg.tokenizer.kind, inputs, sample_info)
    forced = (work / "split.json").is_file()
    workers = max(m["encode_workers"] for m in manifests)
    meta = assemble_meta(
        cfg, key, inputs, tok_meta, dtype, given, forced, splits, (sources, per_source), (val_sources, per_val), workers
    )
    meta["tasks"] = [
        {"id": m["id"], "inputs": m["inputs"], "tokens": m["tokens"], "sha256": m["sha256"], "done": m["done"]}
        for m in manifests
    ]
    return meta


def _link(src: Path, dst: Path) -> None:
    """A hard link (no copy, no space): the task keeps its shards for the next, incremental build."""
    try:
        os.link(src, dst)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(src, dst)


def _hash_file(sha, path: Path) -> None:
    with open(path, "rb") as fh:
        while block := fh.read(COPY_BYTES):
            sha.update(block)


def _unique(keys: np.ndarray, lengths: np.ndarray) -> tuple[int, int]:
    if not len(keys):
        return 0, 0
    _, first = np.unique(keys, return_index=True)
    return int(lengths[first].sum()), int(len(keys) - len(first))


def run_inline(phase: str, ids: list[int], work: Path) -> None:
    """A `Runner` that runs the tasks one after another in this process (debugging, tests)."""
    for i in ids:
        run_task(work, phase, i)
