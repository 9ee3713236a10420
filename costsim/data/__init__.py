"""Shipped data (hardware and model profiles, traces), found through `costsim.files`."""
