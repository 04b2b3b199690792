"""The accuracy chain's laws (scaling.planning.accuracy_chain): their records come into `scalelab plan`
through options of their own (--accuracy, --task-loss), which feed the planned run's loss to the sigmoid;
given with --fit they are refused, and `make_plan` leaves them out."""

from __future__ import annotations

from scaling.planning.planner import Planner, register_planner

ACCURACY = register_planner(Planner(law="accuracy", given_with="--accuracy"))
TASK_LOSS = register_planner(Planner(law="task-loss", given_with="--task-loss"))
PLANNERS = (ACCURACY, TASK_LOSS)
