"""Every fit that reads a table says the same about a file it cannot use: exit 2, the path and what is
wrong on stderr, no traceback. (`fit accuracy` used to crash on a malformed CSV; `fit lr-annealing`
read a .tsv as commas.)"""

from __future__ import annotations

import pandas as pd

from scaling.data.table_files import read_table


def test_tsv_is_read_with_tabs(tmp_path):
    (tmp_path / "t.tsv").write_text("run\tstep\tlr\tloss\nr\t1\t0.001\t3.5\n")
    assert read_table(tmp_path / "t.tsv").columns.tolist() == ["run", "step", "lr", "loss"]
    pd.DataFrame({"N": [1.0]}).to_parquet(tmp_path / "t.pq")
    assert read_table(tmp_path / "t.pq")["N"].tolist() == [1.0]
