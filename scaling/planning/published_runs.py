"""Published training runs priced by models/pricing.py: docs/model-design.md's table of our device-hours at a
stated MFU beside the reported ones, and the MFU the report implies.

    python -m scaling.planning.published_runs [--mfu 0.4]

Shapes, tokens, devices and device-hours as the papers and model cards give them (each row's
`source`); FLOPs per token from models/accounting.py at the run's sequence length (attention
included), peaks from rundir/accelerators.py (bf16 dense). A report's device-hours cover everything the
authors counted (restarts, downtime, for Llama 3.1 and DeepSeek-V3 the long-context stages too),
so the implied MFU is a lower bound on the MFU of the steps themselves.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from models.accounting import model_counts
from models.config import ModelConfig
from models.mla_config import MLAConfig
from models.moe.config import MoEConfig
from models.pricing import implied_mfu, price
from rundir.accelerators import DEVICES, NETWORK_BYTES_PER_S
from scaling.planning.layout_search import search

STATED_MFU = 0.40  # the cost projection's stated default (scaling/planning/cost.py)
# Llama 3 8B / 70B: the only published cluster size is Meta's launch post (ai.meta.com/blog/meta-llama-3, 18 April
# 2024: "our largest Llama 3 models" ran at over 400 TFLOPS per GPU on 16K GPUs at once, on two 24K-GPU clusters);
# the batch is the Llama 3 paper's for 405B (Table 4: 16M tokens), the only Llama 3 batch published
LLAMA3_CLUSTER = (
    "16,384 GPUs (Meta's Llama 3 launch post: 16K GPUs at once for its largest models) and a 16M-token batch "
    "(Llama 3 paper's, for 405B): neither published for this model"
)
_PREDICTED: dict[str, dict | None] = {}  # by run name: a MoE's three stage searches take seconds


@dataclass(frozen=True)
class PublishedRun:
    name: str
    shape: str  # as the source gives it
    tokens: float
    device: str  # a rundir/accelerators.py key
    device_note: str
    reported_device_hours: float | None
    source: str
    model: ModelConfig | None = None  # our Llama-layout model of it
    flops_per_token: float | None = None  # instead of `model` (DeepSeek-V3: by its active parameters)
    note: str = ""
    num_devices: int | None = None  # the cluster the step-time model lays the run out on
    batch_tokens: float | None = None  # its global batch
    cluster_note: str = ""  # where those two come from
    stages: tuple[tuple[float, int], ...] = ()  # (tokens, seq_len) priced one by one; their tokens sum to `tokens`
    precision: str = "bf16"  # the GEMMs' precision the step-time model prices (fp8: the device's fp8 peak)
    layouts: tuple[dict, ...] = ()  # --layout keys the source fixes, per stage (one dict: every stage)

    def parts(self) -> list[tuple[float, ModelConfig]]:
        """(tokens, model at that stage's sequence length) per stage; the whole run when it has no stages."""
        if not self.stages:
            return [(self.tokens, self.model)]
        return [(t, self.model.model_copy(update={"seq_len": s})) for t, s in self.stages]

    def fpt(self) -> float:
        """FLOPs per token (token-weighted over the stages)."""
        if self.flops_per_token is not None:
            return self.flops_per_token
        total = sum(t * model_counts(m).flops_per_token for t, m in self.parts())
        return total / self.tokens

    def params(self) -> float | None:
        return model_counts(self.model).total if self.model is not None else None


RUNS = (
    PublishedRun(
        "Chinchilla 70B",
        "d 8192, 80 layers, 64 heads of 128, FFN 4d (GeLU), vocab 32000, seq 2048",
        1.4e12,
        "tpu-v4",
        "TPUv3/TPUv4 (no split given)",
        None,
        "Hoffmann et al. 2022, arXiv:2203.15556, Table 4 (shape) and Sec. 3/4 (1.4T tokens, 5.76e23 FLOPs, TPUv3/v4)",
        ModelConfig(d_model=8192, n_layers=80, n_heads=64, d_ff=21845, vocab_size=32000, seq_len=2048),
        note="its 4d GeLU FFN as a SwiGLU of the same parameters (d_ff 8d/3); 64.9B here, 70B in the paper; no "
        "device-hours reported",
    ),
    PublishedRun(
        "Llama 2 70B",
        "d 8192, 80 layers, 64 heads, 8 kv heads, d_ff 28672, vocab 32000, seq 4096",
        2.0e12,
        "a100-80gb",
        "A100-80GB",
        1_720_320,
        "Touvron et al. 2023, arXiv:2307.09288 (2T tokens, 4096 context); Llama 2 model card (1,720,320 A100-80GB "
        "GPU-hours for 70B)",
        ModelConfig(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672, vocab_size=32000, seq_len=4096),
        num_devices=2048,
        batch_tokens=4 * 2**20,
        cluster_note="4M-token batch (paper); 2,048 GPUs assumed (not published)",
    ),
    PublishedRun(
        "Llama 3.1 405B",
        "d 16384, 126 layers, 128 heads, 8 kv heads, d_ff 53248, vocab 128256, seq 8192",
        15.6e12,
        "h100-sxm",
        "H100-80GB",
        30.84e6,
        "Llama 3 paper, arXiv:2407.21783 (15.6T tokens, 8K context in pre-training); Llama 3.1 model card "
        "(30.84M H100-80GB GPU-hours for 405B)",
        ModelConfig(
            d_model=16384, n_layers=126, n_heads=128, n_kv_heads=8, d_ff=53248, vocab_size=128256, seq_len=8192
        ),
        num_devices=16384,
        batch_tokens=16 * 2**20,
        cluster_note="16,384 GPUs, 16M-token batch (Llama 3 paper, Table 4)",
        stages=((14.8e12, 8192), (0.8e12, 131072)),
        note="priced in two stages: 14.8T tokens at 8K, then the ~800B-token long-context stages (Sec. 3.4.2) "
        "all at 128K (an upper bound: the paper grows the context in six steps)",
    ),
    PublishedRun(
        "Llama 3 8B",
        "d 4096, 32 layers, 32 heads, 8 kv heads, d_ff 14336, vocab 128256, seq 8192",
        15e12,
        "h100-sxm",
        "H100-80GB",
        1.3e6,
        "Llama 3 model card (Meta, 2024: 15T+ tokens, 1.3M H100-80GB GPU-hours for 8B); shape from its config.json",
        ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, vocab_size=128256, seq_len=8192),
        num_devices=16384,
        batch_tokens=16 * 2**20,
        cluster_note=LLAMA3_CLUSTER,
    ),
    PublishedRun(
        "Llama 3 70B",
        "d 8192, 80 layers, 64 heads, 8 kv heads, d_ff 28672, vocab 128256, seq 8192",
        15e12,
        "h100-sxm",
        "H100-80GB",
        6.4e6,
        "Llama 3 model card (Meta, 2024: 15T+ tokens, 6.4M H100-80GB GPU-hours for 70B); shape from its config.json",
        ModelConfig(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672, vocab_size=128256, seq_len=8192),
        num_devices=16384,
        batch_tokens=16 * 2**20,
        cluster_note=LLAMA3_CLUSTER,
    ),
    PublishedRun(
        "TinyLlama 1.1B",
        "d 2048, 22 layers, 32 heads, 4 kv heads, d_ff 5632, vocab 32000, seq 2048",
        300e9,
        "a100-40gb",
        "A100-40GB",
        3456,
        "TinyLlama README (Zhang et al. 2024, github.com/jzhang38/TinyLlama): 16 A100-40G, 24k tokens/s per GPU "
        "(56% MFU, no activation checkpointing), 3,456 GPU-hours for 300B tokens, 2M-token batch",
        ModelConfig(d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4, d_ff=5632, vocab_size=32000, seq_len=2048),
        num_devices=16,
        batch_tokens=2 * 2**20,
        cluster_note="16 GPUs, 2M-token batch (README)",
    ),
    PublishedRun(
        "OLMo 2 7B",
        "d 4096, 32 layers, 32 heads, d_ff 11008, vocab 100352, seq 4096",
        4.0e12,
        "h100-sxm",
        "H100",
        None,
        "OLMo 2, arXiv:2501.00656, and the OLMo-2-1124-7B model card (4T tokens, 32 layers, 4096 wide, 32 heads, "
        "4096 context); OLMo-core olmo2_7B (= llama2_7B shape, vocab 100352)",
        ModelConfig(d_model=4096, n_layers=32, n_heads=32, d_ff=11008, vocab_size=100352, seq_len=4096),
        note="device-hours not found in the sources read",
    ),
    PublishedRun(
        "DeepSeek-V3",
        "MoE 671B total, 37B active per token, 61 layers, d 7168, seq 4096",
        14.8e12 + 2 * 1000 * 1920 * 32768,
        "h800",
        "H800",
        2.788e6,
        "DeepSeek-V3 technical report, arXiv:2412.19437 (14.8T tokens, 2.788M H800 GPU-hours for the full training: "
        "2.664M pre-training, 0.119M context extension, 0.005M post-training; 37B activated parameters; Sec. 4.3: "
        "1,000 steps at 32K with batch 1,920 and 1,000 at 128K with batch 480)",
        ModelConfig(
            d_model=7168,
            n_layers=61,
            n_heads=128,
            d_ff=18432,
            vocab_size=129280,
            seq_len=4096,
            moe=MoEConfig(num_experts=256, top_k=8, d_ff=2048, num_shared_experts=1, first_dense_layers=3),
            mla=MLAConfig(
                q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128
            ),
            mtp_depth=1,
        ),
        stages=((14.8e12, 4096), (1000 * 1920 * 32768, 32768), (1000 * 480 * 131072, 131072)),
        num_devices=2048,
        batch_tokens=15360 * 4096,
        precision="fp8",
        layouts=({"tp": 1, "pp": 16, "ep_size": 64, "zero_stage": 1}, {"zero_stage": 1}),
        cluster_note="2,048 H800s, 15,360 x 4K-token batch (1,920 x 32K, 480 x 128K: the same tokens); pre-training "
        "laid out as published (no TP, PP 16, EP 64, ZeRO-1), the extensions searched at ZeRO-1 (their layout "
        "is not published); fp8 GEMMs (Sec. 3.1-3.3, 4.2)",
        note="counted with MLA (q/kv ranks 1536/512, heads of 128 + 64 rope for scores, 128 for values) and one "
        "MTP module (model.mla and model.mtp_depth; config.json's shape: 3 dense layers of d_ff 18432, 58 MoE "
        "layers of 256 experts of 2048 + 1 shared, top 8); 671B parameters + 11.6B for MTP, 37.6B active; "
        "trained in FP8, the MFU is against the bf16 peak; priced in three stages (4K pre-training, the 32K and "
        "128K extensions); the reported hours include post-training (0.005M)",
    ),
)


def predicted(run: PublishedRun) -> dict | None:
    """The step-time model's MFU and device-hours for the run on its cluster (searched layout), or None."""
    if run.name not in _PREDICTED:
        _PREDICTED[run.name] = _predicted(run)
    return _PREDICTED[run.name]


def _predicted(run: PublishedRun) -> dict | None:
    if run.model is None or not run.num_devices or not run.batch_tokens or run.device not in NETWORK_BYTES_PER_S:
        return None
    hours, layouts = 0.0, []
    for i, (tokens, model) in enumerate(run.parts()):
        seqs = round(run.batch_tokens / model.seq_len)
        fixed = run.layouts[min(i, len(run.layouts) - 1)] if run.layouts else None
        got = search(
            model,
            num_devices=run.num_devices,
            global_batch_size=seqs,
            device=run.device,
            precision=run.precision,
            fixed=fixed,
            keep_rejected=0,
        )
        if not got.get("fits"):
            return None
        hours += tokens / got["performance"]["tokens_per_s"] / 3600.0 * run.num_devices
        layouts.append(got["describe"])
    peak = DEVICES[run.device]["bf16"]
    return {
        "mfu": run.fpt() * run.tokens / (hours * 3600.0 * peak),
        "device_hours": hours,
        "layout": "; ".join(layouts),
    }


def row(run: PublishedRun, mfu: float = STATED_MFU) -> dict:
    peak = DEVICES[run.device]["bf16"]
    ours = price(run.fpt(), run.tokens, peak, mfu)
    implied = (
        implied_mfu(ours["hardware_flops"], run.reported_device_hours, peak) if run.reported_device_hours else None
    )
    return {
        "name": run.name,
        "params": run.params(),
        "flops_per_token": run.fpt(),
        "tokens": run.tokens,
        "device": run.device,
        "hardware_flops": ours["hardware_flops"],
        "device_hours": ours["device_hours"],
        "reported_device_hours": run.reported_device_hours,
        "implied_mfu": implied,
        "predicted": predicted(run),
    }


def table_markdown(mfu: float = STATED_MFU) -> str:
    lines = [
        f"| run | shape | tokens | device | hardware FLOPs | our device-hours at MFU {mfu:.2f} | reported "
        "device-hours | implied MFU | predicted MFU, device-hours (no MFU given) | predicted / reported |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in RUNS:
        r = row(run, mfu)
        rep = f"{r['reported_device_hours']:,.0f}" if r["reported_device_hours"] else "not reported"
        imp = f"{r['implied_mfu']:.2f}" if r["implied_mfu"] is not None else "–"
        shape = run.shape + (f" ({run.note})" if run.note else "")
        pred = r["predicted"]
        p_txt = f"{pred['mfu']:.2f}, {pred['device_hours']:,.0f} ({run.cluster_note})" if pred else "–"
        ratio = (
            f"{pred['device_hours'] / r['reported_device_hours']:.2f}" if pred and r["reported_device_hours"] else "–"
        )
        lines.append(
            f"| {run.name} | {shape} | {run.tokens:.3g} | {run.device_note} | {r['hardware_flops']:.3g} | "
            f"{r['device_hours']:,.0f} | {rep} | {imp} | {p_txt} | {ratio} |"
        )
    return "\n".join(lines)


def cluster_grid(names=("Llama 3 8B", "Llama 3 70B"), devices=(2048, 8192, 16384), batches_m=(4, 8, 16)) -> str:
    """The step-time model's MFU and predicted / reported hours for runs whose cluster and batch are not
    published, over the clusters and batches they may have used (docs/model-design.md's sensitivity table)."""
    lines = [
        "| run | GPUs | batch (tokens) | searched layout | predicted MFU | predicted / reported hours |",
        "|---|---|---|---|---|---|",
    ]
    for run in (r for r in RUNS if r.name in names):
        for n in devices:
            for b in batches_m:
                got = search(
                    run.model,
                    num_devices=n,
                    global_batch_size=round(b * 2**20 / run.model.seq_len),
                    device=run.device,
                    keep_rejected=0,
                )
                if not got.get("fits"):
                    lines.append(f"| {run.name} | {n:,} | {b}M | does not fit | – | – |")
                    continue
                perf = got["performance"]
                hours = run.tokens / perf["tokens_per_s"] / 3600.0 * n
                ratio = hours / run.reported_device_hours if run.reported_device_hours else float("nan")
                lines.append(f"| {run.name} | {n:,} | {b}M | {got['describe']} | {perf['mfu']:.2f} | {ratio:.2f} |")
    return "\n".join(lines)


def at_throughput(run: PublishedRun, tflops: float) -> dict | None:
    """The run's device-hours at a stated per-device throughput (model FLOPs per second, the accounting's
    convention: 6N + non-causal attention) beside its reported hours and the step-time model's, or None
    without reported hours. Two published figures for one run (e.g. a card's hours and a launch post's
    TFLOPS per GPU) that differ by more than 1.2 / 0.8 = 1.5x cannot both be within +-20% of one prediction."""
    if not run.reported_device_hours:
        return None
    hours = run.fpt() * run.tokens / (tflops * 1e12) / 3600.0
    pred = predicted(run)
    return {
        "hours": hours,
        "reported_over_these": run.reported_device_hours / hours,
        "predicted_over_these": pred["device_hours"] / hours if pred else None,
        "predicted_over_reported": pred["device_hours"] / run.reported_device_hours if pred else None,
    }


def throughput_table(tflops: float, names=("Llama 3 8B", "Llama 3 70B", "Llama 3.1 405B")) -> str:
    """docs/model-design.md's check of the Llama 3 cards' hours against the launch post's TFLOPS per GPU."""
    lines = [
        f"| run | FLOPs per token | device-hours at {tflops:g} TFLOPS per device | reported | reported / those "
        "| predicted / those | predicted / reported |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in (r for r in RUNS if r.name in names):
        t = at_throughput(run, tflops)
        if t is None:
            continue
        pv, pr = t["predicted_over_these"], t["predicted_over_reported"]
        lines.append(
            f"| {run.name} | {run.fpt():.4g} | {t['hours']:,.0f} | {run.reported_device_hours:,.0f} | "
            f"{t['reported_over_these']:.2f} | {'–' if pv is None else f'{pv:.2f}'} | "
            f"{'–' if pr is None else f'{pr:.2f}'} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description="Published training runs priced by scalelab's cost model.")
    ap.add_argument("--mfu", type=float, default=STATED_MFU, help=f"the stated MFU (default {STATED_MFU})")
    ap.add_argument(
        "--cluster-grid", action="store_true", help="Llama 3 8B and 70B over clusters and batches (not published)"
    )
    ap.add_argument(
        "--at-tflops",
        type=float,
        metavar="T",
        help="the Llama 3 runs' device-hours at T model TFLOPS per device beside their reported hours",
    )
    args = ap.parse_args()
    if args.at_tflops:
        print(throughput_table(args.at_tflops))
        return 0
    if args.cluster_grid:
        print(cluster_grid())
        return 0
    print(table_markdown(args.mfu))
    for run in RUNS:
        print(f"- {run.name}: {run.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
