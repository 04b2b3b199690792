"""Cost projections: FLOPs <-> device-hours, days and dollars on the device table, MFU measured
from the run registry, the inverse budget forms, and what `scalelab plan` prints and refuses."""

from __future__ import annotations

import pytest

from rundir.summary import RunSummary
from scaling.core.errors import InputError
from scaling.planning.cost import DEFAULT_MFU, MFU, Hardware, cost_block, measured_mfu, resolve_mfu
from scaling.planning.devices import DEVICES, device_from_name, peak_flops
from tests.helpers import write_run

H100 = 989e12


def test_hand_checked_cost_of_1e21_flops_on_h100():
    # 1e21 FLOPs / (989e12 FLOP/s x 0.4 x 3600 s) = 702.17 device-hours
    plan = {"compute": 1e21, "conventions": {"compute": "trainer_flops"}, "D_opt": 2e10}
    c = cost_block(plan, Hardware("h100-sxm", "bf16", 8, MFU(0.4, "given (--mfu)"), 2.0))
    assert c["peak_flops"] == H100 and c["mfu"] == 0.4 and c["mfu_source"] == "given (--mfu)"
    assert c["device_hours"] == pytest.approx(702.17, abs=0.01)
    assert c["days"] == pytest.approx(702.17 / 24 / 8, abs=1e-3)  # 3.657 days on 8 GPUs
    assert c["usd"] == pytest.approx(1404.34, abs=0.02)
    assert c["tokens_per_s"] == pytest.approx(2e10 / (702.17 * 3600) * 8, rel=1e-4)  # 63,300 tokens/s over the 8
    assert "device_hours_interval" not in c  # given C and given MFU: nothing uncertain


def test_a_6nd_plan_is_priced_in_trainer_flops_of_its_run():
    plan = {
        "compute": 1e21,
        "conventions": {"compute": "6ND_total"},
        "D_opt": 1e10,
        "run": {"preset": "p", "tokens": 1e10, "compute": {"6ND_total": 1e21, "trainer_flops": 1.2e21}},
    }
    c = cost_block(plan, Hardware("a100-80gb", "bf16", 1, MFU(0.5, "given"), None))
    assert c["hardware_flops_ratio"] == pytest.approx(1.2) and c["usd"] is None
    assert c["device_hours"] == pytest.approx(1.2e21 / (312e12 * 0.5 * 3600))


def test_device_table_holds_dense_peaks():
    assert set(DEVICES) == {
        "a100-40gb",
        "a100-80gb",
        "h100-sxm",
        "h100-pcie",
        "h200",
        "b200",
        "mi300x",
        "l4",
        "l40s",
        "h800",
        "tpu-v4",
    }
    # the datasheets' dense figures (their starred numbers are 2x: 2:4 sparsity)
    dense_bf16 = {
        "a100-40gb": 312e12,
        "a100-80gb": 312e12,
        "h100-sxm": 989e12,
        "h100-pcie": 756e12,
        "h200": 989e12,
        "b200": 2.25e15,
        "mi300x": 1307.4e12,
        "l4": 121e12,
        "l40s": 362.05e12,
        "h800": 989e12,
    }
    for d, v in dense_bf16.items():
        assert peak_flops(d, "bf16") == v == peak_flops(d, "fp16")
        assert peak_flops(d, "fp32") < peak_flops(d, "tf32") < v
    assert peak_flops("tpu-v4", "bf16") == 275e12  # Cloud TPU v4 docs, per chip; no fp32 peak published
    with pytest.raises(InputError, match="--precision 'fp32': choose from bf16"):
        peak_flops("tpu-v4", "fp32")
    with pytest.raises(InputError, match="a100-40gb, a100-80gb, h100-sxm"):
        peak_flops("h100", "bf16")
    from scaling.cli.options import DEVICE_NAMES  # the CLI's light copy (no table import at --help)

    assert DEVICE_NAMES == tuple(DEVICES)


def test_device_table_holds_memory_per_device():
    from rundir.accelerators import DATASHEETS, MEMORY_BYTES

    assert set(MEMORY_BYTES) == set(DEVICES) == set(DATASHEETS)
    gib = 1 << 30  # HBM capacities are binary: an "80GB" A100 reports 81,920 MiB
    assert MEMORY_BYTES["a100-80gb"] == MEMORY_BYTES["h100-sxm"] == MEMORY_BYTES["h800"] == 80 * gib
    assert (
        MEMORY_BYTES["a100-40gb"] == 40 * gib
        and MEMORY_BYTES["h200"] == 141 * gib
        and MEMORY_BYTES["tpu-v4"] == 32 * gib
    )


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L40", None),
        ("NVIDIA H800", "h800"),
        ("table:NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("measured-cpu-fp32", None),
    ],
)
def test_torch_device_names_map_to_the_table(name, key):
    assert device_from_name(name) == key


def priced_run(
    root, name, *, params, tokens_per_s, gpu="NVIDIA H100 80GB HBM3", precision="bf16", world_size=1, status="done"
):
    """A run directory as the trainer leaves it (every RunSummary key), trained on `gpu` at `precision`."""
    fpt = 6.0 * params
    summ = RunSummary(
        status=status,
        name=name,
        steps=1000,
        total_steps=1000,
        tokens=1e9,
        params=params,
        non_embedding_params=params * 0.9,
        active_params=params,
        active_non_embedding_params=params * 0.9,
        flops_per_token=fpt,
        flops=fpt * 1e9,
        batch_tokens=1e6,
        batch_size=512,
        lr=3e-4,
        peak_lr=3e-4,
        final_loss=3.0,
        final_val_loss=3.1,
        final_val_bpb=1.0,
        tokens_per_s=tokens_per_s,
        mfu=0.99,
        peak_flops=494e12,
        peak_source=f"table:{gpu}",
        world_size=world_size,
        threads=8,
        deterministic=False,
        wall_s=1e9 / tokens_per_s,
        eval_s=0.0,
        skipped_steps=0,
        finished_at="2026-01-01T00:00:00+00:00",
    )
    return write_run(root / name, summary=summ, config={"name": name, "precision": precision, "model": {"preset": "x"}})


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    # MFU = 6 N x tokens/s / (989e12 x world size): 0.30, 0.36, 0.42 for the big ones
    priced_run(root, "big-a", params=1e9, tokens_per_s=0.30 * H100 / 6e9)
    priced_run(root, "big-b", params=8e8, tokens_per_s=0.36 * H100 / 4.8e9 * 4, world_size=4)
    priced_run(root, "big-c", params=6e8, tokens_per_s=0.42 * H100 / 3.6e9)
    priced_run(root, "small", params=1e8, tokens_per_s=0.10 * H100 / 6e8)  # a small model: left out (not the largest)
    priced_run(root, "other-gpu", params=2e9, tokens_per_s=1e3, gpu="NVIDIA A100-SXM4-80GB")
    priced_run(root, "fp32", params=2e9, tokens_per_s=1e3, precision="fp32")
    priced_run(root, "failed", params=3e9, tokens_per_s=1e3, status="failed")
    return root


def test_mfu_auto_is_the_median_of_the_largest_runs_on_that_device(runs):
    m, why = measured_mfu(runs, "h100-sxm", "bf16")
    assert m.value == pytest.approx(0.36)  # recomputed against the table's peak, not the summary's own mfu
    assert sorted(m.runs) == ["big-a", "big-b", "big-c"]
    assert m.interval(0.95)[0] == pytest.approx(0.30, abs=0.01) and m.interval(0.95)[1] == pytest.approx(0.42, abs=0.01)
    assert "3 largest of 4 finished h100-sxm bf16 runs" in m.source and "range 0.300-0.420" in m.source
    assert resolve_mfu("0.5", "h100-sxm", "bf16", runs).source == "given (--mfu)"  # a number overrides
    none = resolve_mfu("auto", "l4", "bf16", runs)
    assert none.value == DEFAULT_MFU and "none of the 6 finished runs" in none.source and "Llama 3" in none.source
