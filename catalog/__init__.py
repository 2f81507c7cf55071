"""The data model shared by the runner and the builder: recipes, hardware, suites, packets."""
