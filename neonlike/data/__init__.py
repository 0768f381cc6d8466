"""Data: ArrayIterator over in-memory arrays; MNIST and PTB from local files, Text; scikit-learn's
digits."""
from .dataiterator import ArrayIterator
from .datasets import MNIST, find_mnist, load_digits, load_mnist, read_idx
from .hdf5iterator import HDF5Iterator, HDF5IteratorAutoencoder, HDF5IteratorOneHot
from .text import PTB, Text
from .ticker import CopyTask, PrioritySortTask, RepeatCopyTask, Task, Ticker

__all__ = ["ArrayIterator", "HDF5Iterator", "HDF5IteratorOneHot", "HDF5IteratorAutoencoder",
           "MNIST", "PTB", "Text", "load_mnist", "load_digits", "find_mnist",
           "read_idx", "Ticker", "Task", "CopyTask", "RepeatCopyTask", "PrioritySortTask"]
