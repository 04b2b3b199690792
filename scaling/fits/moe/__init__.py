"""The MoE law family (`scalelab fit moe`): the objectives (objectives.py), the fit (fit.py, Clark's in clark.py),
what the runs' design identifies (design.py), compute-optimal shapes (optimum.py) and one run's predicted loss
(prediction.py). The laws are `scaling.laws.moe`, the inputs `scaling.data.moe_inputs`; the plan built on a fit
is scaling/planning/moe_plan.py (and moe_run.py, the run it recommends); the router study's figures are
scaling/data/router_stats.py."""
