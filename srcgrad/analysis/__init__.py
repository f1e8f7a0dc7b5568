"""Pure analyses over the core program; results live in side tables, not on nodes."""
