"""ngraph's op-graph: axes now; ops and graph building to come (issue 14)."""
