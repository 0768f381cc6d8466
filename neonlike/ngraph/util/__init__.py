"""ngraph's utilities: name scopes (`names`)."""
