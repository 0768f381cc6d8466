"""Data: ArrayIterator over in-memory arrays; MNIST from local files; scikit-learn's digits."""
from .dataiterator import ArrayIterator
from .datasets import MNIST, find_mnist, load_digits, load_mnist, read_idx

__all__ = ["ArrayIterator", "MNIST", "load_mnist", "load_digits", "find_mnist", "read_idx"]
