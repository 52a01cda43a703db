"""What a job leaves on this machine is its owner's alone: the store's folder, a job's
folder, its logs and plan, and job text an agent sent are unreadable to other users
(a program's log may hold a token it printed)."""

from __future__ import annotations

import stat
from pathlib import Path

from reliability_helpers import FIGURES


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_local_job_leaves_nothing_another_user_can_read(cli, write, home: Path) -> None:
    home.mkdir(mode=0o755)  # a home made by an older release, open to everyone
    job = write("launcher: none\ncommand: [bash, -c, 'echo printed-token-0123456789']\n")
    done = cli("run", str(job), "--json")
    assert done.rc == 0, done.err
    job_dir = Path(done.json()["job_dir"])
    assert (job_dir / "logs" / "node-0.log").read_text().strip().endswith("0123456789")
    FIGURES["hostile inputs"] += 1
    assert mode(home) == 0o700
    everything = [job_dir, *job_dir.rglob("*")]
    assert any(p.name == "plan.json" for p in everything)
    opened = {str(p.relative_to(home)): oct(mode(p)) for p in everything if mode(p) & 0o077}
    assert opened == {}, opened


def test_job_text_an_agent_sent_is_kept_for_its_owner_only(cli_inproc, home: Path) -> None:
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import DryRunArgs

    path = Path(commands.job_path(DryRunArgs(yaml="command: [echo]\n")))
    FIGURES["hostile inputs"] += 1
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
