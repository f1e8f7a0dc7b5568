"""The compiler's passes and the code they emit: inlining, coalescing, intermediates, generated
names, layouts, compile time, imports, the CuPy backend."""
