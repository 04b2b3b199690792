"""Held-out loss and bits per byte on fixed, evenly spaced windows of the validation split(s).

One part (a data set's val split) gives `min(eval_tokens // seq_len, windows available)` evenly
spaced windows. A mixture evaluates each component's val split with windows in proportion to
its weight, reports each part's `val_loss/<label>`, and combines them: `val_loss` is the mean
over all windows' tokens, `val_bpb` the total bits over the total bytes (each part has its own
bytes per token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist


@dataclass
class EvalPart:
    label: str | None  # None: the only part (no per-part metrics)
    tokens: object  # 1-D token sequence (memmap or TokenStream)
    bytes_per_token: float
    share: float = 1.0  # fraction of eval_tokens given to this part


class HeldOutEval:
    def __init__(self, tokens, seq_len: int, eval_tokens: int, bytes_per_token: float | None, batch_size: int):
        parts = tokens if isinstance(tokens, list) else [EvalPart(None, tokens, bytes_per_token)]
        self.parts, self.seq_len, self.batch_size = parts, seq_len, batch_size
        rows = []
        for p, part in enumerate(parts):
            n_avail = (len(part.tokens) - 1) // seq_len
            if n_avail < 1:
                where = f" of {part.label}" if part.label else ""
                raise ValueError(
                    f"validation split{where} has {len(part.tokens)} tokens, fewer than one window of {seq_len + 1}"
                )
            n = max(1, min(n_avail, round(eval_tokens * part.share) // seq_len))
            rows += [(p, int(s)) for s in np.linspace(0, (n_avail - 1) * seq_len, n).astype(np.int64)]
        self.rows = rows
        self.starts = np.array([s for _, s in rows], dtype=np.int64)

    def batches(self, rank: int, world: int) -> list[list[tuple[int, int]]]:
        """This rank's forwards: its windows (every world-th), in batches that never mix parts."""
        mine = self.rows[rank::world]
        out, i = [], 0
        while i < len(mine):
            part = mine[i][0]
            batch = [r for r in mine[i : i + self.batch_size] if r[0] == part]
            out.append(batch)
            i += len(batch)
        return out

    def forwards(self, world: int) -> int:
        """Forwards every rank runs: the most any rank needs (windows rarely split evenly)."""
        return max(len(self.batches(r, world)) for r in range(world))

    @torch.no_grad()
    def run(self, model, device, rank: int = 0, world: int = 1, autocast=None) -> dict[str, float]:
        was_training = model.training
        model.eval()
        mine = self.batches(rank, world)
        # Every forward may hold collectives (expert-parallel all-to-all, ZeRO-3 gathers), so every
        # rank runs the same number: a rank with fewer batches repeats its first (or the first
        # window) as padding whose loss is masked out; totals count real tokens only.
        pad = mine[0] if mine else [self.rows[0]]
        total = torch.zeros(len(self.parts), 2, dtype=torch.float64, device=device)  # (sum of losses, tokens) per part
        routed: dict[int, torch.Tensor] = {}  # MoE, per layer: (assignments run, tokens)
        for j in range(self.forwards(world)):
            real = j < len(mine)
            batch = mine[j] if real else pad
            part = batch[0][0]
            tokens = self.parts[part].tokens
            rows = np.stack([np.asarray(tokens[s : s + self.seq_len + 1], dtype=np.int64) for _, s in batch])
            x = torch.from_numpy(rows[:, :-1]).to(device)
            y = torch.from_numpy(rows[:, 1:]).to(device)
            if autocast is not None:
                with autocast:
                    out = model(x, targets=y, logits=False)
            else:
                out = model(x, targets=y, logits=False)
            if real:
                total[part, 0] += out.loss.double() * y.numel()
                total[part, 1] += y.numel()
                for s in out.router_stats:
                    acc = routed.setdefault(s["layer"], torch.zeros(2, dtype=torch.float64, device=device))
                    acc[0] += s.get("routed", 0)
                    acc[1] += s.get("tokens", 0)
        layers = sorted(routed)
        flat = torch.stack([routed[i] for i in layers]) if layers else None
        if world > 1 and dist.is_initialized():
            dist.all_reduce(total)
            if out.router_stats:  # every rank ran the same forwards over the same layers: the collective is matched
                if flat is None:  # a rank whose windows were all padding counted nothing
                    flat = torch.zeros(len(out.router_stats), 2, dtype=torch.float64, device=device)
                    layers = [s["layer"] for s in out.router_stats]
                dist.all_reduce(flat)
        if was_training:
            model.train()
        nats, count = total[:, 0].sum().item(), total[:, 1].sum().item()
        loss = nats / count
        if len(self.parts) == 1:
            bpb = loss / math.log(2) / self.parts[0].bytes_per_token
        else:  # total bits over total bytes: each part has its own bytes per token
            bpb = (
                nats / math.log(2) / sum(total[p, 1].item() * part.bytes_per_token for p, part in enumerate(self.parts))
            )
        res = {"val_loss": loss, "val_bpb": bpb}
        if flat is not None and flat[:, 1].sum().item() > 0:
            # realised experts per token at evaluation (variable-k routers; controllers frozen): mean over
            # MoE layers, and per layer
            per = (flat[:, 0] / flat[:, 1].clamp_min(1)).tolist()
            res["val_active_experts"] = sum(per) / len(per)
            for i, v in zip(layers, per):
                res[f"val_active_experts/layer{i}"] = v
        for p, part in enumerate(self.parts):
            if part.label is not None and total[p, 1].item() > 0:
                loss = total[p, 0].item() / total[p, 1].item()
                res[f"val_loss/{part.label}"] = loss
                res[f"val_bpb/{part.label}"] = loss / math.log(2) / part.bytes_per_token
        return res
