"""The public API: grad and its options, the autograd-style names, extend, custom adjoints, show,
compiling once, the CLI."""
