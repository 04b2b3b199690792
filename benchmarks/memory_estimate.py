"""The memory estimate (models/memory.py) against the peak of real training steps on this CPU.

    python benchmarks/memory_estimate.py [--steps 2] [--only NAME]

Each configuration: the trainer's own train module (pretrain/engine/train_module.py:
the GPT, AdamW, DeepSpeed's engine at the configured ZeRO stage, activation checkpointing) takes a
few fp32 optimizer steps on random tokens, one rank, 2 threads. Printed per configuration: the
estimate's parts and total, and what was measured, in MiB:

- `peak`: the process's resident-set high-water mark (VmHWM) over building the model and engine and
  training, minus the resident set just before the model was built (torch and DeepSpeed imported,
  the process group up, a 64-element AdamW stepped once so that the optimizer's ~70 MiB of lazily
  imported torch._dynamo is in the baseline: it does not grow with the model). The high-water mark
  is reset there by writing 5 to /proc/self/clear_refs.
- `fwd+bwd`: the same over the last step's forward and backward alone, from the resident set just
  before it (weights, optimizer states and ZeRO's buffers already there). With one micro-batch per
  step DeepSpeed frees the gradients after each step and builds them in backward while the
  activations are freed, so this peak is the activations' (at the start of backward) or the
  gradients' (at its end): its estimate is max(activations, gradients). The estimate's total adds
  both anyway, an upper bound by the smaller one; `peak` shows by how much.

All configurations run one after the other in one child process (one import of torch and DeepSpeed),
each from its own baseline after the previous one's module was freed.

Why resident memory and not torch's allocator statistics: on CPU torch keeps no allocator
statistics (torch.cuda.max_memory_allocated has no CPU twin) and the profiler's memory events see
only tensors, while what must fit is everything the process holds (DeepSpeed's flat buffers and
buckets included). glibc would keep freed heap pages, and raise its mmap threshold as large blocks
are freed, so the resident set would stop tracking live memory: the children run with
MALLOC_MMAP_THRESHOLD_=131072 (fixed: every block over 128 KiB is its own mapping, returned to the
kernel when freed), so the high-water mark is the peak of live bytes plus a small heap. Pages that
are allocated but never written (e.g. the unused tail of a ZeRO bucket) are not resident and are
not counted; the estimate counts them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MIB = 1 << 20
# name: model shape (about 17M parameters, 10.6M non-embedding) and layout
MODEL = {"d_model": 384, "n_layers": 6, "n_heads": 6, "vocab_size": 8192, "seq_len": 256}
CONFIGS = {
    "zero0-mb1": {"zero": 0, "mb": 1, "ac": "none"},
    "zero0-mb4": {"zero": 0, "mb": 4, "ac": "none"},
    "zero0-mb4-ac": {"zero": 0, "mb": 4, "ac": "full"},
    "zero1-mb4": {"zero": 1, "mb": 4, "ac": "none"},
    "zero1-mb4-ac": {"zero": 1, "mb": 4, "ac": "full"},
    "zero0-mb4-seq512": {"zero": 0, "mb": 4, "ac": "none", "seq_len": 512},
}


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def train_config(spec: dict):
    from pretrain.config.loader import load_train_config

    model = {**MODEL, **({"seq_len": spec["seq_len"]} if "seq_len" in spec else {})}
    over = [f"model.{k}={v}" for k, v in model.items()] + [
        "model.preset=null",
        "train.tokens=null",
        "train.steps=100",
        f"train.micro_batch_size={spec['mb']}",
        f"train.global_batch_size={spec['mb']}",
        f"deepspeed.zero_stage={spec['zero']}",
        "precision=fp32",
        f"train.activation_checkpointing={spec['ac']}",
        "train.threads=2",
        "wandb.mode=disabled",
    ]
    return load_train_config(REPO / "configs/train/tiny.yaml", over)


def estimate(spec: dict) -> dict:
    from models.memory import estimate_memory

    cfg = train_config(spec)
    return estimate_memory(
        cfg.model,
        micro_batch_size=spec["mb"],
        zero_stage=spec["zero"],
        world_size=1,
        precision="fp32",
        activation_checkpointing=spec["ac"],
        device="cpu",
    ).to_dict()


def measure(spec: dict, steps: int, dist) -> dict:
    """In this process: build the train module, train `steps` steps, return the high-water marks."""
    import gc

    import torch

    from pretrain.engine.train_module import DeepSpeedTrainModule

    cfg = train_config(spec)
    torch.manual_seed(0)
    mb, seq, vocab = spec["mb"], cfg.model.seq_len, cfg.model.vocab_size
    batches = [torch.randint(0, vocab, (mb, seq + 1)) for _ in range(steps)]
    gc.collect()
    base = _status("VmRSS")
    _reset_peak()
    with tempfile.TemporaryDirectory() as tmp:
        tm = DeepSpeedTrainModule(cfg, dist, Path(tmp), log=lambda m: None)
        tm.build()
        for step in range(steps - 1):
            b = batches[step]
            tm.train_batch(step, lambda s, i, b=b: (b[:, :-1], b[:, 1:]))
        peak = _status("VmHWM")
        before = _status("VmRSS")
        _reset_peak()
        b = batches[-1]  # the last step by hand, to take forward + backward apart from the optimizer step
        out = tm.engine(b[:, :-1], targets=b[:, 1:], logits=False)
        tm.engine.backward(out.loss)
        fwd_bwd = _status("VmHWM")
        del out
        tm.engine.step()
        peak = max(peak, _status("VmHWM"))
        params = sum(p.numel() for p in tm.model.parameters())
        del tm
    gc.collect()
    return {"peak": peak - base, "fwd_bwd": fwd_bwd - before, "params": params}


def _warm_up() -> None:
    """Load what any run loads whatever its size before the baseline is read: an optimizer's first
    step imports torch._dynamo (~70 MiB of Python objects), the first attention and matmul backward
    load their kernels."""
    import torch
    import torch.nn.functional as F

    w = torch.zeros(8, 8, requires_grad=True)
    opt = torch.optim.AdamW([w], lr=1e-3, foreach=True)
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    (F.scaled_dot_product_attention(q, q, q, is_causal=True).sum() + (w @ w).sum()).backward()
    opt.step()


def run_child(names: list[str], steps: int):
    """Yield (name, measured) as one child process measures each configuration in turn."""
    env = {
        **os.environ,
        "MALLOC_MMAP_THRESHOLD_": "131072",
        "OMP_NUM_THREADS": "2",
        "PYTHONPATH": str(REPO),
        "WANDB_MODE": "disabled",
    }
    cmd = [sys.executable, __file__, "--steps", str(steps)] + [a for n in names for a in ("--child", n)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("RESULT "):
            rec = json.loads(line[len("RESULT ") :])
            yield rec.pop("name"), rec
    err = proc.stderr.read()
    if proc.wait() != 0:
        raise RuntimeError(f"measuring failed:\n{err[-3000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--steps",
        type=int,
        default=2,
        help="optimizer steps per configuration (>= 2: the first creates the optimizer states)",
    )
    ap.add_argument("--only", choices=list(CONFIGS), action="append", help="run only these configurations")
    ap.add_argument("--child", choices=list(CONFIGS), action="append", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        from pretrain.engine.distributed import setup

        dist = setup(2, deterministic=False)
        _warm_up()
        for name in args.child:
            rec = measure(CONFIGS[name], max(2, args.steps), dist)
            print("RESULT " + json.dumps({"name": name, **rec}), flush=True)
        return 0
    print(f"model {MODEL}, fp32, one CPU rank; MiB (estimate / measured)")
    print(
        f"{'config':<18} {'params':>8} {'grads':>7} {'optim':>7} {'acts':>7} {'other':>6} | "
        f"{'total':>7} {'peak':>7} {'ratio':>6} | {'max(a,g)':>8} {'fwd+bwd':>7} {'ratio':>6}"
    )
    names = args.only or list(CONFIGS)
    for name, got in run_child(names, args.steps):
        b = estimate(CONFIGS[name])["per_device_bytes"]
        step_est = max(b["activations"], b["grads"])
        print(
            f"{name:<18} {b['params'] / MIB:8.1f} {b['grads'] / MIB:7.1f} {b['optimizer'] / MIB:7.1f} "
            f"{b['activations'] / MIB:7.1f} {b['other'] / MIB:6.1f} | {b['total'] / MIB:7.1f} "
            f"{got['peak'] / MIB:7.1f} "
            f"{b['total'] / got['peak']:6.2f} | {step_est / MIB:8.1f} {got['fwd_bwd'] / MIB:7.1f} "
            f"{step_est / got['fwd_bwd']:6.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
