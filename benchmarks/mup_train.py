"""A width ladder of tiny GPTs trained in this process, for the μP benchmarks (mup_coord_check.py,
mup_transfer.py): the model (models/), its optimizer groups and per-group lr multipliers
(pretrain/optim/adamw.py) and the lr schedule (rundir/schedules.py) are the trainer's; DeepSpeed, the run
directory and the callbacks are left out, so one run of a 2-layer model costs seconds on a CPU.

Every width keeps 4 heads (head dim = width/4, so the 1/head_dim attention scale is exercised) and
d_ff = 8/3 width; the base width's head dim is the base model's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from models.config import ModelConfig  # noqa: E402
from models.gpt import GPT  # noqa: E402
from pretrain.config.schema import OptimConfig, ScheduleConfig  # noqa: E402
from pretrain.optim.adamw import param_groups  # noqa: E402
from rundir.schedules import lr_at  # noqa: E402

N_HEADS = 4


def model_config(
    width: int, parametrization: str, base_width: int, vocab_size: int, seq_len: int, n_layers: int = 2
) -> ModelConfig:
    return ModelConfig(
        d_model=width,
        n_layers=n_layers,
        n_heads=N_HEADS,
        vocab_size=vocab_size,
        seq_len=seq_len,
        init_std=0.02,
        parametrization=parametrization,
        mup_base_width=base_width,
        mup_base_head_dim=base_width // N_HEADS,
    )


def optimizer(model: GPT, lr: float, weight_decay: float = 0.0) -> tuple[torch.optim.AdamW, list[float]]:
    """AdamW over the trainer's param groups, and each group's lr multiplier."""
    groups = param_groups(model, OptimConfig(lr=lr, weight_decay=weight_decay))
    groups = [g for g in groups if g["params"]]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    return opt, [g["lr_mult"] for g in groups]


def train(
    cfg: ModelConfig, batches, steps: int, lr: float, seed: int = 0, warmup: int = 0, schedule: str = "constant"
) -> tuple[GPT, list[float]]:
    """Train `steps` AdamW steps on `batches(step) -> (x, y)`; (model, per-step training losses).
    A non-finite loss ends the run early (its losses end with that value)."""
    torch.manual_seed(seed)
    model = GPT(cfg)
    opt, mults = optimizer(model, lr)
    sched = ScheduleConfig(name=schedule, warmup_steps=warmup, min_lr_ratio=0.0)
    losses = []
    for step in range(steps):
        now = lr_at(step, steps, lr, sched)
        for g, m in zip(opt.param_groups, mults):
            g["lr"] = now * m
        x, y = batches(step)
        loss = model(x, targets=y, logits=False).loss
        losses.append(loss.item())
        if not torch.isfinite(loss):
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model, losses


def corpus(vocab_size: int = 512, seq_len: int = 64, seed: int = 0):
    """(train sampler, val sampler, vocab size) over the bundled corpus prepared with a `vocab_size` BPE
    (data/v<vocab>/, reused once prepared; read from $SCALELAB_DATA_ROOT or ../shared/data)."""
    from pretrain.data.load import load_data_config
    from pretrain.data.prepare import prepare
    from pretrain.feed.sampler import WindowSampler
    from pretrain.feed.train_feed import TrainFeed

    cfg = load_data_config(
        REPO / "configs/data/default.yaml",
        [f"tokenizer.vocab_size={vocab_size}", f"name=v{vocab_size}", f"out_dir={REPO / 'data' / f'v{vocab_size}'}"],
    )
    data = prepare(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))
    feed = TrainFeed(data, seq_len, seed)
    val = WindowSampler(feed.val_parts[0].tokens, seq_len, seed + 1)
    return feed.sampler, val, data.vocab_size
