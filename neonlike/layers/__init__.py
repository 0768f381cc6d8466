"""neon's layers: `from neonlike.layers import Affine, Conv, Pooling, GeneralizedCost`."""
from .container import Sequential
from .layer import (Activation, Affine, BatchNorm, Bias, CompoundLayer, Conv, Convolution, Dropout,
                    GeneralizedCost, Layer, Linear, LookupTable, ParameterLayer, Pooling)

__all__ = ["Layer", "ParameterLayer", "Linear", "Bias", "Activation", "Affine", "Conv", "Convolution",
           "Pooling", "BatchNorm", "Dropout", "LookupTable", "Sequential", "GeneralizedCost",
           "CompoundLayer"]
