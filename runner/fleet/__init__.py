"""Campaigns across a fleet of measuring hosts, dispatched on Ray (docs/fleet.md)."""
