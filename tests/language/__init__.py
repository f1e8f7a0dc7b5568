"""Python constructs in differentiated programs: control flow, calls, containers, objects,
iterators, generators, lambdas, unpacking."""
