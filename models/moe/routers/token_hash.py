"""Hash routing (Roller et al. 2021, "Hash Layers for Large Sparse Models"): a fixed function of
the token id picks the experts, nothing is learned about which expert a token goes to.

Expert j of token id v (j < top_k) is (h(v) + j * (E // top_k)) mod E with h a multiplicative
hash (Knuth's 2654435761 mod 2^32), so the k experts are distinct and every expert receives
about 1/E of the vocabulary. The gates are a softmax over the router's logits of the chosen
experts (top_k = 1: exactly 1), so the router still weighs its fixed experts. Balanced in
expectation without a loss (the realised balance follows the token frequencies); causal and
batch-independent. The baseline that shows what a learned assignment adds. Needs the token ids:
`models.gpt.GPT` passes them to every MoE layer.
"""

from __future__ import annotations

import torch

from models.moe.routers.base import Router, Routing, router_z_loss

_MULT = 2654435761


def hash_experts(token_ids: torch.Tensor, num_experts: int, top_k: int) -> torch.Tensor:
    """(T,) token ids -> (T, top_k) distinct expert ids."""
    h = (token_ids.long() * _MULT) % (2**32)
    step = max(1, num_experts // top_k)
    offsets = torch.arange(top_k, device=token_ids.device) * step
    return (h.unsqueeze(-1) + offsets) % num_experts


class TokenHashRouter(Router):
    def route(self, x: torch.Tensor, seq_len: int, token_ids: torch.Tensor | None = None) -> Routing:
        if token_ids is None:
            raise ValueError("model.moe.router=token_hash routes by token id: the MoE layer was called without them")
        logits = self(x)
        t = logits.shape[0]
        top_idx = hash_experts(token_ids.reshape(-1), self.num_experts, self.top_k)
        w = logits.gather(1, top_idx).softmax(-1)
        expert_idx = top_idx.reshape(-1)
        z = router_z_loss(logits)
        return Routing(
            token_idx=torch.arange(t, device=x.device).repeat_interleave(self.top_k),
            expert_idx=expert_idx,
            weight=w.reshape(-1),
            probs=logits.detach().softmax(-1),
            priority=w.detach().reshape(-1),
            loss=self.cfg.z_loss_coef * z,
            stats={"z_loss": z.detach()},
            requested=torch.bincount(expert_idx, minlength=self.num_experts),
            num_tokens=t,
            dropped_of=expert_idx.numel(),
        )

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        raise ValueError("model.moe.router=token_hash routes by token id: call route(x, seq_len, token_ids)")
