"""Pre-flight at `sweep plan` / `sweep launch`: a run that would fail once queued (batch not
divisible by micro-batch x the executor's world size, a preset that does not resolve when the
trainer reads launch.yaml, a missing data source, W&B online without credentials) exits 2 naming
the run and the keys, and nothing is queued or written. No training here: fast."""

from __future__ import annotations

from launch.sweep.expand import plan
from tests.helpers import requires_corpus, write_base, write_spec


@requires_corpus
def test_preflight_of_1000_runs_is_fast(work):
    import time

    from launch.commands.preflight import preflight

    base = write_base(work / "base", work / "data")
    spec = write_spec(
        work,
        {
            "name": "big",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "big"),
            "axes": {"train.seed": list(range(100)), "optim.lr": [1e-3 * (i + 1) for i in range(10)]},
        },
    )
    p = plan(spec)
    from launch.sweep.epochs import run_epochs

    run_epochs(p.runs[0])  # the data set's unique tokens, estimated once per data set (seconds), not per run
    t0 = time.perf_counter()
    preflight(p, ["local", "slurm"])
    assert time.perf_counter() - t0 < 2.0
