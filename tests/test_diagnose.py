"""Diagnosis: every rule against the real message it was taken from, root cause over
cascade, and the CLI / Job.diagnose() paths on real failed jobs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from anylaunch.observe.diagnose.engine import diagnose_text

# Real messages, as printed by PyTorch, NCCL, torchrun, Slurm, Pyxis/Enroot, Kubernetes,
# the Linux kernel and cloud APIs (collected from public issues and forums).
REAL = {
    "slurmstepd: error: *** JOB 42221 ON clr1247 CANCELLED AT 2022-04-14T16:20:46 DUE TO TIME LIMIT ***": "TIME_LIMIT",
    "slurmstepd: error: *** STEP 9999 ON hpc CANCELLED DUE TO TIME LIMIT ***": "TIME_LIMIT",
    "Job was active longer than specified deadline": "TIME_LIMIT",
    "slurmstepd: error: *** JOB 1234 ON gpu01 CANCELLED AT 2024-03-01T10:00:00 DUE TO PREEMPTION ***": "PREEMPTED",
    "The node was low on resource: memory. Container trainer was using 61Gi, which exceeds its request of 0.": "OOM_HOST",
    "Pod was evicted: Evicted": "PREEMPTED",
    "slurmstepd: error: *** JOB 5512 ON n7 CANCELLED AT 2024-05-02T01:02:03 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***": "NODE_FAIL",
    "srun: error: Node failure on gpu-st-p4d-24xlarge-12": "NODE_FAIL",
    "NVRM: Xid (PCI:0000:06:00): 79, pid=1913, GPU has fallen off the bus.": "HARDWARE_GPU",
    "RuntimeError: CUDA error: uncorrectable ECC error encountered": "HARDWARE_GPU",
    "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU": "HARDWARE_GPU",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.25 GiB is free.": "OOM_GPU",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated)": "OOM_GPU",
    "RuntimeError: CUDA error: out of memory": "OOM_GPU",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`": "OOM_GPU",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.": "OOM_GPU",
    "misc/nvmlwrap.cc:183 NCCL WARN Cuda failure 'out of memory'": "OOM_GPU",
    "slurmstepd: error: Detected 1 oom_kill event in StepId=6959634.0. Some of the step tasks have been OOM Killed.": "OOM_HOST",
    "srun: error: holy8a24101: task 0: Out Of Memory": "OOM_HOST",
    "Out of memory: Killed process 31412 (python) total-vm:98765432kB, anon-rss:65432100kB": "OOM_HOST",
    "Last State: Terminated Reason: OOMKilled Exit Code: 137": "OOM_HOST",
    "terminate called after throwing an instance of 'std::bad_alloc'": "OOM_HOST",
    "java.lang.OutOfMemoryError: Java heap space": "OOM_HOST",
    "OSError: [Errno 12] Cannot allocate memory": "OOM_HOST",
    "exitcode  : -9 (pid: 2471)": "OOM_HOST",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).": "SHM",
    "RuntimeError: DataLoader worker (pid 4123) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.": "SHM",
    "include/shm.h:28 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-9Xc0Wd (size 9637888)": "SHM",
    "exitcode  : -7 (pid: 818)": "SHM",
    "slurmstepd: error: pyxis: failed to import docker image": "IMAGE_PULL",
    "slurmstepd: error: pyxis:     [ERROR] URL https://nvcr.io/proxy_auth?scope=repository:nvidia/nemo:pull returned error code: 401 Unauthorized": "IMAGE_PULL",
    'Failed to pull image "nvcr.io/nvidia/nemo:25.09": rpc error: code = Unknown desc = failed to pull and unpack image': "IMAGE_PULL",
    "Warning  Failed  kubelet  Error: ImagePullBackOff": "IMAGE_PULL",
    "docker: Error response from daemon: pull access denied for private/trainer, repository does not exist or may require 'docker login'": "IMAGE_PULL",
    "slurmstepd: error: pyxis: couldn't start container": "CONTAINER_MOUNT",
    "enroot-mount: failed to mount: /lustre/data at /var/lib/enroot/data/user-1000/pyxis_42.0/data: No such file or directory": "CONTAINER_MOUNT",
    'MountVolume.SetUp failed for volume "lustre" : mount failed: exit status 32': "CONTAINER_MOUNT",
    "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.": "AUTH",
    "httpx.HTTPStatusError: Client error '401 Unauthorized' for url 'https://gateway.dgxc-lepton.nvidia.com/api/v2/workspaces/ws/jobs'": "AUTH",
    "botocore.exceptions.ClientError: An error occurred (InvalidAccessKeyId) when calling the GetObject operation: The AWS Access Key Id you provided does not exist in our records.": "AUTH",
    "botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the PutObject operation: Access Denied": "STORAGE",
    "botocore.errorfactory.NoSuchKey: An error occurred (NoSuchKey) when calling the GetObject operation: The specified key does not exist.": "STORAGE",
    "OSError: [Errno 28] No space left on device": "STORAGE",
    "anylaunch-stage: in: error: download failed: s3://data/train/0001.bin: 404": "STORAGE",
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).": "PORT_IN_USE",
    "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified": "SUBMIT_CONFIG",
    "sbatch: error: Batch job submission failed: Requested node configuration is not available": "SUBMIT_CONFIG",
    "srun: error: Unable to allocate resources: Invalid generic resource (gres) specification": "SUBMIT_CONFIG",
    "0/12 nodes are available: 12 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are available": "NO_CAPACITY",
    "sky.exceptions.ResourcesUnavailableError: Failed to acquire resources in all zones in us-east-1 for {AWS(p4d.24xlarge)}.": "NO_CAPACITY",
    "An error occurred (InsufficientInstanceCapacity) when calling the RunInstances operation": "NO_CAPACITY",
    "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.": "NCCL_TIMEOUT",
    "[E ProcessGroupNCCL.cpp:475] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.": "NCCL_TIMEOUT",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete": "NCCL_TIMEOUT",
    "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError": "RDZV_FAILED",
    "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.": "RDZV_FAILED",
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [gpu-node-0]:29500 (errno: 111 - Connection refused).": "RDZV_FAILED",
    "RuntimeError: The client socket has timed out after 1800s while trying to connect to (10.1.2.3, 29500).": "RDZV_FAILED",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3": "NCCL_ERROR",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.": "NCCL_ERROR",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:4410": "NCCL_ERROR",
    "slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2024-06-01T12:00:00 ***": "CANCELLED",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 3412 got signal: 15": "CANCELLED",
    "ModuleNotFoundError: No module named 'transformers'": "USER_ERROR",
    "ERROR: Unexpected segmentation fault encountered in worker.": "USER_ERROR",
    "srun: error: gpu001: task 0: Killed": "OOM_HOST",
    "slurmstepd: error: *** STEP 12345.0 ON n1 CANCELLED AT 2024-06-01T12:00:00 ***": "CANCELLED",
    "KeyError: 'input_ids'": "USER_ERROR",
    "RuntimeError: CUDA error: device-side assert triggered": "USER_ERROR",
    "python: can't open file '/workspace/train.py': [Errno 2] No such file or directory": "USER_ERROR",
    "bash: line 1: torchrun: command not found": "USER_ERROR",
    "srun: error: n1: task 3: Exited with exit code 3": "USER_ERROR",
}


@pytest.mark.parametrize(("message", "expected"), list(REAL.items()))
def test_each_real_message_is_classified(message, expected):
    assert diagnose_text(message).code == expected


def test_oom_on_rank_3_is_the_root_cause_not_the_watchdog_timeouts_on_ranks_0_to_2():
    log = "\n".join(
        [
            "[rank3]: Traceback (most recent call last):",
            '[rank3]:   File "train.py", line 88, in <module>',
            "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            *(
                f"[rank{r}]:[E1218 20:37:21 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600081 milliseconds before timing out."
                for r in range(3)
            ),
            "W1218 20:37:30 api.py:897] Sending process 1234 closing signal SIGTERM",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        ]
    )
    result = diagnose_text(log)
    assert (result.code, result.err_class, result.retryable) == ("OOM_GPU", "ERR_PROGRAM", False)
    assert result.first_failure["rank"] == 3
    assert all(e["rank"] == 3 for e in result.evidence)
    assert "batch size" in result.suggestion


def test_torchrun_root_cause_block_names_the_rank_when_lines_carry_none():
    log = """
Traceback (most recent call last):
ValueError: learning rate must be positive
E0101 00:00:00 api.py:826] failed (exitcode: 1) local_rank: 1 (pid: 99) of binary: /usr/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-01-01_00:00:00
  host      : node1
  rank      : 5 (local_rank: 1)
  exitcode  : 1 (pid: 99)
"""
    result = diagnose_text(log)
    assert result.code == "USER_ERROR" and result.first_failure["rank"] == 5
    assert "learning rate must be positive" in result.cause


def test_a_step_cancelled_after_a_task_failed_is_not_the_cause():
    log = "srun: error: n1: task 3: Exited with exit code 3\nslurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2024-06-01T12:00:00 ***"
    assert diagnose_text(log).code == "USER_ERROR"


def test_state_verdicts_and_exit_codes():
    assert diagnose_text("step 10", state="TIMEOUT").code == "TIME_LIMIT"
    assert diagnose_text("CUDA out of memory", cancel_requested=True).code == "CANCELLED"
    assert diagnose_text("step 10 loss 0.1", exit_code=137).code == "OOM_HOST"
    assert diagnose_text("", exit_code=2, state="FAILED").code == "USER_ERROR"
    assert diagnose_text("").code == "UNKNOWN"
    assert (
        diagnose_text("all fine", events=["Warning OOMKilled container trainer"]).code == "OOM_HOST"
    )


def _diagnosis_of_a_failed_2x2_job(cli, write, command: str) -> dict:
    """Run `command` (a YAML list's items) locally on 2 nodes x 2 ranks; it must fail.
    Returns `diagnose --json` of the job."""
    path = write(
        f"""
        command: [{command}]
        nodes: 2
        ranks_per_node: 2
        local: {{kill_grace_s: 1}}
        """
    )
    job = cli("run", str(path), "--json", timeout=180).json()
    assert job["state"] == "FAILED"
    return cli("diagnose", job["id"], "--json").json()


def test_diagnose_a_failed_local_job_names_node_and_rank(cli, write, torch):
    program = "import os, sys; r = int(os.environ['RANK']); sys.exit(0) if r != 3 else (_ for _ in ()).throw(KeyError('input_ids'))"
    result = _diagnosis_of_a_failed_2x2_job(cli, write, f'{sys.executable}, -c, "{program}"')
    assert result["code"] == "USER_ERROR" and "KeyError: 'input_ids'" in result["cause"]
    assert result["first_failure"]["node"] == 1 and result["first_failure"]["rank"] == 3


def test_diagnose_log_file_and_usage(cli_inproc, tmp_path):
    log = tmp_path / "slurm-42.out"
    log.write_text(
        "slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***\n"
    )
    out = cli_inproc("diagnose", "--log", str(log))
    assert out.rc == 0 and out.out.startswith("TIME_LIMIT (ERR_PROGRAM, retryable)")
    assert cli_inproc("diagnose").rc == 2
    assert cli_inproc("diagnose", "--log", str(tmp_path / "none.log")).rc == 2


def test_native_failure_words_of_skypilot_are_classified():
    assert (
        diagnose_text("", events=["FAILED_NO_RESOURCE: no resources in us-east-1"]).code
        == "NO_CAPACITY"
    )
    assert diagnose_text("", events=["FAILED_SETUP: pip install failed"]).code == "USER_ERROR"
    assert (
        diagnose_text("", events=["FAILED_PRECHECKS: invalid cloud credentials"]).code
        == "SUBMIT_CONFIG"
    )


def test_a_teardown_abort_on_node_1_rank_2_is_named_there_with_the_abort_not_the_warnings(
    cli, write, tmp_path, torch
):
    """The README demo's failure on a fresh machine: every rank warns that NumPy is
    missing, then rank 2 (node 1) aborts at teardown. The abort is the cause."""
    program = tmp_path / "demo.py"
    program.write_text(
        textwrap.dedent(
            """
            import os, sys, warnings
            warnings.warn("Failed to initialize NumPy: No module named 'numpy'")
            sys.stderr.flush()
            if int(os.environ["RANK"]) == 2:
                sys.stderr.write("terminate called without an active exception\\n")
                sys.stderr.flush()
                os.abort()
            """
        )
    )
    result = _diagnosis_of_a_failed_2x2_job(cli, write, f"{sys.executable}, {program}")
    assert result["code"] == "USER_ERROR"
    assert "terminate called without an active exception" in result["cause"]
    assert (result["first_failure"]["node"], result["first_failure"]["rank"]) == (1, 2)
    assert result["evidence"] and not any("Warning" in e["text"] for e in result["evidence"])


# --- A failure after training was over, and a hang --------------------------------------

CORPUS = Path(__file__).resolve().parent / "diagnose" / "corpus"


def _corpus_log(file: str, expect: str) -> list[str]:
    return [c["text"] for c in yaml.safe_load((CORPUS / file).read_text()) if c["expect"] == expect]


@pytest.mark.parametrize("log", _corpus_log("teardown.yaml", "TEARDOWN_FAILED"))
def test_an_abort_after_every_rank_finished_is_a_retryable_teardown_failure_shown_by_its_lines(
    log,
):
    result = diagnose_text(log)
    assert (result.code, result.err_class, result.retryable) == (
        "TEARDOWN_FAILED",
        "ERR_INFRA",
        True,
    )
    assert "training finished" in result.cause
    assert "fix the error in the program" not in result.suggestion
    shown = [e["text"] for e in result.evidence]
    ends = [line for line in log.splitlines() if "training finished" in line]
    assert len(ends) == 4 and all(end in shown for end in ends)  # every rank's last line
    assert "terminate called without an active exception" in shown


def test_the_same_abort_in_the_middle_of_training_or_an_exception_after_it_stays_the_programs():
    crash, raised = _corpus_log("teardown.yaml", "USER_ERROR")
    assert "terminate called without an active exception" in crash
    assert "training finished" in raised  # then an exception when it saved its weights
    for log in (crash, raised):
        result = diagnose_text(log)
        assert (result.code, result.retryable) == ("USER_ERROR", False)
    # Ranks that say training is over on some nodes while another rank aborts before
    # its own end is not the teardown either.
    early = "[node 1] terminate called without an active exception\n[node 0] training finished\n"
    assert diagnose_text(early + "[node 1] training finished\n").code == "USER_ERROR"


def test_an_exception_after_training_or_a_failure_beside_the_abort_stays_its_own():
    after = (
        "rank 0: training finished after 10 steps\nTraceback (most recent call last):\n"
        "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/output/model.pt'\n"
        "terminate called without an active exception\n"
    )
    assert diagnose_text(after).code == "USER_ERROR"
    oom = "training finished\nterminate called after throwing an instance of 'std::bad_alloc'\n"
    assert diagnose_text(oom).code == "OOM_HOST"
    assert diagnose_text("terminate called without an active exception\n").code == "USER_ERROR"


def test_the_exit_barrier_losing_its_store_after_training_is_the_teardown():
    log = (
        "[node 1] rank 2: training finished after 10 steps\n"
        "[node 1] E1201 10:00:00.000000 311 torch/distributed/elastic/agent/server/api.py:1007]"
        " Error waiting on exit barrier. Elapsed: 0.01 seconds\n"
        "[node 1] torch.distributed.DistNetworkError: failed to recv, got 0 bytes\n"
    )
    result = diagnose_text(log, exit_code=1)
    assert result.code == "TEARDOWN_FAILED" and result.retryable


@pytest.mark.parametrize(
    "log", [t for t in _corpus_log("hang.yaml", "HANG") if "wait_for_data" in t]
)  # the local backend's watchdog, and the one inside a Slurm allocation
def test_a_hang_names_each_ranks_innermost_frame_and_the_rank_the_others_wait_for(log):
    result = diagnose_text(log, state="FAILED", exit_code=99)
    assert (result.code, result.err_class, result.retryable) == ("HANG", "ERR_INFRA", True)
    where = {(e["rank"], e["node"]): e["text"] for e in result.evidence}
    assert where == {
        (0, 0): "all_reduce (torch/distributed/distributed_c10d.py:3252)",
        (1, 0): "all_reduce (torch/distributed/distributed_c10d.py:3252)",
        (2, 1): "wait_for_data (hang.py:16)",
        (3, 1): "all_reduce (torch/distributed/distributed_c10d.py:3252)",
    }
    assert (result.first_failure["rank"], result.first_failure["node"]) == (2, 1)
    assert "rank 2 (node 1) in wait_for_data (hang.py:16)" in result.cause


def test_the_stacks_in_a_hang_report_are_never_read_as_messages():
    """A rank py-spy could not read, one whose rank is unknown, and frames whose names
    are other classes' words: the report as the watchdog writes it (its own function)."""
    from anylaunch.node.runtime import live

    stack = (
        "Process 13: python -u train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread 13 (idle): "MainThread"\n'
        "    _store_based_barrier (torch/distributed/distributed_c10d.py:4242)\n"
        "    out_of_memory_guard (train.py:9)\n    <module> (train.py:26)\n"
    )
    found = [
        {
            "rank": 0,
            "node": 0,
            "pid": 11,
            "stack": None,
            "error": "py-spy: Permission denied (os error 13)",
        },
        {"rank": 1, "node": 0, "pid": 13, "stack": stack, "error": None},
        {"rank": None, "node": None, "pid": 12, "stack": None, "error": None},
    ]
    result = diagnose_text("step 1 loss 0.69\n" + live.hang_report(612.4, found))
    assert result.code == "HANG" and "for 612s" in result.cause
    assert [(e["rank"], e["node"], e["text"]) for e in result.evidence] == [
        (0, 0, "py-spy: Permission denied (os error 13)"),
        (1, 0, "_store_based_barrier (torch/distributed/distributed_c10d.py:4242)"),
        (None, None, "no stack"),
    ]


def test_a_job_stopped_by_the_watchdog_is_a_hang_even_without_its_report():
    detail = "hang: no rank wrote output for 612s; stopped by the watchdog"
    result = diagnose_text("step 1 loss 0.69\n", state="FAILED", exit_code=99, events=[detail])
    assert result.code == "HANG" and result.retryable
    # Stopped by the watchdog, the job's cancel is the hang's.
    for log in (t for t in _corpus_log("hang.yaml", "HANG") if "wait_for_data" in t):
        assert diagnose_text(log, cancel_requested=True).code == "HANG"


def test_a_classs_own_words_decide_only_where_nothing_names_the_failure():
    # the words of a class, on a line no emitter's rule names
    assert diagnose_text("Failed to save checkpoint at iteration 7000").code == "STORAGE"
    assert diagnose_text(
        "The job stopped because it exceeded the maximum allowed runtime."
    ).code == ("TIME_LIMIT")
    assert diagnose_text('"message": "The provided token has expired."').code == "AUTH"
    # an exception's own line stays the program's, whatever words its message uses
    assert diagnose_text("SyntaxError: invalid token").code == "USER_ERROR"
    # and any line that names a failure outright decides over them
    both = "Failed to save checkpoint at iteration 7000\nRuntimeError: CUDA out of memory."
    assert diagnose_text(both).code == "OOM_GPU"
    # a gRPC call's deadline is not the job's time limit
    grpc = '{"description":"Deadline Exceeded","file":"src/core/ext/filters/deadline"}'
    assert diagnose_text(grpc).code != "TIME_LIMIT"


def test_an_exceptions_message_in_a_classs_own_words_names_the_class():
    assert diagnose_text("ValueError: The provided token has expired.").code == "AUTH"
    assert diagnose_text("RuntimeError: Failed to save checkpoint to /ckpt/step_100").code == (
        "STORAGE"
    )
    # a tokenizer's token is not a credential
    assert diagnose_text("ValueError: token 50257 is invalid for a vocabulary of 50257").code == (
        "USER_ERROR"
    )
    assert diagnose_text("AssertionError: wrong token id 7 at position 3").code == "USER_ERROR"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        (
            "botocore.exceptions.ClientError: An error occurred (UnauthorizedOperation) when "
            "calling the RunInstances operation: You are not authorized to perform this operation.",
            "AUTH",
        ),
        (
            "googleapiclient.errors.HttpError: <HttpError 403 when requesting https://compute."
            "googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances returned "
            "\"Required 'compute.instances.create' permission for 'projects/p/zones/"
            "us-central1-a/instances/trainer-0'\">",
            "AUTH",
        ),
        (
            "(AuthorizationFailed) The client 'sp-train' with object id '0000' does not have "
            "authorization to perform action 'Microsoft.Compute/virtualMachines/write' over scope",
            "AUTH",
        ),
        (
            "botocore.exceptions.ClientError: An error occurred (InvalidParameterValue) when "
            "calling the RunInstances operation: Value (p9.xlarge) for parameter instanceType "
            "is invalid.",
            "SUBMIT_CONFIG",
        ),
        (
            "botocore.exceptions.ClientError: An error occurred (ValidationException) when "
            "calling the SubmitJob operation: Container overrides are not valid",
            "SUBMIT_CONFIG",
        ),
    ],
)
def test_the_clouds_own_error_codes_name_their_class(message: str, code: str) -> None:
    assert diagnose_text(message).code == code


def test_a_traceback_frame_line_is_decoration_but_a_paste_joined_onto_it_is_read():
    frame = '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/c10d.py", line 1906, in broadcast'
    assert diagnose_text(frame).code == "UNKNOWN"
    joined = (
        frame + " 10: work = default_pg.broadcast([tensor], opts) 10: torch.distributed."
        "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1331, unhandled system error"
    )
    assert diagnose_text(joined).code == "NCCL_ERROR"
