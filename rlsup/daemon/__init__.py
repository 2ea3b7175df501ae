"""The rlsup daemon: a queue in SQLite, a reconcile loop, supervised worker processes."""
