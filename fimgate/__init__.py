"""fimgate: fill-in-the-middle completions while a person types."""
__version__ = "0.1.0"
