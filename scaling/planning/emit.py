"""A plan as files: the planned run's train config (`to_train_config`, the one way a plan becomes a
config, carrying the fits' training recipe) written by `emit_config`, and with a laid-out plan
(--device) a one-run Slurm sweep spec beside it."""

from __future__ import annotations

from pathlib import Path

import yaml

from scaling.core.errors import InputError
from scaling.planning.record import PlanRecord


def run_name(plan: PlanRecord) -> str:
    """The planned run's name (and its train config's `name`): plan-<preset or rule-size>-C<compute>."""
    from scaling.planning.run_model import run_label  # deferred: imports numpy/pydantic (a fast scalelab --help)

    return f"plan-{run_label(plan['run'])}-C{plan['compute']:.0e}".replace("+", "")


def to_train_config(
    plan: PlanRecord,
    base: dict | None = None,
    micro_batch_size: int = 16,
    *,
    data: str | dict | None = None,
    name: str | None = None,
) -> dict:
    """The plan's run as a train config (configs/train/*.yaml shape): the one way a plan becomes a config.

    base: the training recipe the run inherits, as the dotted keys of a fit's recipe (optim.*,
    schedule.*, train.*, model.seq_len, precision); default: the recipe in the plan, i.e. that of
    the runs the law was fitted on. Tokens are the run's planned tokens (its budget in the fits'
    convention); lr and batch come from the batch-lr fit when the plan has them, else from base.
    The global batch is whole sequences and a multiple of the micro-batch (base's
    train.micro_batch_size, else `micro_batch_size`, at most the global batch).
    """
    run = plan.get("run")
    if not run:
        raise InputError("plan has no planned model (no vocab size: give --vocab-size): cannot emit a config")
    recipe = plan.get("recipe") or {}
    st = (recipe.get("settings") or {}) if base is None else base
    seq_len = int(st.get("model.seq_len") or run["seq_len"])
    mem = plan.get("memory") or {}
    if mem.get("fits"):  # the layout the plan chose for its devices
        gbs, micro = int(mem["global_batch_size"]), int(mem["micro_batch_size"])
    else:
        batch_tokens = run.get("batch_tokens") or (st.get("train.global_batch_size") or micro_batch_size) * seq_len
        n_seq = max(1, int(round(batch_tokens / seq_len)))
        micro = max(1, min(int(st.get("train.micro_batch_size") or micro_batch_size), n_seq))
        gbs = max(micro, int(round(n_seq / micro)) * micro)
    tokens = int(round(run["tokens"]))
    optim = {k.split(".", 1)[1]: v for k, v in st.items() if k.startswith("optim.") and v is not None}
    if run.get("lr"):
        optim["lr"] = float(f"{run['lr']:.4g}")
    schedule = {k.split(".", 1)[1]: v for k, v in st.items() if k.startswith("schedule.") and v is not None}
    cfg: dict = {
        "name": name or run_name(plan),
        "model": _model_section(run, seq_len) | _parametrization(st),
        "data": data or recipe.get("data") or "default",
        "optim": optim,
        "schedule": schedule,
        "train": {"tokens": max(tokens, gbs * seq_len), "micro_batch_size": micro, "global_batch_size": gbs},
        "extras": {
            "plan": {k: plan.get(k) for k in ("compute", "N_opt", "D_opt", "n_kind", "conventions") if k in plan}
            | {
                "run": {
                    k: run.get(k)
                    for k in (
                        "preset",
                        "shape_rule",
                        "N",
                        "params",
                        "flops_per_token",
                        "tokens",
                        "loss",
                        "loss_interval",
                        "lr",
                        "batch_tokens",
                    )
                    if run.get(k) is not None
                }
            }
        },
    }
    for key in ("eval_tokens", "eval_every_steps"):  # the same held-out measurement as the fitted runs
        if st.get(f"train.{key}") is not None:
            cfg["train"][key] = st[f"train.{key}"]
    for key in ("precision",):
        if st.get(key):
            cfg[key] = st[key]
    if mem.get("fits"):
        cfg["deepspeed"] = {"zero_stage": int(mem["zero_stage"])}
        cfg["train"]["activation_checkpointing"] = mem["activation_checkpointing"]
        if mem.get("activation_checkpointing_k"):
            cfg["train"]["activation_checkpointing_k"] = int(mem["activation_checkpointing_k"])
        if mem.get("precision") in ("bf16", "fp16"):
            cfg["precision"] = mem["precision"]
    for section in ("optim", "schedule"):
        if not cfg[section]:
            del cfg[section]
    return cfg


def _model_section(run: dict, seq_len: int) -> dict:
    """The run's `model:` section: its preset, or the designed shape (the keys of configs/models/*.yaml)."""
    if run.get("preset"):
        return {"preset": run["preset"], "seq_len": seq_len}
    keep = ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "tie_embeddings")
    return {k: run["model"][k] for k in keep if run["model"].get(k) is not None} | {"seq_len": seq_len}


def _parametrization(st: dict) -> dict:
    """The recipe's μP keys (the fitted runs' parametrization and base shapes; nothing under sp)."""
    if st.get("model.parametrization") != "mup":
        return {}
    keys = ("parametrization", "mup_base_width", "mup_base_head_dim")
    return {k: st[f"model.{k}"] for k in keys if st.get(f"model.{k}") is not None}


def emit_config(
    plan: PlanRecord,
    path: str | Path,
    *,
    micro_batch_size: int = 16,
    data: str | dict | None = None,
    name: str | None = None,
) -> Path:
    """Write `to_train_config(plan, ...)` as a YAML train config, with a header saying where it came
    from; with a laid-out plan (--device) also `<stem>.sweep.yaml`, a one-run sweep spec with the
    layout's Slurm block (nodes, GPUs per node) that `scalelab sweep plan` accepts."""
    cfg = to_train_config(plan, micro_batch_size=micro_batch_size, data=data, name=name)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Written by `scalelab plan --emit-config`: the planned "
        "run for the budget, trained with the recipe of the runs\n"
        "# the laws were fitted on (schedule, warmup, weight decay, sequence length, data).\n"
    )
    out.write_text(header + yaml.safe_dump(cfg, sort_keys=False))
    if (plan.get("memory") or {}).get("fits"):
        sweep_spec_path(out).write_text(
            _sweep_header(plan) + yaml.safe_dump(sweep_spec(plan, out, cfg["name"]), sort_keys=False)
        )
    return out


def sweep_spec_path(config: Path) -> Path:
    return config.with_name(config.stem + ".sweep.yaml")


def sweep_spec(plan: PlanRecord, config: Path, name: str) -> dict:
    """The planned run as a one-run sweep (kind seeds, its train.seed) on Slurm with the plan's layout."""
    mem = plan["memory"]
    return {
        "name": name,
        "base": config.name,
        "kind": "seeds",
        "seeds": [0],
        "executor": {
            "slurm": {
                "partition": "gpu",
                "account": None,
                "nodes": int(mem["nodes"]),
                "gpus_per_node": int(mem["devices_per_node"]),
                "time": "48:00:00",
                "setup": ["source .venv/bin/activate"],
            }
        },
    }


def _sweep_header(plan: PlanRecord) -> str:
    cost = plan.get("cost") or {}
    days = f", about {cost['days']:.3g} days at MFU {cost['mfu']:.2g}" if cost.get("days") else ""
    return (
        "# Written by `scalelab plan --emit-config`: the planned "
        "run as a one-run sweep on Slurm, laid out by the plan\n"
        f"# ({plan['memory']['nodes']} node(s) x {plan['memory']['devices_per_node']} devices{days}). Set partition,\n"
        "# account and time for your cluster, then: scalelab sweep plan "
        "THIS.yaml; scalelab sweep launch THIS.yaml --executor slurm\n"
    )
