"""Housekeeping of this machine: what it can run (doctor), and what killed runs left behind (gc)."""
