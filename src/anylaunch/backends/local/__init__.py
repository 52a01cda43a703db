"""The local backend."""
