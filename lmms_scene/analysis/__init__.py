"""Analyses that are not generation tasks: Pfram (object information in image representations) and COOCO attention allocation."""
