"""The cost of `train.deterministic` on CPU: training steps of the tiny configs with it on and off.

    python benchmarks/determinism_cost.py [--steps 4] [--rounds 6] [--threads N]

One process builds configs/train/tiny.yaml's model (and tiny-moe.yaml's) with AdamW and times
forward + backward + optimizer steps on a fixed batch, switching the deterministic settings on and
off in interleaved rounds (the machine is shared and noisy); it reports the median step time of
each and their ratio, and checks that both settings give the same loss bits.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from models.gpt import GPT  # noqa: E402
from pretrain.config.loader import load_train_config  # noqa: E402
from pretrain.engine.determinism import make_deterministic  # noqa: E402


def set_mode(on: bool) -> None:
    if on:
        make_deterministic(torch.device("cpu"))
        return
    lib = Path(torch.__file__).parent / "lib"
    ctypes.CDLL(str(lib / "libtorch_cpu.so")).MKL_Set_Dynamic(ctypes.c_int(1))  # MKL's default
    torch.use_deterministic_algorithms(False)


def bench(config: str, steps: int, rounds: int) -> dict:
    cfg = load_train_config(REPO / config, ["train.tokens=60000", "model.vocab_size=4096"])
    times: dict[bool, list[float]] = {True: [], False: []}
    losses: dict[bool, float] = {}
    x = torch.randint(
        0, 4096, (cfg.train.micro_batch_size, cfg.model.seq_len + 1), generator=torch.Generator().manual_seed(0)
    )
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            set_mode(on)
            torch.manual_seed(0)
            model = GPT(cfg.model)
            opt = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=True)
            t0 = time.perf_counter()
            for _ in range(steps):
                out = model(x[:, :-1], targets=x[:, 1:], logits=False)
                loss = out.loss if out.aux_loss is None else out.loss + out.aux_loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            times[on].append((time.perf_counter() - t0) / steps)
            losses[on] = loss.item()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    return {"config": config, "on_s": on, "off_s": off, "ratio": on / off, "same_loss": losses[True] == losses[False]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    for config in ("configs/train/tiny.yaml", "configs/train/tiny-moe.yaml"):
        r = bench(config, args.steps, args.rounds)
        print(
            f"{config}: deterministic {r['on_s'] * 1e3:.0f} ms/step, off {r['off_s'] * 1e3:.0f} ms/step, "
            f"ratio {r['ratio']:.3f}, same loss bits: {r['same_loss']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
