"""Sweep spec: a short YAML file that names a base train config and what varies.

The spec is validated like every other config (unknown keys are errors naming the key); the
expansion into runs lives in `launch.sweep.expand`, executor settings are typed here so a typo in a
Slurm option fails at `sweep plan`, not after a day in the queue.

    name: isoflop-tiny
    base: configs/train/tiny.yaml          # train config every run starts from
    set: {data.tokenizer.vocab_size: 1024} # overrides applied to every run
    kind: isoflop                          # grid | zip | isoflop | batch_lr | seeds | moe | wsd
    isoflop: {budgets: [1e12, 3e12], models: [n50k, n100k]}
    seeds: [0, 1]                          # optional: every run repeated per seed
    executor: {local: {workers: 2}, slurm: {partition: gpu, gpus_per_node: 8}}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from base.config_files import PROJECT_ROOT, parse_key_value, read_yaml
from base.strict import StrictModel
from launch.sweep import slurm_fields
from pretrain.config.loader import apply_overrides
from pretrain.errors import ConfigError

Kind = Literal["grid", "zip", "isoflop", "batch_lr", "seeds", "moe", "wsd"]


def _as_float_list(v: Any) -> Any:
    if isinstance(v, list):
        return [float(x) if isinstance(x, str) else x for x in v]
    return v


class AnchorSpec(StrictModel):
    """One run of an IsoFLOP sweep outside its budgets: a model trained on `tokens` tokens."""

    model: Any = Field(description="model preset (name) or model section (mapping)")
    tokens: float = Field(gt=0, description="training tokens")

    @field_validator("tokens", mode="before")
    @classmethod
    def _float(cls, v: Any) -> Any:
        return float(v) if isinstance(v, str) else v


class IsoflopSpec(StrictModel):
    budgets: list[float] = Field(
        description="compute budgets C in FLOPs under `compute`; tokens D = C / (FLOPs per token)"
    )
    models: list[Any] = Field(description="model presets (names) or model sections (mappings)")
    min_steps: int = Field(10, ge=1, description="pairs (budget, model) giving fewer optimizer steps are skipped")
    tokens_per_param: list[float] | None = Field(
        None,
        description="[lo, hi]: per budget, keep the models whose tokens per (total) parameter lie in this window "
        "(an IsoFLOP profile around the optimum: Chinchilla's ~20 sits inside [3, 100])",
    )
    hparams_fit: str | None = Field(
        None,
        description="a `scalelab fit batch-lr` record (compute form, same compute convention): each budget's runs take "
        "lr and global batch from its law at that budget instead of the base config's (DeepSeek's procedure)",
    )
    compute: Literal["6ND_total", "6ND_nonembed", "trainer_flops"] = Field(
        "trainer_flops",
        description="what a budget counts: 6*N*D with total or non-embedding N, or the trainer's FLOPs "
        "(attention and output head included); recorded in each "
        "run's axes so fits group and plan in the same convention",
    )
    anchors: list[AnchorSpec] = Field(
        default_factory=list,
        description="data-rich runs beyond the IsoFLOP profiles, e.g. [{model: n25k, tokens: 8e6}]: "
        "approach 3 fits them with the rest (they pin the data term "
        "and the small-size limit, which profiles at small budgets "
        "leave unidentified); approach 2 leaves them out (they belong to no budget)",
    )

    @field_validator("budgets", mode="before")
    @classmethod
    def _floats(cls, v: Any) -> Any:
        return _as_float_list(v)

    @field_validator("tokens_per_param")
    @classmethod
    def _window(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and not (len(v) == 2 and 0 < v[0] < v[1]):
            raise ValueError(f"must be [lo, hi] with 0 < lo < hi (got {v})")
        return v


class BatchLrSpec(StrictModel):
    models: list[Any] | None = Field(None, description="model presets; default: the base config's model")
    batch_sizes: list[int] | None = Field(None, description="global batch sizes in sequences")
    lrs: list[float] | None = Field(None, description="peak learning rates")
    centre: dict[str, float] | None = Field(None, description="{batch_size, lr} the factors multiply")
    batch_factors: list[float] | None = Field(None, description="multipliers of centre.batch_size")
    lr_factors: list[float] | None = Field(None, description="multipliers of centre.lr")
    per_model: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="model label (a preset name, or d_model<D>-L<layers> for a shape mapping) -> its own centre "
        "{batch_size, lr} and, optionally, its own training `tokens` (over tokens and tokens_per_param)",
    )
    tokens: float | None = Field(None, gt=0, description="training tokens of every run (default: the base config's)")
    tokens_per_param: float | None = Field(None, gt=0, description="tokens = this x non-embedding params, per model")

    @field_validator("lrs", "tokens", "tokens_per_param", mode="before")
    @classmethod
    def _floats(cls, v: Any) -> Any:
        return float(v) if isinstance(v, str) else _as_float_list(v)

    @field_validator("per_model")
    @classmethod
    def _per_model_keys(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for name, entry in v.items():
            bad = sorted(set(entry) - {"batch_size", "lr", "tokens"})
            if bad:
                raise ValueError(f"{name}: unknown key(s) {', '.join(bad)} (allowed: batch_size, lr, tokens)")
            if "tokens" in entry and not entry["tokens"] > 0:
                raise ValueError(f"{name}.tokens must be > 0 (got {entry['tokens']})")
        return v


class MoeSpec(StrictModel):
    """Kind `moe`: experts x granularity x active size x tokens, for `scalelab fit moe` (launch.sweep.expand_moe)."""

    models: list[Any] = Field(
        description="active sizes: model presets (names) or model sections; each is trained dense and as MoEs"
    )
    experts: list[int] | None = Field(
        None, description="routed experts per MoE run (model.moe.num_experts), the same at every granularity"
    )
    expansion: list[float] | None = Field(
        None,
        description="instead of experts: experts = expansion x granularity (Krajewski et al.'s "
        "fixed expansion rate: routed expert parameters / one dense FFN)",
    )
    granularity: list[int] = Field([1], description="G = dense d_ff / expert d_ff; the preset's d_ff must divide by G")
    top_k: int = Field(
        1,
        ge=1,
        description="experts per token at G = 1; a run at granularity "
        "G routes to top_k x G experts (the same active FFN)",
    )
    tokens: list[float] | None = Field(None, description="training tokens of every run (default: the base config's)")
    tokens_per_param: list[float] | None = Field(
        None, description="instead of tokens: tokens = this x the run's active non-embedding parameters"
    )
    dense: bool = Field(True, description="also train each model dense (E = 1, G = 1) at each token count")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="other model.moe keys of every MoE run (router, capacity_factor, ...)"
    )
    min_steps: int = Field(10, ge=1, description="runs with fewer optimizer steps are skipped and listed")

    @field_validator("tokens", "tokens_per_param", "expansion", mode="before")
    @classmethod
    def _floats(cls, v: Any) -> Any:
        return _as_float_list(v)

    @field_validator("experts", "granularity", "expansion", "tokens", "tokens_per_param")
    @classmethod
    def _positive(cls, v: list | None) -> list | None:
        if v is not None and (not v or any(not x > 0 for x in v)):
            raise ValueError(f"must be a non-empty list of positive numbers (got {v})")
        return v

    @field_validator("settings")
    @classmethod
    def _no_shape(cls, v: dict) -> dict:
        shape = sorted(set(v) & {"num_experts", "top_k", "d_ff"})
        if shape:
            raise ValueError(
                f"{', '.join(shape)}: set by the sweep (experts/expansion, top_k, granularity), not in settings"
            )
        return v

    @model_validator(mode="after")
    def _one_of(self) -> MoeSpec:
        if (self.experts is None) == (self.expansion is None):
            raise ValueError(
                "give exactly one of `experts` (experts per run) or `expansion` (experts = expansion x granularity)"
            )
        if self.tokens is not None and self.tokens_per_param is not None:
            raise ValueError("give `tokens` or `tokens_per_param`, not both")
        return self


class WsdSpec(StrictModel):
    """Kind `wsd`: per model one stable run to D_max and cooldown branches from it (launch.sweep.expand_wsd)."""

    models: list[Any] = Field(description="model presets (names) or model sections (mappings); one stable run each")
    tokens: float | None = Field(
        None,
        gt=0,
        description="D_max: the stable run's tokens, rounded up to whole steps (default: the base config's length)",
    )
    fractions: list[float] | None = Field(
        None,
        description="token counts of the branches as fractions of D_max, each in (0, 1] "
        "and a whole number of steps; 1 is the stable run itself (it ends with its own cooldown)",
    )
    budgets: list[float] | None = Field(
        None,
        description="instead of fractions (an IsoFLOP study from branches): compute "
        "budgets C under `compute`; per model a run ends at D = C / (FLOPs per token), rounded "
        "up to whole steps, and the stable run goes to the largest such D",
    )
    tokens_per_param: list[float] | None = Field(
        None,
        description="with budgets: [lo, hi], keep per budget the models whose "
        "tokens per (total) parameter lie in this window (as isoflop.tokens_per_param)",
    )
    min_steps: int = Field(10, ge=1, description="with budgets: (budget, model) pairs giving fewer steps are skipped")
    compute: Literal["6ND_total", "6ND_nonembed", "trainer_flops"] = Field(
        "trainer_flops",
        description="with budgets: what a budget counts (as isoflop.compute); recorded in each run's axes",
    )
    cooldown: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="each run's cooldown as a fraction of its own steps "
        "(Hägele et al.: 0.2), rounded to whole steps; default 0.2 unless cooldown_steps is given",
    )
    cooldown_steps: int | None = Field(None, gt=0, description="instead of cooldown: every run's cooldown in steps")
    decay_shape: Literal["linear", "sqrt", "cosine"] = Field(
        "sqrt",
        description="the cooldown's shape (schedule.decay_shape; "
        "sqrt is 1-sqrt: lr = peak (1 - sqrt(t)) to min_lr_ratio)",
    )
    warmup_steps: int | None = Field(
        None,
        ge=0,
        description="warmup in steps, the same in every run of a model (default: "
        "the base's schedule.warmup_steps, else its warmup_fraction of the stable run)",
    )

    @field_validator("tokens", mode="before")
    @classmethod
    def _float(cls, v: Any) -> Any:
        return float(v) if isinstance(v, str) else v

    @field_validator("fractions", "budgets", "tokens_per_param", mode="before")
    @classmethod
    def _floats(cls, v: Any) -> Any:
        return _as_float_list(v)

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return v
        if not v or any(not c > 0 for c in v) or len(set(v)) != len(v):
            raise ValueError(f"must be distinct positive compute budgets (got {v})")
        return sorted(v)

    @field_validator("tokens_per_param")
    @classmethod
    def _window(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and not (len(v) == 2 and 0 < v[0] < v[1]):
            raise ValueError(f"must be [lo, hi] with 0 < lo < hi (got {v})")
        return v

    @field_validator("fractions")
    @classmethod
    def _in_unit(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("give at least one fraction")
        bad = [x for x in v if not 0 < x <= 1]
        if bad:
            raise ValueError(f"each fraction of D_max must lie in (0, 1] (got {bad})")
        if len(set(v)) != len(v):
            raise ValueError(f"fractions repeat a value (got {v})")
        return sorted(v)

    @model_validator(mode="after")
    def _one_cooldown(self) -> WsdSpec:
        if (self.fractions is None) == (self.budgets is None):
            raise ValueError(
                "give exactly one of `fractions` (branches at fractions of D_max) or `budgets` (an IsoFLOP "
                "study: per model a branch at each budget's token count)"
            )
        if self.budgets is not None and self.tokens is not None:
            raise ValueError("`tokens` (D_max) comes from the largest budget when `budgets` are given; drop one")
        if self.budgets is None and self.tokens_per_param is not None:
            raise ValueError("`tokens_per_param` selects models per budget: give it with `budgets`")
        if self.cooldown is not None and self.cooldown_steps is not None:
            raise ValueError("give `cooldown` (a fraction of each run's steps) or `cooldown_steps`, not both")
        if self.cooldown is None and self.cooldown_steps is None:
            self.cooldown = 0.2
        return self


class LocalExec(StrictModel):
    workers: int = Field(1, ge=1, description="runs at once")
    threads: int | None = Field(None, ge=1, description="torch threads per run (default cores / workers)")
    gpus_per_run: int = Field(1, ge=0, description="GPUs per run when CUDA devices are visible")
    warm_start: bool = Field(
        True,
        description="CPU runs: fork each trainer from one process that imported torch and DeepSpeed as the launch "
        "began (seconds less per run); false starts each as a new process",
    )


class SlurmExec(StrictModel):
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(0, ge=0)
    cpus_per_task: int | None = Field(None, ge=1)
    mem: str | None = Field(None, description="e.g. 64G (Slurm --mem)")
    time: str | None = Field(None, description="e.g. 04:00:00 (Slurm --time)")
    signal_secs: int = Field(
        120, ge=1, description="SIGUSR1 this many seconds before the time limit: checkpoint then requeue"
    )
    requeue: bool = Field(True, description="--requeue, and requeue the task after a signal-triggered checkpoint")
    max_requeues: int = Field(
        3, ge=0, description="at most this many self-requeues per task (SIGUSR1); each is logged in requeues.jsonl"
    )
    max_parallel: int | None = Field(None, ge=1, description="array throttle (%N)")
    launcher: Literal["auto", "single", "local", "srun", "deepspeed"] = Field(
        "auto",
        description="ranks: auto = single process (1 GPU/CPU), local spawn (1 node, >1 GPU), srun per rank (>1 node)",
    )
    extra: list[str] = Field(default_factory=list, description="extra #SBATCH directives, e.g. --constraint=h100")
    setup: list[str] = Field(
        default_factory=list, description="shell lines run before training (module load, source venv)"
    )
    python: str | None = Field(None, description="python executable in the job (default: the launching one)")
    master_port: int = Field(29500, ge=1024, le=65535)

    # Strings that go into the sbatch script: validated here, quoted when written (slurm_fields).
    @field_validator("partition", "account", "qos")
    @classmethod
    def _slurm_name(cls, v: str | None) -> str | None:
        return slurm_fields.check_name(v)

    @field_validator("mem")
    @classmethod
    def _slurm_mem(cls, v: str | None) -> str | None:
        return slurm_fields.check_mem(v)

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, v: str | None) -> str | None:
        return slurm_fields.check_time(v)

    @field_validator("extra")
    @classmethod
    def _slurm_extra(cls, v: list[str]) -> list[str]:
        return [slurm_fields.check_directive(x) for x in v]

    @field_validator("setup")
    @classmethod
    def _slurm_setup(cls, v: list[str]) -> list[str]:
        return [slurm_fields.check_line(x) for x in v]

    @field_validator("python")
    @classmethod
    def _slurm_python(cls, v: str | None) -> str | None:
        return None if v is None else slurm_fields.no_control(v, "the path")


class DeepSpeedExec(StrictModel):
    hostfile: str | None = Field(None, description="DeepSpeed hostfile: `host slots=N` per line")
    num_nodes: int | None = Field(None, ge=1)
    num_gpus: int | None = Field(None, ge=1, description="GPUs per node")
    master_addr: str | None = None
    master_port: int = Field(29500, ge=1024, le=65535)
    launcher: str = Field("pdsh", description="deepspeed --launcher (pdsh, openmpi, mvapich, ...)")


class ExecutorSpec(StrictModel):
    local: LocalExec = Field(default_factory=LocalExec)
    slurm: SlurmExec = Field(default_factory=SlurmExec)
    deepspeed: DeepSpeedExec = Field(default_factory=DeepSpeedExec)


class SweepSpec(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    base: str = Field(description="base train config YAML")
    set: dict[str, Any] = Field(default_factory=dict, description="dotted-key overrides applied to every run")
    kind: Kind
    axes: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="grid/zip: dotted key -> values; isoflop, batch_lr, "
        "seeds, moe: further axes crossed with every run (e.g. optim.name: [adamw, muon])",
    )
    isoflop: IsoflopSpec | None = None
    batch_lr: BatchLrSpec | None = None
    moe: MoeSpec | None = None
    wsd: WsdSpec | None = None
    seeds: list[int] | None = Field(None, description="repeat every run per seed (train.seed)")
    runs_dir: str | None = Field(None, description="where run directories go (default runs/<name>)")
    flops_per_s: float | None = Field(
        None, gt=0, description="achieved model FLOP/s per run for the plan's time estimate"
    )
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)

    @field_validator("set", mode="before")
    @classmethod
    def _set_list(cls, v: Any) -> Any:
        if isinstance(v, list):  # ["k=v", ...]
            return dict(parse_key_value(item, "entry") for item in v)
        return v

    @model_validator(mode="after")
    def _kind_section(self) -> SweepSpec:
        need = {
            "grid": "axes",
            "zip": "axes",
            "isoflop": "isoflop",
            "batch_lr": "batch_lr",
            "seeds": "seeds",
            "moe": "moe",
            "wsd": "wsd",
        }[self.kind]
        if not getattr(self, need):
            raise ValueError(f"kind '{self.kind}' needs a non-empty `{need}` section")
        if self.axes and self.kind == "wsd":
            raise ValueError(
                "axes: kind wsd names its branches after their stable runs and cannot be crossed with axes; "
                "give the value under `set` (one sweep per value)"
            )
        if self.kind == "wsd" and self.seeds is not None:
            raise ValueError(
                "seeds: kind wsd branches each run from its own stable run; give train.seed under `set` "
                "(one sweep per seed)"
            )
        return self

    # Filled by load_spec: the spec file, for resolving relative paths and naming.
    _path: Path | None = None

    def base_path(self) -> Path:
        return resolve_path(self.base, self._path)

    def runs_root(self) -> Path:
        return Path(self.runs_dir or Path("runs") / self.name)


def resolve_path(p: str, spec_path: Path | None) -> Path:
    """A relative path is tried against the cwd, the spec's folder, then the project root."""
    path = Path(os.path.expanduser(p))
    if path.is_absolute():
        return path

    for base in (Path.cwd(), spec_path.parent if spec_path else None, PROJECT_ROOT):
        if base is not None and (base / path).exists():
            return (base / path).resolve()
    return path


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "spec"
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        else:
            msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {key}: {msg}")
    return "\n".join(lines)


def parse_spec(data: dict, path: Path | None = None) -> SweepSpec:
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'sweep spec'}: top level must be a mapping")
    data = dict(data)
    if path is not None:
        data.setdefault("name", path.stem)
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid sweep spec {path or ''}:\n{_format_errors(exc)}".replace(" :", ":")) from None
    spec._path = path
    return spec


def edit_spec(data: dict, overrides: list[str]) -> dict:
    """Apply `--set key=value` edits to a spec mapping. Spec keys hold dots themselves
    (set.data.name), so under `set` and `axes` only the first segment nests."""

    for item in overrides:
        key, value = parse_key_value(item, "spec override")
        head, _, rest = key.partition(".")
        if head in ("set", "axes") and rest:
            data.setdefault(head, {})
            data[head] = dict(data[head] or {})
            data[head][rest] = value
        else:
            data = apply_overrides(data, [item])
    return data


def load_spec(path: str | Path, overrides: list[str] | None = None) -> SweepSpec:
    """Read a spec file; `overrides` (key=value) edit the spec itself, e.g. runs_dir=/scratch/x."""

    p = Path(path)
    data = read_yaml(p)
    if overrides:
        data = edit_spec(data, overrides)
    return parse_spec(data, p.resolve())
