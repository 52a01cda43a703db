"""The diagnosis rules: one readable table of the messages real emitters print.

Each rule names the program that prints its messages (`source`: a file in that
program's repository, or the page that documents it), so a rule can be checked against
the text it was taken from. A line is matched against RULES in order; the first strong match
classifies it (else the first weak one), so a specific rule stands before a general one
that would also match
("unable to write to file </torch_…>: No space left on device" is shared memory, not a
full disk).

A STRONG rule names the failure itself ("CUDA out of memory"); a WEAK one is a symptom
or the cascade that follows a failure (a DistBackendError wrapper, a step cancelled
after a task failed), which only decides when nothing stronger is found. Exit codes and
signals are read by `signals`, not here. tests/diagnose/ holds, for every rule, the real
messages it was taken from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from anylaunch.observe.diagnose import keywords
from anylaunch.observe.diagnose.classes import BY_CODE, CLASSES, PRECEDENCE, Class

STRONG, WEAK = 2, 1

__all__ = ["BY_CODE", "CLASSES", "PRECEDENCE", "RULES", "STRONG", "WEAK", "Class", "Rule"]


@dataclass(frozen=True)
class Rule:
    code: str
    pattern: re.Pattern[str]
    strength: int
    source: str
    name: str
    words: tuple[str, ...] | None  # a line holding none of these cannot match (keywords)
    # Names only the shape of a failure (a Python exception's line), not what failed: a
    # weak rule that names the same line's message (a cascade) decides instead.
    generic: bool = False


def _r(
    code: str,
    source: str,
    *patterns: str,
    weak: bool = False,
    case: bool = False,
    generic: bool = False,
    words: tuple[str, ...] | None = None,
) -> Rule:
    """`words` names the pre-check's words where they cannot be read off the patterns."""
    flags = 0 if case else re.IGNORECASE
    # (?a): a word boundary between letters of other scripts and an emitter's ASCII
    # words ("启动报错AssertionError: ...", a message a user's own text runs into).
    pattern = re.compile("(?a)" + "|".join(f"(?:{p})" for p in patterns), flags)
    strength = WEAK if weak else STRONG
    found = words or keywords.words(patterns)
    return Rule(code, pattern, strength, source, patterns[0][:60], found, generic)


# Lines that only summarise or decorate other lines: never evidence themselves.
IGNORE = re.compile(
    r"ChildFailedError|^(To enable traceback|traceback\s*:|error_file\s*:|host\s*:|time\s*:|"
    r"exitcode\s*:|rank\s*:|Failures:|Root Cause|<NO_OTHER_FAILURES>|[=-]{5,}\s*$|\[\d+\]:$)|"
    r"^\s*File \"[^\"]*\", line \d+(, in \S+)?\s*$|^frame #\d+:",
    re.IGNORECASE,
)

SLURM_STEPD = "SchedMD/slurm src/slurmd/slurmstepd/req.c"
SLURM_ERRNO = "SchedMD/slurm src/common/slurm_errno.c"
K8S_KUBELET = "kubernetes/kubernetes pkg/kubelet/images/types.go"
PYXIS = "NVIDIA/pyxis pyxis_slurmstepd.c"
ENROOT = "NVIDIA/enroot src/common.sh"
NCCL_SOCKET = "NVIDIA/nccl src/misc/socket.cc"
NCCL_IB = "NVIDIA/nccl src/transport/net_ib/common.cc"
C10D_SOCKET = "pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp"
C10D_NCCL = "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
ELASTIC = "pytorch/pytorch torch/distributed/elastic/rendezvous/"
DATALOADER = "pytorch/pytorch torch/utils/data/_utils/signal_handling.py"
SHM_MANAGER = "pytorch/pytorch c10/core/impl/alloc_cpu.cpp, aten/src/ATen/MapAllocator.cpp"
CUDA_RT = "NVIDIA CUDA runtime API, cudaError_t (docs.nvidia.com/cuda/cuda-runtime-api)"
KERNEL_OOM = "torvalds/linux mm/oom_kill.c"
XID = "NVIDIA Xid errors (docs.nvidia.com/deploy/xid-errors)"
SKY = "skypilot-org/skypilot sky/exceptions.py, sky/jobs/state.py"
LEPTON = "anylaunch emulator/src/lepton_emulator/jobs.py (Lepton's Kubernetes events)"

RULES: list[Rule] = [
    # --- Scheduler verdicts -------------------------------------------------------------
    _r("TIME_LIMIT", SLURM_STEPD, r"DUE TO TIME LIMIT", r"CANCELLED DUE TO TIME"),
    _r(
        "TIME_LIMIT",
        "SchedMD/slurm src/slurmctld/job_mgr.c; kubernetes pkg/controller/job/job_controller.go",
        r"\btime limit (was )?(exceeded|reached)",
        r"exceeded (its |the |job |\w+ )?(wall ?clock|wall ?time|run ?time|time)[ -]?limit",
        r"(?<!code = )\bDeadlineExceeded\b",  # gRPC's "code = DeadlineExceeded" is one call's
        r"active (on the node )?longer than (the )?specified deadline",
        # Flux's, submitit's and grid middleware's words for the allocation's end
        r"\bresource allocation expired\b",
        r"\btimed-out and not checkpointable\b",
        r"\bwall ?clock limit\b.{0,60}\bkilled\b",
        r"Reason=TimeLimit\b",
        r"\bwall ?time limit\b.*(exceeded|reached|killed)",
        r"JobState=TIMEOUT",
        r"\bTIMEOUT\s+\d+:\d+\s*$",  # a row of sacct: State, then ExitCode
        r"walltime \d+ exceeded limit \d+",
        r"TERM_RUNLIMIT|TERM_CPULIMIT",
        # a CI runner's or another executor's limit on a job's running time
        r"exceeded the maximum execution time\b",
        r"\b(cancell?ed|killed|terminated|aborted) because (the )?(time|wall ?time|run ?time)\b.{0,20}\bexceeded\b",
        # SageMaker's secondary status for a job its StoppingCondition stopped
        r"\bMaxRuntimeExceeded\b",
        # Modal: a function's input ran past the function's timeout
        r"\bFunctionTimeoutError\b|\bhit its\s+timeout of \d+",
    ),
    # The state a workflow engine read from sacct ("SLURM status is: 'TIMEOUT'").
    _r(
        "TIME_LIMIT",
        "snakemake/snakemake-executor-plugin-slurm (sacct states)",
        r"\bstatus( is)?:? '?TIMEOUT\b",
        r"'\d+': 'TIMEOUT'",
        case=True,
    ),
    # PBS and Torque call a job killed by its node's failure "preempted (node failure)".
    _r("NODE_FAIL", "openpbs/openpbs src/server (job preempted)", r"preempted \(node fail"),
    # JAX's and XLA's coordination service: the tasks of a multi-host job finding each
    # other (its heartbeat message lists "got preempted" among possible causes, so it
    # stands before the preemption rules).
    _r(
        "RDZV_FAILED",
        "openxla/xla xla/tsl/distributed_runtime/coordination; jax-ml/jax jax/_src/distributed.py",
        r"\bcoordination service\b.{0,120}(fail|error|heartbeat timeout|UNAVAILABLE|DEADLINE_EXCEEDED)",
        r"\bcluster registration failed\b",
        r"CoordinationService/\w+",
        r"Coordination service agent in error status",
        r"DEADLINE_EXCEEDED: Barrier timed out",
    ),
    # A spot VM reclaimed before it ever started is spot capacity the zone did not have
    # (Compute Engine's operation error; SkyPilot fails over to another zone on it).
    _r(
        "NO_CAPACITY",
        "GCP Compute Engine operation errors (spot and preemptible VMs)",
        r"\bfailed to start due to preemption\b",
    ),
    _r("PREEMPTED", SLURM_STEPD, r"DUE TO PREEMPTION", r"DUE TO JOB REQUEUE"),
    # An eviction for going over the pod's own disk limit is the job's writing, as an
    # eviction for memory is (a node short of disk is the node's pressure: below).
    _r(
        "STORAGE",
        "kubernetes pkg/kubelet/eviction (ephemeral storage)",
        r"\bephemeral (local )?storage usage exceeds\b",
        r"\bephemeral-storage\b.{0,60}\bexceeds? (the |its )?(total )?limit\b",
    ),
    # An eviction for memory is the pod using more than it asked for: it comes back
    # on a retry unless the request grows.
    _r(
        "OOM_HOST",
        "kubernetes pkg/kubelet/eviction (memory pressure)",
        r"The node was low on resource: \[?memory\b",
        # Ray's raylet killing workers for the node's memory; TensorFlow's host allocator
        r"killed due to memory pressure \(OOM\)",
        r"OOM when allocating tensor .{0,200}device:CPU|\bby allocator cpu\b",
    ),
    _r(
        "PREEMPTED",
        "SchedMD/slurm src/slurmctld/job_mgr.c (requeue); kubernetes pkg/kubelet/eviction",
        r"\bjob (was )?requeued\b",
        r"\brequeu(ed|ing) (job|batch job|JobId)",
        r"JobState=PREEMPTED",
        r"\bTERM_PREEMPT\b",  # LSF
        r"\bPREEMPTED\s+\d+:\d+\s*$",
        r"The node was low on resource",
        r"\bPod was (evicted|preempted)",
        r"\bPreempt(ed|ing)\b|\bpre-empt(ed|ion)\b|\bPreemptionError\b",
        # Karpenter acting on the cloud's spot interruption notice
        r"\bSpotInterruption\w*\b|\bdelete from interruption message\b",
        # AWS Batch and ECS: the instance under the job was taken away
        r"Host EC2 \(instance \S+\) terminated",
        r"spot (instance|VM)?.{0,40}(interrupt|reclaim|terminat)",
        r"\binstances?\.preempted\b",
        r"\bpreemption notice\b",
        # the cloud's metadata service announcing the instance's end (GCP, AWS, Azure)
        r"\b(termination|preemption|interruption) is imminent\b|\binterruption notice\b",
        r"instance was preempted",
        # the kubelet's graceful node shutdown (a spot or maintenance reclaim of the node)
        r"Pod was terminated in response to imminent node shutdown",
        r"cluster .{0,40}(was|is|has been) preempted",
    ),
    # A pod's bare "Evicted" does not say why: the message beside it (memory, disk, a
    # higher-priority pod) decides when it is there.
    _r("PREEMPTED", "kubernetes pkg/kubelet/eviction", r"\bEvicted\b", r"\beviction\b", weak=True),
    _r("NODE_FAIL", SLURM_STEPD, r"DUE TO NODE FAIL"),
    _r(
        "NODE_FAIL",
        "SchedMD/slurm src/srun/allocate.c, src/slurmctld/node_mgr.c",
        r"\bNode failure on\b",
        r"\bProlog failure on node\b",
        r"\bNODE_FAIL\b",
        r"\bBOOT_FAIL\b",
        r"\bnode \S+ (is )?not responding",
        r"Kill task (failed|due to node failure)",
        r"launch failed requeued held",
        r"Reason=NodeDown\b",
        r"\bNodeNotReady\b",
        r"\bnode(s)? (is|are|was|were) (lost|unreachable|not ready)\b",
        r"\bNodeLost\b",
        r"Task launch for \S+ failed on node",
        r"job driver (died|was lost)|FAILED_DRIVER",
        r"its node has died",
        # Ray's head losing a node's heartbeats
        r"has been marked dead because .{0,60}missed too many heartbeats|\bRAY_NODE_REMOVED\b",
        r"FAILED_CONTROLLER",
        # slurmd could not exec the batch script it had just written to its own spool
        r"execve\(\): \S*/slurm_script: No such file or directory",
        r"reason set to: .{0,40}health ?check failed",
    ),
    # --- GPU hardware and driver --------------------------------------------------------
    _r(
        "HARDWARE_GPU",
        XID,
        r"NVRM: Xid\b",
        r"\bXid (error|\(PCI)",
        r"fallen off the bus",
        r"uncorrectable ECC error",
        r"\bECC (error|errors|failure)\b",
        r"ECCUncorrectable|ECC_UNCORRECTABLE|cudaErrorECCUncorrectable",
        r"\bGPU is lost\b",
        r"GPU_IS_LOST|CUDA_ERROR_(ECC_UNCORRECTABLE|NVLINK_UNCORRECTABLE)",
        r"GPU requires a? ?reset",
        r"NVLink (error|fault)",
        r"uncorrectable NVLink error",
        r"Row remapping (failure|pending)",
        r"Unable to determine the device handle for GPU",
        r"NV_ERR_RESET_REQUIRED",
        r"infoROM is corrupted",
    ),
    _r(
        "HARDWARE_GPU",
        CUDA_RT + "; NVIDIA/nvidia-container-toolkit",
        r"no CUDA-capable device is detected",
        r"CUDA-capable device\(s\) is/are busy or unavailable",
        r"cudaErrorDevicesUnavailable|cudaErrorNoDevice|cudaErrorSystemNotReady",
        r"system not yet initialized",
        r"Driver/library version mismatch",
        r"nvml error: driver not loaded",
        # the container toolkit could not reach the node's driver (not a container setting)
        r"nvidia-container-cli: initialization error: (driver|nvml|cuda)\b",
        r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        r"Failed to initialize NVML",
        r"CUDA error: unknown error|\bcuda runtime error \(30\)",
        # cudaErrorLaunchFailure in the runtime's, the driver's and NCCL's words
        r"\bunspecified launch failure\b|cudaErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED",
        r"CUDA_ERROR_(NOT_INITIALIZED|NO_DEVICE)\b",
        r"CUDA driver initialization failed",
        r"Found no NVIDIA driver on your system",
        r"unsupported display driver / cuda driver combination|SYSTEM_DRIVER_MISMATCH|cudaErrorSystemDriverMismatch",
        r"Unexpected error from cudaGetDeviceCount",
        r"^No devices were found$",
        r"forward compatibility was attempted on non supported HW",
    ),
    _r(
        "HARDWARE_GPU",
        "NVIDIA/DCGM dcgmlib/dcgm_errors.h; GPU health checks of node monitors and schedulers",
        r"\bDCGM_FR_\w+",
        r"\bGPU\w*?(Is)?(Not ?|Un)Healthy\b",
        r"\bGPUs?\b.{0,40}\bunhealthy\b",
        r"gres/gpu count reported lower than configured",
        # a node health check (NHC) failing one of its GPU checks
        r"Health check failed:\s+Check check_\w*(nv|gpu|xid|dcgm|ecc|nvlink)",
        r"\bXid\w*Error\b|\bXid[ =:]+\d+\b",
        r"devices unavailable for nvidia\.com/gpu|UnexpectedAdmissionError",
        # the driver's own error lines, and a PCIe error on an NVIDIA device (vendor 0x10de)
        r"\bNVRM: .{0,160}(fail|error|crash|fallen|lost|timeout)",
        r"\bvendor(_id)?[: ]+0x10de\b",
    ),
    # A host DRAM error is the node's fault; a GPU's memory errors, above, are the GPU's.
    _r(
        "NODE_FAIL",
        "torvalds/linux mm/memory-failure.c, arch/x86/kernel/cpu/mce/core.c",
        r"Uncorrected hardware memory error",
        r"uncorrect(ed|able) (host |system |DRAM |main )?memory error",
        r"\bMemory failure: 0x[0-9a-f]+",
        r"\bMachine check events? logged\b",
        r"\bEDAC\b.{0,60}\b(UE|uncorrect\w*)\b",
        # the kernel's lockup detector: the node stopped scheduling
        r"soft lockup - CPU#\d+ stuck|\bhard LOCKUP\b",
        # slurmd draining a node that does not match its configuration
        r"Node configuration differs from hardware",
        r"mce: \[Hardware Error\]",
        r"hardware memory corruption",
    ),
    # --- Memory ---------------------------------------------------------------------------
    # Host memory errors whose names would otherwise read as a GPU's.
    _r(
        "OOM_HOST",
        "openjdk: java.lang.OutOfMemoryError; ray-project/ray python/ray/exceptions.py",
        r"java\.lang\.OutOfMemoryError",
        r"node running low on memory",
        r"\bRayOutOfMemoryError\b|\bray\.exceptions\.OutOfMemoryError\b",
    ),
    _r(
        "OOM_GPU",
        "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp; " + CUDA_RT,
        r"CUDA out of memory",
        r"\bOutOfMemoryError\b",
        r"CUDA error: out of memory",
        r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY",
        r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUSOLVER_STATUS_ALLOC_FAILED",
        r"CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate",
        r"RESOURCE_EXHAUSTED: (Out of memory|Failed to allocate)",
        r"HIP out of memory|\bMPS backend out of memory\b",
        # TensorFlow's and XLA's stream executor allocating on the device
        r"failed to allocate [\d.]+[KMGT]? \(\d+ bytes\) from device",
        r"Resource exhausted: Out of memory",
        r"out of memory on (device|GPU)",
        r"\bGPU \d+ has a total capacity of",
        r"cudaMalloc(Async)? (failed|retries)",
        r"No available memory for the cache blocks",
        # vLLM: the memory left on the GPU after the weights holds fewer tokens than asked
        r"larger than the maximum number of tokens that can be stored in KV cache",
        r"\[CUDA\]: out of memory",
        r"OOM when allocating tensor",
        # a CUDA library's own wording of cudaErrorMemoryAllocation (error 2)
        r"\b(alloc_)?cuda\b.{0,60}\bout of memory\b",
        # a framework's check of a CUDA call (Caffe's CHECK, a kernel's GPUassert)
        r"cudaSuccess\b.{0,30}\bout of memory\b|\bGPUassert: out of memory\b",
    ),
    _r(
        "OOM_GPU",
        "NVIDIA/nccl src/include/checks.h, src/include/alloc.h",
        r"Cuda failure (\d+ )?'?out of memory",
        r"Failed to CUDA (malloc|calloc)",
    ),
    _r(
        "OOM_HOST",
        "SchedMD/slurm src/plugins/task/cgroup/task_cgroup_memory.c, src/srun/launch.c",
        r"oom[_-]kill event",
        r"OOM Killed",
        r"task \d+: Out Of Memory",
        r"Exceeded (job|step) memory limit",
        r"\bTERM_MEMLIMIT\b|reaching LSF memory usage limit",  # LSF
        # a scheduler's or a container manager's memory limit, however worded
        r"\b(exceed\w*|over) (its |the |their )?(container'?s? )?memory (limit|request)s?\b",
        r"\bmemory limit of the (container|job|pod|task) (was|has been) exceeded\b",
        r"exceeded memory limit \(\d+ > \d+\), being killed",
        r"exceeded MEM usage (hard )?limit",  # Torque's and PBS's
        # Ray's guess when a worker on Kubernetes died of a SIGTERM or SIGKILL
        r"may have exceeded (K8s |the )?(pod )?memory limits?",
        r"\bOUT_OF_MEMORY\b",
        r"\bState=OUT_OF_ME",
    ),
    _r(
        "OOM_HOST",
        KERNEL_OOM,
        r"Out of memory: Kill(ed)? process",
        r"Memory cgroup out of memory",
        r"invoked oom-killer",
        r"oom-kill:constraint=",
        r"\boom_reaper\b",
        r"Killed process \d+ \(",
    ),
    _r(
        "OOM_HOST",
        "kubernetes pkg/kubelet (OOMKilled); Lepton node event OOM",
        r"\bOOMKilled\b",
        r"OOM encountered, victim process",
        r"container .{0,40}(was )?OOM[- ]killed",
    ),
    _r(
        "OOM_HOST",
        "python/cpython Objects/exceptions.c (MemoryError); libstdc++ std::bad_alloc",
        r"std::bad_alloc",
        r"(^|[\s:])MemoryError\b",
        r"Unable to allocate [\d.]+ [KMGT]i?B for an array",
        r"^(?!.*(torch_|NCCL|ibv_)).*Cannot allocate memory",
        r"DefaultCPUAllocator: (can't allocate memory|not enough memory)",
        r"CPUAllocator\.cpp:\d+\] posix_memalign\(",
        r"DataLoader worker \(pid\(?s?\)? ?[\d, .]+\) is killed by signal: Killed",
    ),
    # A peer's NCCL segment that is not there to attach to is NCCL's own fault (fixed by
    # another NCCL version), not a full /dev/shm: creating or growing one is the space.
    _r(
        "NCCL_ERROR",
        "NVIDIA/nccl src/misc/shmutils.cc (attaching to a peer's segment)",
        r"Error while attaching to shared memory segment .{0,160}No such file or directory",
    ),
    # Shared memory before disk space: both say "No space left on device".
    _r(
        "SHM",
        DATALOADER,
        r"insufficient shared memory",
        r"out of shared memory",
        r"killed by signal: Bus error",
        r"Unexpected bus error encountered in worker",
        r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly",
    ),
    _r(
        "SHM",
        SHM_MANAGER,
        r"unable to \w+ .{0,60}</?torch_",
        r"unable to (write to|open) (file|shared memory)",
        r"shm_open|shmget|shm_unlink",
        r"^(?!.*(\benroot|Error response from daemon)).*/dev/shm",
        r"\bshm[ _-](size|limit|space)\b",
        r"(fail\w*|unable|cannot|could not) (to )?\w+ .{0,20}shared memory",
        r"\bshared memory\b.{0,40}(exhausted|insufficient|is full|No space)",
    ),
    _r(
        "SHM",
        "NVIDIA/nccl src/misc/shmutils.cc",
        r"Error while creating shared memory segment",
        r"Call to posix_fallocate failed",
        r"failed to extend .*nccl-",
    ),
    _r("SHM", "srun/bash: strsignal(SIGBUS)", r"\bBus error\b"),
    # --- Containers -----------------------------------------------------------------------
    _r(
        "IMAGE_PULL",
        K8S_KUBELET,
        r"\bErrImagePull\b|\bImagePullBackOff\b|\bErrImageNeverPull\b|\bInvalidImageName\b",
        r"(failed|failing|unable|error) (to )?pull(ing)? (the )?image",
        # The registry's own refusal (its API error UNAUTHORIZED, a token it would not
        # give): a pull's credentials, whichever client printed it (docker, containerd,
        # buildkit pulling a base image).
        r"\bunauthorized: authentication required\b",
        r"WWW-Authenticate|\bauthentication challenge\b",
        r"failed to authorize: |failed to fetch (anonymous|oauth) token",
        r"Back-off pulling image",
        r"manifest (for \S+ )?unknown",
        r"manifest for \S+ not found",
        r"pull access denied",
        r"toomanyrequests: You have reached your pull rate limit",
        r"repository does not exist or may require",
        r"image not found|Image not found|\bimage \S+ not found\b",
        # Apptainer/Singularity fetching an image for a container
        r"\bUnable to pull \w+://|\bconveyor failed to get\b",
        # an image file whose download or copy was cut short
        r"\bSIF image \S+ is corrupted\b|\bimage \S+ is corrupted\b",
        # The daemon writing a pulled layer to the node: the pull failed whatever the OS
        # said (a full disk, an I/O error).
        r"failed to (register|extract|apply) layer|\bApplyLayer\b|Error processing tar file",
        r"Error pulling image",
        r"\bpulling image: |\berror pinging (docker )?registry\b",
        r"\bdoes not exist or no pull access\b",
        r"\b(reading|fetching|parsing|getting|retrieving) (image )?manifest\b",
        r"\binitializing source \w+://",
        r"error fetching (the )?(image|layer|blob)|error pulling (the )?(image|layer|blob)"
        r"|error downloading (the )?(image|layer|blob)",
        r"\bfrom (oci|docker) registry\b",
        r"failed to resolve reference",
        # the image store missing a layer or blob it was to read
        r"\blayer does not exist\b|\bblob unknown\b|\bunknown blob\b",
        r"\bhttpReadSeeker\b|/v2/[\w./-]*/(blobs|manifests)/",
        r"Error response from daemon: (Get|Head) \"?https?://\S+/v2/",
        # the container runtime's refusal of a pull, under the kubelet's "rpc error"
        r"Error response from daemon: (unauthorized|denied|forbidden)\b",
        r"login attempt to https?://\S+/v2/ failed with status: 5\d\d",
        r"\bimage \"[^\"]+\": rpc error: ",
    ),
    _r(
        "IMAGE_PULL",
        PYXIS + "; " + ENROOT + ", src/docker.sh",
        r"URL https?://\S+ returned error code: \d+",
        r"Could not parse (digest information|authentication realm)",
        r"Could not retrieve digest",
        r"Invalid image reference",
        # enroot refusing an argument shaped like an image reference (registry/name:tag)
        r"\[ERROR\] Invalid argument: (\w+://\S+|[\w.-]+(/[\w.-]+)+:[\w.-]+\s*$)",
        r"Unsupported authentication method",
        r"pyxis: (importer\b.{0,200}(failed|terminated|did not)|could not (wait for|call) importer"
        r"|failed to call importer)",
        r"\[ERROR\] Could not process JSON input",
        r"Checksum mismatch: sha256:",
        r"pyxis:\s+curl: \(\d+\)",
        # mksquashfs, writing the imported image
        r"FATAL ERROR: ?Failed to write to output filesystem|Write failed because",
        r"FATAL ERROR: ?write_file: failed to create file",
    ),
    # pyxis's summary of a failed import is a wrapper: the enroot log it prints below says
    # why (a registry's refusal is the pull's, enroot's runtime folder the container's).
    _r(
        "IMAGE_PULL",
        PYXIS + ", importer.c",
        r"failed to import docker image",
        weak=True,
    ),
    # An image that could not be written to the node's disk was not pulled: the disk
    # words alone are STORAGE (below), with an image's layers, blobs or squashfs around
    # them they are the pull's.
    _r(
        "IMAGE_PULL",
        "containerd/containerd, containers/podman, moby/moby, NVIDIA/enroot (layers and images on the node's disk)",
        r"(layer|blob|image|snapshot|overlay|containerd|docker|containers/storage|squashfs|\.sqsh|enroot|pyxis)"
        r".{0,300}(No space left on device|Disk quota exceeded)",
        r"(No space left on device|Disk quota exceeded).{0,300}(layer|blob|image|snapshot|\.sqsh)",
        # tar extracting a root filesystem (an image's layer) into a full disk
        r"\btar: (\./)?(usr|opt|etc|var|lib\w*|bin|sbin|root)/\S+: Cannot \w+: "
        r"(No space left on device|Disk quota exceeded)",
        words=("no space left on device", "disk quota exceeded"),
    ),
    _r(
        "SUBMIT_CONFIG",
        "NVIDIA/pyxis args.c, pyxis_slurmstepd.c (the job's container options)",
        r"pyxis: --container-[\w-]+(: (argument required|invalid format|empty|unknown|flag must be"
        r"|target is a directory)| specified multiple times)",
        r"pyxis: (both --\S+ and --\S+ were specified|mount (source|target) must be)",
        r"pyxis: (error: )?a container with name .{0,200}(does not exist|already exists|is not running)",
        r"pyxis: (error: )?--container-[\w=-]+ requested but",
        r"pyxis: container export: ",
    ),
    _r(
        "CONTAINER_MOUNT",
        PYXIS,
        r"pyxis: failed to (start container|create container filesystem)",
        r"pyxis: container exited too soon",
        r"pyxis: .{0,30}source path does not exist",
        r"pyxis: couldn't (join|get) container",
        r"pyxis: couldn't (mkdir|chown) ",
        r"container was not started successfully",
        # pyxis setting up the container, and the node's pyxis configuration
        r"pyxis: ([\w-]+: )?(couldn't (?!start container)|could not (?!wait for importer|call importer|remove squashfs)|unable to"
        r"|failed to (?!import |call importer)|fork error"
        r"|seccomp filter failed|a previous task terminated|child \d+ terminated|container \S+ was not)",
        r"pyxis:\s{2,}\S.{0,200}(denied|not permitted|fail|error|cannot|can't|could not|couldn't|not found"
        r"|No such|unbound variable|Read-only file system)",
        r"pyxis: (unknown configuration option|\w+: (invalid value|path too long))",
        # enroot: its tools, its script, its runtime folders and its hooks
        r"\benroot-[a-z0-9]+\S*: ",
        r"/enroot: line \d+: ",
        r"cannot create directory .{0,2}(/run/(user|enroot|pyxis)|[^'’\s]*(enroot|pyxis))",
        r"\[ERROR\] Failed to mount",
        r"\[ERROR\] (No such file or directory|Invalid argument|Invalid image format|File already exists"
        r"|Command not found|Could not acquire|Could not change directory|Could not find kernel"
        r"|Missing directive|Process not found|Unsupported architecture|Unknown \w+ (driver capability"
        r"|device id))",
        r"\[ERROR\] Not enough space left",
        r"\[ERROR\] \S*hooks\.d/\S+ exited with return code",
    ),
    # The tools enroot runs a container with (squashfuse, fuse-overlayfs, unsquashfs) and
    # enroot itself, failing on the node: before the FUSE rule reads "fuse" as a bucket.
    _r(
        "CONTAINER_MOUNT",
        ENROOT + ", src/runtime.sh",
        r"\b(squashfuse\w*|fuse-overlayfs|unsquashfs|enroot)\b.{0,200}(denied|not permitted|fail|cannot"
        r"|could not|not found|No such|Read-only file system)",
        words=("squashfuse", "fuse-overlayfs", "unsquashfs", "enroot"),
    ),
    # A FUSE daemon that could not mount its bucket (before the containers' "failed to
    # mount").
    _r(
        "STORAGE",
        "libfuse/libfuse util/fusermount.c; GoogleCloudPlatform/gcsfuse cmd/mount.go; rclone/rclone cmd/mountlib",
        r"failed to mount FUSE|\bFUSE (fs|file ?system)\b.{0,40}(fail|error)",
        r"\bfusermount3?: ",
        r"\b(gcsfuse|s3fs|mount-s3|goofys|blobfuse2?|rclone|juicefs)\b(\[\d+\])?( <(ERROR|FATAL)>)?: "
        r".{0,40}\b(failed to|cannot|could not|unable to) mount",
        r"\b(gcsfuse|s3fs|goofys|blobfuse2?|rclone|juicefs)\[\d+\] <(ERROR|FATAL)>: ",
        # blobfuse2's own components (its storage backend, its libfuse layer)
        r"\bazstorage\b|\bLibfuse::\w+ : .{0,80}(fail|error)",
        r"\b(could not|cannot|failed to|unable to) mount (\w+ )?(juicefs|gcsfuse|s3fs|mount-?s3|mountpoint-s3|goofys"
        r"|blobfuse2?|rclone|fuse)\b",
        r"\b(failed to|cannot|could not|unable to) mount (the )?bucket\b|\bmount(ing)? (the )?bucket\b.{0,60}(fail|error)",
        words=(
            "fuse",
            "fusermount",
            "bucket",
            "s3fs",
            "mount-s3",
            "goofys",
            "rclone",
            "juicefs",
            "mount ",
            "azstorage",
            "libfuse::",
        ),
    ),
    # NCCL refuses two ranks on one GPU: the launch gave ranks the same device (no
    # torch.cuda.set_device(local_rank), CUDA_VISIBLE_DEVICES): retrying repeats it.
    _r("USER_ERROR", "NVIDIA/nccl src/init.cc (Duplicate GPU detected)", r"Duplicate GPU detected"),
    _r(
        "USER_ERROR",
        "opencontainers/runc libcontainer (exec of the container's command)",
        r"^(?!.*MountVolume).*executable file not found in \$PATH",
        r"exec: \"(?![^\"]*nvidia-container)[^\"]+\": (stat \S+: )?(permission denied|no such file or directory"
        r"|exec format error)",
    ),
    _r(
        "CONTAINER_MOUNT",
        "kubernetes pkg/kubelet/volumemanager, pkg/kubelet/container; NVIDIA/nvidia-container-toolkit",
        r"MountVolume\.\w+ failed",
        # a pod the scheduler cannot place until its volume claim is bound
        r"pod has unbound (immediate )?PersistentVolumeClaims",
        r"Unable to attach or mount volumes",
        r"timeout expired waiting for volumes to attach",
        r"\bFailedMount\b|\bFailedAttachVolume\b",
        r"failed to mount",
        r"creating mount source path",
        # mount(8) itself refused (enroot loading a root filesystem, a runtime's volume)
        r"^mount: .{0,200}(permission denied|not permitted|failed|bad option)",
        # the node's own kubelet folder on a full disk: no pod starts there
        r"/var/lib/kubelet/\S*: (no space left on device|disk quota exceeded)",
        r"mount point (not found|does not exist)",
        r"CreateContainerConfigError|CreateContainerError|RunContainerError|ContainerCannotRun",
        r"OCI runtime (create|exec) failed",
        r"failed to create shim task",
        r"FailedCreatePodSandBox|Failed to create pod sandbox",
        r"nvidia-container-cli: \w+ error",
        r"(?<!pyxis: )couldn't start container|(?<!pyxis: )container start failed",
        r"Failed to set securebits",
        r"could not select device driver",
        # a secret or config map the pod mounts or reads that does not exist
        r"Error: (secret|configmap)s? \"[^\"]+\" not found",
        r"error creating \w+ mount to\b",
        # the runtime setting the container up (its mounts, hooks, cgroups), in runc's,
        # docker's, containerd's and Apptainer's words
        r"unable to start container process|error during container init",
        r"invalid mount config|bind source path does not exist|failed to generate container spec",
        r"\bcontainer creation failed\b",
    ),
    _r(
        "USER_ERROR",
        "kubernetes pkg/kubelet (CrashLoopBackOff)",
        r"CrashLoopBackOff",
        r"Back-off restarting failed container",
        weak=True,
    ),
    # A pyxis failure is followed by these lines whatever the reason (an import that
    # failed ends in "couldn't start container" too): the lines around them say why.
    _r(
        "CONTAINER_MOUNT",
        "SchedMD/slurm src/common/spank.c",
        r"spank_pyxis\.so: \w+\(\) failed",
        r"spank: required plugin .* failed",
        r"pyxis: child \d+ failed with error code",
        r"pyxis: couldn't start container",
        r"pyxis: container start (failed|error)",
        r"Plugin (stack )?initialization failed",
        # Singularity 2's abort after its own error line (which says why, when a rule knows it)
        r"^ABORT\s*: Retval = \d+",
        weak=True,
    ),
    # --- Credentials and storage ----------------------------------------------------------
    _r(
        "AUTH",
        "huggingface/huggingface_hub src/huggingface_hub/errors.py; boto/botocore; HTTP 401/403",
        r"\b401\b.{0,40}(Unauthorized|Client Error)",
        r"\bUnauthorized\b",
        r"token (is )?(invalid|expired|missing)",
        r"(?<!SyntaxError: )\b(invalid|expired) (or (invalid|expired) )?(access |auth |api |bearer )?token\b",
        # the Hub refusing a token the rights on a namespace (its 403's message)
        r"You don't have the rights to (create|write|push|access)\b",
        # (Python's "SyntaxError: invalid token" is a character in the source)
        r"(?<!SyntaxError: )invalid (or missing )?(auth |user |api |access )?(token|credentials|api[ _]?key)",
        # Google's and Azure's client libraries refused at sign-in
        r"\bRefreshError\b.{0,80}(invalid_grant|expired|revoked)|\binvalid_grant\b",
        r"\bClientAuthenticationError\b|Server failed to authenticate the request",
        r"GatedRepoError|gated repo",
        r"Authentication (failed|required)",
        r"InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken|UnrecognizedClientException",
        r"Access Key Id you provided does not exist",
        r"Unable to locate credentials|NoCredentialsError",
        # Google's client libraries with no application-default credentials (Go, Python)
        r"could not find default credentials|DefaultCredentialsError",
        r"security token included in the request is (invalid|expired)",
        r"api_key not configured|No API key configured",
        r"Permission denied \(publickey",
        r"You must be logged in|login required|not logged in",
        r"RepositoryNotFoundError",
        # W&B's key refused (its length checked, or the server's answer)
        r"\bAPI key must be \d+ characters\b|\bAuthenticationError\b",
        r"API key you provided is (either )?(invalid|missing)",
        r"\b(api ?key|credentials?|password)s? (is|are|was|were|has|have)( been)? (invalid|expired|incorrect|wrong|revoked)\b",
        r"Not authorized to perform:? sts:\w+",
        # AWS refusing the caller an action of a service's API (IAM); a refused action on
        # a bucket's data (s3:PutObject) is the storage's, below
        r"\(AccessDeniedException\) when calling the (?!\w*(Object|Bucket|Upload))\w+ operation",
        r"\bis not authorized to perform:? (?!s3:)[\w-]+:\w+",
        r"\b(personal|write|read)[- ]access (account )?token\b",
        # the clouds' own codes for a caller they could not authenticate or would not
        # let act (EC2's and STS's error codes, Google's API errors, Azure Resource
        # Manager's and Entra ID's)
        r"\b(UnauthorizedOperation|AuthFailure|InvalidClientTokenId|MissingAuthenticationToken"
        r"|IncompleteSignature|InvalidSignatureException)\b",
        r"\bRequired '[\w.]+' permission for\b|\bThe caller does not have permission\b",
        r"\bAuthorizationFailed\b|does not have authorization to perform action",
        r"\b(Invalid|Expired)AuthenticationToken\b|\bAADSTS\d{5,}\b",
        r"\bCloudUserIdentityError\b",
    ),
    # torch's wrapper says "failed or timed out": a line that says which wins over it.
    _r("NCCL_TIMEOUT", C10D_NCCL, r"Some NCCL operations have failed or timed out", weak=True),
    # An HTTP client's 401 is a credential refused, a 403 (below) needs the body to say
    # which; W&B prints the response object.
    _r(
        "AUTH",
        "HTTP 401 (requests' Response, TensorFlow's file system)",
        r"<Response \[401\]>|\bHTTP response code 401\b",
    ),
    _r("AUTH", "HTTP 403 (requests' Response)", r"<Response \[403\]>", weak=True),
    # A bare HTTP 403 names no cause: a body or the next line does (S3's AccessDenied is
    # a permission on the data, an unknown key is the credential).
    _r("AUTH", "HTTP 403", r"\b403\b.{0,30}Forbidden", weak=True),
    # A token or credential a library looked for and did not find or could not use
    # (huggingface_hub's LocalTokenNotFoundError, azure-identity's
    # CredentialUnavailableError, a FUSE daemon with no credentials).
    _r(
        "AUTH",
        "huggingface/huggingface_hub errors.py; Azure/azure-sdk-for-python azure-identity; awslabs/mountpoint-s3",
        r"\b\w*(Token|Credential)\w*(NotFound|Unavailable|Missing|Expired|Invalid)\w*Error\b",
        # a token required and absent (not a client noting it will go on anonymously)
        r"\bbut no (\w+ )?(token|credentials?) (was |were )?found\b|: no credentials (were )?found\b",
        r"failed to (retrieve|obtain|get|acquire|refresh) (a |an |the )?(access )?token\b",
        # a library refusing to go on without one ("Token must be specified for push to hub")
        r"\b(token|credentials?)s? (must|needs? to|has to) be (specified|provided|set|given|passed)\b",
        r"\b(access |auth |api |hf |hub )?(token|credentials?)s? (is|are) required\b",
        words=("token", "credential"),
    ),
    _r(
        "STORAGE",
        "boto/botocore (S3 error codes); python/cpython errno; anylaunch src/anylaunch/storage",
        r"NoSuchBucket|NoSuchKey|\bAccessDenied\b|Access Denied",
        # Google Cloud Storage refusing a permission on a bucket or its objects
        r"does not have storage\.\w+\.\w+ access",
        # Azure Storage refusing the caller a permission on the data
        r"\bPublicAccessNotPermitted\b|\bAuthorizationPermissionMismatch\b",
        r"\bContainerNotFound\b|\bBlobNotFound\b|\bNoSuchUpload\b",
        r"The specified (container|blob|bucket|key) does not exist",
        r"anylaunch-stage: \w+: error",
        r"No space left on device|ENOSPC",
        r"Disk quota exceeded|EDQUOT",
        r"Read-only file system|EROFS",
        r"Stale (NFS )?file handle|ESTALE",
        r"Input/output error|\bEIO\b",
        r"\[Errno \d+\] [^:]{0,60}: '/(\S*/)?(s3|gcs|gcsfuse|buckets?|blob\w*|juicefs|mountpoint\w*|s3mnt|gcsmnt)/",
        r"PermissionError: \[Errno 13\] Permission denied|\[Errno 13\] Permission denied: '",
        # coreutils refused a file operation (a mount the job's user may not write)
        r"^(touch|mkdir|cp|mv|rm|ln|tee|dd|rsync|tar): .{0,160}\bPermission denied\s*$",
        # SageMaker finding no data under the job's input prefix
        r"No S3 objects found under S3 URL",
        # TensorFlow's and absl's status ("Permission denied: /models; ...")
        r"\bPermission denied: /",
        # Hugging Face datasets checking the disk before it downloads
        r"\bNot enough disk space\b",
        # TensorFlow's checkpoint writer ("Resource exhausted: <file>" is the disk; on a
        # tensor's shape it is the GPU's memory) and Ray's monitor of its session folder
        r"\bError writing (\(tmp\) )?checkpoint file\b|\bResource exhausted: /",
        r"\bis over \d+% full, available space\b",
        r"\(404\) when calling the HeadObject|HeadObject operation: Not Found",
        r"PytorchStreamReader failed reading|PytorchStreamWriter failed writing",
        r"\[Errno 95\] Operation not supported|\bEOPNOTSUPP\b",
        r"inline_container\.cc:\d+\] \. (unexpected pos|file write failed)",
        r"SafetensorError|MetadataIncompleteBuffer",
        r"unexpected EOF, expected \d+ more bytes",
    ),
    # An object store's client whose request failed (its endpoint unreachable, a
    # connection it lost, a request refused): the data was not read or written, whatever
    # the program's traceback around it. Credentials it lacks are AUTH's, above; the
    # cloud APIs' capacity errors (the same client) name no object or bucket.
    _r(
        "STORAGE",
        "boto/botocore botocore/exceptions.py; googleapis/python-storage; Azure/azure-sdk-for-python",
        r"\b(EndpointConnectionError|ConnectionClosedError|ReadTimeoutError|ConnectTimeoutError)\b"
        r".{0,80}\bendpoint\b",
        r"when calling the \w*(Object|Objects|Bucket|Upload|Part)\w* operation",
        r"\b(cannot|can't|could not|unable to|failed to) (reach|access|list|connect to) (the )?(bucket|S3|GCS|blob"
        r"|object store)",
        r"\b(list_objects\w*|ListObjects\w*|get_object|put_object|GetObject|PutObject|HeadObject|head_object)"
        r"( request)? failed",
        r"(\bs3[\w.-]*\.amazonaws\.com|storage\.googleapis\.com|\.blob\.core\.windows\.net)\S*.{0,120}"
        r"\b(error|fail\w*|timed? ?out|refused|reset|denied|forbidden|unavailable|not ?found|no such)\b",
        words=(
            "endpoint",
            "when calling the",
            "amazonaws.com",
            "googleapis.com",
            "windows.net",
            "bucket",
            "s3",
            "gcs",
            "blob",
            "object store",
            "object",
        ),
    ),
    # A bucket mounted as a folder (FUSE): the daemon's own errors, and what a program
    # reads from a mount whose daemon died (ENOTCONN).
    _r(
        "STORAGE",
        "GoogleCloudPlatform/gcsfuse, awslabs/mountpoint-s3, FUSE daemons; python/cpython errno ENOTCONN",
        r"Transport endpoint is not connected|\bENOTCONN\b|\[Errno 107\]",
        r"Error while mounting gcsfuse",
        # gcsfuse's chain of mount errors (credentials it could not find are AUTH's, above)
        r"\bmountWith\w+: ",
        r"\bmountpoint_s3\w*::\w+: \w+ failed",
        r"Failed to create (S3 client|mount process)|waiting for mount process",
        r"\b(gcsfuse|s3fs|mount-s3|goofys|blobfuse2?|rclone|juicefs|fusermount3?|fuse)\b(\[\d+\])?( <(ERROR|FATAL)>)?: "
        r".{0,120}(error|fail|denied|not connected|stale|cannot|could not|unable|not enough|only allowed"
        r"|not allowed|refused|timed? ?out|not empty)",
        words=(
            "transport endpoint",
            "enotconn",
            "errno 107",
            "gcsfuse",
            "mountwith",
            "mountpoint_s3",
            "s3 client",
            "mount process",
            "s3fs",
            "mount-s3",
            "goofys",
            "blobfuse",
            "rclone",
            "juicefs",
            "fuse",
        ),
    ),
    # --- Network setup ----------------------------------------------------------------------
    _r(
        "PORT_IN_USE",
        C10D_SOCKET,
        r"Address already in use",
        # accelerate's own check of the rendezvous port
        r"Tried to launch distributed communication on port \S+, but another process is utilizing it",
        r"\bport \d+ is already in use\b|\bport is already (in use|allocated)\b",
        r"EADDRINUSE",
        r"errno: 98\b",
        r"failed to bind to \S+ \(errno: 98",
    ),
    _r(
        "SUBMIT_CONFIG",
        SLURM_ERRNO + "; sbatch/srun",
        r"FAILED_PRECHECKS",
        r"sbatch: error",
        r"\b(srun|sbatch|salloc): fatal: ",
        r"Batch job submission failed",
        r"Unable to allocate resources: (?!.*(Requested nodes are busy|Resources temporarily))",
        r"Invalid account",
        r"invalid partition",
        r"Requested time limit is invalid",
        r"Invalid generic resource",
        r"Invalid qos",
        r"Requested node configuration is not available",
        r"Job violates accounting/QOS policy",
        r"\b(specification|count per \w+|per node) can ?not be satisfied",
        r"More processors requested than permitted",
        r"Node count specification invalid",
        r"Invalid feature specification",
        r"--gres=\S+ is not valid|\bgres not found\b",
        # PBS's and LSF's refusals of a submission
        r"qsub: (submit )?(error: |error \()?(Job exceeds queue|Unknown queue|Job rejected by all possible destinations"
        r"|Illegal attribute or resource value|Unknown resource)",
        r"\bJob not submitted\b|Bad resource requirement syntax",
        r"qsub: submit filter returned an error code",
        r"\bQOSMax\w+PerJob\b",
        r"anylaunch: error: \S+:\d+:",
        # squeue's reasons for a job the partition's own limits hold forever
        r"\((PartitionConfig|PartitionTimeLimit)\)\s*$",
    ),
    _r(
        "SUBMIT_CONFIG",
        SKY + "; kubernetes apiserver validation; Lepton API",
        r"\bValidationError\b.*(job|spec)",
        r"failed quota: \S+: must specify\b",
        # the API server refusing the object itself (a field it does not know, a bad value)
        r"Error from server \((BadRequest|Invalid|UnprocessableEntity)\)",
        r"strict decoding error: unknown field",
        r"InvalidRequest",
        r"ResourcesMismatchError",
        r"No cloud (is )?(enabled|access)",
        r"InvalidCloudConfigs|InvalidSkyPilotConfigError",
        r"Catalog does not contain any instances",
        r"No launchable resource found for task",
        r"due to invalid cloud (credentials|config)",
        r"admission webhook .* denied the request",
        r"is invalid: spec\.",
        # an AWS API refusing the request's parameters (SageMaker's, Batch's), EC2's codes
        # for a parameter or a resource the request names that is not valid; YARN's
        r"\(ValidationException\) when calling the \w+ operation",
        r"\b(InvalidParameterValue|InvalidParameterCombination|InvalidAMIID\.\w+|InvalidSubnetID\.\w+"
        r"|InvalidGroup\.NotFound|InvalidKeyPair\.NotFound)\b",
        r"\bInvalidResourceRequestException\b|\bInvalid resource request\b",
    ),
    _r(
        "NO_CAPACITY",
        "kubernetes pkg/scheduler (FailedScheduling); " + SKY + "; AWS/GCP/Azure capacity errors",
        r"Insufficient (nvidia\.com/gpu|cpu|memory|ephemeral-storage)",
        r"\d+/\d+ nodes are available",
        r"InsufficientInstanceCapacity|InsufficientCapacity|InsufficientHostCapacity",
        r"ResourcesUnavailableError",
        r"Failed to acquire resources",
        r"Found no quota for",
        r"Failed to provision all possible launchable resources",
        r"out of capacity",
        r"\bno (available )?capacity\b",
        r"ZONE_RESOURCE_POOL_EXHAUSTED|STOCKOUT",
        r"does not have enough resources available to fulfill the request",
        r"FAILED_NO_RESOURCE",
        r"\bUnschedulable\b|\bFailedScheduling\b",
        r"queued .* without a node",
        r"Quota '?\w+'? exceeded|QUOTA_EXCEEDED|VcpuLimitExceeded|QuotaExceeded",
        r"AllocationFailed|SkuNotAvailable|ZonalAllocationFailed",
        r"Nodes required for job are DOWN, DRAINED",
        r"Requested nodes are busy",
        r"Unable to create step for job",
        r"Reason=\(?(ReqNodeNotAvail|PartitionNodeLimit)",
    ),
    # The family in other launchers' and clouds' words: capacity or quota that is not
    # there, offers that all failed, requests nothing can place.
    _r(
        "NO_CAPACITY",
        "dstackai/dstack; aws/sagemaker-python-sdk; ray-project/ray autoscaler; kubernetes-sigs/kueue",
        r"\b(no|not (having |have )?(enough|sufficient)|insufficient|out of|lack of"
        r"|unable to (provision|acquire|allocate))"
        r"\b[\w\s/.-]{0,40}\bcapacity\b",
        r"\b(insufficient|exceed\w*|exhausted|not enough)\b.{0,60}\bquota\b|\bOutOfQuota\b",
        # a spot bid below the market price: no spot capacity at that price
        r"\bSpotMaxPriceTooLow\b|\bspot (request )?price\b.{0,60}\blower than\b",
        r"NO_CAPACITY\b|\bNoCapacity\w*|CapacityError\b",
        r"\bno offers\b",
        # a host or a cloud without the free GPUs a pod or instance asks for (RunPod's,
        # other GPU clouds' and managed platforms' words)
        r"\bnot enough (free |available |idle )?GPUs? (on|in|available|to)\b",
        r"\b(does not|doesn't|do not|don't) have (enough |the )?(free |available )?resources to\b",
        r"\b(is )?waiting for available resources\b",
        r"\bQuota failure for project\b|\bexceeds the allowed maximum of 0\b",
        r"\b\w*(Instance|Vcpu|Resource)(Limit|Count)Exceeded\b",
        r"No available node types can fulfill",
        r"\b(could not|cannot|can't|unable to) (find|fit|place) (a |any )?(node|instance|machine|host)( type)?s? "
        r"(to|that can) (satisfy|fulfill)",
        r"(request|pod|task|job)s? (cannot|can't|could not) be scheduled",
        r"\bcapacity (issue|constraint|error|shortage)s?\b|\bout of stock\b",
        r"\bquota\b.{0,60}\b(exceeded|exhausted)\b|\bquota of \d+\b.{0,200}\b(cannot|is less than)\b",
        r"Exceeds\w*Quota\b",
        r"\b(is|are) currently unavailable\b",
        r"\bno (longer )?(any )?([\w-]+ ){0,2}(instances|offers|machines|VMs|nodes) (are )?(currently )?available\b",
        r"not supported in (your|the) requested (Availability Zone|zone|region)",
        r"\bnot available in (the |this |your )?(current |requested )?(region|zone|location|availability zone)\b",
        r"\bresources (are )?(currently )?unavailable\b",
        r"\bno (available|free|idle) (nodes?|instances?|machines?|resources|GPUs?)\b",
        r"\bResources are insufficient in (region|zone)\b",
        r"\bOverconstrained\w*\b",
        # the cluster autoscaler that cannot add the node a pending pod needs
        r"max node group size reached|\bNotTriggerScaleUp\b|no node group can be scaled up",
        words=(
            "capacity",
            "quota",
            "offers",
            "limitexceeded",
            "countexceeded",
            "node types",
            "satisfy",
            "fulfill",
            "be scheduled",
            "out of stock",
            "currently unavailable",
            "instances",
            "available",
            "unavailable",
            "requested",
            "overconstrained",
            "node group",
            "nottriggerscaleup",
            "insufficient in",
            "spot",
            "gpu",
            "resources",
            "quota failure",
            "allowed maximum",
        ),
    ),
    # --- Collectives: the timeout before the error, so a watchdog timeout wrapped in a
    # DistBackendError stays a timeout.
    _r(
        "NCCL_TIMEOUT",
        C10D_NCCL,
        r"Watchdog caught collective( operation timeout|\s*$)",  # a terminal may wrap it
        r"ran for \d+ milliseconds before timing out",
        r"\bNCCL timeout\b|\bnccl.{0,20}timed out\b",
        r"collective operation timeout",
        r"ProcessGroupNCCL.{0,60}(?<!failed or )(?<!monitor )(timed out|timeout)",
        r"Exception raised from checkTimeout",
        r"failed to pass monitoredBarrier",
        r"NCCL_ERROR_TIMEOUT|ncclTimeout\b",
        r"Timeout at NCCL work",
        # the flight recorder told to dump because a collective of this rank timed out
        r"Received a dump signal due to a collective timeout",
    ),
    # c10d's heartbeat monitor: the watchdog thread itself is blocked in a CUDA or NCCL
    # call ("this typically indicates a NCCL/CUDA API hang"), no collective timed out. It
    # also fires while a job that timed out is torn down, so the timeout decides then.
    # Horovod's stall check says the same of ranks that stopped submitting.
    _r(
        "HANG",
        C10D_NCCL + " (heartbeat monitor); horovod/horovod horovod/common/stall_inspector.cc",
        r"watchdog got stuck for \d+ seconds|Heartbeat monitor timed out",
        r"waiting for remainder of ranks for more than \d+ seconds",
        weak=True,
    ),
    _r(
        "NCCL_TIMEOUT",
        "pytorch/pytorch third_party/gloo gloo/transport/tcp/unbound_buffer.cc",
        r"Timed out waiting \d+ms for (send|recv) operation",
    ),
    _r(
        "NCCL_ERROR",
        "NVIDIA/nccl src/init.cc (ncclGetErrorString)",
        r"NCCL error",
        # ncclResult_t's names, and the strings ncclGetErrorString gives them (PyTorch adds
        # "run with NCCL_DEBUG=... for details" and the NCCL version)
        r"\bnccl(InternalError|UnhandledCudaError|SystemError|RemoteError|InvalidUsage"
        r"|InvalidArgument)\b",
        r"\(run with NCCL_DEBUG=\w+ for details\)",
        r"unhandled (system|cuda) error",
        # NCCL's CUDACHECK ("Cuda failure 217 'peer access is not supported ...'")
        r"\bCuda failure \d+ '",
        r"\bUnhandledCudaError\b|\bCall to CUDA function failed\b",
        r"NCCL failure \S+ '",
        r"internal error - please report this issue to the NCCL developers",
        r"remote process exited or there was a network error",
        r"call failed possibly due to a network error or a remote process exiting",
    ),
    _r(
        "NCCL_ERROR",
        NCCL_SOCKET + ", src/bootstrap.cc",
        r"Connection closed by remote peer",
        r"socket\w*: Connect to \S+ (failed|returned)",
        r"Call to connect (returned|failed)",
        r"socket\w*: Call to (recv|send|connect)",
        r"\bConnect to \S+<\d+> failed",
        r"Bootstrap ?: no socket interface found",
        r"No usable listening interface found",
        r"no device found (matching|after excluding)",
        r"\bSet NCCL_[A-Z_]+=",
        r"is neither AF_INET",
        r"Message truncated ?: received",
        r"NCCL_SOCKET_IFNAME",
    ),
    # NCCL's subsystems report an error under their own name ("Net : No interface found",
    # "Bootstrap : no socket interface found"): the "Last error:" PyTorch prints after an
    # ncclResult, without NCCL's own prefix.
    _r(
        "NCCL_ERROR",
        "NVIDIA/nccl src/misc/socket.cc, src/bootstrap.cc, src/proxy.cc, src/graph/topo.cc",
        r"^(Net|NET/\w+|Bootstrap( Root)?|Proxy\w*|Transport|Topo\w*) ?: .{0,120}\b(no|not|unable|fail\w*"
        r"|error|invalid|mismatch\w*|cannot|could not)\b",
        words=("net", "bootstrap", "proxy", "transport", "topo"),
    ),
    _r(
        "NCCL_ERROR",
        NCCL_IB + ", src/misc/ibvwrap.cc",
        r"NET/IB ?: .{0,60}(error|fail|fatal)",
        r"NET/IB ?: No device found",
        r"Got completion (from peer \S+ )?with (status|error)",
        r"Call to ibv_\w+ (failed|returned)",
        r"ibv_\w+\(\) failed",
        r"async fatal event",
        r"Transport retry counter exceeded|IBV_WC_RETRY_EXC_ERR|Local protection error",
        r"NET/(Plugin|OFI|Socket).{0,40}(error|fail)",
    ),
    # "NCCL WARN" is how NCCL reports a fatal error, whatever words follow (an interface,
    # an address, a connection): the rules above name the NCCL errors of other classes
    # (its shared memory, CUDA's out of memory, its timeouts).
    _r(
        "NCCL_ERROR",
        "NVIDIA/nccl src/debug.cc (WARN level; before 2.4: file.h:line WARN)",
        r"\bNCCL WARN\b",
        r"\.(h|cc|cu|cpp):\d+ WARN\b",
        # NCCLCHECK's trace of a failed call returning up NCCL's stack ("init.cc:1303 ->
        # 2", ncclResult_t 1-6): printed at INFO level, so it decides only without errors
        r"NCCL INFO [\w/.]+\.(cc|h|cu|cpp):\d+ -> [1-6]\b",
    ),
    # gloo's transport refusing its setup or its peer (GLOO_SOCKET_IFNAME naming no
    # interface, an address it cannot find): its source file names the family, before
    # the socket's own words ("Connection refused") that a store's failure shares.
    _r(
        "NCCL_ERROR",
        "pytorch/pytorch third_party/gloo gloo/transport/tcp/pair.cc",
        r"Gloo connectFullMesh failed",
        r"Unable to find address for: \S+",
        r"gloo/transport/\w+/\w+\.cc:\d+\]",
    ),
    _r(
        "RDZV_FAILED",
        "pytorch/pytorch torch/distributed/elastic/rendezvous/etcd_rendezvous.py (python-etcd)",
        r"\betcd\.Etcd\w+|\bEtcdKeyNotFound\b",
    ),
    _r(
        "RDZV_FAILED",
        C10D_SOCKET + ", torch/csrc/distributed/c10d/TCPStore.cpp",
        r"DistNetworkError",
        r"DistStoreError",
        r"client socket has timed out",
        r"client socket has failed to connect",
        r"client socket cannot be initialized",
        r"server socket has failed to listen",
        r"waiting for clients",
        r"store based barrier|store_based_barrier",
        r"Timed out initializing process group",
        r"connect\(\) timed out\. Original timeout",
        r"Stop_waiting response is expected",
        r"Failed to recv, got 0 bytes",
        r"\bWait timeout\b",
        r"TCPStore",
        r"\bstore->(get|set|wait)\b|Socket Timeout|recvBytes|sendBytes",
        r"Connection refused",
        r"^(RuntimeError: )?Connection timed out$",
        r"failed to connect to",
    ),
    _r(
        "RDZV_FAILED",
        ELASTIC + "; torch/distributed/elastic/agent/server/api.py (_exit_barrier)",
        r"Rendezvous\w*Error",
        r"\brendez[- ]?vous\b.{0,80}(fail|timed? ?out|timeout|closed|not (reachable|complete))",
        r"The node '\S+' has failed to (shutdown|join)",
        r"C10d store has failed",
    ),
    # Other launchers reaching the other nodes before any rank runs: Open MPI's daemons,
    # MPICH's Hydra, ssh under pdsh (DeepSpeed's multi-node launcher); ssh exits 255 when
    # it could not connect.
    _r(
        "RDZV_FAILED",
        "open-mpi/ompi orte (daemon launch); pmodels/mpich hydra; DeepSpeed pdsh launcher",
        r"ORTE was unable to reliably start one or more daemons",
        r"HYDU_sock_connect .{0,80}unable to connect",
        r"\bssh exited with exit code 255\b",
        r"\bwas not reachable via ssh\b",
    ),
    # torchrun enters its exit barrier only after its node's worker group SUCCEEDED
    # (elastic/agent/server/api.py), and the CUDA driver shuts down only as the process
    # exits: the work on that node was over when these were printed.
    _r(
        "TEARDOWN_FAILED",
        "pytorch/pytorch torch/distributed/elastic/agent/server/api.py (_exit_barrier);"
        " CUDA cudaErrorCudartUnloading",
        r"Error waiting on exit barrier",
        r"\bdriver shutting down\b",
    ),
    # Host and address failures when resolving MASTER_ADDR.
    _r(
        "RDZV_FAILED",
        C10D_SOCKET + "; glibc gai_strerror",
        r"gai error: -?\d+",
        r"Name or service not known",
        r"Temporary failure in name resolution",
        r"nodename nor servname provided",
        r"getaddrinfo failed|\bgetaddrinfo\b.*(fail|error)",
        r"No address associated with hostname",
        r"Address family not supported by protocol|errno: 97\b",
        r"Address family for hostname not supported",
        r"hostname of the client socket cannot be retrieved",
        r"\bENOTFOUND\b|\bEAI_NONAME\b|Could not resolve hostname",
        # musl's and busybox's wording (alpine-based images, a launcher's wait loop)
        r"Name does not resolve|nslookup: can't resolve '",
        r"network addresses of .* cannot be retrieved",
        r"Cannot assign requested address",
        r"No route to host",
        r"Network is unreachable",
    ),
    # A peer's connection lost says only that the peer went away: why it did decides.
    _r(
        "NCCL_ERROR",
        "pytorch/pytorch third_party/gloo gloo/transport/tcp/pair.cc (its peer)",
        r"Connection closed by peer",
        r"Connection reset by peer",
        r"Broken pipe",
        weak=True,
    ),
    # Wrappers and aftermath of a collective failure: the line that caused them decides.
    _r(
        "NCCL_ERROR",
        C10D_NCCL,
        r"DistBackendError",
        r"NCCL communicator was aborted",
        r"ProcessGroupNCCL is aborting|Process group watchdog thread terminated",
        r"\bncclCommAbort\b",
        weak=True,
    ),
    # The hang watchdog's word for the job's end (its report in the log is read as a
    # whole by `hang`; this line decides when the report is not in the logs read).
    _r(
        "HANG",
        "anylaunch src/anylaunch/backends/local/supervisor.py, src/anylaunch/node/runtime/live.py",
        r"\bhang: no rank wrote output for \d+s",
    ),
    _r(
        "CANCELLED",
        SLURM_STEPD,
        r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+ \*\*\*",
        r"\*\*\* JOB \S+ CANCELLED AT \S+ \*\*\* on \S+",  # Slurm before 15.08
        # LSF's termination reasons for a job its owner or an administrator killed
        r"\bTERM_(FORCE_)?OWNER\b|\bTERM_FORCE_ADMIN\b",
        # PBS's server log for a qdel, and a row of sacct whose state is CANCELLED
        r"\bJob deleted at request of\b",
        r"^CANCELLED\+?\s*$",
    ),
    _r(
        "CANCELLED",
        "SchedMD/slurm src/scancel; Lepton job stop; " + SKY,
        r"CANCELLED AT \S+ DUE to SIGNAL",
        r"CANCELLED by (\d+|user)",
        r"\bscancel\b",
        r"job was (cancelled|canceled|stopped) by",
        r"\bcancell?ed by user\b",
        r"Job stopped by user",
        # Python's SIGINT: someone (or a launcher stopping the job) pressed Ctrl-C
        r"^KeyboardInterrupt\b",
        r"\bManagedJobUserCancelledError\b",
    ),
    # A step cancelled by srun after one task failed is the cascade, not the cause.
    _r(
        "CANCELLED",
        SLURM_STEPD + "; pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py",
        r"\*\*\* STEP \S+ ON \S+ CANCELLED AT \S+ \*\*\*",
        r"got signal: (15|2|1)\b",
        r"Received (SIGTERM|SIGINT|Signals\.SIGTERM)",
        r"SignalException",
        r"Sending process \d+ closing signal SIG(TERM|INT)",
        r"Terminating job step",
        r"Force Terminated (job|StepId)",
        r"^Terminated$",
        weak=True,
    ),
    _r(
        "USER_ERROR",
        SLURM_STEPD,
        r"CANCELLED AT \S+ DUE TO TASK FAILURE",
        r"FAILED \(non-zero exit code or other failure mode\)",
        r"Job step aborted",
        weak=True,
    ),
    # --- The program's own failure ------------------------------------------------------------
    _r(
        "USER_ERROR",
        "libstdc++ std::terminate (libsupc++/vterminate.cc)",
        r"terminate called without an active exception",
        r"terminate called recursively",
        r"pure virtual method called",
    ),
    # The exception a C++ library threw: its "what():" line names the failure.
    _r(
        "USER_ERROR",
        "libstdc++ libsupc++/vterminate.cc",
        r"terminate called after throwing an instance of",
        r"^what\(\):",
        weak=True,
    ),
    _r(
        "USER_ERROR",
        "pytorch/pytorch c10/cuda/CUDAException.cpp, aten/src/ATen/native/cuda",
        r"device-side assert triggered",
        r"illegal memory access",
        r"misaligned address",
        r"CUBLAS_STATUS_(EXECUTION_FAILED|INVALID_VALUE|NOT_SUPPORTED)",
        r"CUDNN_STATUS_(BAD_PARAM|NOT_SUPPORTED|EXECUTION_FAILED)",
        r"no kernel image is available for execution on the device",
        r"invalid device ordinal",
        r"CUDA driver version is insufficient",
        r"Assertion `.*` failed",
        r"OutOfResources: out of resource",
    ),
    # A subprocess that failed: its own output, above, says why (an ssh that could not
    # reach a node, a compiler); alone, it is the program's.
    _r(
        "USER_ERROR",
        "python/cpython Lib/subprocess.py (CalledProcessError)",
        r"CalledProcessError",
        r"returned non-zero exit status",
        weak=True,
    ),
    # --- A class's own words, in any emitter's sentence ------------------------------------
    # Last, and weak: a line no rule above names, and that no exception's class names
    # either, is read for the words engineers use for a failure of that class ("the
    # token is expired", "not enough free GPUs to start", "time value exceeded"). They
    # decide only when no line of the log names a failure outright.
    _r(
        "TIME_LIMIT",
        "the words of a time limit, in any scheduler's or runner's sentence",
        # (not a deadline: gRPC's and HTTP clients' "Deadline Exceeded" is one call's)
        r"\b(time ?limit|wall ?(clock|time)|run ?time|time value|execution time|time budget)"
        r"\b.{0,40}\b(exceeded|reached|expired|hit|ran out)\b",
        r"\b(exceeded|reached|hit)\b.{0,20}\b(its |the |a |job |task )?(time ?limit|wall ?time|max(imum)?( allowed)? ?run ?time)\b",
        weak=True,
        words=("time", "wall"),
    ),
    _r(
        "AUTH",
        "the words of a credential refused, in any client's sentence",
        # (a bare "token" is as often a tokenizer's: only one a credential's word qualifies)
        r"\b(((access|auth|api|bearer|hf|hub|personal|provided|your|user|login|session|oauth|refresh)"
        r"[ _-])token|credentials?|api[ _-]?key|password|access key|secret key)s?\b.{0,40}"
        r"\b(invalid|expired|incorrect|revoked|rejected|not valid|wrong)\b",
        r"\b(expired|revoked)\b.{0,20}\b(token|credentials?|api[ _-]?key|password)\b",
        r"\b(unauthenticated|not authenticated|authentication (error|failure)|unauthori[sz]ed)\b",
        weak=True,
        words=("token", "credential", "key", "password", "authent", "authori"),
    ),
    _r(
        "NO_CAPACITY",
        "the words of capacity that is not there, in any cloud's or platform's sentence",
        r"\b(not enough|insufficient|no|lack of)\b (free |available |idle |spare )?(GPUs?|accelerators?"
        r"|instances?|machines?|capacity|runtimes?)\b.{0,40}\b(available|to (start|deploy|schedule"
        r"|launch|fulfill|satisfy|place|provision))\b",
        r"\b(instances?|capacity|machines?)\b (is |are )?(currently )?(unavailable|not available|sold out"
        r"|exhausted)\b",
        weak=True,
        words=("gpu", "accelerator", "instance", "machine", "capacity", "runtime"),
    ),
    _r(
        "STORAGE",
        "the words of a disk or a store that failed, in any program's sentence",
        r"\b(disk|volume|file ?system|partition|bucket|mount ?point)s?\b.{0,40}\b(is |was )?(full|out of space"
        r"|no space|not mounted|read-only|unavailable)\b",
        r"\b(failed|unable|error|cannot|could not)\b.{0,20}\b(writ\w*|sav\w*|upload\w*)\b.{0,40}"
        r"\b(checkpoint|bucket|blob|object store)\b",
        weak=True,
        words=(
            "disk",
            "volume",
            "file",
            "partition",
            "bucket",
            "mount",
            "checkpoint",
            "blob",
            "object",
        ),
    ),
    _r(
        "USER_ERROR",
        "python/cpython; bash; SkyPilot FAILED_SETUP",
        r"(?<![\w.:])(?:[A-Za-z_]\w*\.)*(?!DistBackendError|SignalException)[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?:\([\w.]+\))?(?::|$|\([\x22\x27])",
        r"^(AssertionError|StopIteration)\b|^Exception: \S",
        case=True,
        generic=True,
        words=("error", "exception", "exit", "interrupt", "stopiteration"),
    ),
    # An exception whose class is named otherwise (omegaconf's MissingMandatoryValue,
    # dynamo's Unsupported): the last line of a traceback, named by the module that
    # holds a library's exceptions.
    _r(
        "USER_ERROR",
        "python/cpython Lib/traceback.py (format_exception_only)",
        r"^(?:[a-z_]\w*\.)*(?:errors|exc|exceptions)\.[A-Z]\w*: \S",
        case=True,
        generic=True,
        words=("errors.", "exc.", "exceptions."),
    ),
    # omegaconf (Hydra, NeMo, Lightning configs) refusing a key its schema lacks: the
    # message's own lines, printed under whichever exception class the caller raised.
    _r(
        "USER_ERROR",
        "omry/omegaconf omegaconf/_utils.py (format_and_raise)",
        r"\bKey '[^']+' not in '[^']+'",
        r"^\s*full_key: \S+$",
        words=("key '", "full_key"),
    ),
    _r(
        "USER_ERROR",
        "python/cpython; bash; " + DATALOADER + "; SkyPilot FAILED_SETUP",
        r"FAILED_SETUP",
        # DDP's reducer: parameters that took no part in the loss (the model's code)
        r"Expected to have finished reduction in the prior iteration",
        # argparse refusing the command line (torchrun's, the script's)
        r"error: unrecognized arguments|error: the following arguments are required"
        r"|error: argument \S+: (invalid|expected)",
        r"segmentation fault encountered in worker",
        r"Fatal Python error",
        r"command not found",
        # a parallel layout that does not divide the model or the batch (Megatron, vLLM,
        # NeMo, DeepSpeed check their configuration this way)
        r"\bmust be (evenly )?divisible by\b|\bis not (evenly )?divisible by\b",
        # torch's view of a tensor into a shape its size does not fill; an assert quoted
        r"shape '\[[\d, -]*\]' is invalid for input of size \d+",
        r"`assert [^`]+`",
        # an extension built against another torch or CUDA than the one installed
        r"\bundefined symbol: \w+",
        r"No module named",
        r"can't open file",
        r"execve\(\): .*: No such file or directory",
        r"Could not find a version that satisfies the requirement|No matching distribution found",
        # a library refusing the installed version of another ("requires PyTorch >= 1.10")
        r"\brequires? (\w[\w.-]* ){0,2}?\w[\w.-]* ?(>=|==|~=|>) ?v?\d",
        r"^E: Unable to locate package",
        r"(?:[a-z_]\w*\.)+[A-Z]\w*Failed: ",
    ),
    _r(
        "USER_ERROR",
        "python/cpython Python/traceback.c",
        r"Traceback \(most recent call last\)",
        weak=True,
    ),
    _r(
        "USER_ERROR",
        "skypilot-org/skypilot sky/skylet/job_lib.py (JobStatus.FAILED)",
        r"^FAILED: ",
        # SkyPilot's summary of a run whose program exited non-zero: the lines above say why
        r"\bJob \S+ failed with return code list: \[|Job finished \(status: FAILED\)",
        weak=True,
        case=True,
    ),
]


def strip_prefix(text: str) -> str:
    """The message without a logger's level/time prefix ("[E1218 20:27:21 file.cpp:629] ")."""
    return _PREFIX.sub("", text, count=1)


_PREFIX = re.compile(
    r"^(\[?[EWIF]\d{3,4} \d\d:\d\d:\d\d[.\d]*(\s+\d+)?\s+[\w./-]+:\d+\]\s*"
    r"|\[[EWIF] [\w./-]+:\d+\]\s*"
    r"|\[NeMo [EWIF] [\d-]+ [\d:.]+ [\w./-]+:\d+\]\s*"
    # Python logging's and loguru's usual formats: the time, the logger's name and the
    # level in either order, then the message ("... - __main__ - ERROR - ", "... | ERROR |
    # module:function:12 - ", "[...] ERROR: ")
    r"|\[?\d{4}-\d\d-\d\d[ T][\d:.,]+\]?\s*([-|]\s*)?([\w.<>-]+\s*[-|]\s*){0,2}"
    r"\[?(ERROR|WARNING|WARN|INFO|CRITICAL|FATAL|DEBUG)\]?\s*[-|:]\s*([\w.<>]+(:[\w<>]+)*(:\d+)? - )?"
    r"|\d{4}-\d\d-\d\d[ T][\d:.,]+\s*(\S+\s+)?(-\s+)?(ERROR|WARNING|INFO|CRITICAL)?\s*(-\s+)?"
    r"|(ERROR|CRITICAL|FATAL)(:|\s+-)\s*)"
)

# torchrun's "Root Cause (first observed failure)" block names the failing rank.
ROOT_CAUSE_RANK = re.compile(r"^rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")


def place(rule: Rule | None) -> int:
    """Where `rule` stands in RULES, past the end for none: of two rules naming one line,
    the one before is the more specific."""
    return _PLACE[id(rule)] if rule is not None else len(RULES)


_PLACE = {id(rule): i for i, rule in enumerate(RULES)}

# Each rule's words by their first three letters: a line's three-letter slices find the
# rules it may match without testing every word of every rule.
_BY_PREFIX: dict[str, list[tuple[int, str]]] = {}
for _i, _rule in enumerate(RULES):
    for _word in _rule.words or ():
        _BY_PREFIX.setdefault(_word[: keywords.MIN_LENGTH], []).append((_i, _word))
_ALWAYS = frozenset(i for i, rule in enumerate(RULES) if rule.words is None)


def _candidates(lower: str) -> set[int]:
    found = set(_ALWAYS)
    n = keywords.MIN_LENGTH
    for start in {lower[i : i + n] for i in range(len(lower) - n + 1)} & _BY_PREFIX.keys():
        for index, word in _BY_PREFIX[start]:
            if index not in found and word in lower:
                found.add(index)
    return found


def classify(text: str) -> Rule | None:
    if IGNORE.search(text):
        return None
    body = strip_prefix(text)
    # The body is a suffix of the text: its words are in the text too.
    candidates = _candidates(text.lower())
    weak = None
    for index in sorted(candidates):  # RULES' order
        rule = RULES[index]
        if rule.pattern.search(text) or (body is not text and rule.pattern.search(body)):
            if rule.strength == WEAK:
                weak = weak or rule
            elif rule.generic and weak is not None:
                # "RuntimeError: ProcessGroupNCCL is aborting": the exception's class says
                # only that something raised; its message names the cascade.
                return weak
            else:
                return rule
    # A wrapper ("DistBackendError: ... what(): CUDA error: ...") names its cause later
    # on the same line: a strong rule there wins over the wrapper's weak one.
    return weak
