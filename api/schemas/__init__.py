"""Pydantic request and response models of the service, one module per resource."""
