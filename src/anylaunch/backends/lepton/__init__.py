"""The lepton backend."""
