"""Placeholder until this area of the data engine lands."""
__all__: list[str] = []
