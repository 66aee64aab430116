"""Analyses of the GG mechanism: privacy curves, outlier probabilities, PATE experiments."""
