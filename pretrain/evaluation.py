"""Held-out loss and bits per byte on fixed, evenly spaced windows of the validation split."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist


class HeldOutEval:
    def __init__(self, tokens: np.ndarray, seq_len: int, eval_tokens: int, bytes_per_token: float, batch_size: int):
        n_avail = (len(tokens) - 1) // seq_len
        if n_avail < 1:
            raise ValueError(f"validation split has {len(tokens)} tokens, fewer than one window of {seq_len + 1}")
        n = max(1, min(n_avail, eval_tokens // seq_len))
        self.starts = np.linspace(0, (n_avail - 1) * seq_len, n).astype(np.int64)
        self.tokens, self.seq_len = tokens, seq_len
        self.bytes_per_token, self.batch_size = bytes_per_token, batch_size

    @torch.no_grad()
    def run(self, model, device, rank: int = 0, world: int = 1, autocast=None) -> dict[str, float]:
        was_training = model.training
        model.eval()
        mine = self.starts[rank::world]
        total = torch.zeros(2, dtype=torch.float64, device=device)  # (sum of losses, tokens)
        for i in range(0, len(mine), self.batch_size):
            rows = np.stack([self.tokens[s : s + self.seq_len + 1].astype(np.int64) for s in mine[i : i + self.batch_size]])
            x = torch.from_numpy(rows[:, :-1]).to(device)
            y = torch.from_numpy(rows[:, 1:]).to(device)
            if autocast is not None:
                with autocast:
                    out = model(x, targets=y, logits=False)
            else:
                out = model(x, targets=y, logits=False)
            total[0] += out.loss.double() * y.numel()
            total[1] += y.numel()
        if world > 1 and dist.is_initialized():
            dist.all_reduce(total)
        if was_training:
            model.train()
        loss = (total[0] / total[1]).item()
        return {"val_loss": loss, "val_bpb": loss / math.log(2) / self.bytes_per_token}
