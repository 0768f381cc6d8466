"""neon's layers: `from neonlike.layers import Affine, Conv, Pooling, GeneralizedCost`."""
from .container import Sequential
from .layer import (Activation, Affine, BatchNorm, Bias, CompoundLayer, Conv, Convolution, Dropout,
                    GeneralizedCost, Layer, Linear, LookupTable, ParameterLayer, Pooling)
from .bidirectional import BiBNRNN, BiLSTM, BiRNN, BiSum, DeepBiLSTM, DeepBiRNN
from .recurrent import (GRU, LSTM, Recurrent, RecurrentLast, RecurrentMean, RecurrentOutput,
                        RecurrentSum)

__all__ = ["Layer", "ParameterLayer", "Linear", "Bias", "Activation", "Affine", "Conv", "Convolution",
           "Pooling", "BatchNorm", "Dropout", "LookupTable", "Sequential", "GeneralizedCost",
           "CompoundLayer", "Recurrent", "LSTM", "GRU", "BiRNN", "BiBNRNN", "BiLSTM", "BiSum",
           "DeepBiRNN", "DeepBiLSTM", "RecurrentOutput", "RecurrentSum", "RecurrentMean",
           "RecurrentLast"]
