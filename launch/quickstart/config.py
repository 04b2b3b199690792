"""Typed settings of the main job (configs/quickstart.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from base.strict import StrictModel


class DataStep(StrictModel):
    config: str = Field("configs/data/default.yaml", description="data config every run trains on")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides of the data config")


class SweepStep(StrictModel):
    spec: str = Field(description="sweep spec YAML")
    set: list[str] = Field(default_factory=list, description="`scalelab sweep launch --set` edits of the spec")


class BatchLrStep(SweepStep):
    run: Literal["auto"] | bool = Field(
        "auto",
        description="run the batch-size x lr sweep and its law: auto = only when something uses it "
        "(hparams_law or plan.hparams_from_fit); true: always; false: never",
    )


class TransferStep(StrictModel):
    """Tune once, transfer: an lr sweep on the smallest IsoFLOP model under μP, whose chosen lr trains every
    IsoFLOP run, anchor and the plan's run under μP (docs/quickstart.md)."""

    enabled: bool = Field(False, description="run the lr sweep and train every later run under μP with its lr")
    parametrization: Literal["mup"] = Field("mup", description="the parametrization the lr transfers under")
    model: str | None = Field(
        None, description="model preset of the lr sweep (null: the IsoFLOP sweep's smallest, by d_model)"
    )
    base_width: int | None = Field(
        None, ge=1, description="model.mup_base_width of every run (null: the lr sweep model's d_model)"
    )
    lrs: list[float] = Field(
        [7.5e-4, 1.5e-3, 3.0e-3, 6.0e-3, 1.2e-2],
        min_length=3,
        description="peak lrs of the sweep (log-spaced; at least 3 for the parabola)",
    )
    tokens: float = Field(1.0e6, gt=0, description="training tokens of each lr-sweep run")
    set: list[str] = Field(
        default_factory=list, description="`scalelab sweep launch --set` edits of the generated lr-sweep spec"
    )

    @field_validator("lrs", mode="before")
    @classmethod
    def _floats(cls, v):
        return [float(x) for x in v] if isinstance(v, list) else v

    @field_validator("lrs")
    @classmethod
    def _distinct_positive(cls, v):
        if any(not x > 0 for x in v) or len(set(v)) != len(v):
            raise ValueError(f"must be distinct positive learning rates (got {v})")
        return sorted(v)

    @field_validator("tokens", mode="before")
    @classmethod
    def _float(cls, v):
        return float(v) if isinstance(v, (str, int)) else v


class WsdOptions(StrictModel):
    cooldown: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="isoflop.schedule wsd: each run's cooldown as a fraction of its steps (the plan's run too)",
    )
    decay_shape: Literal["linear", "sqrt", "cosine"] = Field(
        "sqrt", description="isoflop.schedule wsd: the cooldown's shape"
    )
    budgets: list[float] | None = Field(
        None,
        description="isoflop.schedule wsd: the IsoFLOP budgets (null: the spec's); "
        "branches make more budgets affordable",
    )

    @field_validator("budgets", mode="before")
    @classmethod
    def _floats(cls, v):
        return [float(x) for x in v] if isinstance(v, list) else v

    @field_validator("budgets")
    @classmethod
    def _positive(cls, v):
        if v is not None and (not v or any(not c > 0 for c in v)):
            raise ValueError(f"must be a non-empty list of positive FLOP budgets (got {v})")
        return v


class IsoflopStep(SweepStep):
    schedule: Literal["cosine", "wsd"] = Field(
        "cosine",
        description="where the IsoFLOP (N, D) points come from: one cosine run each, or WSD cooldown branches "
        "(per size one stable run to the largest budget's tokens, a branch at each smaller budget's)",
    )
    wsd: WsdOptions = Field(default_factory=WsdOptions)


class EvalStep(StrictModel):
    suite: str = Field("tiny", description="eval suite for the final checkpoints")
    limit: int | None = Field(100, description="documents per task (null: the suite's)")
    tasks: list[str] | None = Field(None, description="a subset of the suite's tasks (null: all)")


class FitStep(StrictModel):
    bootstrap: int = Field(200, ge=0, description="bootstrap resamples for every fit")
    n_kind: Literal["total", "non_embedding"] = Field(
        "non_embedding", description="which parameter count is N in every fit"
    )
    compute_kind: Literal["6ND_total", "6ND_nonembed", "trainer_flops"] | None = Field(
        None,
        description="compute convention of the fits and the plan (null: the one the IsoFLOP sweep sized its runs with)",
    )
    batch_lr_optimum: Literal["best", "quadratic"] = Field(
        "quadratic",
        description="each batch/LR group's optimum: its best run, or the vertex of a quadratic in (log lr, log batch)",
    )
    max_embedding_fraction: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="approach 3 leaves out runs whose embeddings exceed this fraction of their parameters",
    )


class PlanStep(StrictModel):
    compute_multiplier: float = Field(10.0, gt=1, description="plan budget = this x the largest IsoFLOP budget")
    hparams_from_fit: bool = Field(
        True, description="train the plan with the batch-lr fit's lr and batch (false: the IsoFLOP runs' recipe)"
    )
    threads: int | None = Field(
        None, ge=1, description="torch threads of the plan's run (default: one per core left after the evaluations)"
    )
    next_sweep: bool = Field(
        False,
        description="train the runs `scalelab study next` proposes for 10x the largest IsoFLOP budget (within the "
        "IsoFLOP sweep's own FLOPs), refit approach 3 on the IsoFLOP runs and them, and re-plan: the report shows "
        "the verdict at 10x and 1000x before and after",
    )


class QuickstartConfig(StrictModel):
    out: str = Field("quickstart", description="output folder (runs/, fits/, plan/, report.md)")
    workers: int = Field(2, ge=1, description="local sweep workers")
    seed: int = Field(
        0, description="train.seed of every run and the fits' bootstrap seed (repeat the study with others)"
    )
    data: DataStep = Field(default_factory=DataStep)
    batch_lr: BatchLrStep
    isoflop: IsoflopStep
    hparams_law: bool = Field(
        True,
        description="fit the batch-size x lr law first; every IsoFLOP "
        "budget and the plan's run take lr and batch from it",
    )
    transfer: TransferStep = Field(default_factory=TransferStep)
    eval: EvalStep = Field(default_factory=EvalStep)
    fit: FitStep = Field(default_factory=FitStep)
    plan: PlanStep = Field(default_factory=PlanStep)

    @model_validator(mode="after")
    def _wsd_one_recipe(self) -> QuickstartConfig:
        if self.isoflop.schedule == "wsd" and self.hparams_law:
            raise ValueError(
                "isoflop.schedule: wsd: branches share their stable run's lr and batch, so the budgets cannot each "
                "take their own from the batch-lr law; set hparams_law: false"
            )
        return self

    @model_validator(mode="after")
    def _batch_lr_used(self) -> QuickstartConfig:
        if self.batch_lr.run is False and self.hparams_law:
            raise ValueError("batch_lr.run: false skips the batch-lr law that hparams_law: true uses; set one of them")
        return self

    @model_validator(mode="after")
    def _one_lr_source(self) -> QuickstartConfig:
        if self.transfer.enabled and (self.hparams_law or self.plan.hparams_from_fit):
            raise ValueError(
                "transfer.enabled: every run takes the lr the μP sweep chose, so the batch-lr law cannot give "
                "another; set hparams_law: false and plan.hparams_from_fit: false"
            )
        return self

    def batch_lr_runs(self) -> bool:
        """Whether stage 2 runs: `batch_lr.run`, where auto means only when its law is used."""
        if self.batch_lr.run == "auto":
            return self.hparams_law or self.plan.hparams_from_fit
        return self.batch_lr.run
