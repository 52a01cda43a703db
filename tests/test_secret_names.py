"""Which variable names are secrets: the rule README's "Secret names" writes down, and
what a dry run of a job holding such variables shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import inproc
from anylaunch.jobfile.secrets import is_secret_name

SECRETS = [
    "HF_TOKEN", "WANDB_API_KEY", "OPENAI_KEY", "DEPLOY_KEY", "SSH_KEY", "DB_PASS",
    "MYSQL_PWD", "PGPASSWORD", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "NGC_KEY",
    "LEPTON_AUTH_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "DOCKER_CREDS", "BASIC_AUTH",
    "HTTP_AUTHORIZATION", "SESSION_COOKIE", "GPG_PASSPHRASE", "ANTHROPIC_APIKEY",
    "SSH_PRIVATE_KEY", "KEY", "RUN_KEY", "API_KEYS", "openai_key", "db_pass", "CLOUD_METADATA",
]  # fmt: skip
ORDINARY = [
    "KEYBOARD_LAYOUT", "MONKEY_PATCH", "HOTKEYS", "KEYRING_BACKEND", "PASSES",
    "BYPASS_CACHE", "COMPASS_DIR", "PWD", "OLDPWD", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
    "PATH", "HOME", "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "NCCL_DEBUG", "ANYLAUNCH_RUN_KEY",
]  # fmt: skip


@pytest.mark.parametrize("name", SECRETS)
def test_names_users_keep_secrets_in_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_settings_stay_readable(name: str) -> None:
    assert not is_secret_name(name)


def test_a_dry_run_shows_no_value_of_a_key_or_pass_variable(tmp_path: Path, home: Path) -> None:
    values = {
        "OPENAI_KEY": "sk-openai-0123456789", "DEPLOY_KEY": "deploy-key-0123456789",
        "SSH_KEY": "ssh-ed25519-AAAAC3Nza", "DB_PASS": "db-pass-0123456789",
    }  # fmt: skip
    job = tmp_path / "job.yaml"
    env_lines = "".join(f"  {name}: ${{{name}}}\n" for name in values)
    job.write_text(f"command: [echo]\nenv:\n{env_lines}  KEYBOARD_LAYOUT: us-intl-dvorak\n")
    environ = {**os.environ, "ANYLAUNCH_HOME": str(home), **values}
    rc, out, err = inproc.call(("run", str(job), "--dry-run", "--json"), environ, tmp_path)
    assert rc == 0, err
    json.loads(out)
    for name, value in values.items():
        assert value not in out + err, name
    assert "us-intl-dvorak" in out
