"""Compute <-> device-hours, wall-clock days and dollars, with the assumptions stated.

    device_hours = hardware FLOPs / (peak dense FLOP/s x MFU x 3600)
    days = device_hours / (24 K),  usd = device_hours x price per device-hour

Hardware FLOPs are what the devices execute: the trainer's FLOPs (6 x matmul parameters incl. the
output head + attention, per token), the count its MFU is measured against. A plan whose fit
counts compute as 6 N D converts with the planned run's own ratio trainer_flops / C (exactly 1
under trainer_flops; 1 and said when the plan has no preset to price).

MFU: `--mfu X` as given; `--mfu auto` is the median whole-run MFU of the largest finished runs
on that device and precision in the run registry (their spread is the MFU interval), else
DEFAULT_MFU with its stated range; scaling/planning/budget.py then replaces that default with the
step-time model's prediction for the planned run where it can lay the run out. Intervals combine the
fit's bootstrap (N, D, loss, FLOPs where they vary) with MFU draws. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from rundir.files import read_yaml
from rundir.layout import CONFIG
from rundir.read import load_runs
from rundir.summary import read_summary
from scaling.core.bootstrap import interval
from scaling.core.conventions import TokenCost
from scaling.core.errors import InputError
from scaling.laws.allocation import allocate, search_range
from scaling.planning.devices import DATASHEETS, device_from_name, peak_flops
from scaling.planning.inference import bootstrap_laws
from scaling.planning.run_model import run_label

DEFAULT_MFU = 0.40
DEFAULT_MFU_RANGE = (0.30, 0.50)
DEFAULT_MFU_WHY = (
    "default 0.40 (range 0.30-0.50 assumed): well-run dense transformer pretraining in bf16 reaches about "
    "that (Llama 3 405B: 38-43% on H100, Dubey et al. 2024; PaLM 540B: 46% on TPU v4, Chowdhery et al. 2022)"
)
LARGEST_FACTOR = 2.0  # "the largest runs": within this factor of the largest model measured on the device
DRAWS = 4000
SEED = 0


@dataclass
class MFU:
    value: float
    source: str
    draws: np.ndarray | None = None  # MFU values to propagate (None: exact)
    runs: list[str] = field(default_factory=list)

    def interval(self, ci: float) -> list[float] | None:
        return None if self.draws is None else interval(self.draws, ci)


def _precision(run_dir: Path) -> str:
    try:
        cfg = read_yaml(run_dir / CONFIG)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        cfg = {}
    cfg = cfg if isinstance(cfg, dict) else {}
    return cfg.get("precision") or "fp32"  # the trainer's default (pretrain/config/schema.py)


def measured_mfu(root, device: str, precision: str) -> tuple[MFU | None, str]:
    """Whole-run MFU of the registry's finished runs on `device` at `precision`: flops_per_token x
    tokens_per_s / (table peak x world size), recomputed against this table's peak (the trainer's
    own peak table may differ). Median of the largest ones (params within LARGEST_FACTOR of the
    largest); their values are the spread. (None, why) when there are none."""
    if root is None or not Path(root).exists():
        return None, f"no run directory tree at {root}"
    df, _ = load_runs(root)
    peak = peak_flops(device, precision)
    rows, seen = [], 0
    for r in df.to_dict("records") if not df.empty else []:
        if r.get("status") != "done":
            continue
        seen += 1
        summ = read_summary(r["path"]) or {}
        if device_from_name(summ.get("peak_source")) != device or _precision(Path(r["path"])) != precision:
            continue
        fpt, tps, ws, n = r.get("flops_per_token"), r.get("tokens_per_s"), r.get("world_size") or 1, r.get("params")
        if not all(isinstance(v, (int, float)) and np.isfinite(v) and v > 0 for v in (fpt, tps, n)):
            continue
        rows.append((float(n), float(fpt) * float(tps) / (peak * float(ws)), r["run"]))
    if not rows:
        return None, f"none of the {seen} finished runs under {root} ran on {device} at {precision}"
    top = max(n for n, _, _ in rows)
    big = [(m, name) for n, m, name in rows if n >= top / LARGEST_FACTOR]
    vals = np.asarray([m for m, _ in big])
    src = (
        f"measured: median whole-run MFU of the {len(big)} largest of "
        f"{len(rows)} finished {device} {precision} runs under {root} "
        f"(params >= {top / LARGEST_FACTOR:.3g}; range {vals.min():.3f}-{vals.max():.3f})"
    )
    return MFU(float(np.median(vals)), src, vals if vals.size > 1 else None, [name for _, name in big]), src


def resolve_mfu(spec: str | None, device: str, precision: str, runs_root) -> MFU:
    """`--mfu`: a number in (0, 1] as given; 'auto' (or None) from the registry, else the default."""
    if spec not in (None, "auto"):
        try:
            v = float(spec)
        except ValueError:
            raise InputError(f"--mfu must be 'auto' or a number in (0, 1] (got {spec!r})") from None
        if not 0 < v <= 1:
            raise InputError(f"--mfu must be 'auto' or a number in (0, 1] (got {spec!r})")
        return MFU(v, "given (--mfu)")
    got, why = measured_mfu(runs_root, device, precision)
    if got:
        return got
    lo, hi = DEFAULT_MFU_RANGE
    return MFU(DEFAULT_MFU, f"{DEFAULT_MFU_WHY}; no measurement: {why}", np.linspace(lo, hi, 201))


@dataclass
class Hardware:
    device: str
    precision: str
    num_devices: int
    mfu: MFU
    usd_per_device_hour: float | None = None

    @property
    def peak(self) -> float:
        return peak_flops(self.device, self.precision)

    def flops_per_device_hour(self, mfu: float | np.ndarray | None = None):
        return self.peak * (self.mfu.value if mfu is None else mfu) * 3600.0


def budget_device_hours(hw: Hardware, *, budget_usd=None, device_hours=None, days=None) -> tuple[float, str]:
    """The inverse forms as device-hours, and how they were read."""
    if budget_usd is not None:
        if not hw.usd_per_device_hour:
            raise InputError("--budget-usd needs --usd-per-device-hour (the price of one device for one hour)")
        return budget_usd / hw.usd_per_device_hour, f"${budget_usd:,.0f} at ${hw.usd_per_device_hour:g}/device-hour"
    if device_hours is not None:
        return float(device_hours), f"{device_hours:g} device-hours"
    return float(days) * 24.0 * hw.num_devices, f"{days:g} days on {hw.num_devices} devices"


def hardware_ratio(plan: dict) -> tuple[float, str]:
    """Hardware (trainer) FLOPs per FLOP of the plan's convention, from the planned run."""
    conv = (plan.get("conventions") or {}).get("compute")
    run = plan.get("run") or {}
    comp = run.get("compute") or {}
    if conv == "trainer_flops":
        return 1.0, "the fit counts the trainer's FLOPs: hardware FLOPs = C"
    if comp.get("trainer_flops") and comp.get(conv):
        r = comp["trainer_flops"] / comp[conv]

        return r, f"hardware FLOPs = {r:.3g} x C (the planned run {run_label(run)}: trainer FLOPs / {conv})"
    return (
        1.0,
        f"hardware FLOPs taken as C ({conv}; no planned model to "
        "count attention and the output head: an underestimate)",
    )


def plan_for_budget(plan_fn, hw: Hardware, hours: float, iterations: int = 2) -> dict:
    """The plan whose run spends `hours` device-hours: C = hours x peak x MFU x 3600 / r, with r
    (hardware per convention FLOP) read off the plan at that C and refined `iterations` times."""
    hw_flops = hours * hw.flops_per_device_hour()
    C, r = hw_flops, 1.0
    plan = plan_fn(C)
    for _ in range(iterations):
        r_new, _ = hardware_ratio(plan)
        if abs(r_new - r) < 1e-9:
            break
        r, C = r_new, hw_flops / r_new
        plan = plan_fn(C)
    return plan


def _draws(values, n: int, rng) -> np.ndarray:
    arr = np.asarray(values, float)
    arr = arr[np.isfinite(arr)]
    return rng.choice(arr, size=n) if arr.size else np.full(n, np.nan)


def cost_block(
    plan: dict,
    hw: Hardware,
    *,
    ci: float = 0.95,
    flops=None,
    tokens=None,
    flops_samples=None,
    tokens_samples=None,
    budget: dict | None = None,
    fit=None,
) -> dict:
    """The plan's `cost` section: the training of the planned run priced on `hw`.

    flops/tokens: training FLOPs (fit convention) and tokens to price, default the plan's compute
    and its run's tokens; *_samples: their bootstrap draws (inference plans), combined with MFU draws.
    budget: {kind, device_hours, text} for the inverse forms (adds the bought compute's interval
    and the loss interval at it, from the fit's bootstrap x MFU draws)."""
    rng = np.random.default_rng(SEED)
    r, r_note = hardware_ratio(plan)
    C = float(plan["compute"] if flops is None else flops)
    run = plan.get("run") or {}
    D = float(tokens if tokens is not None else run.get("tokens") or plan.get("D_opt"))
    hours = C * r / hw.flops_per_device_hour()
    out = {
        "device": hw.device,
        "precision": hw.precision,
        "peak_flops": hw.peak,
        "peak_source": "dense, " + DATASHEETS[hw.device],
        "mfu": hw.mfu.value,
        "mfu_source": hw.mfu.source,
        "num_devices": hw.num_devices,
        "usd_per_device_hour": hw.usd_per_device_hour,
        "hardware_flops": C * r,
        "hardware_flops_ratio": r,
        "hardware_flops_note": r_note,
        "device_hours": hours,
        "days": hours / 24.0 / hw.num_devices,
        "usd": hours * hw.usd_per_device_hour if hw.usd_per_device_hour else None,
        "tokens": D,
        "tokens_per_s": D / (hours * 3600.0) * hw.num_devices,
        "priced": "training only",
    }
    out["tokens_per_s_per_device"] = out["tokens_per_s"] / hw.num_devices
    if hw.mfu.runs:
        out["mfu_runs"] = hw.mfu.runs
    mfu_iv = hw.mfu.interval(ci)
    if mfu_iv:
        out["mfu_interval"] = mfu_iv
    m = _draws(hw.mfu.draws, DRAWS, rng) if hw.mfu.draws is not None else np.full(DRAWS, hw.mfu.value)
    c = _draws(flops_samples, DRAWS, rng) if flops_samples else np.full(DRAWS, C)
    d = _draws(tokens_samples, DRAWS, rng) if tokens_samples else np.full(DRAWS, D)
    if budget:
        # the budget is fixed; what it buys varies with the MFU
        out["budget"] = budget
        c_bought = C * m / hw.mfu.value
        out["compute_interval"] = interval(c_bought, ci, spread_only=True)
        loss = _loss_draws(fit, c_bought, plan, rng) if fit is not None else None
        if loss is not None:
            out["loss_at_optimum_interval"] = interval(loss, ci, spread_only=True)
        return out
    h = c * r / (hw.peak * m * 3600.0)
    for key, arr in (
        ("device_hours", h),
        ("days", h / 24.0 / hw.num_devices),
        ("usd", h * hw.usd_per_device_hour if hw.usd_per_device_hour else None),
        ("tokens_per_s", d / (h * 3600.0) * hw.num_devices),
    ):
        if arr is not None and (iv := interval(arr, ci, spread_only=True)):
            out[f"{key}_interval"] = iv
    return out


def _loss_draws(fit, C_draws, plan, rng):
    """Loss at the compute-optimal allocation, one bootstrap law per MFU draw (approach 3 only)."""
    if fit.get("approach") != 3:
        return None
    samples = bootstrap_laws(fit)
    if not samples:
        return None
    cost = TokenCost.from_record(fit)
    n_range = search_range(np.asarray((fit.get("data_range") or {}).get("N") or [1.0, 1.0]))
    idx = rng.integers(0, len(samples), size=min(len(C_draws), 400))
    out = []
    for i, Ci in zip(idx, C_draws[: idx.size]):
        law = samples[i]
        if cost.exact:
            out.append(float(law.optimal_loss(Ci)))
        else:
            n, d = allocate(law.predict, float(Ci), cost, n_range)
            out.append(float(law.predict(n, d)))
    return np.asarray(out)


def format_cost(cost: dict, ci: float = 0.95) -> list[str]:
    def iv(key, fmt="{:.4g}"):
        v = cost.get(f"{key}_interval")
        return f"  [{fmt.format(v[0])}, {fmt.format(v[1])}]" if v else ""

    lines = [
        f"cost assumptions: {cost['device']} x {cost['num_devices']}, "
        f"{cost['precision']} dense peak {cost['peak_flops'] / 1e12:.4g} TFLOP/s "
        f"per device ({cost['peak_source']}); MFU {cost['mfu']:.3g}{iv('mfu', '{:.3g}')} ({cost['mfu_source']}); "
        + (
            f"price ${cost['usd_per_device_hour']:g}/device-hour"
            if cost.get("usd_per_device_hour")
            else "no price given (--usd-per-device-hour)"
        ),
        f"  {cost['hardware_flops_note']}; {cost['priced']} ({ci:.0%} intervals)",
    ]
    if cost.get("budget"):
        b = cost["budget"]
        hours = "" if b.get("form") == "device_hours" else f" = {b['device_hours']:.4g} device-hours"
        lines.append(
            f"  budget: {b['text']}{hours} -> compute {b['compute']:.4g} FLOPs{iv('compute')} in the fit's convention"
        )
        if cost.get("loss_at_optimum_interval"):
            lines.append(
                "  loss at the compute-optimal allocation of that "
                f"budget{iv('loss_at_optimum')} (fit bootstrap x MFU spread)"
            )
    exact = (
        ""
        if cost.get("budget") or cost.get("device_hours_interval")
        else "  (no interval: compute and MFU are both given)"
    )
    lines.append(f"  device-hours: {cost['device_hours']:,.4g}{iv('device_hours')}{exact}")
    lines.append(f"  wall-clock: {cost['days']:.4g} days on {cost['num_devices']} devices{iv('days')}")
    if cost.get("usd") is not None:
        lines.append(f"  cost: ${cost['usd']:,.0f}{iv('usd', '${:,.0f}')}")
    lines.append(
        f"  tokens/s needed: {cost['tokens_per_s']:.4g} ({cost['tokens_per_s_per_device']:.4g} "
        f"per device) for {cost['tokens']:.4g} tokens{iv('tokens_per_s')}"
    )
    return lines
