"""ngraph's neon front end: the standard axes `ax` and axis roles `ar` of seed 000."""
from neonlike.ngraph.frontends.neon.axis import ar, ax

__all__ = ["ar", "ax"]
