"""MoE routers: router health metrics on log steps, aggregated over all micro-batches and all ranks
of the step (models/moe/metrics.py sums the counts; one all-reduce sums the ranks), and the
realised training compute.

The controller updates (aux_free_bias's bias, relu_l1's coefficient, sigmoid_threshold's
thresholds) are not here: they run as a post-step hook of the train module
(pretrain/engine/moe_controllers.py), before any callback.

Realised compute: every step adds the assignments the experts ran (after capacity) and the
token-layer pairs routed, counted on the host (tensor sizes: no device sync); at each log step
the counts since the last one are summed over the ranks and
`flops_realised = flops + 6 * 3 * d_model * expert_d_ff * (assignments - k_nominal * token-layer pairs)`,
`k_nominal` the experts per token the config counts (models/accounting.py: top_k, expert_choice
top_k x capacity_factor). Recorded as `flops_realised` (cumulative) and `moe/active_experts_run`
(realised experts per token over the run so far) in metrics.jsonl, W&B and summary.json.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from models.moe.block import expert_d_ff
from models.moe.metrics import pack, summarize_totals, totals, unpack
from pretrain.callbacks.base import Callback


class MoERouterMetrics(Callback):
    name = "moe_router"  # keeps the realised-compute counts in checkpoints
    priority = 80  # right after the optimizer step, before any probe or evaluation

    def __init__(self, module, flops_per_token: float):
        self.module, self.flops_per_token = module, flops_per_token  # config-only FLOPs (models/accounting.py)
        cfg = module.cfg.model
        moe = cfg.moe
        self.flops_per_assignment = 6.0 * 3 * cfg.d_model * expert_d_ff(cfg)
        k = moe.top_k * ((moe.capacity_factor or 1.0) if moe.router == "expert_choice" else 1)
        self.k_nominal = float(k)
        self.routed = self.pairs = 0.0  # over all ranks, up to the last log step
        self.pending = [0, 0]  # this rank's counts since the last log step

    def post_train_batch(self, out) -> None:
        for stats in out.router_stats:
            for s in stats:
                self.pending[0] += int(s.get("routed", 0))
                self.pending[1] += int(s.get("tokens", 0))
        if self.info.log_step:
            self._flush()
            for k, v in self.realised().items():
                self.trainer.record_metric(k, v, reduce="none")
            if out.router_stats:
                for k, v in step_metrics(out.router_stats, self.module.dist.world_size).items():
                    self.trainer.record_metric(k, v, reduce="none")  # already over all ranks

    def _flush(self) -> None:
        got = torch.tensor(self.pending, dtype=torch.float64)
        if self.module.dist.world_size > 1 and dist.is_initialized():
            got = got.to(self.module.dist.device)
            dist.all_reduce(got)
        routed, pairs = got.tolist()
        self.routed += routed
        self.pairs += pairs
        self.pending = [0, 0]

    def realised(self) -> dict[str, float]:
        if self.pairs <= 0:
            return {}
        step, tps = self.info.step, self.info.config.tokens_per_step()
        nominal = step * tps * self.flops_per_token
        extra = self.flops_per_assignment * (self.routed - self.k_nominal * self.pairs)
        return {"flops_realised": nominal + extra, "moe/active_experts_run": self.routed / self.pairs}

    def state_dict(self) -> dict:
        return {"routed": self.routed, "pairs": self.pairs, "pending": list(self.pending)}

    def load_state_dict(self, state: dict) -> None:
        self.routed, self.pairs = float(state["routed"]), float(state["pairs"])
        self.pending = [int(x) for x in state.get("pending", [0, 0])]


def step_metrics(micro_stats: list[list[dict]], world_size: int) -> dict[str, float]:
    """Router metrics of one step from this rank's micro-batches, summed over the ranks."""
    t = totals(micro_stats)
    if world_size > 1 and dist.is_initialized():
        flat = pack(t)
        dist.all_reduce(flat)
        t = unpack(flat, t)
    return summarize_totals(t)


class RoutingStability(Callback):
    """`moe/routing_change` at every evaluation step: the fraction of a fixed probe set's tokens
    (the first `PROBE_WINDOWS` windows of the validation split) whose expert set changed since the
    previous evaluation, mean over MoE layers (models/moe/stability.py). The previous routing is
    part of the checkpoint, so a resumed run reports the same figure."""

    name = "moe_stability"
    priority = 59  # after the held-out evaluation: its time counts as evaluation too
    PROBE_WINDOWS = 4

    def __init__(self, module, val_parts):
        self.module = module
        seq = module.cfg.model.seq_len
        tokens = val_parts[0].tokens
        n = max(1, min(self.PROBE_WINDOWS, (len(tokens) - 1) // seq))
        self.probe = torch.as_tensor([[int(t) for t in tokens[i * seq : (i + 1) * seq]] for i in range(n)])
        self.previous: torch.Tensor | None = None

    def post_train_batch(self, out) -> None:
        if not self.info.eval_step:
            return
        from models.moe.stability import expert_sets, routing_change

        with self.trainer.paused("eval"):
            sets = expert_sets(self.module.model, self.probe.to(self.module.dist.device)).cpu()
        if self.previous is not None and self.previous.shape == sets.shape:
            self.trainer.record_metric("moe/routing_change", routing_change(self.previous, sets), reduce="none")
        self.previous = sets

    def state_dict(self) -> dict | None:
        return None if self.previous is None else {"previous": self.previous.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.previous = state["previous"].clone()
