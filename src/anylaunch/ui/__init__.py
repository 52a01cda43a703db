"""`anylaunch ui`: a local web dashboard of the job store.

People watch long training jobs for hours; a page left open beats re-running `ps`. Only
the `ui` command imports this package (with the `ui` extra: Starlette, uvicorn, Jinja2),
so the CLI's start-up never pays for a web server.
"""
