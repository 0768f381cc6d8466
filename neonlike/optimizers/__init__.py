"""neon's optimizers and learning-rate schedules."""
from .optimizer import (Adadelta, Adagrad, Adam, GradientDescentMomentum, MultiOptimizer, Optimizer,
                        RMSProp, Schedule, StepSchedule, get_param_list)

__all__ = ["Optimizer", "GradientDescentMomentum", "RMSProp", "Adagrad", "Adadelta", "Adam",
           "MultiOptimizer", "Schedule", "StepSchedule", "get_param_list"]
