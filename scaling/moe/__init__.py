"""MoE scaling laws fitted and planned: the objectives (objectives.py), the fit (fit.py, Clark's in
clark.py), what the runs' design identifies (design.py), compute-optimal shapes (optimum.py), a run's
predicted loss (prediction.py), the plan (plan.py) and the run it recommends (run.py). The laws
are `scaling.laws.moe`; the inputs `scaling.data.moe_inputs`."""
