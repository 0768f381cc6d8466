"""ngraph's front ends: `neon` (the standard axes and roles, seed 000)."""
