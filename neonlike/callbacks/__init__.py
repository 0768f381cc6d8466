"""neon's callbacks (`from neonlike.callbacks.callbacks import Callbacks`)."""
from .callbacks import (Callback, Callbacks, EarlyStopCallback, LossCallback, MetricCallback,
                        ProgressBarCallback, RunTimerCallback, SaveBestStateCallback,
                        SerializeModelCallback, TrainCostCallback)

__all__ = ["Callbacks", "Callback", "TrainCostCallback", "ProgressBarCallback", "LossCallback",
           "MetricCallback", "SerializeModelCallback", "SaveBestStateCallback",
           "EarlyStopCallback", "RunTimerCallback"]
