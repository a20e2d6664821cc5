"""Training runtime: backends, executor, parameter store, optimizers, trainer, recorders."""
