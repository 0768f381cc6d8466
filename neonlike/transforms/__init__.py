"""neon's transforms: activations (op-tree functions with a `bprop`), costs and metrics."""
from .activation import (Explin, Identity, Leaky, Logistic, Normalizer, PixelwiseSoftmax, Rectlin,
                         Rectlinclip, Sign, Softmax, Tanh, Transform)
from .cost import (Accuracy, BLEUScore, Cost, CrossEntropyBinary, CrossEntropyMulti, GANCost,
                   LogLoss, MeanSquared, Metric, Misclassification, PrecisionRecall, SmoothL1Loss,
                   SquareHingeLoss, SumSquared, TopKMisclassification)

__all__ = ["Transform", "Identity", "Rectlin", "Rectlinclip", "Leaky", "Explin", "Logistic", "Tanh",
           "Softmax", "PixelwiseSoftmax", "Sign", "Normalizer", "Cost", "CrossEntropyBinary",
           "CrossEntropyMulti", "SumSquared", "MeanSquared", "SmoothL1Loss", "SquareHingeLoss",
           "GANCost", "Metric", "Misclassification", "Accuracy", "LogLoss", "TopKMisclassification",
           "PrecisionRecall", "BLEUScore"]
