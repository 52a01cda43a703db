"""Read a recipe as AutoModel's loader does: PyYAML, then `${NAME}`, `${NAME,default}` and
`${oc.env:NAME,default}` from the environment. Writes what it found to argv[2] as JSON,
with the length of each secret it resolved, never the value."""

import json
import os
import re
import sys
from pathlib import Path

import yaml

_REF = re.compile(r"\$\{(?:oc\.env:)?([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}")


def resolve(text: str) -> str:
    return _REF.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), text)


recipe = yaml.safe_load(Path(sys.argv[1]).read_text())
report = {
    "keys": [[type(k).__name__, str(k)] for k in recipe],
    "optim": recipe["optim"],
    "raw": {"wandb_key": recipe["wandb"]["key"], "token": recipe["model"]["token"]},
    "resolved_lengths": {
        "wandb_key": len(resolve(recipe["wandb"]["key"])),
        "token": len(resolve(recipe["model"]["token"])),
    },
}
Path(sys.argv[2]).write_text(json.dumps(report))
print("recipe read; secrets resolved:", report["resolved_lengths"])
