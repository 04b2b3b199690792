"""Per-step memory and step-time breakdown in metrics.jsonl, from a tiny CLI run on CPU."""

from __future__ import annotations

from tests.helpers import REPO

TIMES = ("time/data_s", "time/fwd_bwd_s", "time/optim_s", "time/step_s")


def test_metric_names_are_documented():
    page = (REPO / "docs/run-directory.md").read_text()
    section = page[page.index("## Metric names") :]
    section = section.split("\n## ", 1)[0]
    for key in (*TIMES, "time/comm_s", "mem/max_allocated_gb", "mem/max_reserved_gb", "mem/max_rss_gb"):
        assert f"`{key}`" in section, key
