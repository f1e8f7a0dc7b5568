"""Compiler passes, one per module; ``srcgrad.pipeline`` runs them in order."""
