"""The job queue: job states and their transitions, the typed job record, and the SQLite store."""
