"""The skypilot backend."""
