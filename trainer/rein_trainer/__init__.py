"""Rein's PyTorch trainer: the objective of docs/training-objective.md on Hugging Face checkpoints."""

__version__ = "0.1.0"
