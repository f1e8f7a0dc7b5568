"""srcgrad's tests, a folder per feature (a package: tests import their helpers as
``tests.finite_differences``, ``tests.rules.rule_table``, ...).

rules/      every derivative rule (the table of rows), its conventions, coverage, SciPy's rules
modes/      reverse, forward, higher order, batched columns, Jacobians
language/   Python in differentiated programs: control flow, calls, containers, objects, iterators
soundness/  right or refused: in-place writes, aliasing, globals, messages, the fuzzers
passes/     the compiler's passes and the code they emit: inline, coalesce, names, layout, imports
api/        the public API: grad and its options, extend, custom adjoints, show, the CLI
nn/         srcgrad.nn, optim and data, against PyTorch where it is installed
examples/   the examples, the tutorial and the benchmark harnesses run
real/       the corpus of real (autograd) programs, each against autograd
"""
