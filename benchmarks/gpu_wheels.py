"""`make gpu-wheels`: what an air-gapped GPU node's image lacks, as wheels, plus a small prepared data set.

The node this is made for (docs/benchmarks.md, "The GPU check") has a python3 with torch, triton,
numpy, scipy, pandas, transformers, ... (IMAGE_HAS, read off the image's package list) but no
package index: what else benchmarks/gpu_check.py needs travels in one folder, at most 64 MiB together
with the working tree, and is installed there with `pip install --no-index --no-deps --target`.

What goes in (run on a machine that reaches the package index, from the project's venv):
- the requirement closure of DeepSpeed, pydantic, hjson, zstandard and lm-eval, as installed in this
  venv (so the node runs the versions CI tested), less what the image has; each as a wheel for the
  node's Python (`--python-version`, manylinux x86-64), an sdist-only one built here into a pure wheel;
- DeepSpeed itself built here from its sdist with DS_BUILD_OPS=0: a pure-Python wheel, its CUDA
  ops unbuilt (the trainer uses torch's fused AdamW, not DeepSpeed's ops);
- data/gutenberg100-gpt2: the first books of the bundled gutenberg100 corpus prepared with
  `scalelab data prepare` and the GPT-2 tokenizer (the GPU presets' vocabulary); the corpus itself
  does not travel;
- data/evals: the local lm-eval task files the check's adapter comparison reads;
- MANIFEST.json: versions, the target Python, sizes.

    python benchmarks/gpu_wheels.py [--out gpu_wheels] [--python-version 3.12] [--books 20]
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEEPSPEED = "0.19.8"
LM_EVAL = "0.4.13"
ROOTS = ("deepspeed", "pydantic", "hjson", "zstandard", "lm-eval")
LIMIT_MIB = 64  # what travels to the node: the working tree and the carried folders together
# The GPU image's packages (the device docs' list, read on such a machine 2026-11-17): never carried.
IMAGE_HAS = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
    certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
    cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
    flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
    huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
    jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
    linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
    mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
    numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
    nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
    nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
    onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
    orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
    propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
    pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
    pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
    scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
    sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore
    threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
    torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3
    uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
# the eval tasks of the check's adapter comparison and of tests/unit/evals/test_agreement.py
EVAL_FILES = (
    "piqa_validation.jsonl",
    "arc_easy_test.jsonl",
    "lambada_openai_test.jsonl",
    "winogrande_validation.jsonl",
    "tinyshakespeare_val_docs.jsonl",
    "blimp/anaphor_number_agreement.jsonl.gz",
)


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots, python_version: str) -> dict[str, str]:
    """{distribution: installed version} of the roots and what they require (no extras, markers
    evaluated for the node's Python), not descending into what the image has."""
    from packaging.requirements import Requirement

    env = {"python_version": python_version, "python_full_version": python_version + ".0", "extra": ""}
    out: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = norm(todo.pop())
        if name in out or name in IMAGE_HAS:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            sys.exit(f"{name} is not installed in this venv ({sys.prefix}): run `make setup` first")
        out[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return out


def pip(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def binary_wheel(name: str, version: str, out: Path, python_version: str) -> bool:
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    res = pip(
        "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
        "--implementation", "cp", *plat, "-d", str(out), f"{name}=={version}",
    )  # fmt: skip
    return res.returncode == 0


def built_wheel(name: str, version: str, out: Path, isolation: bool = True, env: dict | None = None) -> Path:
    """Build a pure-Python wheel from the sdist here; fails if the result is not pure."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["wheel", "-q", "--no-deps", "--no-binary", name, "-w", tmp, f"{name}=={version}"]
        if not isolation:
            args.insert(1, "--no-build-isolation")
        res = pip(*args, env=env)
        if res.returncode:
            sys.exit(f"building a wheel of {name}=={version} failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
        (whl,) = Path(tmp).glob("*.whl")
        if not whl.name.endswith("-py3-none-any.whl") and not whl.name.endswith("-py2.py3-none-any.whl"):
            sys.exit(f"{whl.name}: built from the sdist but not a pure-Python wheel; it would not run on the node")
        return Path(shutil.copy2(whl, out / whl.name))


def prepare_data(out: Path, books: int, val_books: int) -> Path:
    """The first `books` train and `val_books` validation books of gutenberg100, GPT-2 tokens."""
    target = out / "data" / "gutenberg100-gpt2"
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "gutenberg100-gpt2.yaml"
        cfg.write_text(
            json.dumps(
                {
                    "name": "gutenberg100-gpt2",
                    "sources": [{"path": "corpus/gutenberg100/train.txt.gz", "max_documents": books}],
                    "val_sources": [{"path": "corpus/gutenberg100/valid.txt.gz", "max_documents": val_books}],
                    "doc_delimiter": "<|endoftext|>",
                    "doc_chars": None,
                    "tokenizer": {"kind": "gpt2"},
                    "out_dir": str(target),
                }
            )
        )
        # through the CLI, as a user prepares data (`scalelab data prepare`)
        res = subprocess.run(
            [sys.executable, "-m", "launch.cli", "data", "prepare", str(cfg)], cwd=REPO, capture_output=True, text=True
        )
        if res.returncode:
            sys.exit(f"scalelab data prepare failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
    return target


def eval_data(out: Path) -> Path:
    from evals.tasks import data_root

    src, dst = data_root(), out / "data" / "evals"
    dst.mkdir(parents=True, exist_ok=True)
    for name in EVAL_FILES:
        if not (src / name).exists():
            sys.exit(f"eval data {src / name} not found (set SCALELAB_DATA_ROOT to the shared data folder)")
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, dst / name)
    return dst


def mib(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def tracked_mib() -> float:
    res = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True)
    paths = [REPO / p for p in res.stdout.split("\0") if p]
    return sum(p.stat().st_size for p in paths if p.is_file()) / 2**20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "gpu_wheels"), help="folder to fill (emptied first)")
    ap.add_argument("--python-version", default="3.12", help="the node's Python, major.minor (default 3.12)")
    ap.add_argument("--books", type=int, default=20, help="gutenberg100 train books to prepare (default 20)")
    ap.add_argument("--val-books", type=int, default=2, help="gutenberg100 validation books (default 2)")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python_version):
        print(f"--python-version must look like 3.12, got {args.python_version!r}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name, want in (("deepspeed", DEEPSPEED), ("lm-eval", LM_EVAL)):
        have = md.version(name)
        if have != want:
            print(f"warning: this venv has {name} {have}; the check is pinned to {want}", file=sys.stderr)
    dists = closure(ROOTS, args.python_version)
    versions = {n: v for n, v in sorted(dists.items()) if n != "deepspeed"}
    print(f"{len(dists)} distributions the image lacks: " + ", ".join(f"{n} {v}" for n, v in sorted(dists.items())))
    built = []
    for name, version in versions.items():
        if not binary_wheel(name, version, out, args.python_version):
            built.append(built_wheel(name, version, out).name)
    # DeepSpeed: the sdist's setup.py imports torch, so build against this venv's (no isolation)
    ds = built_wheel("deepspeed", dists["deepspeed"], out, isolation=False, env={"DS_BUILD_OPS": "0"})
    built.append(ds.name)
    data = prepare_data(out, args.books, args.val_books)
    evals = eval_data(out)
    wheels = sorted(p.name for p in out.glob("*.whl"))
    meta = json.loads((data / "meta.json").read_text())
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    manifest = {
        "commit": head.stdout.strip() or None,  # the checkout the folder was made in (the node may have no .git)
        "python_version": args.python_version,
        "distributions": dists,
        "wheels": wheels,
        "built_here": sorted(built),
        "data": {
            "folder": "data/gutenberg100-gpt2",
            "tokens": {s: v.get("tokens") for s, v in meta["splits"].items()},
            "vocab_size": meta["vocab_size"],
            "books": args.books,
            "val_books": args.val_books,
        },
        "evals": sorted(str(p.relative_to(evals)) for p in evals.rglob("*") if p.is_file()),
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    total, tree = mib(out), tracked_mib()
    for p in sorted(out.iterdir()):
        print(f"  {mib(p):7.2f} MiB  {p.name}")
    print(
        f"{out}: {len(wheels)} wheels ({sum(mib(out / w) for w in wheels):.1f} MiB), data {mib(out / 'data'):.1f} MiB; "
        f"total {total:.1f} MiB + the tracked tree {tree:.1f} MiB = {total + tree:.1f} MiB of the {LIMIT_MIB} MiB limit"
    )
    if total + tree >= LIMIT_MIB:
        print(f"too large to travel: {total + tree:.1f} MiB >= {LIMIT_MIB} MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
