"""What `data/` describes: recipes and overlays, the `vllm serve` command composed from them,
hardware, prompt suites and canaries."""
