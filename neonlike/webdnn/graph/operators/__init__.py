"""The operators of `neonlike.webdnn.graph`, each with its axis semantics."""
from .convolution2d import Convolution2d
from .elementwise import (Elementwise, elementwise, exp, log, maximum, minimum, relu, sigmoid,
                          sqrt, tanh)
from .linear import Linear
from .pooling2d import AveragePooling2D, MaxPooling2D, Pooling2D
from .reshape import Reshape, Transpose
from .softmax import Softmax

__all__ = ["AveragePooling2D", "Convolution2d", "Elementwise", "Linear", "MaxPooling2D",
           "Pooling2D", "Reshape", "Softmax", "Transpose", "elementwise", "exp", "log", "maximum",
           "minimum", "relu", "sigmoid", "sqrt", "tanh"]
