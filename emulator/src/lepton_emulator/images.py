"""Container images as local profiles: what a replica's `image:` gives it.

A real Lepton replica runs in the image the job names, and only what that image ships
is there. The emulator has no container runtime, so each known image maps to a profile:
a Python interpreter and the host directories a replica sees, read-only, under
/opt/image (the dev image: at their own paths). Everything else of the host stays out of the replica's root (see sandbox.py).

- `bare`: the system python3 with its standard library only (the distribution's
  dist-packages are hidden). ubuntu:* and debian:* images.
- `python`: bare, plus the `python` command that the python:* images also have.
- `pytorch`: python3 with torch 2.13.0, the packages torch needs and numpy (every NGC
  PyTorch image has it, and torch warns in every process when it is missing), nothing
  else: a virtualenv whose site-packages holds hard links to those packages only.
  nvcr.io/nvidia/pytorch:* and the pytorch/pytorch images.
- `dev`: an image built from this repository (`anylaunch-dev:*`), with the project's
  virtualenv and the repository at the paths they have here, so anylaunch, boto3 and
  the test programs are importable. Only jobs that name this image get them.

Public images pull without a secret. nvcr.io/nvidia/tao/* and nvcr.io/nvidia/nemo:* are
private NGC repositories: they need an image pull secret for nvcr.io. Any other image is
unknown here and fails to pull, like an image that does not exist.
"""

from __future__ import annotations

import atexit
import fcntl
import fnmatch
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Where an image's own files appear in a replica (as /opt/conda does in some images);
# built on this host elsewhere, never at the same path.
IMAGE_ROOT = "/opt/image"
TORCH_VERSION = "2.13.0"
PROFILE_FORMAT = 3  # bump when a built profile's layout or contents change


@dataclass(frozen=True)
class Image:
    pattern: str
    profile: str
    private: bool = False  # needs an image pull secret for its registry


IMAGES = (
    Image("nvcr.io/nvidia/pytorch:*", "pytorch"),
    Image("pytorch/pytorch:*", "pytorch"),
    Image("docker.io/pytorch/pytorch:*", "pytorch"),
    Image("nvcr.io/nvidia/tao/*", "pytorch", private=True),
    Image("nvcr.io/nvidia/nemo:*", "pytorch", private=True),
    Image("python:*", "python"),
    Image("docker.io/library/python:*", "python"),
    Image("ubuntu:*", "bare"),
    Image("debian:*", "bare"),
    Image("anylaunch-dev:*", "dev"),
)


def lookup(image: str) -> Image | None:
    return next((i for i in IMAGES if fnmatch.fnmatchcase(image, i.pattern)), None)


@dataclass(frozen=True)
class Profile:
    name: str
    path: str  # PATH inside the replica
    # (host directory, path in the replica): seen read-only there
    binds: tuple[tuple[str, str], ...] = ()
    hidden: tuple[str, ...] = field(default=())  # directories that are empty inside


def _system_site_dirs() -> tuple[str, ...]:
    """The distribution's site-packages of the system python3 (apt's python3-yaml...)."""
    found = []
    for pattern in ("/usr/lib/python3/dist-packages", "/usr/local/lib/python3*/dist-packages"):
        found += [str(p) for p in sorted(Path("/").glob(pattern.lstrip("/"))) if p.is_dir()]
    return tuple(found)


def _base_prefix() -> str:
    return os.path.realpath(sys.base_prefix)


def profile(name: str) -> Profile:
    """The profile `name`, built first if it needs building (pytorch)."""
    hidden = _system_site_dirs()
    if name == "bare":
        return Profile("bare", SYSTEM_PATH, (), hidden)
    if name == "python":
        alias = str(_python_alias())
        return Profile(
            "python", f"{IMAGE_ROOT}/bin:{SYSTEM_PATH}", ((alias, f"{IMAGE_ROOT}/bin"),), hidden
        )
    if name == "pytorch":
        venv, base = str(build_pytorch()), _base_prefix()
        binds = ((venv, f"{IMAGE_ROOT}/venv"), (base, base))
        return Profile("pytorch", f"{IMAGE_ROOT}/venv/bin:{SYSTEM_PATH}", binds, hidden)
    if name == "dev":
        seen = [sys.prefix, _base_prefix()]
        repo = _repository()
        if repo is not None:
            seen.append(str(repo))
        return Profile(
            "dev", f"{sys.prefix}/bin:{SYSTEM_PATH}", tuple((d, d) for d in seen), hidden
        )
    raise KeyError(name)


# What an image's /etc holds that programs read: users and groups, resolver settings, the
# loader's cache, certificates, alternatives, shells' profiles, time zone. Copied from
# this machine once per emulator process, read-only in replicas; nothing else of its /etc
# (/etc/shadow, ssh host keys, munge's key, sudoers) is there.
ETC_FILES = (
    "passwd", "group", "host.conf", "gai.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
    "ca-certificates.conf", "localtime", "timezone", "os-release", "debian_version",
    "mime.types", "protocols", "services", "networks", "profile", "profile.d",
    "bash.bashrc", "environment", "inputrc", "shells", "login.defs", "python3",
    f"python{sys.version_info.major}.{sys.version_info.minor}",
)  # fmt: skip
_NEVER = ("private",)  # ssl/private: the host's TLS keys
# Name service from files alone. On Lepton a job's names come from the cluster's DNS,
# which answers for the job's workers and says "no such name" for the rest at once. A
# replica has no DNS server to reach, so /etc/hosts holds those answers and nothing asks
# further: a lookup of anything else is a definite "not found", never the "temporary
# failure" (EAI_AGAIN) of an unreachable server that torch's c10d warns about on every
# connection it cannot name.
NSSWITCH = """passwd: files
group: files
hosts: files
networks: files
protocols: files
services: files
"""


@functools.lru_cache(maxsize=1)
def image_etc() -> Path:
    """This process's copy of the /etc an image has (ETC_FILES), removed at exit."""
    made = Path(tempfile.mkdtemp(prefix="lepton-image-etc-"))
    atexit.register(shutil.rmtree, made, True)
    etc = made / "etc"
    etc.mkdir(mode=0o755)
    for name in ETC_FILES:
        host = Path("/etc") / name
        try:
            if host.is_symlink() or host.is_file():
                shutil.copy2(host, etc / name, follow_symlinks=False)
            elif host.is_dir():
                shutil.copytree(
                    host, etc / name, symlinks=True, ignore=shutil.ignore_patterns(*_NEVER)
                )
        except OSError:
            continue  # unreadable here: the image goes without it
    (etc / "nsswitch.conf").write_text(NSSWITCH)
    (etc / "hosts").touch()  # the replica's hosts file is bound over it
    return etc


def _python_alias() -> Path:
    """A folder whose `python` is the system python3, as in the python:* images."""
    folder = cache_dir() / "python-alias" / "bin"
    if not (folder / "python").is_symlink():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".python-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to("/usr/bin/python3")
        tmp.replace(folder / "python")
    return folder


def _repository() -> Path | None:
    """The checkout this emulator is installed from (editable install), if any: the
    repository the dev image is built from."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / ".git").exists():
            return parent
    return None


def cache_dir() -> Path:
    """Where built profiles live: inside the project's virtualenv, so hard links work
    (same filesystem) and every emulator started from it shares one build."""
    return Path(sys.prefix) / "share" / "anylaunch-lepton-images"


def _closure(root: str) -> list[metadata.Distribution]:
    """`root` and every distribution it requires (markers evaluated for this Python)."""
    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def build_pytorch() -> Path:
    """A virtualenv with torch and its requirements only; built once, then reused."""
    target = cache_dir() / f"pytorch-{TORCH_VERSION}-v{PROFILE_FORMAT}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target
        dists = _closure("torch") + _closure("numpy")
        names = {d.metadata["Name"].lower() for d in dists}
        if not {"torch", "numpy"} <= names:
            raise RuntimeError(
                f"the pytorch image profile needs torch=={TORCH_VERSION} and numpy in {sys.prefix}"
            )
        shutil.rmtree(target, ignore_errors=True)
        base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        subprocess.run([base, "-m", "venv", "--without-pip", str(target)], check=True)
        site = Path(
            sysconfig.get_path("purelib", vars={"base": str(target), "platbase": str(target)})
        )
        for dist in dists:
            _link_distribution(dist, site)
        (target / "bin" / "torchrun").write_text(
            f"#!{IMAGE_ROOT}/venv/bin/python\nimport sys\nfrom torch.distributed.run import main\n"
            "sys.exit(main())\n"
        )
        (target / "bin" / "torchrun").chmod(0o755)
        (target / ".complete").write_text(TORCH_VERSION + "\n")
    return target


def _link_distribution(dist: metadata.Distribution, site: Path) -> None:
    """Hard-link a distribution's files (its RECORD) into `site`; copy across devices."""
    for item in dist.files or []:
        source = Path(str(dist.locate_file(item)))
        rel = Path(str(item))
        if rel.is_absolute() or ".." in rel.parts or not source.is_file():
            continue  # scripts in bin/ and the like: not part of site-packages
        dest = site / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, dest)
        except FileExistsError:
            continue
        except OSError:
            shutil.copy2(source, dest)


def main(argv: list[str] | None = None) -> int:
    """`python -m lepton_emulator.images build`: build the profiles now."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["build"]:
        print("usage: python -m lepton_emulator.images build", file=sys.stderr)
        return 2
    print(f"pytorch image profile: {build_pytorch()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
