"""Every derivative rule: the table of rows (rule_table.py), conventions at singular points,
coverage, SciPy's rules."""
