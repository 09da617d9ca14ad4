"""Policy replay (docs/replay.md): a project's observed failures replayed under other recovery policies."""
