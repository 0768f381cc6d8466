"""neon's layers: `from neonlike.layers import Affine, Conv, Pooling, GeneralizedCost`."""
from .container import (Broadcast, DeltasTree, MergeBroadcast, MergeMultistream, MergeSum, Sequential,
                        SingleOutputTree, Tree)
from .layer import (LRN, Activation, Affine, BatchNorm, Bias, BranchNode, CompoundLayer, Conv,
                    Convolution, Convolution_bias, Deconvolution, Dropout, GeneralizedCost, Layer,
                    Linear, LookupTable, ParameterLayer, Pooling, Reshape, SkipNode)
from .bidirectional import BiBNRNN, BiLSTM, BiRNN, BiSum, DeepBiLSTM, DeepBiRNN
from .recurrent import (GRU, LSTM, Recurrent, RecurrentLast, RecurrentMean, RecurrentOutput,
                        RecurrentSum)

__all__ = ["Layer", "ParameterLayer", "Linear", "Bias", "Activation", "Affine", "Conv", "Convolution",
           "Pooling", "BatchNorm", "Dropout", "LookupTable", "Sequential", "GeneralizedCost",
           "CompoundLayer", "Recurrent", "LSTM", "GRU", "BiRNN", "BiBNRNN", "BiLSTM", "BiSum",
           "DeepBiRNN", "DeepBiLSTM", "RecurrentOutput", "RecurrentSum", "RecurrentMean",
           "RecurrentLast", "Convolution_bias", "Deconvolution", "LRN", "Reshape", "SkipNode",
           "BranchNode", "Tree", "SingleOutputTree", "Broadcast", "MergeSum", "MergeBroadcast",
           "MergeMultistream", "DeltasTree"]
