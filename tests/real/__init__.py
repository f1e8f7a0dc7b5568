"""The corpus of real programs: a package, as every folder of tests is (its conftest is
`tests.real.conftest`)."""
