"""Expert choice (Zhou et al. 2022): each expert takes its top-C tokens.

C = ceil(capacity_factor * tokens * top_k / num_experts) (capacity_factor null means 1), so every
expert gets exactly C tokens (perfect balance by construction) and a token may get 0..E experts.
Weights are the softmax-over-experts probabilities of the chosen (token, expert) pairs.

NOT CAUSAL: a token's routing depends on every other token of the batch, later positions
included. Training and evaluation (val loss, in train or eval mode) route this way over the
batch with the same capacity rule, so the validation loss measures the model that was trained.
Where routing must be causal (generation, lm-eval scoring of a continuation given its context),
the caller switches the router explicitly with `models.moe.routers.set_causal_routing(model)`:
each token then takes its top-k experts over the same probabilities (a different function than
the one trained; no capacity).
"""

from __future__ import annotations

import torch

from models.moe.routers.base import Router, Routing, capacity, router_z_loss, topk_assignments


class ExpertChoiceRouter(Router):
    token_choice = False

    def __init__(self, cfg, d_model):
        super().__init__(cfg, d_model)
        self.causal = False  # set by set_causal_routing: token-choice top-k instead of expert choice

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        probs = logits.softmax(-1)
        t, e = probs.shape
        z = router_z_loss(logits)
        loss, stats = cfg.z_loss_coef * z, {"z_loss": z.detach()}
        if self.causal:
            token_idx, expert_idx, weight, _ = topk_assignments(probs, probs, self.top_k, False)
            return Routing(
                token_idx=token_idx,
                expert_idx=expert_idx,
                weight=weight,
                requested=torch.bincount(expert_idx, minlength=e),
                dropped_of=t,
                probs=probs,
                loss=loss,
                stats=stats,
                num_tokens=t,
            )
        cap = min(t, capacity(cfg.capacity_factor or 1.0, t, self.top_k, e))
        weight, token_idx = probs.t().topk(cap, dim=1)  # (E, C)
        token_idx = token_idx.reshape(-1)
        expert_idx = torch.arange(e, device=logits.device).repeat_interleave(cap)
        routed = torch.zeros(t, dtype=torch.bool, device=logits.device)
        routed[token_idx] = True
        return Routing(
            token_idx=token_idx,
            expert_idx=expert_idx,
            weight=weight.reshape(-1),
            requested=torch.full((e,), cap, device=logits.device),
            dropped=(~routed).sum(),  # tokens no expert picked: they pass through on the residual
            dropped_of=t,
            probs=probs,
            loss=loss,
            stats=stats,
            num_tokens=t,
        )
