"""WebDNN's graph front end (seed 001) on neonlike's engine: `neonlike.webdnn.graph`.

Not imported by `import neonlike`; importing it makes WebDNN's preset axes and orders, nothing
else.
"""
