"""Muon for the hidden weight matrices and AdamW for the rest, in one torch optimizer whose
whole-tensor updates can be shared out over data-parallel ranks (pretrain/optim/muon_ranks.py).

The Muon update follows torch.optim.Muon (momentum by lerp, Nesterov, decoupled weight decay,
quintic Newton-Schulz with Keller Jordan's coefficients, `adjust_lr_fn` names), with two
differences: a 3-D parameter is a stack of matrices (MoE experts), orthogonalised per matrix; and
Newton-Schulz runs in bf16 on CUDA (as torch does) but fp32 on CPU, where bf16 matmuls are ~100x
slower. DeepSpeed runs this optimizer as a client optimizer on its ZeRO-0 engine (gradient
all-reduce, clipping, checkpoints); with a sharded assignment (our ZeRO-1 for muon) each rank keeps
optimizer state only for the tensors it updates, and after the step each tensor is broadcast from
the rank that computed it. `state_dict` gathers every rank's state, so DeepSpeed's rank-0
checkpoint holds all of it and resumes are exact.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from pretrain.optim.muon_ranks import Assignment, assign

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon's defaults
NS_EPS = 1e-7


def newton_schulz(g: torch.Tensor, steps: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Approximately orthogonalise each trailing m x n matrix of `g` (U S V^T -> ~U V^T)."""
    a, b, c = NS_COEFFICIENTS
    x = g.to(dtype)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / torch.linalg.matrix_norm(x, keepdim=True).clamp(min=NS_EPS)
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.mT if tall else x).to(g.dtype)


def lr_ratio(rule: str, shape: tuple[int, ...]) -> float:
    """torch.optim.Muon's `adjust_lr_fn` on the (last two dims of the) shape (fan_out, fan_in)."""
    fan_out, fan_in = shape[-2], shape[-1]
    if rule == "match_rms_adamw":
        return 0.2 * math.sqrt(max(fan_out, fan_in))
    if rule == "original":
        return math.sqrt(max(1.0, fan_out / fan_in))
    return 1.0


class MuonAdamW(torch.optim.Optimizer):
    """Param groups carry `use_muon`; Muon groups read momentum, nesterov, ns_steps, adjust_lr;
    AdamW groups read betas, eps. `mode`: replicated | balanced | flat (pretrain/optim/muon_ranks.py)."""

    def __init__(
        self,
        groups: list[dict],
        *,
        lr: float,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
        adjust_lr: str = "match_rms_adamw",
        betas=(0.9, 0.95),
        eps: float = 1e-8,
        mode: str = "replicated",
        rank: int = 0,
        world_size: int = 1,
        ns_dtype: torch.dtype | None = None,
    ):
        defaults = dict(
            lr=lr,
            weight_decay=0.0,
            use_muon=False,
            momentum=momentum,
            nesterov=nesterov,
            ns_steps=ns_steps,
            adjust_lr=adjust_lr,
            betas=tuple(betas),
            eps=eps,
        )
        super().__init__(groups, defaults)
        self.rank, self.world_size, self.mode = rank, world_size, mode
        self.ns_dtype = ns_dtype
        params = self._params()
        kinds = ["muon" if g["use_muon"] else "adamw" for g in self.param_groups for _ in g["params"]]
        self.assignment: Assignment = assign(mode, kinds, [tuple(p.shape) for p in params], world_size, ns_steps)
        self.steps = 0  # optimizer steps taken (state exists for every owned tensor once > 0)

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def owns(self, i: int) -> bool:
        return self.rank in self.assignment.workers[i]

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        i = 0
        for g in self.param_groups:
            for p in g["params"]:
                if self.owns(i):
                    grad = p.grad if p.grad is not None else torch.zeros_like(p)
                    (self._muon if g["use_muon"] else self._adamw)(
                        p, grad.float() if grad.dtype != p.dtype else grad, g
                    )
                i += 1
        self.steps += 1
        self._share()
        return loss

    def _muon(self, p: torch.Tensor, grad: torch.Tensor, g: dict) -> None:
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p)
        buf = state["momentum_buffer"]
        buf.lerp_(grad, 1 - g["momentum"])
        update = grad.lerp(buf, g["momentum"]) if g["nesterov"] else buf
        dtype = self.ns_dtype or (torch.bfloat16 if p.device.type == "cuda" else torch.float32)
        update = newton_schulz(update, g["ns_steps"], dtype)
        p.mul_(1 - g["lr"] * g["weight_decay"])
        p.add_(update, alpha=-g["lr"] * lr_ratio(g["adjust_lr"], tuple(p.shape)))

    def _adamw(self, p: torch.Tensor, grad: torch.Tensor, g: dict) -> None:
        state = self.state[p]
        if "step" not in state:
            state["step"] = torch.zeros((), dtype=torch.float64)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        t = float(state["step"])
        b1, b2 = g["betas"]
        state["exp_avg"].lerp_(grad, 1 - b1)
        state["exp_avg_sq"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (state["exp_avg_sq"] / (1 - b2**t)).sqrt_().add_(g["eps"])
        p.mul_(1 - g["lr"] * g["weight_decay"])
        p.addcdiv_(state["exp_avg"], denom, value=-g["lr"] / (1 - b1**t))

    # ------------------------------------------------------------------ ranks
    def _sharded(self) -> bool:
        return self.mode != "replicated" and self.world_size > 1

    def _share(self) -> None:
        """Every rank takes each tensor from the rank that computed it: one broadcast per source rank."""
        if not self._sharded():
            return
        params = self._params()
        for src in range(self.world_size):
            mine = [p for i, p in enumerate(params) if self.assignment.source[i] == src]
            if not mine:
                continue
            flat = torch.cat([p.detach().reshape(-1) for p in mine])
            dist.broadcast(flat, src=src)
            if self.rank != src:
                for p, v in zip(mine, torch._utils._unflatten_dense_tensors(flat, mine)):
                    p.data.copy_(v)

    def state_dict(self):
        """Every tensor's state, gathered from the ranks that keep it (collective when sharded:
        DeepSpeed calls this on every rank at a ZeRO-0 checkpoint)."""
        if self._sharded() and self.steps > 0:
            self._gather_state()
        out = super().state_dict()
        out["muon_steps"] = self.steps
        self._drop_others()
        return out

    def _gather_state(self) -> None:
        for i, (p, use_muon) in enumerate(self._kinds()):
            names = ("momentum_buffer",) if use_muon else ("step", "exp_avg", "exp_avg_sq")
            state = self.state[p]
            for name in names:
                t = state.get(name)
                if t is None:
                    t = torch.zeros((), dtype=torch.float64) if name == "step" else torch.zeros_like(p)
                dist.broadcast(t, src=self.assignment.source[i])
                state[name] = t

    def _kinds(self):
        return [(p, g["use_muon"]) for g in self.param_groups for p in g["params"]]

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        steps = int(state_dict.pop("muon_steps", 0))
        super().load_state_dict(state_dict)
        self.steps = steps
        self._drop_others()

    def _drop_others(self) -> None:
        """Keep only the state of the tensors this rank updates (ZeRO-1's memory saving)."""
        for i, p in enumerate(self._params()):
            if not self.owns(i):
                self.state.pop(p, None)
