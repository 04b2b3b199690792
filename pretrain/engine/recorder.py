"""Metrics recorded during a log window and reduced once, on the log step (cf. OLMo-core's
`Trainer.record_metric`, torchtitan's `MetricsProcessor.log`).

`record(name, value, reduce)` takes a float, a device tensor (kept on the device: no host sync)
or None. A name recorded several times in one window is averaged over those records (the loss,
recorded every step, is the window's mean); a name recorded once is that value. On the log step
the window's values are reduced over ranks, one collective per reduction kind present, and read
to the host in one transfer:
  mean   the mean over ranks (losses)
  sum    the sum over ranks
  max    the maximum over ranks
  none   this rank's value (values already global, or the main rank's own: throughput, lr)
"""

from __future__ import annotations

import torch
import torch.distributed as dist

REDUCTIONS = ("mean", "sum", "max", "none")


class MetricRecorder:
    def __init__(self, device: torch.device, world_size: int):
        self.device, self.world_size = device, world_size
        self._window: dict[str, list] = {}  # name -> [total, count, reduce]

    def record(self, name: str, value, reduce: str = "mean") -> None:
        if reduce not in REDUCTIONS:
            raise ValueError(f"reduce={reduce!r}: allowed {', '.join(REDUCTIONS)}")
        if isinstance(value, torch.Tensor):
            value = value.detach()
        slot = self._window.get(name)
        if slot is None or slot[0] is None or value is None:
            self._window[name] = [value, 1, reduce]
        else:
            slot[0], slot[1] = slot[0] + value, slot[1] + 1

    def reduce(self) -> dict:
        """The window's values (floats, or None where None was recorded), in recording order; starts a new window."""
        window, self._window = self._window, {}
        out: dict = {name: None for name in window}
        groups: dict[str, list[tuple[str, object]]] = {}
        for name, (total, n, how) in window.items():
            if total is not None:
                groups.setdefault(how, []).append((name, total / n if n > 1 else total))
        pending: list[tuple[str, torch.Tensor]] = []  # device values read back together
        for how, items in groups.items():
            if how == "none" or self.world_size == 1 or not dist.is_initialized():
                for name, v in items:
                    if isinstance(v, torch.Tensor):
                        pending.append((name, v.to(torch.float64).reshape(())))
                    else:
                        out[name] = v
                continue
            t = torch.stack([torch.as_tensor(v, dtype=torch.float64, device=self.device).reshape(()) for _, v in items])
            dist.all_reduce(t, op=dist.ReduceOp.MAX if how == "max" else dist.ReduceOp.SUM)
            if how == "mean":
                t = t / self.world_size
            pending += [(name, t[i]) for i, (name, _) in enumerate(items)]
        if pending:
            values = torch.stack([v.to(self.device) for _, v in pending]).tolist()
            out.update({name: v for (name, _), v in zip(pending, values)})
        return out
