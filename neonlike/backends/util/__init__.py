"""neon's `neon.backends.util`: GPU capability checks (check_gpu)."""
