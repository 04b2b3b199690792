"""From fit records to new runs: the plan for a budget (plan.py, each law's part of it a planner:
planner.py, planners/; the run it chooses: run_choice.py; budget.py adds cost, layout,
inference and accuracy; report.py prints it; emit.py writes its config), the planned run's model
(run_model.py), and `scalelab predict` at given points (predict.py)."""
