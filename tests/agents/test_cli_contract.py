"""CLI twins of the MCP tools: `logs --since` and the Lepton workspace commands, whose
`--json` output the `cli` fixture checks against docs/schemas/."""

from __future__ import annotations


def test_logs_since_an_offset_prints_only_what_followed(cli, write):
    path = write("command: python -c \"print('first'); print('second')\"\nlauncher: none\n")
    job = cli("run", str(path), "--json").json()
    assert job["state"] == "SUCCEEDED"
    whole = cli("logs", job["id"], "--json").json()
    assert whole["text"] == "first\nsecond\n" and whole["offset"] == len(whole["text"])
    after_first = cli("logs", job["id"], "--since", "6", "--json").json()
    assert after_first["text"] == "second\n" and after_first["offset"] == whole["offset"]
    assert cli("logs", job["id"], "--since", str(whole["offset"])).out == ""
    negative = cli("logs", job["id"], "--tail", "-1", "--json")
    assert negative.rc == 2 and "tail" in negative.json()["error"]["message"]


def test_lepton_shapes_and_volumes_list_the_workspace(cli_inproc, tmp_path, lepton_server):
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=7) as emu:
        shapes = cli_inproc("lepton", "shapes", "--json", env=emu.env())
        assert shapes.rc == 0 and shapes.json(), shapes.err
        assert all(s["gpu_count"] >= 0 for s in shapes.json().values())
        volumes = cli_inproc("lepton", "volumes", "--json", env=emu.env())
        assert volumes.rc == 0 and isinstance(volumes.json(), list)
        assert shapes.out.count(emu.token) == volumes.out.count(emu.token) == 0
        # One node group, by id or by name; one the workspace lacks is a one-line refusal.
        group = volumes.json()[0]["node_group_id"]
        one = cli_inproc("lepton", "volumes", "--node-group", group, "--json", env=emu.env())
        assert one.rc == 0 and {v["node_group_id"] for v in one.json()} == {group}
        for sub in ("shapes", "volumes"):
            wrong = cli_inproc("lepton", sub, "--node-group", "nope", env=emu.env())
            assert wrong.rc == 2 and wrong.out == "", wrong.out
            assert wrong.err.count("\n") == 1 and "node group 'nope'" in wrong.err
            assert group in wrong.err and "--node-group" in wrong.err
            wrong = cli_inproc("lepton", sub, "--node-group", "nope", "--json", env=emu.env())
            assert wrong.rc == 2 and wrong.json()["error"]["code"] == "USAGE"
    unset = {"LEPTON_WORKSPACE_ID": "", "LEPTON_AUTH_TOKEN": "", "LEPTON_WORKSPACE_URL": ""}
    missing = cli_inproc("lepton", "shapes", "--json", env=unset)
    assert missing.rc != 0 and "LEPTON_AUTH_TOKEN" in missing.json()["error"]["message"]
