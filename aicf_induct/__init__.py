"""aicf_induct: a training-aware AI compiler that learns which structures suit which problems."""

__version__ = "0.1.0"
