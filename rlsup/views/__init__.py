"""What the CLI and the TUI render, computed once: job rows, experiment groups, plots, colours."""
