"""`scalelab study next --law batch-lr --sweep NEXT.yaml`: the proposed compute groups as a sweep spec of
the existing kind `batch_lr` (launch.sweep.spec.BatchLrSpec) and NEXT.base.yaml, its base train config.

Each group becomes one model of the spec: the study's own model family (the shapes of the runs the
record was fitted on, `scaling.planning.plan.designed_candidate`; the default shape rule when the
record names none) designed at the group's N, trained on the tokens that spend the group's compute in
the record's convention (`per_model.<label>.tokens`), with the group's lr x batch grid as a centre
(`per_model.<label>: {batch_size, lr}`) and the design's factors. Batch sizes are whole sequences of
the recipe's sequence length; a centre below MIN_CENTRE_SEQUENCES is raised to it so that the smallest
factor still gives at least one sequence and the three batch sizes stay distinct.
"""

from __future__ import annotations

from pathlib import Path

from scaling.core.conventions import conventions_of
from scaling.core.errors import InputError
from scaling.planning.next_batch_lr import BATCH_FACTORS, LR_FACTORS
from scaling.planning.run_choice import designed_candidate

DEFAULT_SEQ_LEN = 2048  # as the plan designs when the record states no recipe
MIN_CENTRE_SEQUENCES = round(1.0 / min(BATCH_FACTORS))


def design_groups(p: dict, fits: list) -> dict:
    """The proposal with each group's model designed on the study's family: N, D (what the group's
    compute buys that model), flops, the batch sizes in sequences and the lr and batch grid the sweep
    expands to, and the notes on where the shapes and the sequence length came from."""
    from scaling.planning.run_model import default_vocab_size, recipe_vocab  # deferred: reads configs/

    hp = next(f for f in fits if f["law"] == "batch-lr")
    src = next((f for f in [hp, *fits] if f.get("recipe")), hp)
    recipe = src.get("recipe") or {}
    st = recipe.get("settings") or {}
    conv = conventions_of(hp)
    if conv["n_kind"] not in ("total", "non_embedding"):
        raise InputError(f"--sweep: the batch-lr record counts N as {conv['n_kind']}: only dense models are designed")
    seq_len = int(st.get("model.seq_len") or DEFAULT_SEQ_LEN)
    vocab = recipe_vocab(recipe) or default_vocab_size() or 32000
    notes: list[str] = []
    if not recipe:
        notes.append(
            "the record names no training recipe (fitted from a table): models by the default shape rule, "
            f"sequence length {seq_len}, the default data and optimizer settings: edit the .base.yaml beside the spec"
        )
    elif src is not hp:
        notes.append(f"models and recipe from the {src['law']} record's runs (the batch-lr record names none)")
    groups: list[dict] = []
    labels: dict[str, float] = {}
    shaped: list[str] = []
    for g in p["groups"]:
        warn: list[str] = []
        m = designed_candidate(src, g["N"], conv, vocab, seq_len, None, warn)
        shaped += warn
        label = model_label(m["model"])
        if label in labels:
            raise InputError(
                f"--sweep: the groups at {labels[label]:.3g} and {g['C']:.3g} FLOPs design the same model ({label}); "
                "raise --budget-flops or lower --max-runs"
            )
        labels[label] = g["C"]
        N = float(m[conv["n_kind"]])
        D = float(round(g["C"] / m["k"][conv["compute"]]))
        centre = max(MIN_CENTRE_SEQUENCES, int(round(g["batch_tokens_centre"] / seq_len)))
        if centre * seq_len > 1.5 * g["batch_tokens_centre"]:
            notes.append(
                f"group at {g['C']:.3g} FLOPs: its batch centre {g['batch_tokens_centre']:.3g} tokens is under "
                f"{MIN_CENTRE_SEQUENCES} sequences of {seq_len}; raised to {centre} sequences"
            )
        sizes = [int(round(centre * f)) for f in BATCH_FACTORS]  # as launch.sweep.expand rounds them
        lrs = [float(f"{g['lr_centre'] * f:.6g}") for f in LR_FACTORS]
        groups.append(
            g
            | {
                "N": N,
                "D": D,
                "flops": g["runs"] * g["C"],
                "model": m["model"] | {"seq_len": seq_len},
                "label": label,
                "batch_size_centre": centre,
                "batch_sizes": sizes,
                "batch_tokens": [float(b * seq_len) for b in sizes],
                "lrs": lrs,
            }
        )
    if shaped:
        notes.append(
            f"{len(shaped)} departure(s) from the shape rule to meet the groups' N (listed in the spec's header)"
        )
    return p | {"groups": groups, "seq_len": seq_len, "sweep_notes": notes, "shape_notes": shaped, "recipe": recipe}


def model_label(model: dict) -> str:
    """A designed shape's label in the sweep's run names and `per_model` keys: launch.sweep.naming's for a
    shape mapping (d_model and n_layers with the model schema's sweep-axis labels: `d_model64-L2`)."""
    from base.roles import axis_labels  # deferred: the model schema (pydantic)
    from models.config import ModelConfig

    alias = axis_labels(ModelConfig)
    return "-".join(f"{alias.get(k, k)}{model[k]}" for k in ("d_model", "n_layers"))


def sweep_files(p: dict, spec_path: str | Path, name: str | None = None) -> tuple[Path, Path]:
    """Write a designed proposal (`design_groups`) as NEXT.yaml (kind batch_lr) and NEXT.base.yaml."""
    import yaml  # deferred

    from scaling.planning.emit import to_train_config
    from scaling.planning.record import PlanRecord

    spec_path = Path(spec_path)
    name = name or spec_path.stem
    base_path = spec_path.with_name(spec_path.stem + ".base.yaml")
    keep = ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "tie_embeddings", "seq_len")
    g0 = p["groups"][0]
    # the base run: the first group's model and centre through the plan's one way to a train config
    plan = PlanRecord(
        {
            "run": {"model": g0["model"], "seq_len": p["seq_len"], "tokens": g0["D"], "lr": g0["lr_centre"]}
            | {"batch_tokens": g0["batch_size_centre"] * p["seq_len"]},
            "recipe": p["recipe"],
            "compute": g0["C"],
            "warnings": [],
        }
    )
    cfg = to_train_config(plan, name=name)
    spec = {
        "name": name,
        "description": f"scalelab study next --law batch-lr: {len(p['groups'])} compute groups "
        f"({p['spent_flops']:.3g} FLOPs) for the batch/LR law at {p['target_compute']:.3g} FLOPs",
        "base": base_path.name,
        "kind": "batch_lr",
        "batch_lr": {
            "models": [{k: g["model"][k] for k in keep if g["model"].get(k) is not None} for g in p["groups"]],
            "per_model": {
                g["label"]: {
                    "batch_size": g["batch_size_centre"],
                    "lr": float(f"{g['lr_centre']:.6g}"),
                    "tokens": int(g["D"]),
                }
                for g in p["groups"]
            },
            "batch_factors": list(BATCH_FACTORS),
            "lr_factors": list(LR_FACTORS),
        },
    }
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    base_path.write_text(
        "# Written by `scalelab study next --law batch-lr`: the base train config of the proposed groups (the\n"
        "# recipe of the runs the law was fitted on); the sweep sets each run's model, tokens, lr and batch.\n"
        + yaml.safe_dump(cfg, sort_keys=False)
    )
    header = "".join(f"# note: {n}\n" for n in p["sweep_notes"] + p["shape_notes"])
    spec_path.write_text(
        "# Written by `scalelab study next --law batch-lr`: per compute group a model, its tokens at that compute\n"
        "# and an lr x batch grid around the law's prediction (batch_size in sequences).\n"
        f"#   scalelab sweep plan {spec_path.name}; scalelab sweep launch {spec_path.name}\n"
        + header
        + yaml.safe_dump(spec, sort_keys=False)
    )
    return spec_path, base_path
