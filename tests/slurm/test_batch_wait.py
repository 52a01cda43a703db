"""The batch shell's exit status is srun's, even when a trapped signal arrives as srun ends.

The batch shell traps the early signal (`--signal=B:USR1@lead`) and forwards it to srun.
A trap interrupts bash's `wait`: when srun ends at that moment, bash 5.2 answers
128+signal (one run in ten here), or loses srun's status altogether. So the script's own
lines run here in a real bash, with an `srun` on PATH that ends with a known status a
few milliseconds in, while the test sends USR1 around that moment: the script must
exit with srun's status every time. No cluster is needed: the race is the batch shell's
alone (the cluster tests run the same script under real Slurm).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from anylaunch import api
from anylaunch.jobfile import loader
from anylaunch.store import Store

pytestmark = pytest.mark.usefixtures("spawns")

# srun's stand-in: writes its pid where the test looks, then ends with SRUN_EXIT after
# SRUN_MICROS. As the `--overlap` step the batch shell starts to pass on the early
# signal, it sends USR1 to the main one, as that step does to the ranks that handle it;
# in `unhandled` mode it finds no rank that handles it and looks again until the limit or
# until the file its last argument names exists. In `checkpoint` mode the main one ends
# with 42 as soon as USR1 reaches it, as a program that checkpoints and exits would;
# otherwise it lets USR1 pass, as srun does.
FAKE_SRUN = r"""#!/bin/bash
case " $* " in *" --overlap "*)  # the step that passes the early signal to the ranks
  if [ "${SRUN_MODE:-}" = unhandled ]; then  # no rank handles it: looks until the limit
    for _ in $(seq 600); do [ -e "${@: -1}" ] && exit 0; sleep 0.1; done  # or its last word
    exit 0
  fi
  kill -USR1 "$(cat "$SRUN_PID_FILE")" 2>/dev/null; exit 0;;
esac
started() { echo "$$" > "$SRUN_PID_FILE.tmp" && mv "$SRUN_PID_FILE.tmp" "$SRUN_PID_FILE"; }
if [ "${SRUN_MODE:-}" = checkpoint ]; then
  trap 'kill "$!"; exit 42' USR1
  sleep 60 >/dev/null 2>&1 &
  started
  wait "$!"
  exit 0
fi
trap '' USR1
started
end=$(( ${EPOCHREALTIME/./} + SRUN_MICROS ))
while left=$(( end - ${EPOCHREALTIME/./} )); [ "$left" -gt 0 ]; do
  read -r -t "$(( left / 1000000 )).$(printf %06d $(( left % 1000000 )))" <> <(:) || true
done
exit "$SRUN_EXIT"
"""


def batch_shell(tmp_path: Path) -> str:
    """The batch shell's lines around srun, from a rendered script with a time limit (so
    with the early signal): its trap from the setup, and everything from srun on."""
    spec = loader.from_text(
        'command: t\nlauncher: none\nslurm:\n  time: "02:00:00"\n',
        file=str(tmp_path / "job.yaml"),
        environ={},
    )
    text = api.dry_run(spec, "slurm", store=Store(tmp_path / "home")).payload["script"]
    trap = next(line for line in text.splitlines() if line.startswith("early_signal=0"))
    return "set -uo pipefail\n" + trap + "\n" + text[text.index("# The program of every task") :]


@pytest.fixture
def shell(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    (tmp_path / "job" / "logs").mkdir(parents=True)
    script = batch_shell(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ANYLAUNCH_JOB_DIR": str(tmp_path / "job"),
        "ANYLAUNCH_JOB_ID": "batchwait",  # exported at the top of the real script
        "SLURM_JOB_ID": "4242",  # set by Slurm in every batch shell
    }

    def start(pid_file: Path, **extra: str) -> subprocess.Popen[str]:
        pid_file.unlink(missing_ok=True)
        return subprocess.Popen(
            ["bash", "-c", script],
            env={**env, "SRUN_PID_FILE": str(pid_file), **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # as in the job's log
            text=True,
            start_new_session=True,
        )

    return start


def _started(pid_file: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not pid_file.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "srun never started"
        time.sleep(0.001)


def race(shell, tmp_path: Path, runs: int, *, group: bool = False, mode: str = "") -> Counter[str]:
    """`runs` batch shells whose srun ends 50 ms in with 0 or 3, each sent USR1 a few
    times around that moment (to the batch shell, or with `group` to every process of the
    batch step, as `scancel --batch` does); counts what each exited with. `mode` is the
    stand-in's SRUN_MODE."""
    seen: Counter[str] = Counter()
    rng = random.Random(1234)
    pid_file = tmp_path / "srun.pid"
    for i in range(runs):
        expected = (0, 3)[i % 2]
        proc = shell(pid_file, SRUN_EXIT=str(expected), SRUN_MICROS="50000", SRUN_MODE=mode)
        _started(pid_file, proc)
        time.sleep(rng.uniform(0.035, 0.065))
        for _ in range(rng.randint(1, 3)):
            try:
                if group:
                    os.killpg(proc.pid, signal.SIGUSR1)
                else:
                    proc.send_signal(signal.SIGUSR1)
            except ProcessLookupError:
                break
            time.sleep(rng.uniform(0, 0.004))
        proc.communicate(timeout=30)
        seen[
            "right" if proc.returncode == expected else f"{expected} read as {proc.returncode}"
        ] += 1
    return seen


def test_a_signal_as_srun_ends_never_replaces_srun_s_exit_status(shell, tmp_path):
    seen = race(shell, tmp_path, 150)
    assert seen == Counter({"right": 150}), seen


def test_a_signal_to_the_whole_batch_step_keeps_srun_s_exit_status(shell, tmp_path):
    # `scancel --batch --signal=USR1` reaches every process of the batch step, the one
    # that waits for srun included.
    seen = race(shell, tmp_path, 60, group=True)
    assert seen == Counter({"right": 60}), seen


def test_a_signal_as_srun_ends_that_no_rank_takes_never_holds_the_batch_shell(shell, tmp_path):
    # The step passing it on, started as srun ends or just after, looks for a rank that
    # handles it until the limit: each batch shell must still end with srun's status,
    # at once (`communicate` in `race` gives it 30 s).
    seen = race(shell, tmp_path, 60, mode="unhandled")
    assert seen == Counter({"right": 60}), seen


@pytest.mark.slow
def test_a_thousand_signals_as_srun_ends(shell, tmp_path):
    seen = race(shell, tmp_path, 1000)
    assert seen == Counter({"right": 1000}), seen


def test_the_early_signal_still_reaches_srun_while_the_batch_shell_waits(shell, tmp_path):
    pid_file = tmp_path / "srun.pid"
    proc = shell(pid_file, SRUN_MODE="checkpoint")
    _started(pid_file, proc)
    sent = time.monotonic()
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 42, out  # the program's own exit after its checkpoint
    assert time.monotonic() - sent < 10
    assert "passing it to the ranks that handle it" in out


def test_a_program_that_handles_no_early_signal_ends_the_job_when_it_ends(shell, tmp_path):
    # The step passing the signal on looks for a rank that handles it until the limit:
    # the batch shell, and the allocation, must not wait for it once the program ended.
    pid_file = tmp_path / "srun.pid"
    proc = shell(pid_file, SRUN_MODE="unhandled", SRUN_EXIT="0", SRUN_MICROS="2000000")
    _started(pid_file, proc)
    proc.send_signal(signal.SIGUSR1)
    started = time.monotonic()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert time.monotonic() - started < 15, out
    assert "passing it to the ranks that handle it" in out


def test_a_lost_srun_status_is_said_and_never_success(shell, tmp_path):
    # Only a kill of the process waiting for srun loses srun's status: the batch shell
    # says so, and ends with its own status for that, never 0.
    pid_file = tmp_path / "srun.pid"
    proc = shell(pid_file, SRUN_EXIT="0", SRUN_MICROS="60000000")
    _started(pid_file, proc)
    srun = int(pid_file.read_text())
    waiter = int(Path(f"/proc/{srun}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(waiter, signal.SIGKILL)
    os.kill(srun, signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 96
    assert "srun's exit status was lost" in out
