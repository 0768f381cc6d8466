"""neon's optimizers and learning-rate schedules."""
from .optimizer import (Adadelta, Adagrad, Adam, ExpSchedule, GradientDescentMomentum, MultiOptimizer,
                        Optimizer, PolySchedule, PowerSchedule, RMSProp, Schedule, ShiftAdaMax,
                        ShiftSchedule, StepSchedule, get_param_list)

__all__ = ["Optimizer", "GradientDescentMomentum", "RMSProp", "Adagrad", "Adadelta", "Adam",
           "ShiftAdaMax", "MultiOptimizer", "Schedule", "StepSchedule", "PowerSchedule",
           "ExpSchedule", "PolySchedule", "ShiftSchedule", "get_param_list"]
