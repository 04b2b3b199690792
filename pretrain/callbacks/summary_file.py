"""summary.json, written atomically when the run ends (done, preempted or failed), from the
records this attempt logged and the state a resumed attempt brought from its checkpoint."""

from __future__ import annotations

from datetime import UTC, datetime

import torch

from models.moe.accounting import moe_summary
from models.mup import base_shapes
from pretrain.callbacks.base import Callback
from rundir.summary import write_summary


class SummaryFileWriter(Callback):
    name = "run_summary"  # keys its state in checkpoints and is what logs show: kept
    priority = 40  # before the W&B callback, which mirrors this summary

    def __init__(self, module, counts, feed, speed):
        self.module, self.counts, self.feed, self.speed = module, counts, feed, speed
        self.final_loss = self.mfu = None
        self.last_val: dict = {}  # the last held-out evaluation's values
        self.realised: dict = {}  # MoE: realised training FLOPs and experts per token so far

    def log_metrics(self, step: int, rec: dict) -> None:
        self.final_loss, self.mfu = rec.get("loss"), rec.get("mfu")
        if "val_loss" in rec:
            self.last_val = {k: v for k, v in rec.items() if k.startswith(("val_loss", "val_bpb", "val_active"))}
        if "flops_realised" in rec:  # MoE: what the routers actually ran (pretrain/callbacks/moe.py)
            self.realised = {k: rec[k] for k in ("flops_realised", "moe/active_experts_run") if k in rec}

    def post_train(self) -> None:
        s = self._write()
        if self.info.is_main and s["status"] == "done":
            self.info.log(
                f"done: {s['steps']} steps, {s['tokens']:,} tokens, final loss {_f(s['final_loss'])}, "
                f"val loss {_f(s['final_val_loss'])}, {s['wall_s']:.1f}s -> {self.info.run_dir.path}"
            )

    def on_error(self, exc: BaseException) -> None:
        self._write()

    def _write(self) -> dict:
        tr = self.trainer
        tr.summary = s = self.summary(tr.status, tr.error)
        if self.info.is_main:
            try:
                write_summary(self.info.run_dir.path, s)
            except OSError as exc:  # a full disk: the run's own message matters more than a traceback
                self.info.log(f"warning: summary.json could not be written ({exc})")
        return s

    def summary(self, status: str, error: str | None) -> dict:
        info, c, state = self.info, self.counts, self.trainer.state
        cfg, step, tps = info.config, state.step, info.config.tokens_per_step()
        train_wall = max(1e-9, state.wall_s - state.eval_s)
        lineage = state.lineage  # a branch: the steps up to lineage["step"] were its parent's work
        own = step - (lineage["step"] if lineage else 0)
        out = {
            "status": status,
            "name": cfg.name,
            "steps": step,
            "total_steps": info.total_steps,
            "tokens": step * tps,
            "params": c.total,
            "non_embedding_params": c.non_embedding,
            "active_params": c.active,
            "active_non_embedding_params": c.active_non_embedding,
            "flops_per_token": c.flops_per_token,
            "flops": step * tps * c.flops_per_token,
            "batch_tokens": tps,
            "batch_size": cfg.train.global_batch_size,
            "lr": cfg.optim.lr,  # as configured (with optim.width_lr_ref: the reference width's lr)
            "peak_lr": cfg.peak_lr(),
            "final_loss": self.final_loss,
            "final_val_loss": self.last_val.get("val_loss"),
            "final_val_bpb": self.last_val.get("val_bpb"),
            "tokens_per_s": own * tps / train_wall if own > 0 else None,
            "mfu": self.mfu,
            "peak_flops": self.speed.peak,
            "peak_source": self.speed.peak_source,
            "world_size": self.module.dist.world_size,
            "threads": torch.get_num_threads(),  # per rank; pin train.threads to resume bit-exactly elsewhere
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "wall_s": state.wall_s,
            "eval_s": state.eval_s,
            "skipped_steps": self.module.skipped_steps,
            "optimizer": getattr(self.module, "optimizer_record", None),
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "extras": cfg.extras,
        }
        out.update(self.feed.summary(step * tps, step * cfg.train.global_batch_size))
        if cfg.model.moe is not None:  # the MoE shape the MoE scaling laws read (scaling/data/moe_inputs.py)
            out["moe"] = moe_summary(cfg.model, cfg.model.vocab_size)
            # Realised compute: the experts the routers ran (variable-k routers, capacity drops), beside
            # the config-only `flops` (models/accounting.py, what the planner uses).
            out["flops_realised"] = self.realised.get("flops_realised")
            out["moe"]["active_experts"] = self.realised.get("moe/active_experts_run")
            out["moe"]["val_active_experts"] = self.last_val.get("val_active_experts")
        shapes = base_shapes(cfg.model)
        out["parametrization"] = shapes.pop("parametrization")
        if shapes:  # mup: the base shapes a transfer is relative to
            out["mup"] = shapes
        if lineage:  # the parent's prefix, which `tokens` and `flops` include but this run did not compute
            out.update(
                init_from=dict(lineage),
                shared_tokens=lineage["step"] * tps,
                shared_flops=lineage["step"] * tps * c.flops_per_token,
            )
        if error:
            out["error"] = error
        return out

    def state_dict(self) -> dict:
        return {"final_loss": self.final_loss, "mfu": self.mfu, "last_val": self.last_val, "realised": self.realised}

    def load_state_dict(self, state: dict) -> None:
        self.final_loss, self.mfu = state.get("final_loss"), state.get("mfu")
        self.last_val = dict(state.get("last_val") or {})
        self.realised = dict(state.get("realised") or {})


def _f(x) -> str:
    return f"{x:.4f}" if isinstance(x, float) else str(x)
