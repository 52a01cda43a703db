"""User-supplied sbatch templates (`slurm.template`): a site's own preamble around ours.

Clusters often need lines anylaunch cannot know (module loads, a site's proxy, a
license server). A template is any script with `{{ sbatch }}`, `{{ setup }}` and
`{{ launch }}` where anylaunch's parts go; everything else is copied as written.
"""

from __future__ import annotations

import re

from anylaunch.errors import ConfigError

PARTS = ("sbatch", "setup", "launch")
DEFAULT = "#!/bin/bash\n{{ sbatch }}\n\n{{ setup }}\n\n{{ launch }}\n"
_SLOT = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")


def fill(template: str | None, parts: dict[str, str], *, file: str | None = None) -> str:
    """The template with each `{{ part }}` replaced; unknown or missing parts are errors."""
    text = DEFAULT if template is None else template
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _SLOT.finditer(line):
            if match.group(1) not in PARTS:
                raise ConfigError(
                    f"unknown slot '{{{{ {match.group(1)} }}}}'",
                    file=file,
                    line=number,
                    key="slurm.template",
                    fix=f"use {', '.join('{{ ' + p + ' }}' for p in PARTS)}",
                )
    if not _SLOT.search(text) or "launch" not in {m.group(1) for m in _SLOT.finditer(text)}:
        raise ConfigError(
            "the template has no '{{ launch }}' slot, so the job would run nothing",
            file=file,
            key="slurm.template",
            fix="add a line '{{ launch }}' where the program should start",
        )
    if not text.startswith("#!"):
        raise ConfigError(
            "the template does not start with '#!' (sbatch needs an interpreter line)",
            file=file,
            line=1,
            key="slurm.template",
            fix="make '#!/bin/bash' its first line",
        )
    return _SLOT.sub(lambda m: parts[m.group(1)], text)
