"""The tool-health feed for agents (docs/contract/tool-health.md): `state` (pure: a tool's state and
next action) and `snapshot` (the per-project document, computed from the rollups and stored)."""
