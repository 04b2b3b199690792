"""MoE plans and the router study: the compute-optimal plan from a MoE fit (plan.py), the run it recommends
(run.py) and the router study's figures from run directories (router_stats.py: the notebooks and
benchmarks/moe_routers.py). The MoE law family (its fit, design and prediction) is `scaling.fits.moe`."""
