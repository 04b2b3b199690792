"""The accelerator table: peak **dense** FLOP/s per device and precision, and memory per device.

Vendors print tensor-core figures "with sparsity" (2:4 structured sparsity doubles them); training
runs dense, so every figure here is the dense one (half the starred datasheet number). `fp32` is
plain (non-tensor-core) FP32; `tf32` is the FP32-input tensor-core path where the device has one.
Shared by the cost projection (scaling/planning/devices.py, scaling/planning/cost.py) and the trainer's MFU
(pretrain/callbacks/speed_monitor.py), so both measure against the same peaks; torch-free.

Sources (vendor datasheets; dense = sparse / 2 where the sheet only gives sparse):
- a100-40gb, a100-80gb: NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5 TF, TF32 156 TF,
  BF16/FP16 312 TF (624 with sparsity); SXM and PCIe share these peaks.
- h100-sxm: NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column: FP32 67 TF, TF32 989 TF*,
  BF16/FP16 1,979 TF* (* with sparsity) -> dense 494 / 989 TF.
- h100-pcie: same datasheet, PCIe column: FP32 51 TF, TF32 756 TF*, BF16/FP16 1,513 TF* -> 378 / 756.
- h200: NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column: FP32 67 TF, TF32 989 TF*,
  BF16/FP16 1,979 TF* -> the H100 SXM's compute (more and faster memory only).
- b200: NVIDIA HGX B200 / DGX B200 datasheet (2024), per GPU (8 per board): FP32 75 TF,
  TF32 2.2 PF*, BF16/FP16 4.5 PF* -> dense 1.1 / 2.25 PF.
- mi300x: AMD Instinct MI300X data sheet (2023): FP32 (matrix) 163.4 TF, TF32 653.7 TF,
  BF16/FP16 1,307.4 TF (2,614.9 with sparsity).
- l4: NVIDIA L4 Tensor Core GPU datasheet (2023): FP32 30.3 TF, TF32 120 TF*, BF16/FP16 242 TF*
  -> dense 60 / 121 TF.
- l40s: NVIDIA L40S GPU datasheet (2023): FP32 91.6 TF, TF32 366 TF*, BF16/FP16 733 TF*
  -> dense 183 / 366 TF (the sheet's dense BF16: 362.05 TF).
- h800: NVIDIA H800 Tensor Core GPU datasheet (2023), SXM: the H100 SXM's FP32 67 TF, TF32 989 TF*,
  BF16/FP16 1,979 TF* (the export variant cuts FP64 to 1 TF and NVLink to 400 GB/s, not these);
  80 GB HBM3. The numbers come from secondary copies of the sheet (it was not read directly).
- tpu-v4: Google Cloud TPU v4 documentation ("Peak compute per chip 275 teraflops (bf16 or int8)",
  "HBM2 capacity 32 GiB"), per chip. No fp32/tf32 peak is published, so none is listed.

Memory (`MEMORY_BYTES`, what a plan checks a run's per-device bytes against): the datasheets' capacity,
read as GiB for HBM (NVIDIA's "80GB" A100 reports 81,920 MiB; the H200's "141GB" 143,771 MiB), from
the same sheets: A100 40 / 80 GB, H100 80 GB (SXM and PCIe), H200 141 GB, B200 180 GB (HGX B200:
1,440 GB over 8 GPUs), MI300X 192 GB, L4 24 GB, L40S 48 GB, H800 80 GB, TPU v4 32 GiB. A process
sees a little less (driver, ECC, CUDA context): models/memory.py keeps headroom for that.

Bandwidths and fp8 (the step-time model, scaling/planning/perf_model.py), bytes/s per device, one direction:
`HBM_BYTES_PER_S` the memory bandwidth; `NVLINK_BYTES_PER_S` the scale-up link inside a node (NVLink's
"total" is both directions: half of it here; no NVLink: the PCIe Gen4/5 x16 link, one direction);
`NETWORK_BYTES_PER_S` the scale-out NIC per device of the vendor's reference node (DGX A100: 8 x 200 Gb/s
HDR InfiniBand; DGX H100/H200/B200: 8 x 400 Gb/s ConnectX-7), where the device datasheet names none an
assumption said in `NETWORK_SOURCES`. `FP8_FLOPS`: dense fp8 tensor-core peak (sparse / 2). Sources, the
datasheets above: A100 HBM2e 1,555 GB/s (40 GB) / 2,039 GB/s (80 GB SXM), NVLink 600 GB/s; H100 SXM
HBM3 3.35 TB/s, NVLink 900 GB/s, FP8 3,958 TF*; H100 PCIe HBM2e 2.0 TB/s, NVLink bridge 600 GB/s, FP8
3,026 TF*; H200 HBM3e 4.8 TB/s, NVLink 900 GB/s, FP8 3,958 TF*; B200 (HGX B200, per GPU) HBM3e 8 TB/s,
NVLink 1.8 TB/s, FP8 9 PF*; MI300X HBM3 5.3 TB/s, 7 Infinity Fabric links of 128 GB/s (both directions),
FP8 2,614.9 TF dense; L4 300 GB/s, PCIe Gen4 x16 64 GB/s, FP8 485 TF*; L40S 864 GB/s, PCIe Gen4 x16,
FP8 1,466 TF*; H800 HBM3 3.35 TB/s, NVLink 400 GB/s, FP8 3,958 TF* (secondary copies, as above);
TPU v4: HBM 1,200 GB/s (Cloud TPU docs), ICI not modelled (no entry: the step-time model refuses it).
"""

from __future__ import annotations

import re

PRECISIONS = ("bf16", "fp16", "fp32", "tf32")

# device -> {precision: peak dense FLOP/s per device}
DEVICES: dict[str, dict[str, float]] = {
    "a100-40gb": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "a100-80gb": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "h100-sxm": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "h100-pcie": {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51e12},
    "h200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "b200": {"bf16": 2250e12, "fp16": 2250e12, "tf32": 1100e12, "fp32": 75e12},
    "mi300x": {"bf16": 1307.4e12, "fp16": 1307.4e12, "tf32": 653.7e12, "fp32": 163.4e12},
    "l4": {"bf16": 121e12, "fp16": 121e12, "tf32": 60e12, "fp32": 30.3e12},
    "l40s": {"bf16": 362.05e12, "fp16": 362.05e12, "tf32": 183e12, "fp32": 91.6e12},
    "h800": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "tpu-v4": {"bf16": 275e12},
}

GIB = 1 << 30
# device -> memory per device in bytes (datasheet GB read as GiB; see the docstring)
MEMORY_BYTES: dict[str, int] = {
    "a100-40gb": 40 * GIB,
    "a100-80gb": 80 * GIB,
    "h100-sxm": 80 * GIB,
    "h100-pcie": 80 * GIB,
    "h200": 141 * GIB,
    "b200": 180 * GIB,
    "mi300x": 192 * GIB,
    "l4": 24 * GIB,
    "l40s": 48 * GIB,
    "h800": 80 * GIB,
    "tpu-v4": 32 * GIB,
}

GBPS = 1e9  # bytes/s per GB/s
# device -> bytes/s (one direction; see the docstring)
HBM_BYTES_PER_S: dict[str, float] = {
    "a100-40gb": 1555 * GBPS,
    "a100-80gb": 2039 * GBPS,
    "h100-sxm": 3350 * GBPS,
    "h100-pcie": 2000 * GBPS,
    "h200": 4800 * GBPS,
    "b200": 8000 * GBPS,
    "mi300x": 5300 * GBPS,
    "l4": 300 * GBPS,
    "l40s": 864 * GBPS,
    "h800": 3350 * GBPS,
    "tpu-v4": 1200 * GBPS,
}
NVLINK_BYTES_PER_S: dict[str, float] = {
    "a100-40gb": 300 * GBPS,
    "a100-80gb": 300 * GBPS,
    "h100-sxm": 450 * GBPS,
    "h100-pcie": 300 * GBPS,
    "h200": 450 * GBPS,
    "b200": 900 * GBPS,
    "mi300x": 448 * GBPS,
    "l4": 32 * GBPS,
    "l40s": 32 * GBPS,
    "h800": 200 * GBPS,
}
NETWORK_BYTES_PER_S: dict[str, float] = {
    "a100-40gb": 25 * GBPS,
    "a100-80gb": 25 * GBPS,
    "h100-sxm": 50 * GBPS,
    "h100-pcie": 50 * GBPS,
    "h200": 50 * GBPS,
    "b200": 50 * GBPS,
    "mi300x": 50 * GBPS,
    "l4": 12.5 * GBPS,
    "l40s": 25 * GBPS,
    "h800": 50 * GBPS,
}
NETWORK_SOURCES = {
    "a100-40gb": "DGX A100: 8 x 200 Gb/s HDR InfiniBand",
    "a100-80gb": "DGX A100: 8 x 200 Gb/s HDR InfiniBand",
    "h100-sxm": "DGX H100: 8 x 400 Gb/s ConnectX-7",
    "h100-pcie": "assumed one 400 Gb/s NIC per GPU (the PCIe datasheet names no node design)",
    "h200": "DGX H200: 8 x 400 Gb/s ConnectX-7",
    "b200": "DGX B200: 8 x 400 Gb/s ConnectX-7",
    "mi300x": "assumed one 400 Gb/s NIC per GPU (AMD's data sheet names no node design)",
    "l4": "assumed one 100 Gb/s NIC per GPU",
    "l40s": "assumed one 200 Gb/s NIC per GPU",
    "h800": "DeepSeek-V3 report (arXiv:2412.19437, Sec. 3.1): 400 Gb/s InfiniBand per GPU",
}
FP8_FLOPS: dict[str, float] = {
    "h100-sxm": 1979e12,
    "h100-pcie": 1513e12,
    "h200": 1979e12,
    "b200": 4500e12,
    "mi300x": 2614.9e12,
    "l4": 242.5e12,
    "l40s": 733e12,
    "h800": 1979e12,
}

DATASHEETS = {
    "a100-40gb": "NVIDIA A100 datasheet",
    "a100-80gb": "NVIDIA A100 datasheet",
    "h100-sxm": "NVIDIA H100 datasheet (SXM)",
    "h100-pcie": "NVIDIA H100 datasheet (PCIe)",
    "h200": "NVIDIA H200 datasheet (SXM)",
    "b200": "NVIDIA HGX B200 datasheet (per GPU)",
    "mi300x": "AMD Instinct MI300X data sheet",
    "l4": "NVIDIA L4 datasheet",
    "l40s": "NVIDIA L40S datasheet",
    "h800": "NVIDIA H800 datasheet (SXM)",
    "tpu-v4": "Google Cloud TPU v4 documentation (per chip)",
}


# torch.cuda.get_device_name(...) / rocm names -> table key. Order matters: L40S before L4, and
# variants with other peaks (H100 NVL, H200 NVL, plain L40) map to nothing rather than a wrong row.
_NAME_RULES: tuple[tuple[str, str | None], ...] = (
    (r"\bNVL\b", None),
    (r"A100.*80\s*GB|80\s*GB.*A100", "a100-80gb"),
    (r"A100", "a100-40gb"),
    (r"H800", "h800"),
    (r"H100.*PCIe", "h100-pcie"),
    (r"H100", "h100-sxm"),
    (r"H200", "h200"),
    (r"B200", "b200"),
    (r"MI300X", "mi300x"),
    (r"L40S", "l40s"),
    (r"\bL40\b", None),
    (r"\bL4\b", "l4"),
)


def device_from_name(name: str | None) -> str | None:
    """The table key for a device name as torch reports it ('NVIDIA H100 80GB HBM3' -> 'h100-sxm'),
    or None when the name is not one of the table's devices."""
    if not name:
        return None
    for pattern, key in _NAME_RULES:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return key
    return None
