"""The env layer: env source x state capture x vectoriser, and the checks a job's env passes."""
