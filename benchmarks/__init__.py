"""The benchmark suite (not collected by pytest): see benchmarks/README.md."""
