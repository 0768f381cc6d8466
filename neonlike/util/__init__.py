"""neon.util: the argument parser of the example scripts."""
