"""neon's transforms: activations (op-tree functions with a `bprop`), costs and metrics."""
from .activation import (Explin, Identity, Leaky, Logistic, Normalizer, Rectlin, Rectlinclip,
                         Softmax, Tanh, Transform)
from .cost import (Accuracy, Cost, CrossEntropyBinary, CrossEntropyMulti, LogLoss, MeanSquared,
                   Metric, Misclassification, SmoothL1Loss, SumSquared, TopKMisclassification)

__all__ = ["Transform", "Identity", "Rectlin", "Rectlinclip", "Leaky", "Explin", "Logistic", "Tanh",
           "Softmax", "Normalizer", "Cost", "CrossEntropyBinary", "CrossEntropyMulti", "SumSquared",
           "MeanSquared", "SmoothL1Loss", "Metric", "Misclassification", "Accuracy", "LogLoss",
           "TopKMisclassification"]
