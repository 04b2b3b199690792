"""Sweep specs: expansion of every kind (counts, stable names and ids, FLOPs = accounting),
invalid specs rejected with a message naming the problem, shipped example sweeps, and the
Slurm script the executor would submit (no training here: fast)."""

from __future__ import annotations

import copy

import pytest

from launch.sweep.expand import expand, plan, vocab_for
from launch.sweep.naming import fmt_num, fmt_sci
from launch.sweep.spec import parse_spec
from models.accounting import model_counts
from pretrain.errors import ConfigError
from tests.helpers import REPO, write_base


@pytest.fixture()
def base(work):
    return write_base(work / "base", work / "data")


def spec_of(base, **kw):
    d = {"name": "t", "base": str(base), **kw}
    return parse_spec(copy.deepcopy(d))


def names(p):
    return [r.name for r in p.runs]


def test_grid_counts_names_and_axes(base):
    p = expand(spec_of(base, kind="grid", axes={"model": ["n50k", "n100k"], "optim.lr": [1e-3, 3e-3, 1e-2]}))
    assert len(p.runs) == 6
    assert names(p) == ["n50k-lr1e-3", "n50k-lr3e-3", "n50k-lr1e-2", "n100k-lr1e-3", "n100k-lr3e-3", "n100k-lr1e-2"]
    r = p.runs[4]
    assert r.cfg.model.d_model == 64 and r.cfg.optim.lr == 3e-3
    assert r.cfg.extras["axes"] == {"model": "n100k", "optim.lr": 3e-3}
    assert r.cfg.extras["sweep"] == "t" and r.cfg.wandb.group == "t" and r.cfg.wandb.name == r.name
    assert len({r.id for r in p.runs}) == 6


def test_zip_and_seeds(base):
    p = expand(spec_of(base, kind="zip", axes={"model": ["n50k", "n100k"], "train.steps": [10, 20]}, seeds=[0, 1]))
    assert names(p) == ["n50k-steps10-s0", "n50k-steps10-s1", "n100k-steps20-s0", "n100k-steps20-s1"]
    assert [r.cfg.train.seed for r in p.runs] == [0, 1, 0, 1]
    s = expand(spec_of(base, kind="seeds", seeds=[3, 4, 5]))
    assert names(s) == ["s3", "s4", "s5"] and [r.steps for r in s.runs] == [12] * 3


def test_moe_axis_names_routers_shared_experts_and_dropless(base):
    """A router comparison (zip over model.moe) names each arm; a mapping that gives none of the
    new keys keeps the name it always had (e8k2), so earlier sweeps' runs are not renamed."""
    arms = [
        None,
        {"num_experts": 8, "top_k": 2},
        {"num_experts": 8, "top_k": 2, "router": "sinkhorn"},
        {"num_experts": 8, "top_k": 2, "router": "aux_free_bias", "capacity_factor": None},
        {"num_experts": 8, "top_k": 1, "num_shared_experts": 1, "router": "aux_free_bias", "capacity_factor": 1.25},
    ]
    p = expand(spec_of(base, kind="zip", axes={"model.moe": arms, "train.steps": [10] * 5}))
    assert names(p) == [
        "dense-steps10",
        "e8k2-steps10",
        "e8k2-sinkhorn-steps10",
        "e8k2-aux_free_bias-dropless-steps10",
        "e8k1-sh1-aux_free_bias-steps10",
    ]
    assert p.runs[3].cfg.model.moe.capacity_factor is None and p.runs[4].cfg.model.moe.num_shared_experts == 1
    with pytest.raises(ConfigError, match="both be named"):  # arms that differ only in an unnamed key are refused
        expand(spec_of(base, kind="zip", axes={"model.moe": [{"d_ff": 32}, {"d_ff": 64}], "train.steps": [10, 10]}))


def test_isoflop_flops_match_accounting(base):
    budgets = [6e8, 2e9, 6e9]
    p = expand(
        spec_of(
            base,
            kind="isoflop",
            set={"model.seq_len": 64},
            isoflop={"budgets": budgets, "models": ["n50k", "n100k", "n200k"], "min_steps": 3},
        )
    )
    assert len(p.runs) + len(p.skipped) == 9
    for r in p.runs:
        c = model_counts(r.cfg.model, vocab_for(r.cfg))
        assert r.flops_per_token == c.flops_per_token
        assert r.non_embedding_params == c.non_embedding
        assert r.flops == r.cfg.total_steps() * r.cfg.tokens_per_step() * c.flops_per_token
        budget = r.axes["budget"]
        # Tokens are rounded up to whole steps: at most one step's FLOPs above the budget.
        assert budget <= r.flops < budget + r.batch_tokens * c.flops_per_token + 1
        assert r.cfg.train.tokens == round(budget / c.flops_per_token)
        assert r.name == f"c{fmt_sci(budget)}-{r.axes['model']}"
    # Bigger models get fewer tokens at equal budget.
    same = [r for r in p.runs if r.axes["budget"] == 6e9]
    assert [r.tokens for r in same] == sorted((r.tokens for r in same), reverse=True)


def test_isoflop_tokens_per_param_window(base):
    spec = spec_of(
        base,
        kind="isoflop",
        set={"model.seq_len": 64},
        isoflop={
            "budgets": [1e11, 1e12],
            "models": ["n25k", "n50k", "n100k", "n200k"],
            "min_steps": 1,
            "tokens_per_param": [1.5, 40],
        },
    )
    p = expand(spec)
    for r in p.runs:
        assert 1.5 <= r.tokens / r.params <= 40 * 1.01  # tokens round up to whole steps
    kept = {(r.axes["budget"], r.axes["model"]) for r in p.runs}
    # 1e11: n25k (5.5 tokens/param), n50k (1.7); 1e12: n50k (17), n100k (6.2), n200k (2.1) -- n25k has 55
    assert kept == {(1e11, "n25k"), (1e11, "n50k"), (1e12, "n50k"), (1e12, "n100k"), (1e12, "n200k")}
    assert any("tokens per parameter outside isoflop.tokens_per_param" in s for s in p.skipped)
    with pytest.raises(ConfigError, match="no model has tokens per parameter within"):
        expand(
            spec_of(
                base,
                kind="isoflop",
                isoflop={"budgets": [1e12], "models": ["n25k"], "min_steps": 1, "tokens_per_param": [1, 2]},
            )
        )


def test_isoflop_takes_lr_and_batch_from_a_batch_lr_law(base, work):
    from scaling import fit_batch_lr
    from scaling.laws.hparams import ComputeHParamLaw
    from scaling.synthetic.runs import batch_lr_sweep

    truth = ComputeHParamLaw(lr_coef=3e-2, lr_exp_C=-0.05, bs_coef=0.01, bs_exp_C=0.5)
    fit = fit_batch_lr(batch_lr_sweep(truth, budgets=(1e10, 1e11, 1e12), noise=0.0)).save(work / "bslr.json")
    iso = {
        "budgets": [1e10, 1e12],
        "models": ["n25k", "n50k"],
        "min_steps": 1,
        "compute": "6ND_total",
        "hparams_fit": str(fit),
    }
    p = expand(spec_of(base, kind="isoflop", set={"model.seq_len": 64}, isoflop=iso))
    for r in p.runs:
        lr, bt = truth.predict(C=r.axes["budget"])
        assert r.cfg.optim.lr == pytest.approx(lr, rel=0.01) and r.axes["lr"] == r.cfg.optim.lr
        assert r.cfg.train.global_batch_size == max(1, round(bt / 64)) == r.axes["batch_size"]
        assert r.cfg.train.global_batch_size % r.cfg.train.micro_batch_size == 0
        assert (
            r.axes["budget"] <= 6 * r.params * r.tokens < r.axes["budget"] + 6 * r.params * r.batch_tokens
        )  # whole steps
    assert len({r.cfg.train.global_batch_size for r in p.runs}) == 2  # the batch grows with the budget
    with pytest.raises(ConfigError, match="counts compute as 6ND_total but isoflop.compute is trainer_flops"):
        expand(spec_of(base, kind="isoflop", isoflop={**iso, "compute": "trainer_flops"}))
    with pytest.raises(ConfigError, match="isoflop.hparams_fit: fit record not found"):
        expand(spec_of(base, kind="isoflop", isoflop={**iso, "hparams_fit": str(work / "missing.json")}))


def test_isoflop_anchors_run_outside_the_budgets(base):
    """isoflop.anchors: one run per (model, tokens), first in the plan (the longest runs start
    first), named for model and tokens, with the sweep's compute convention and no budget."""
    iso = {
        "budgets": [6e9],
        "models": ["n50k", "n100k"],
        "min_steps": 3,
        "anchors": [{"model": "n50k", "tokens": 2.0e6}, {"model": "n25k", "tokens": "3e5"}],
    }
    p = expand(spec_of(base, kind="isoflop", set={"model.seq_len": 64}, isoflop=iso))
    assert names(p) == ["anchor-n50k-d2m", "anchor-n25k-d300k", "c6e9-n50k", "c6e9-n100k"]
    a = p.runs[0]
    assert a.axes == {"model": "n50k", "compute": "trainer_flops", "anchor": True}
    c = model_counts(a.cfg.model, vocab_for(a.cfg))
    assert (
        a.cfg.train.tokens == 2_000_000 and a.flops == a.cfg.total_steps() * a.cfg.tokens_per_step() * c.flops_per_token
    )
    assert all("budget" in r.axes and "anchor" not in r.axes for r in p.runs[2:])
    with pytest.raises(ConfigError, match=r"isoflop.anchors: n25k at 100 tokens is 1 steps < isoflop.min_steps=3"):
        expand(
            spec_of(
                base,
                kind="isoflop",
                set={"model.seq_len": 64},
                isoflop={**iso, "anchors": [{"model": "n25k", "tokens": 100}]},
            )
        )
    with pytest.raises(ConfigError, match="steps: unknown key"):
        expand(spec_of(base, kind="isoflop", isoflop={**iso, "anchors": [{"model": "n25k", "steps": 100}]}))


def test_a_sweep_over_what_the_trainer_does_not_build_is_refused(base):
    """model.mla / model.mtp_depth are priced by the planner only: a sweep refuses them before launching."""
    with pytest.raises(ConfigError, match="run .*model.mtp_depth: the trainer does not build"):
        expand(spec_of(base, kind="grid", axes={"model.mtp_depth": [0, 1]}))


def test_batch_lr_grid_around_centre(base):
    p = expand(
        spec_of(
            base,
            kind="batch_lr",
            batch_lr={
                "models": ["n50k", "n100k"],
                "centre": {"batch_size": 8, "lr": 2e-3},
                "batch_factors": [0.5, 1, 2],
                "lr_factors": [0.5, 1, 2],
                "tokens_per_param": 0.5,
                "per_model": {"n100k": {"batch_size": 16, "lr": 1e-3}},
            },
        )
    )
    assert len(p.runs) == 18
    n50 = [r for r in p.runs if r.axes["model"] == "n50k"]
    assert sorted({r.cfg.train.global_batch_size for r in n50}) == [4, 8, 16]
    assert sorted({r.lr for r in n50}) == [1e-3, 2e-3, 4e-3]
    n100 = [r for r in p.runs if r.axes["model"] == "n100k"]
    assert sorted({r.cfg.train.global_batch_size for r in n100}) == [8, 16, 32]
    for r in p.runs:  # micro-batch always divides the batch
        assert r.cfg.train.global_batch_size % r.cfg.train.micro_batch_size == 0
        assert r.cfg.train.tokens == round(0.5 * r.non_embedding_params)
    assert "n50k-b4-lr1e-3" in names(p)
    # a model's own tokens (study next --law batch-lr: each group at its compute) over tokens_per_param
    own = {"n100k": {"batch_size": 16, "lr": 1e-3, "tokens": 123456}}
    spec = spec_of(
        base,
        kind="batch_lr",
        batch_lr={"models": ["n50k", "n100k"], "centre": {"batch_size": 8, "lr": 2e-3}, "tokens_per_param": 0.5}
        | {"per_model": own},
    )
    for r in expand(spec).runs:
        want = 123456 if r.axes["model"] == "n100k" else round(0.5 * r.non_embedding_params)
        assert r.cfg.train.tokens == want


def test_replanning_never_renames(base, work):
    spec = {
        "name": "t",
        "base": str(base),
        "kind": "isoflop",
        "set": {"model.seq_len": 64},
        "isoflop": {"budgets": [6e8, 2e9], "models": ["n50k", "n100k"], "min_steps": 3},
    }
    a = expand(parse_spec(copy.deepcopy(spec)))
    b = expand(parse_spec(copy.deepcopy(spec)))
    assert [(r.name, r.id) for r in a.runs] == [(r.name, r.id) for r in b.runs]
    spec["isoflop"]["budgets"] = [2e9, 6e8, 6e9]  # reordered + one more budget
    spec["isoflop"]["models"].append("n200k")
    c = {r.name: r.id for r in expand(parse_spec(spec)).runs}
    for r in a.runs:
        assert c[r.name] == r.id
    # The id follows the config: a different lr is a different run.
    d = expand(parse_spec({**spec, "set": {"model.seq_len": 64, "optim.lr": 1e-2}}))
    assert {r.name: r.id for r in d.runs}.keys() == c.keys()
    assert all(c[r.name] != r.id for r in d.runs)


@pytest.mark.parametrize(
    "kw, needle",
    [
        ({"kind": "grid", "axes": {"optim.lrr": [1e-3]}}, "optim.lrr: unknown key"),
        ({"kind": "grid", "axes": {"optim.lr": [1e-3]}, "set": {"train.bogus": 1}}, "train.bogus: unknown key"),
        ({"kind": "grid", "axes": {"optim.lr": []}}, "axes.optim.lr: empty axis"),
        ({"kind": "grid", "axes": {}}, "needs a non-empty `axes`"),
        ({"kind": "zip", "axes": {"optim.lr": [1e-3, 2e-3], "train.seed": [1]}}, "equal lengths"),
        (
            {"kind": "isoflop", "isoflop": {"budgets": [1e3, 1e9], "models": ["n50k", "n100k"]}},
            "too small for the smallest model n50k",
        ),
        ({"kind": "isoflop", "isoflop": {"budgets": [], "models": ["n50k"]}}, "isoflop.budgets: empty axis"),
        ({"kind": "isoflop", "isoflop": {"budgets": [1e9], "models": ["n7b"]}}, "unknown preset 'n7b'"),
        (
            {"kind": "isoflop", "isoflop": {"budgets": [1e9], "models": ["n50k"], "tokens_per_param": [20, 5]}},
            "0 < lo < hi",
        ),
        ({"kind": "grid", "axes": {"optim.lr": [-1.0]}}, "optim.lr"),
        ({"kind": "grid", "axes": {"train.global_batch_size": [6]}}, "must be a multiple"),
        ({"kind": "grid", "axes": {"optim.lr": [1e-3, 0.001]}}, "both be named"),
        ({"kind": "batch_lr", "batch_lr": {"batch_sizes": [4]}}, "needs `lrs` or `centre.lr`"),
        (
            {"kind": "batch_lr", "batch_lr": {"lrs": [1e-3], "per_model": {"n50k": {"lr": 1e-3, "steps": 9}}}},
            "n50k: unknown key(s) steps (allowed: batch_size, lr, tokens)",
        ),
        ({"kind": "sweepy"}, "kind"),
        ({"kind": "grid", "axes": {"optim.lr": [1e-3]}, "colour": "red"}, "colour: unknown key"),
        ({"kind": "seeds"}, "needs a non-empty `seeds`"),
    ],
)
def test_invalid_specs_are_rejected_with_the_problem_named(base, kw, needle):
    with pytest.raises(ConfigError) as e:
        expand(spec_of(base, **kw))
    assert needle in str(e.value)


def test_shipped_example_sweeps_plan():
    for name in ["isoflop-tiny", "bs-lr-tiny", "moe-vs-dense-tiny", "isoflop-125m-1.3b", "bs-lr-125m"]:
        p = plan(REPO / "configs" / "sweeps" / f"{name}.yaml")
        assert p.runs, name
        if name == "isoflop-tiny":
            assert (
                len({r.axes["budget"] for r in p.runs if "budget" in r.axes}) >= 3
                and len({r.axes["model"] for r in p.runs}) >= 3
            )
            assert sum(bool(r.axes.get("anchor")) for r in p.runs) == 2
            assert sum(r.est_s for r in p.runs) < 20 * 60
        if name == "moe-vs-dense-tiny":
            assert {r.cfg.model.moe is None for r in p.runs} == {True, False}
            assert any(r.name.endswith("-dense") for r in p.runs)
        if name.endswith(("125m", "1.3b")):
            assert p.spec.executor.slurm.gpus_per_node == 8


def test_naming_formats():
    assert fmt_num(1_000_000) == "1m" and fmt_num(2_500_000) == "2.5m" and fmt_num(0.003) == "3e-3"
    assert fmt_num(16) == "16" and fmt_sci(1e13) == "1e13" and fmt_sci(1.5e-4) == "1.5e-4"


def test_rank_commands_srun_and_deepspeed_hostfile(work, monkeypatch):
    from launch.run import worker

    monkeypatch.setattr(worker, "slurm_hosts", lambda: ["node1", "node2"])
    base = worker.train_argv(work, "py")
    [(argv, env)] = worker.rank_commands("srun", base, 2, 4, 29501, work)
    assert argv[:5] == ["srun", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--kill-on-bad-exit=1"]
    assert env == {"MASTER_ADDR": "node1", "MASTER_PORT": "29501"} and "--rank-shim" in argv
    [(argv, _)] = worker.rank_commands("deepspeed", base, 2, 4, 29501, work)
    assert (work / "hostfile").read_text() == "node1 slots=4\nnode2 slots=4\n"
    assert argv[:2] == ["deepspeed", "--hostfile"] and "--module" in argv and "pretrain.cli" in argv
    ranks = worker.rank_commands("local", base, 1, 2, 29501, work)
    assert [e["RANK"] for _, e in ranks] == ["0", "1"] and ranks[0][1]["WORLD_SIZE"] == "2"
