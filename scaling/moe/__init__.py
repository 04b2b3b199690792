"""MoE scaling laws fitted and planned: the objectives (objectives.py), the fit (fit.py, Clark's in
clark.py), what the runs' design identifies (design.py), compute-optimal shapes (optimum.py), a run's
predicted loss (prediction.py), the plan (plan.py), the run it recommends (run.py) and the router
study's figures from run directories (router_stats.py: the notebooks and benchmarks/moe_routers.py). The laws
are `scaling.laws.moe`; the inputs `scaling.data.moe_inputs`."""
