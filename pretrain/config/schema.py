"""Typed training configuration. Every key is documented here; the reference (docs/config-reference.md) is
generated from these descriptions (`scalelab config reference`)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from base.roles import BOOKKEEPING, BRANCH, RESUMABLE, SweepAxis
from base.strict import StrictModel
from models.config import ModelConfig
from pretrain.checkpoint.evaluators import section_type
from pretrain.data.config import DataConfig

# The `eval:` section's schema belongs to the registered checkpoint evaluator (pretrain/checkpoint/evaluators.py).
EvalSection = section_type()


class OptimConfig(StrictModel):
    lr: Annotated[float, SweepAxis("lr")] = Field(
        3e-4, gt=0, description="peak learning rate (AdamW; with muon, both halves)"
    )
    weight_decay: Annotated[float, SweepAxis("wd")] = Field(
        0.1,
        ge=0,
        description="decoupled weight decay (AdamW and Muon halves); "
        "never applied to norms, biases or embeddings' norms",
    )
    beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1")
    beta2: float = Field(0.95, ge=0, lt=1, description="AdamW beta2")
    eps: float = Field(1e-8, gt=0, description="AdamW epsilon")
    grad_clip: float = Field(1.0, ge=0, description="global gradient-norm clipping (0 disables)")
    name: Annotated[Literal["adamw", "muon"], SweepAxis("")] = Field(
        "adamw",
        description="optimizer: adamw, or muon (Muon on the blocks' 2-D weight matrices and per-expert "
        "matrices, AdamW on embeddings, output head, norms, biases and routers; see docs/optimizers.md)",
    )
    momentum: float = Field(0.95, ge=0, lt=1, description="muon: momentum of the Muon half")
    nesterov: bool = Field(True, description="muon: Nesterov momentum")
    ns_steps: int = Field(5, ge=1, le=99, description="muon: Newton-Schulz iterations that orthogonalise each update")
    muon_adjust_lr: Literal["match_rms_adamw", "original", "none"] = Field(
        "match_rms_adamw",
        description="muon: per-matrix update scale (torch.optim.Muon's adjust_lr_fn): match_rms_adamw "
        "multiplies the lr by 0.2*sqrt(max(fan_out, fan_in)) so the update's RMS matches AdamW's and AdamW lrs and "
        "weight decay transfer (Liu et al. 2025); original: sqrt(max(1, fan_out/fan_in)) (Keller Jordan); none: 1",
    )
    width_lr_ref: int | None = Field(
        None,
        ge=1,
        description="scale the peak lr by width_lr_ref / model.d_model (Adam's 1/width rule, as in muP's hidden "
        "layers): optim.lr is then the lr of a model of this width, so one lr serves a ladder of sizes",
    )

    def build(self, model, lr: float, **kwargs):
        """(the torch optimizer for `model` at peak lr `lr`, its summary.json record): AdamW, or Muon with
        its AdamW half. Keyword arguments: pretrain/optim/build.py's `build_optimizer`."""
        from pretrain.optim.build import build_optimizer  # deferred: imports torch

        return build_optimizer(self, model, lr, **kwargs)


class ScheduleConfig(StrictModel):
    name: Annotated[Literal["cosine", "linear", "constant", "wsd"], SweepAxis("")] = Field(
        "cosine", description="lr schedule after warmup"
    )
    warmup_steps: int | None = Field(None, ge=0, description="linear warmup steps (overrides warmup_fraction)")
    warmup_fraction: float = Field(0.05, ge=0, lt=1, description="warmup as a fraction of total steps")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="final lr as a fraction of the peak (cosine, linear, wsd)")
    decay_fraction: float = Field(0.2, gt=0, le=1, description="wsd: fraction of steps spent in the final decay")
    decay_shape: Literal["linear", "cosine", "sqrt"] = Field("linear", description="wsd: shape of the final decay")
    decay_steps: int | None = Field(
        None,
        gt=0,
        description="wsd: the final decay's length in steps (overrides decay_fraction), e.g. the cooldown of "
        "a branch (train.init_from) over the steps after its branch point",
    )


class LoopConfig(StrictModel):
    tokens: Annotated[int | None, SweepAxis("d")] = Field(
        None, gt=0, description="training length in tokens (rounded up to whole steps)"
    )
    steps: Annotated[int | None, SweepAxis("steps")] = Field(
        None, gt=0, description="training length in optimizer steps (instead of tokens)"
    )
    micro_batch_size: Annotated[int, SweepAxis("mb")] = Field(
        16, gt=0, description="sequences per rank per forward/backward"
    )
    global_batch_size: Annotated[int, BRANCH, SweepAxis("b")] = Field(
        16, gt=0, description="sequences per optimizer step, over all ranks and accumulation steps"
    )
    seed: Annotated[int, BRANCH, SweepAxis("s")] = Field(
        0, description="seed for init, data order and dropout-free sampling"
    )
    log_every_steps: Annotated[int, RESUMABLE] = Field(
        10, gt=0, description="steps between metrics.jsonl / W&B records"
    )
    eval_every_steps: Annotated[int, RESUMABLE] = Field(
        100, ge=0, description="steps between held-out evaluations (0: only at the end)"
    )
    eval_tokens: int = Field(65_536, gt=0, description="held-out tokens per evaluation (deterministic windows)")
    checkpoint_every_steps: Annotated[int, RESUMABLE] = Field(
        200, ge=0, description="steps between checkpoints (0: only at the end)"
    )
    keep_checkpoints: Annotated[int, RESUMABLE] = Field(2, gt=0, description="number of most recent checkpoints kept")
    compile: bool = Field(
        False,
        description="compile the model with torch.compile through DeepSpeed's engine.compile() "
        "(a GPU option: on CPU the first steps spend a minute or more compiling and a tiny model runs no faster)",
    )
    compile_backend: Literal["inductor", "aot_eager", "eager"] = Field(
        "inductor",
        description="train.compile's torch.compile backend: inductor (generated kernels; needs a C++ compiler "
        "on CPU, Triton on CUDA), aot_eager or eager (no code generation: to tell a compiler problem from a model one)",
    )
    activation_checkpointing: Annotated[Literal["none", "full", "every_k"], RESUMABLE] = Field(
        "none",
        description="recompute block activations in backward instead of keeping them (dense and MoE blocks; "
        "same losses, less memory, ~1 more forward of compute): "
        "none, full (every block) or every_k (blocks 0, k, 2k, ...)",
    )
    activation_checkpointing_k: Annotated[int | None, RESUMABLE] = Field(
        None, description="every_k: checkpoint every k-th block (k >= 1)"
    )
    tf32: bool = Field(
        True,
        description="CUDA only: TF32 tensor cores for fp32 matmuls and convolutions (MFU is then "
        "measured against the device's TF32 peak); no effect on CPU",
    )
    device_peak_flops: Annotated[float | None, RESUMABLE] = Field(
        None, gt=0, description="override the per-device peak FLOP/s used for MFU"
    )
    threads: Annotated[int | None, RESUMABLE] = Field(
        None, gt=0, description="torch CPU threads per rank (default: allotted cores / local ranks)"
    )
    dist_timeout_s: Annotated[float | None, RESUMABLE] = Field(
        None,
        gt=0,
        description="seconds a collective (all-reduce, barrier, ...) may wait for a peer before the rank "
        "fails, on every process group (DeepSpeed's included); null: torch's default (30 min). A frozen or "
        "cut-off node otherwise holds the other nodes' ranks that long; set it above the longest checkpoint save",
    )
    deterministic: Annotated[bool, RESUMABLE] = Field(
        True,
        description="bitwise-reproducible runs and resumes: fixed OpenMP/MKL thread teams, torch deterministic "
        "algorithms (see docs/reliability.md for the cost); false: let the libraries choose",
    )
    noise_scale_every_steps: int = Field(
        0,
        ge=0,
        description="measure the gradient noise scale B_simple every "
        "this many steps (0: off); logged as grad_noise_scale",
    )
    noise_scale_batches: int = Field(
        4, ge=2, description="micro-batches per noise-scale measurement (B_big = this x micro-batch tokens)"
    )
    nonfinite_grad: Annotated[Literal["skip", "stop"], RESUMABLE] = Field(
        "skip",
        description="a step whose global gradient norm is inf/NaN: skip its update (counted "
        "as skipped_steps) or stop the run (exit 1, last good checkpoint kept)",
    )
    max_skipped_steps: Annotated[int, RESUMABLE] = Field(
        10, ge=0, description="nonfinite_grad skip: stop the run (exit 1) once more than this many steps were skipped"
    )
    max_epochs_warn: Annotated[float | None, RESUMABLE] = Field(
        4.0,
        gt=0,
        description="warn at start when the planned tokens exceed this many passes over the "
        "training split's unique tokens (or any mixture component's); null: never",
    )
    init_from: str | None = Field(
        None,
        description="start from another run's checkpoint: RUN_DIR (its newest complete checkpoint) or "
        "RUN_DIR/checkpoints/step_N; weights, optimizer state, RNG and step N are taken over (data position and lr are "
        "functions of the step), then this run's own schedule runs to its own length. Model, data, optimizer, global "
        "batch, seed, precision and ZeRO stage must equal the parent's, and the lr on every step up to N. "
        "Ignored once this run has checkpoints of its own (it resumes from them)",
    )
    checkpoint_at_steps: Annotated[list[int], RESUMABLE] = Field(
        default_factory=list,
        description="also checkpoint after these steps (e.g. the branch points of a WSD study); "
        "these checkpoints are never pruned by keep_checkpoints",
    )

    @field_validator("tokens", mode="before")
    @classmethod
    def _float_tokens(cls, v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str):
            try:
                f = float(v)
            except ValueError:
                return v
            return int(f) if f.is_integer() else v
        return v

    @field_validator("checkpoint_at_steps")
    @classmethod
    def _steps_sorted(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v):
            raise ValueError(f"steps must be >= 1 (got {v})")
        return sorted(set(v))

    @model_validator(mode="after")
    def _checkpointing_k(self) -> LoopConfig:
        k, mode = self.activation_checkpointing_k, self.activation_checkpointing
        if mode == "every_k" and (k is None or k < 1):
            raise ValueError(
                "train.activation_checkpointing_k must be an integer "
                f">= 1 with activation_checkpointing: every_k (got {k})"
            )
        if mode != "every_k" and k is not None:
            raise ValueError(
                f"train.activation_checkpointing_k is only read with activation_checkpointing: every_k (it is {mode})"
            )
        return self

    def checkpoint_every(self) -> int:
        """Blocks between checkpointed ones (0: none), for `GPT.set_activation_checkpointing`."""
        return {"none": 0, "full": 1}.get(self.activation_checkpointing, self.activation_checkpointing_k or 0)

    @model_validator(mode="after")
    def _length(self) -> LoopConfig:
        if (self.tokens is None) == (self.steps is None):
            raise ValueError("set exactly one of train.tokens or train.steps")
        if self.global_batch_size % self.micro_batch_size:
            raise ValueError(
                f"train.global_batch_size={self.global_batch_size} must be a multiple of "
                f"train.micro_batch_size={self.micro_batch_size} (times the number of ranks)"
            )
        return self


class DeepSpeedSection(StrictModel):
    zero_stage: Annotated[Literal[0, 1, 2, 3], BRANCH] = Field(0, description="ZeRO stage 0-3")
    zero_init: Annotated[bool, RESUMABLE] = Field(
        True,
        description="ZeRO-3 only: build the model inside deepspeed.zero.Init, so each rank allocates only its "
        "partition of every parameter as it is created (a model larger than one rank's memory can be built; the same "
        "initial weights for a seed on CPU); false: every rank first builds the whole model",
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="raw DeepSpeed config merged over the generated one"
    )


class WandbConfig(StrictModel):
    mode: Literal["offline", "online", "disabled"] = Field(
        "offline", description="offline writes under the run directory; online needs WANDB_API_KEY"
    )
    project: str = Field("scalelab", description="W&B project")
    entity: str | None = Field(None, description="W&B entity (team or user)")
    group: str | None = Field(None, description="W&B group (sweeps set it to the sweep name)")
    name: str | None = Field(None, description="W&B run name (default: the run directory name)")
    tags: list[str] = Field(default_factory=list, description="W&B tags")


class TrainConfig(StrictModel):
    name: Annotated[str, RESUMABLE, BOOKKEEPING] = Field(
        "run", description="run name; default run directory is runs/<name>"
    )
    model: Annotated[ModelConfig, BRANCH]
    data: Annotated[DataConfig, BRANCH]
    optim: Annotated[OptimConfig, BRANCH] = Field(default_factory=OptimConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    train: LoopConfig
    deepspeed: DeepSpeedSection = Field(default_factory=DeepSpeedSection)
    precision: Annotated[Literal["fp32", "bf16", "fp16"], BRANCH] = Field(
        "fp32", description="fp32 on CPU; bf16 (or fp16) on GPUs"
    )
    wandb: Annotated[WandbConfig, RESUMABLE] = Field(default_factory=WandbConfig)
    eval: Annotated[EvalSection | None, RESUMABLE] = Field(
        None, description="in-loop lm-eval evaluation at checkpoints (evals/inloop.py); null: none"
    )
    extras: Annotated[dict[str, Any], RESUMABLE, BOOKKEEPING] = Field(
        default_factory=dict, description="free-form metadata (sweep axes, notes); copied to W&B config"
    )

    @model_validator(mode="after")
    def _probe_needs_full_params(self) -> TrainConfig:
        if self.train.noise_scale_every_steps and self.deepspeed.zero_stage == 3:
            raise ValueError(
                "train.noise_scale_every_steps needs full parameters on each rank: use deepspeed.zero_stage 0-2"
            )
        return self

    @model_validator(mode="after")
    def _expert_parallel_zero(self) -> TrainConfig:
        moe = getattr(self.model, "moe", None)
        if moe is not None and getattr(moe, "ep_size", 1) > 1 and self.deepspeed.zero_stage == 3:
            raise ValueError(
                "model.moe.ep_size > 1 needs deepspeed.zero_stage 0, 1 or 2 (DeepSpeed's MoE path rejects ZeRO-3)"
            )
        return self

    @model_validator(mode="after")
    def _muon_zero(self) -> TrainConfig:
        if self.optim.name != "muon":
            return self
        if self.deepspeed.zero_stage > 1:
            raise ValueError(
                f"optim.name muon supports deepspeed.zero_stage 0 or 1 (got {self.deepspeed.zero_stage}): "
                "Muon needs each weight matrix whole, which ZeRO-2/3 split across ranks"
            )
        moe = getattr(self.model, "moe", None)
        if moe is not None and getattr(moe, "ep_size", 1) > 1:
            raise ValueError("optim.name muon needs model.moe.ep_size 1 (whole expert matrices on every rank)")
        if self.precision == "fp16":
            raise ValueError("optim.name muon supports precision fp32 or bf16 (fp16's loss scaling is not wired to it)")
        return self

    @model_validator(mode="after")
    def _mup_lr(self) -> TrainConfig:
        if self.model.parametrization == "mup" and self.optim.width_lr_ref is not None:
            raise ValueError(
                "optim.width_lr_ref and model.parametrization mup both scale the lr with width: "
                "set optim.width_lr_ref null under mup (its hidden-matrix lr already scales by mup_base_width/d_model)"
            )
        return self

    def total_steps(self) -> int:
        if self.train.steps is not None:
            return self.train.steps
        if self.train.tokens is None:  # LoopConfig's check asks for one of the two
            raise ValueError("train.steps or train.tokens must be set")
        per_step = self.train.global_batch_size * self.model.seq_len
        return max(1, math.ceil(self.train.tokens / per_step))

    def peak_lr(self) -> float:
        """The peak lr this model trains with: optim.lr, scaled by width_lr_ref / d_model when set."""
        ref = self.optim.width_lr_ref
        return self.optim.lr * ref / self.model.d_model if ref else self.optim.lr

    def tokens_per_step(self) -> int:
        return self.train.global_batch_size * self.model.seq_len
