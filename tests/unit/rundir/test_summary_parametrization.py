"""summary.json's `parametrization` and `mup` keys: typed, written after `optimizer` when set, absent
from summaries written before them (which read as sp)."""

from __future__ import annotations

from rundir.summary import RunSummary, read_summary, write_summary


def test_parametrization_round_trips_and_old_summaries_have_none(tmp_path):
    mup = {"mup_base_width": 32, "mup_base_head_dim": 8, "mup_width_mult": 2.0}
    write_summary(tmp_path, {"status": "done", "optimizer": {"name": "adamw"}, "parametrization": "mup", "mup": mup})
    d = read_summary(tmp_path)
    keys = list(d)
    assert keys.index("parametrization") == keys.index("optimizer") + 1 and d["mup"] == mup
    assert RunSummary.from_dict(d).parametrization == "mup" and not RunSummary.from_dict(d).other
    old = RunSummary.from_dict({"status": "done"}).to_dict()
    assert "parametrization" not in old and "mup" not in old
