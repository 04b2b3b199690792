"""`study next --law batch-lr --sweep`: the proposed groups designed on the study's own model family
(scaling.planning.next_batch_lr_sweep), in the recipe's sequence length and whole sequences."""

from __future__ import annotations

import json

import pytest

from scaling.fits.batch_lr import fit_batch_lr
from scaling.fits.record import FitRecord
from scaling.planning.next_batch_lr import propose_batch_lr
from scaling.planning.next_batch_lr_sweep import MIN_CENTRE_SEQUENCES, design_groups, model_label
from scaling.synthetic.runs import batch_lr_sweep

SHAPES = [  # a tiny family: d_model grows with depth as in configs/models/n*.yaml
    {"d_model": 48, "n_layers": 2, "n_heads": 4, "n_kv_heads": 4, "d_ff": 192, "moe": False},
    {"d_model": 96, "n_layers": 3, "n_heads": 4, "n_kv_heads": 4, "d_ff": 384, "moe": False},
    {"d_model": 192, "n_layers": 4, "n_heads": 4, "n_kv_heads": 4, "d_ff": 768, "moe": False},
]


def _record(recipe=None):
    rec = FitRecord(json.loads(fit_batch_lr(batch_lr_sweep(budgets=(1e14, 1e15))).to_json()))
    if recipe:
        rec["recipe"] = recipe
    return rec


def test_groups_take_the_recipes_family_sequence_length_and_compute():
    recipe = {
        "settings": {"model.seq_len": 128, "model.tie_embeddings": False},
        "models": SHAPES,
        "data": {"tokenizer": {"vocab_size": 1024}},
    }
    rec = _record(recipe)
    p = design_groups(propose_batch_lr(rec, 1e17, budget=3e16, max_groups=3), [rec])
    assert p["seq_len"] == 128 and len(p["groups"]) >= 1
    for g in p["groups"]:
        m = g["model"]
        assert m["seq_len"] == 128 and m["vocab_size"] == 1024 and g["label"] == model_label(m)
        assert 6 * g["N"] * g["D"] == pytest.approx(g["C"], rel=1e-6)  # the record's 6ND_total: D spends C
        # whole sequences; a centre under MIN_CENTRE_SEQUENCES is raised so the smallest factor is >= 1
        assert g["batch_size_centre"] >= MIN_CENTRE_SEQUENCES and min(g["batch_sizes"]) >= 1
        assert len(set(g["batch_sizes"])) == 3 and g["batch_tokens"] == [b * 128.0 for b in g["batch_sizes"]]
    assert not any("names no training recipe" in n for n in p["sweep_notes"])


def test_without_a_recipe_it_says_what_it_assumed():
    rec = _record()
    p = design_groups(propose_batch_lr(rec, 1e17, budget=3e16, max_groups=2), [rec])
    assert p["seq_len"] == 2048 and any("names no training recipe" in n for n in p["sweep_notes"])


def test_a_chinchilla_record_beside_lends_its_runs_family_when_the_batch_lr_one_has_none():
    rec = _record()
    ch = FitRecord(
        {"law": "chinchilla", "approach": 3, "recipe": {"settings": {"model.seq_len": 256}, "models": SHAPES}}
    )
    p = design_groups(propose_batch_lr(rec, 1e17, budget=3e16, max_groups=2), [rec, ch])
    assert p["seq_len"] == 256 and any("from the chinchilla record's runs" in n for n in p["sweep_notes"])
