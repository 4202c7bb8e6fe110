"""One module per command (or pair of commands sharing their inputs)."""
