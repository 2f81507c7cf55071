"""Card energy beside every measured window: sources (sources.py), the campaign's meter (meter.py),
and the final judging of a packet's windows against its idle baseline (packet.py)."""
