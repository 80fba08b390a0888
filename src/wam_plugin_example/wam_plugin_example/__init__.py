"""Example plug-in experts for Mooncake-SG (see experts.py)."""
