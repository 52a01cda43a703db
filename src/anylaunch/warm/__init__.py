"""Warm start: dry-runs answered by a server that has already imported what they need
(`client` is the command's entry point, `server` the server, `wire` what they share)."""
