"""The demo and benchmark tooling: the simulated fleet, the quickstart's demo data, the seed
benchmark and the drift scenarios. Tooling on top of the product, never imported by it."""
