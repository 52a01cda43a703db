"""`anylaunch mcp`: the commands as Model Context Protocol tools, for coding agents.

`tools` describes them as data (no SDK needed); `server` serves them over stdio with the
official `mcp` SDK, which is imported only when the server starts.
"""
