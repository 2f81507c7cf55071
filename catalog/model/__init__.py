"""The typed records every other part reads: packets and their states, load sweeps, the
protocol's arithmetic, and the building blocks (strict models, compact arrays, redaction)."""
