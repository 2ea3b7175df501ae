"""The Textual TUI: `rlsup` with no arguments, or `rlsup tui` (see rlsup.tui.app.run)."""
