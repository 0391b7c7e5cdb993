"""KIP-932 share groups: membership and assignment (groups.py)."""
