"""Typed settings of the main job (configs/quickstart.yaml)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataStep(_Strict):
    config: str = Field("configs/data/default.yaml", description="data config every run trains on")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides of the data config")


class SweepStep(_Strict):
    spec: str = Field(description="sweep spec YAML")
    set: list[str] = Field(default_factory=list, description="`scalelab sweep launch --set` edits of the spec")


class EvalStep(_Strict):
    suite: str = Field("tiny", description="eval suite for the final checkpoints")
    limit: int | None = Field(100, description="documents per task (null: the suite's)")
    tasks: list[str] | None = Field(None, description="a subset of the suite's tasks (null: all)")


class FitStep(_Strict):
    bootstrap: int = Field(200, ge=0, description="bootstrap resamples for every fit")
    n_kind: Literal["total", "non_embedding"] = Field("non_embedding", description="which parameter count is N in every fit")
    compute_kind: Literal["6ND_total", "6ND_nonembed", "trainer_flops"] | None = Field(
        None, description="compute convention of the fits and the plan (null: the one the IsoFLOP sweep sized its runs with)")
    batch_lr_optimum: Literal["best", "quadratic"] = Field(
        "quadratic", description="each batch/LR group's optimum: its best run, or the vertex of a quadratic in (log lr, log batch)")
    max_embedding_fraction: float | None = Field(
        None, gt=0, lt=1, description="approach 3 leaves out runs whose embeddings exceed this fraction of their parameters")


class PlanStep(_Strict):
    compute_multiplier: float = Field(10.0, gt=1, description="plan budget = this x the largest IsoFLOP budget")
    hparams_from_fit: bool = Field(True, description="train the plan with the batch-lr fit's lr and batch (false: the IsoFLOP runs' recipe)")
    threads: int | None = Field(None, ge=1, description="torch threads of the plan's run (default: one per core left after the evaluations)")


class QuickstartConfig(_Strict):
    out: str = Field("quickstart", description="output folder (runs/, fits/, plan/, report.md)")
    workers: int = Field(2, ge=1, description="local sweep workers")
    seed: int = Field(0, description="train.seed of every run and the fits' bootstrap seed (repeat the study with others)")
    data: DataStep = Field(default_factory=DataStep)
    batch_lr: SweepStep
    isoflop: SweepStep
    hparams_law: bool = Field(True, description="fit the batch-size x lr law first; every IsoFLOP budget and the plan's run take lr and batch from it")
    eval: EvalStep = Field(default_factory=EvalStep)
    fit: FitStep = Field(default_factory=FitStep)
    plan: PlanStep = Field(default_factory=PlanStep)
