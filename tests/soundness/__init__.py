"""Right or refused: in-place writes, aliasing, writes through callees, values changed during a
call, messages, the fuzzers."""
