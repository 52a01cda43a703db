"""The diagnosis classes: what each means, whose fix it is, and the fix.

`err_class` uses the Lepton facade's names, so `anylaunch diagnose` and
`LeptonSDK.get_failure_analysis` say the same thing: ERR_PROGRAM (yours to fix),
ERR_INFRA (the platform's), and the three failures the facade names on their own,
ERR_IMAGE_PULL, ERR_CAPACITY and ERR_AUTH.

The order is precedence, highest first: scheduler verdicts, then hardware, then root
causes, then the cascade that follows them (collective errors and timeouts,
cancellations). A root cause on one rank beats the timeouts it causes on the others: a
GPU that fell off the bus beats the node failure the scheduler reports after it, and
NCCL refusing its configuration on one rank beats the store timeouts of the ranks
waiting for it.
"""

from __future__ import annotations

from dataclasses import dataclass

PROGRAM, INFRA = "ERR_PROGRAM", "ERR_INFRA"
IMAGE_PULL, CAPACITY, AUTH = "ERR_IMAGE_PULL", "ERR_CAPACITY", "ERR_AUTH"


@dataclass(frozen=True)
class Class:
    code: str
    err_class: str
    retryable: bool
    cause: str
    suggestion: str


CLASSES = [
    Class("TIME_LIMIT", PROGRAM, True, "the job reached its time limit",
          "raise the time limit, or checkpoint more often and resubmit: it resumes from the newest checkpoint"),
    Class("PREEMPTED", INFRA, True, "the job was preempted, requeued or evicted by the platform",
          "resubmit (it resumes from the newest checkpoint); use a dedicated node group or on-demand instances for long runs"),
    Class("HARDWARE_GPU", INFRA, True, "a GPU hardware or driver error (Xid, ECC, GPU lost)",
          "resubmit on other nodes and report the node to the cluster admins"),
    Class("NODE_FAIL", INFRA, True, "a node of the allocation failed",
          "resubmit, excluding the failed node (slurm: exclude / another node group), and report the node"),
    Class("OOM_GPU", PROGRAM, False, "the GPU ran out of memory",
          "reduce the batch size (or max_length), enable activation checkpointing, or add GPUs with tensor/pipeline parallelism"),
    Class("OOM_HOST", PROGRAM, False, "host memory ran out and the kernel's OOM killer stopped a process",
          "request more memory (slurm: mem), lower DataLoader num_workers or prefetching, or load data lazily"),
    Class("SHM", PROGRAM, False, "shared memory (/dev/shm) ran out",
          "raise the container's shared memory (lepton: shared_memory_size, docker: --shm-size) or lower DataLoader num_workers"),
    Class("IMAGE_PULL", IMAGE_PULL, False, "the container image could not be pulled",
          "check the image name and registry credentials: NGC_KEY for nvcr.io (an image pull secret), enroot credentials on Slurm"),
    Class("CONTAINER_MOUNT", INFRA, True, "the container could not start or mount its volumes",
          "check that every mount source exists on the nodes; on Lepton cancel and resubmit to another node group"),
    Class("AUTH", AUTH, False, "a credential was rejected or is missing",
          "the token is invalid, expired or unset — create a new one (Lepton: Settings → Tokens; Hugging Face: HF_TOKEN with access to the repo) and export it"),
    Class("STORAGE", PROGRAM, False, "reading or writing data failed (S3 path, permissions or disk space)",
          "check the exact s3:// paths and ACCESS_KEY/SECRET_KEY/S3_ENDPOINT_URL, and the free space of the output filesystem"),
    Class("PORT_IN_USE", INFRA, True, "the rendezvous port was already in use on the master node",
          "set another master_port (or leave it unset locally: a free one is picked)"),
    Class("SUBMIT_CONFIG", PROGRAM, False, "the scheduler or API rejected the job's configuration",
          "fix the rejected setting (account, partition, qos, time, gres, resource shape) named in the evidence"),
    Class("NO_CAPACITY", CAPACITY, True, "no capacity for the requested resources",
          "queued without a node: choose another resource shape, node group, region or zone, or fewer GPUs"),
    Class("USER_ERROR", PROGRAM, False, "the training program failed",
          "fix the error in the program or its configuration shown in the evidence"),
    Class("HANG", INFRA, True, "the job hung: no rank wrote output",
          "look at the rank whose stack differs from the others' (they wait for it) and at what it waits on; a hang of every rank in a collective is often a transient deadlock or a bad node: resubmit, excluding the node if it hangs again; a collective timeout (init_process_group(timeout=...)) and NCCL_DEBUG=INFO turn the next hang into an error"),
    Class("TEARDOWN_FAILED", INFRA, True, "training finished, then the job failed while it shut down",
          "nothing in the training to fix: its work completed (check its outputs and newest checkpoint); resubmit if the job must end SUCCEEDED. The shutdown of torch's distributed runtime failed (gloo's threads at interpreter exit, or the rendezvous store gone at the exit barrier): a rank that ends with os._exit(0) once dist.destroy_process_group() and its last write returned skips the teardown where the abort happens"),
    Class("NCCL_ERROR", INFRA, True, "a collective communication error (NCCL/gloo)",
          "rerun with NCCL_DEBUG=INFO; check the network interfaces (NCCL_SOCKET_IFNAME) and that no rank died first"),
    Class("RDZV_FAILED", INFRA, True, "the nodes could not rendezvous",
          "check that MASTER_ADDR resolves and is reachable from every node, the port is open, and all nodes started"),
    Class("NCCL_TIMEOUT", INFRA, True, "a collective operation timed out",
          "a rank stalled or died: look for the first failing rank; raise the timeout only for long data loading or checkpointing"),
    Class("CANCELLED", PROGRAM, False, "the job was cancelled",
          "nothing to fix if you cancelled it; otherwise check who ran scancel/cancel"),
    Class("UNKNOWN", PROGRAM, False, "the job failed for a reason the logs do not show",
          "read the logs of every node (anylaunch logs JOB) and rerun with more logging"),
]  # fmt: skip
BY_CODE = {c.code: c for c in CLASSES}
PRECEDENCE = {c.code: len(CLASSES) - i for i, c in enumerate(CLASSES)}
