"""The contract with programs that drive anylaunch: what each command takes and returns.

`inputs` holds the arguments of each command as pydantic models (the CLI builds them from
its flags, the MCP server from a tool call, so both validate alike); `outputs` holds the
objects `--json` prints; `schemas` turns both into the JSON Schemas under docs/schemas/.
"""
