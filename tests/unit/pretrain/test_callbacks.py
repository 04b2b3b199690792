"""The trainer made of parts: a callback's hooks in order with their steps, its state through a
checkpoint, old checkpoints (state under the pre-callback keys) still resuming exactly, a NaN on
the last micro-batch of a step stopping with the weights untouched, and the metric recorder."""

from __future__ import annotations

import pytest
import torch


def test_recorder_window_mean_last_values_and_types():
    from pretrain.engine.recorder import MetricRecorder

    r = MetricRecorder(torch.device("cpu"), world_size=1)
    r.record("loss", torch.tensor(2.0, dtype=torch.float64))
    r.record("loss", torch.tensor(3.0, dtype=torch.float64))
    r.record("grad_norm", torch.tensor(0.5), reduce="none")
    r.record("skipped_steps", 2, reduce="none")
    r.record("missing", None, reduce="none")
    out = r.reduce()
    assert out == {"loss": 2.5, "grad_norm": 0.5, "skipped_steps": 2, "missing": None}
    assert isinstance(out["skipped_steps"], int) and isinstance(out["loss"], float)
    assert r.reduce() == {}  # a new window
    with pytest.raises(ValueError, match="reduce='avg'"):
        r.record("x", 1.0, reduce="avg")
