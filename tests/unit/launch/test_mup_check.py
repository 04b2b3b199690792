"""`sweep plan`/`launch` pre-flight warns (one line, not an error) when runs under μP differ in depth or
batch size, which width-μP does not cover; sp runs and μP runs that differ in width only pass silently."""

from __future__ import annotations

import json

from tests.helpers import requires_corpus, scalelab, write_base, write_spec

MUP = {"model.parametrization": "mup", "model.mup_base_width": 32}


def plan_spec(work, name: str, axes: dict, set_: dict) -> tuple[int, str, str]:
    base = write_base(work / "base", work / "data")
    spec = write_spec(work, {"name": name, "base": str(base), "kind": "grid", "set": set_, "axes": axes})
    r = scalelab("sweep", "plan", spec, "--format", "json")
    return r.returncode, r.stdout, r.stderr


@requires_corpus
def test_depth_and_batch_under_mup_warn_once_naming_both(work):
    code, out, err = plan_spec(
        work, "deep", {"model.n_layers": [2, 3], "train.global_batch_size": [4, 8]}, {**MUP, "model.d_model": 64}
    )
    assert code == 0 and len(json.loads(out)) == 4  # the JSON on stdout is intact
    lines = [ln for ln in err.splitlines() if "width-μP" in ln]
    assert lines == [
        "warning: 4 runs under model.parametrization mup differ in model.n_layers (2, 3) and tokens per step, "
        "train.global_batch_size x model.seq_len (256, 512): width-μP transfers the lr across width only, "
        "not across depth or batch size (docs/mup.md)"
    ]


@requires_corpus
def test_width_only_under_mup_and_depth_under_sp_are_silent(work):
    code, _, err = plan_spec(work, "wide", {"model.d_model": [32, 64], "optim.lr": [1e-3, 3e-3]}, MUP)
    assert code == 0 and "width-μP" not in err
    code, _, err = plan_spec(work, "sp", {"model.n_layers": [2, 3]}, {})
    assert code == 0 and "width-μP" not in err
