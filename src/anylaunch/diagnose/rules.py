"""The diagnosis rules: one readable table of log patterns and what they mean.

Each line of a log is matched against RULES in order; the first match classifies it.
A STRONG rule names the failure itself ("CUDA out of memory"); a WEAK one is a
symptom that only counts when nothing stronger is found (an exit code of -9, a bare
traceback). Across lines, CLASSES' order decides: a root cause (OOM on one rank) ranks
above the cascade it causes (NCCL watchdog timeouts, SIGTERMs on the other ranks).
tests/test_diagnose.py holds, for every pattern, the real message it was taken from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STRONG, WEAK = 2, 1
PROGRAM, INFRA = "ERR_PROGRAM", "ERR_INFRA"


@dataclass(frozen=True)
class Class:
    code: str
    err_class: str
    retryable: bool
    cause: str
    suggestion: str


# Highest precedence first: scheduler verdicts, then hardware, then root causes, then
# the cascade (collective errors and timeouts, cancellations).
CLASSES = [
    Class("TIME_LIMIT", PROGRAM, True, "the job reached its time limit",
          "raise the time limit, or checkpoint more often and resubmit: it resumes from the newest checkpoint"),
    Class("PREEMPTED", INFRA, True, "the job was preempted or evicted by the platform",
          "resubmit (it resumes from the newest checkpoint); use a dedicated node group or on-demand instances for long runs"),
    Class("NODE_FAIL", INFRA, True, "a node of the allocation failed",
          "resubmit, excluding the failed node (slurm: exclude / another node group)"),
    Class("HARDWARE_GPU", INFRA, True, "a GPU hardware error (Xid, ECC, GPU lost)",
          "resubmit on other nodes and report the node to the cluster admins"),
    Class("OOM_GPU", PROGRAM, False, "the GPU ran out of memory",
          "reduce the batch size (or max_length), enable activation checkpointing, or add GPUs with tensor/pipeline parallelism"),
    Class("OOM_HOST", PROGRAM, False, "host memory ran out and the kernel's OOM killer stopped a process",
          "request more memory (slurm: mem), lower DataLoader num_workers or prefetching, or load data lazily"),
    Class("SHM", PROGRAM, False, "shared memory (/dev/shm) ran out",
          "raise the container's shared memory (lepton: shared_memory_size, docker: --shm-size) or lower DataLoader num_workers"),
    Class("IMAGE_PULL", PROGRAM, False, "the container image could not be pulled",
          "check the image name and registry credentials: NGC_KEY for nvcr.io (an image pull secret), enroot credentials on Slurm"),
    Class("CONTAINER_MOUNT", INFRA, True, "the container could not start or mount its volumes",
          "check that every mount source exists on the nodes; on Lepton cancel and resubmit to another node group"),
    Class("AUTH", PROGRAM, False, "a credential was rejected (401/403)",
          "the token is invalid or expired — create a new one (Lepton: Settings → Tokens; Hugging Face: HF_TOKEN with access to the repo) and export it"),
    Class("STORAGE", PROGRAM, False, "reading or writing data failed (S3 path, permissions or disk space)",
          "check the exact s3:// paths and ACCESS_KEY/SECRET_KEY/S3_ENDPOINT_URL, and the free space of the output filesystem"),
    Class("PORT_IN_USE", INFRA, True, "the rendezvous port was already in use on the master node",
          "set another master_port (or leave it unset locally: a free one is picked)"),
    Class("SUBMIT_CONFIG", PROGRAM, False, "the scheduler or API rejected the job's configuration",
          "fix the rejected setting (account, partition, qos, time, gres, resource shape) named in the evidence"),
    Class("NO_CAPACITY", INFRA, True, "no capacity for the requested resources",
          "queued without a node: choose another resource shape, node group, region or zone, or fewer GPUs"),
    Class("USER_ERROR", PROGRAM, False, "the training program failed",
          "fix the error in the program or its configuration shown in the evidence"),
    Class("RDZV_FAILED", INFRA, True, "the nodes could not rendezvous",
          "check that MASTER_ADDR is reachable from every node and the port is open, and that all nodes started"),
    Class("NCCL_ERROR", INFRA, True, "a collective communication error (NCCL/gloo)",
          "rerun with NCCL_DEBUG=INFO; check the network interfaces (NCCL_SOCKET_IFNAME) and that no rank died first"),
    Class("NCCL_TIMEOUT", INFRA, True, "a collective operation timed out",
          "a rank stalled or died: look for the first failing rank; raise the timeout only for long data loading or checkpointing"),
    Class("CANCELLED", PROGRAM, False, "the job was cancelled",
          "nothing to fix if you cancelled it; otherwise check who ran scancel/cancel"),
    Class("UNKNOWN", PROGRAM, False, "the job failed for a reason the logs do not show",
          "read the logs of every node (anylaunch logs JOB) and rerun with more logging"),
]  # fmt: skip
BY_CODE = {c.code: c for c in CLASSES}
PRECEDENCE = {c.code: len(CLASSES) - i for i, c in enumerate(CLASSES)}


@dataclass(frozen=True)
class Rule:
    code: str
    pattern: re.Pattern[str]
    strength: int = STRONG


def _r(code: str, pattern: str, strength: int = STRONG, flags: int = re.IGNORECASE) -> Rule:
    return Rule(code, re.compile(pattern, flags), strength)


# Lines that summarise other lines: never evidence themselves.
IGNORE = re.compile(
    r"ChildFailedError|^(To enable traceback|traceback\s*:|error_file\s*:|host\s*:|time\s*:|Failures:|"
    r"Root Cause|<NO_OTHER_FAILURES>|={5,}|-{5,})",
    re.IGNORECASE,
)

RULES: list[Rule] = [
    # Slurm's verdicts: "slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***"
    _r(
        "TIME_LIMIT",
        r"DUE TO TIME LIMIT|time limit (was )?exceeded|exceeded (its|the) time limit|DeadlineExceeded|active longer than specified deadline",
    ),
    _r(
        "PREEMPTED",
        r"DUE TO PREEMPTION|\bpreempted\b|spot instance.*(interrupt|reclaim)|\bEvicted\b|\beviction\b|The node was low on resource",
    ),
    _r(
        "NODE_FAIL",
        r"DUE TO NODE FAIL|Node failure on|\bNODE_FAIL\b|node \S+ (is )?not responding|Kill task due to node failure",
    ),
    # Hardware: "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
    _r(
        "HARDWARE_GPU",
        r"\bXid\b|fallen off the bus|uncorrectable ECC|ECC error|ECCUncorrectable|ECC_UNCORRECTABLE|GPU is lost|GPU_IS_LOST|GPU requires a? ?reset|NVLink (error|fault)|Row remapping failure",
    ),
    # Host OOM first for Java's OutOfMemoryError, which is no GPU's.
    _r("OOM_HOST", r"java\.lang\.OutOfMemoryError"),
    _r(
        "OOM_GPU",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory|HIP out of memory|Cuda failure 'out of memory'|out of memory on (device|GPU)",
    ),
    _r(
        "OOM_HOST",
        r"oom_kill event|oom-kill|\boom_reaper\b|Out of memory: Killed process|Killed process \d+|OOMKilled|OUT_OF_MEMORY|: Out Of Memory|std::bad_alloc|\bMemoryError\b|Cannot allocate memory|Memory cgroup out of memory",
    ),
    _r(
        "SHM",
        r"insufficient shared memory|Bus error|SIGBUS|/dev/shm|shm_open|shared memory segment|unable to (write to|open) (file|shared memory)",
    ),
    _r(
        "IMAGE_PULL",
        r"ErrImagePull|ImagePullBackOff|(failed|unable) to pull image|failed to import docker image|manifest (for \S+ )?unknown|pull access denied|Back-off pulling image|URL https?://\S+ returned error code: 40[13]|image not found|repository does not exist",
    ),
    _r(
        "CONTAINER_MOUNT",
        r"couldn't start container|enroot-mount|failed to mount|MountVolume\.SetUp failed|mount point (not found|does not exist)|container start failed|spank_pyxis\.so: task_init\(\) failed|CreateContainerConfigError|FailedMount",
    ),
    _r(
        "AUTH",
        r"\b401\b.*(Unauthorized|Client Error)|\bUnauthorized\b|403 Forbidden|token (is )?(invalid|expired)|invalid (auth )?(token|credentials)|GatedRepoError|gated repo|Authentication failed|InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken|authentication required",
    ),
    _r(
        "STORAGE",
        r"NoSuchBucket|NoSuchKey|AccessDenied|anylaunch-stage: \w+: error|No space left on device|Disk quota exceeded|Read-only file system|Stale file handle|Input/output error",
    ),
    # "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."
    _r("PORT_IN_USE", r"Address already in use|EADDRINUSE|errno: 98\b|address in use"),
    _r(
        "SUBMIT_CONFIG",
        r"FAILED_PRECHECKS|sbatch: error|Batch job submission failed|Invalid account|invalid partition|Requested time limit is invalid|Invalid generic resource|Invalid qos|Requested node configuration is not available|\bValidationError\b.*(job|spec)|InvalidRequest|anylaunch: error: \S+:\d+:",
    ),
    _r(
        "NO_CAPACITY",
        r"Insufficient (nvidia\.com/gpu|cpu|memory)|\d+/\d+ nodes are available|InsufficientInstanceCapacity|ResourcesUnavailableError|Failed to acquire resources|out of capacity|no (available )?capacity|ZONE_RESOURCE_POOL_EXHAUSTED|FAILED_NO_RESOURCE|\bUnschedulable\b|queued .* without a node",
    ),
    # Collective timeouts before errors: "Some NCCL operations have failed or timed out".
    _r(
        "NCCL_TIMEOUT",
        r"Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out|NCCL timeout|collective operation timeout|ProcessGroupNCCL.*(timed out|timeout)|Timed out waiting \d+ms for (send|recv) operation|heartbeat monitor",
    ),
    _r(
        "RDZV_FAILED",
        r"Rendezvous\w*Error|DistNetworkError|DistStoreError|client socket has timed out|waiting for clients|failed to connect to|Connection refused|TCPStore|store->get|Socket Timeout|recvBytes|\brendezvous\b.*(fail|timed? ?out|closed)",
    ),
    _r(
        "NCCL_ERROR",
        r"NCCL error|nccl(Internal|UnhandledCuda|System|Remote|InvalidUsage)Error|NCCL WARN|DistBackendError|NCCL communicator was aborted|Gloo connectFullMesh failed|gloo.*Connection closed by peer|Connection reset by peer|\bNET/IB\b.*(error|fail)",
    ),
    _r(
        "CANCELLED",
        r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+ \*\*\*|CANCELLED by \d+|\bscancel\b|job was cancelled|\bcancelled by user\b",
    ),
    # A step cancelled by srun after one task failed is the cascade, not the cause.
    _r(
        "CANCELLED",
        r"\*\*\* STEP \S+ ON \S+ CANCELLED AT \S+ \*\*\*|got signal: (15|2)\b|Received SIGTERM|SignalException|\bTerminated\b",
        WEAK,
    ),
    # The program's own failure: the last line of a Python traceback, and the like.
    _r("USER_ERROR", r"^(\w+\.)*\w*(Error|Exception)\b(:|$)|FAILED_SETUP", flags=0),
    _r(
        "USER_ERROR",
        r"device-side assert triggered|Segmentation fault|core dumped|command not found|No module named|can't open file|CalledProcessError|illegal memory access",
    ),
    _r(
        "USER_ERROR",
        r"Traceback \(most recent call last\)|exitcode\s*:\s*[1-9]|exited with (exit )?code [1-9]|exit code [1-9]|Exited with exit code [1-9]",
        WEAK,
    ),
    # torchrun's summary of a worker killed by a signal: SIGKILL is usually the OOM killer.
    _r(
        "OOM_HOST",
        r"exitcode\s*:\s*-9|Signal 9 \(SIGKILL\)|exit code 137|^Killed$|task \d+: Killed",
        WEAK,
    ),
    _r("SHM", r"exitcode\s*:\s*-7|Signal 7 \(SIGBUS\)", WEAK),
]

# torchrun's "Root Cause (first observed failure)" block names the failing rank.
ROOT_CAUSE_RANK = re.compile(r"^rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")
ROOT_CAUSE_HOST = re.compile(r"^host\s*:\s*(\S+)")


def classify(text: str) -> Rule | None:
    if IGNORE.search(text):
        return None
    for rule in RULES:
        if rule.pattern.search(text):
            return rule
    return None
