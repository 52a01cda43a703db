"""The DGX Cloud Lepton REST API as anylaunch speaks it: the client, the wire models,
the API's errors and the rules it enforces on a job body.

The emulator (`anylaunch.lepton_emulator`) serves the same wire models, so both
sides of the loopback tests read and write one format.
"""
