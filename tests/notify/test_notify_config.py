"""`notify:` in the job file: targets, their states, and webhook URLs kept secret."""

from __future__ import annotations

import json

import pytest

from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader

URL = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX"


def error_of(path, env) -> str:
    with pytest.raises(ConfigError) as caught:
        loader.load(path, environ=env)
    assert "\n" not in caught.value.message
    return caught.value.message


def test_targets_load_with_yamls_on_key_and_the_url_kept_as_its_reference(write):
    path = write(
        "command: [python, t.py]\nnotify:\n"
        "  - url: ${SLACK_WEBHOOK_URL}\n    on: [FAILED, SUCCEEDED]\n"
        "  - command: cat > /tmp/end.json\n    on: [FAILED]\n"
    )
    spec = loader.load(path, environ={"SLACK_WEBHOOK_URL": URL})
    assert [t.on for t in spec.notify] == [["FAILED", "SUCCEEDED"], ["FAILED"]]
    assert spec.notify[0].url == "${SLACK_WEBHOOK_URL}"
    assert spec.notify[0].url_env == "SLACK_WEBHOOK_URL"
    assert URL not in json.dumps(spec.redacted())
    assert "notify" not in spec.recipe  # the launcher's, not the program's


def test_a_url_written_in_the_clear_is_refused_with_the_fix(write):
    path = write(f"command: [python, t.py]\nnotify:\n  - url: {URL}\n    on: [FAILED]\n")
    message = error_of(path, {})
    assert message.startswith(f"{path}:3: notify[0].url: a webhook URL is a secret")
    assert "url: ${SLACK_WEBHOOK_URL}" in message and URL not in message


def test_an_unset_url_variable_names_it(write):
    path = write("command: [python, t.py]\nnotify:\n  - url: ${HOOK}\n    on: [FAILED]\n")
    assert "environment variable HOOK is not set" in error_of(path, {})


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("{on: [FAILED]}", "exactly one of url: (a webhook) or command:"),
        ("{command: 'true', on: []}", "at least 1"),
        ("{command: 'true', on: [FAIL]}", "FAILED"),
        ("{command: 'true'}", "on"),
    ],
)
def test_bad_targets_say_what_to_write(write, target, says):
    path = write(f"command: [python, t.py]\nnotify:\n  - {target}\n")
    message = error_of(path, {})
    assert message.startswith(f"{path}:3: notify[0]") and says in message


def test_the_dry_run_names_the_webhook_by_its_variable_only(cli_inproc, write, monkeypatch):
    monkeypatch.setenv("SLACK_WEBHOOK_URL", URL)
    path = write(
        "launcher: none\ncommand: [python, t.py]\n"
        "notify:\n  - url: ${SLACK_WEBHOOK_URL}\n    on: [FAILED]\n"
    )
    for backend in ("local", "slurm"):
        result = cli_inproc("run", str(path), "--backend", backend, "--dry-run", "--json")
        assert result.rc == 0, result.err
        assert URL not in result.out
        assert "SLACK_WEBHOOK_URL" in result.json()["plan"]["secret_env"]
