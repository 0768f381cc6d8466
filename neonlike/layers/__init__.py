"""neon's layers: `from neonlike.layers import Affine, Conv, Pooling, GeneralizedCost`."""
from .container import (Broadcast, DeltasTree, GenerativeAdversarial, MergeBroadcast, MergeMultistream,
                        MergeSum, Multicost, Sequential, SingleOutputTree, Tree)
from .layer import (LRN, Activation, Affine, BatchNorm, Bias, BranchNode, CompoundLayer, Conv,
                    Convolution, Convolution_bias, Deconvolution, Dropout, GeneralizedCost,
                    GeneralizedCostMask, GeneralizedGANCost, Layer,
                    Linear, LookupTable, ParameterLayer, Pooling, Reshape, SkipNode)
from .bidirectional import BiBNRNN, BiLSTM, BiRNN, BiSum, DeepBiLSTM, DeepBiRNN
from .recurrent import (GRU, LSTM, Recurrent, RecurrentLast, RecurrentMean, RecurrentOutput,
                        RecurrentSum)
from .seq2seq import Decoder, Encoder, Seq2Seq

__all__ = ["Layer", "ParameterLayer", "Linear", "Bias", "Activation", "Affine", "Conv", "Convolution",
           "Pooling", "BatchNorm", "Dropout", "LookupTable", "Sequential", "GeneralizedCost",
           "CompoundLayer", "Recurrent", "LSTM", "GRU", "BiRNN", "BiBNRNN", "BiLSTM", "BiSum",
           "DeepBiRNN", "DeepBiLSTM", "RecurrentOutput", "RecurrentSum", "RecurrentMean",
           "RecurrentLast", "Convolution_bias", "Deconvolution", "LRN", "Reshape", "SkipNode",
           "BranchNode", "Tree", "SingleOutputTree", "Broadcast", "MergeSum", "MergeBroadcast",
           "MergeMultistream", "DeltasTree", "GeneralizedCostMask", "GeneralizedGANCost", "Multicost",
           "GenerativeAdversarial", "Seq2Seq", "Encoder", "Decoder"]
