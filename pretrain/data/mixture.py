"""`data.mixture`: train on a weighted mixture of prepared data sets.

Each component names a data preset (configs/data/<name>.yaml), a data config YAML, or a prepared
data folder (one holding meta.json). Presets and YAML files are prepared like any data set (into
their own data.out_dir, else data/<name>); folders are read as they are. All components must
share one tokenizer (the sha256 of tokenizer.json): token ids from two tokenizers cannot be mixed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from base.config_files import PROJECT_ROOT, configs_dir
from pretrain.data.config import DataConfig
from pretrain.data.load import load_data_config
from pretrain.data.prepared import META_FILE, PreparedData, load_prepared
from pretrain.errors import DataError

Log = Callable[[str], None]


@dataclass
class Component:
    label: str
    weight: float  # normalised: the weights of a mixture sum to 1
    spec: str  # what data.mixture.<label>.data named
    data: PreparedData


def component_target(cfg: DataConfig, label: str, spec: str) -> Path | DataConfig:
    """A prepared folder to read, or the data config of a data set to prepare."""

    path = Path(spec).expanduser()
    if (path / META_FILE).is_file():
        return path.resolve()
    if spec.endswith((".yaml", ".yml")):
        found = next((b / spec for b in (Path.cwd(), PROJECT_ROOT) if (b / spec).is_file()), None)
        if found is None:
            raise DataError(f"data.mixture.{label}: data config {spec} not found")
        dcfg = load_data_config(found)
    elif (configs_dir() / "data" / f"{spec}.yaml").is_file():
        dcfg = load_data_config(configs_dir() / "data" / f"{spec}.yaml")
    elif path.is_dir():
        raise DataError(
            f"data.mixture.{label}: {path} is not a prepared data folder (no {META_FILE}); "
            "run `scalelab data prepare` for it first"
        )
    else:
        presets = sorted(p.stem for p in (configs_dir() / "data").glob("*.yaml"))
        raise DataError(
            f"data.mixture.{label}: '{spec}' is neither a data preset (allowed: {', '.join(presets)}), "
            "a data config YAML nor a prepared data folder"
        )
    if dcfg.mixture is not None:
        raise DataError(f"data.mixture.{label}: {spec} is itself a mixture; mixtures of mixtures are not supported")
    updates: dict[str, Any] = {}
    if cfg.root and not dcfg.root:
        updates["root"] = cfg.root
    if cfg.workers and not dcfg.workers:
        updates["workers"] = cfg.workers
    return dcfg.model_copy(update=updates) if updates else dcfg


def component_configs(cfg: DataConfig) -> list[tuple[str, DataConfig]]:
    """(label, data config) of the components that are prepared from a config (not given as folders)."""
    out = []
    for label, comp in (cfg.mixture or {}).items():
        target = component_target(cfg, label, comp.data)
        if isinstance(target, DataConfig):
            out.append((label, target))
    return out


def check_tokenizers(components: list[Component]) -> None:
    shas = {c.label: c.data.meta["tokenizer"]["sha256"] for c in components}
    if len(set(shas.values())) > 1:
        listed = ", ".join(
            f"{label}={sha[:12]} ({c.data.meta['tokenizer']['kind']}, vocab {c.data.vocab_size})"
            for (label, sha), c in zip(shas.items(), components)
        )
        first = components[0].data.tokenizer_path
        raise DataError(
            "data.mixture: the components do not share one tokenizer (sha256 of tokenizer.json: "
            f"{listed}); token ids of different tokenizers cannot be mixed. Prepare every component with the "
            f"same tokenizer, e.g. tokenizer: {{kind: hf, path: {first}}} (or kind: gpt2)"
        )


class MixtureData:
    """A resolved mixture: its components, and the PreparedData fields the trainer and run dir use."""

    def __init__(self, cfg: DataConfig, components: list[Component]):
        check_tokenizers(components)
        self.name, self.components, self.period = cfg.name, components, cfg.mixture_period
        first = components[0].data
        self.out_dir, self.vocab_size, self.eot_id, self.dtype = (
            first.out_dir,
            first.vocab_size,
            first.eot_id,
            first.dtype,
        )
        self.tokenizer_path = first.tokenizer_path
        parts = {
            c.label: {
                "weight": c.weight,
                "data": c.spec,
                "data_dir": str(c.data.out_dir),
                "fingerprint": c.data.fingerprint,
            }
            for c in components
        }
        self.fingerprint = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        self.meta = {
            "name": cfg.name,
            "tokenizer": first.meta["tokenizer"],
            "fingerprint": self.fingerprint,
            "mixture": parts,
        }
        self.reused = all(c.data.reused for c in components)

    def load_tokenizer(self):
        return self.components[0].data.load_tokenizer()


def open_mixture(
    cfg: DataConfig, prepare_missing: bool, log: Log = print, force: bool = False, prepare_fn=None
) -> MixtureData:
    """Resolve every component: prepare presets/configs (prepare_missing) or only load them.

    `prepare_fn(cfg, log=, force=)` prepares one component (default `prepare`; the CLI passes one that
    runs in tasks)."""
    from pretrain.data.prepare import output_dir, prepare  # deferred: imports tokenizers

    prepare_fn = prepare_fn or prepare

    total = sum(c.weight for c in cfg.mixture.values())
    components = []
    for label, comp in cfg.mixture.items():
        target = component_target(cfg, label, comp.data)
        if isinstance(target, Path):
            data = load_prepared(target)
        elif prepare_missing:
            data = prepare_fn(target, log=log, force=force)
        else:
            data = load_prepared(output_dir(target))
        components.append(Component(label, comp.weight / total, comp.data, data))
    return MixtureData(cfg, components)


def planned_vocab(cfg: DataConfig) -> int | None:
    """The vocabulary a mixture will train with, without preparing anything (for sweep plans)."""
    comp = next(iter(cfg.mixture.values()))
    label = next(iter(cfg.mixture))
    try:
        target = component_target(cfg, label, comp.data)
    except DataError:
        return None
    if isinstance(target, Path):
        return int(json.loads((target / META_FILE).read_text())["vocab_size"])
    tok = target.tokenizer
    if tok.kind == "gpt2":
        return 50257
    return tok.vocab_size if tok.kind == "bpe" else None
