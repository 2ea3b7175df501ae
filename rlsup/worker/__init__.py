"""The job process (`python -m rlsup.worker RUN`): training, progress, TensorBoard."""
