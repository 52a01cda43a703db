"""Works WORK_S seconds in steps of one second, whatever its time limit. Its progress
(the steps done) is saved to CKPT, by rename so it is never half-written, when the early
signal comes and every ten steps; an attempt that finds it starts from there."""

import os
import signal
import time

ckpt = os.environ["CKPT"]
total = int(os.environ.get("WORK_S", "100"))
done = 0
if os.path.exists(ckpt):
    with open(ckpt) as saved:
        done = int(saved.read())
print(f"attempt={os.environ['ANYLAUNCH_ATTEMPT']} resumes at step {done}", flush=True)


def save() -> None:
    with open(ckpt + ".tmp", "w") as out:
        out.write(str(done))
    os.replace(ckpt + ".tmp", ckpt)


def on_signal(_signum, _frame) -> None:
    save()
    print(f"checkpoint at step {done} (early signal)", flush=True)


signal.signal(signal.SIGUSR1, on_signal)
while done < total:
    time.sleep(1)
    done += 1
    if done % 10 == 0:
        save()
save()
print(f"done: {done} steps", flush=True)
