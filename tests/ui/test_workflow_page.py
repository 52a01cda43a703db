"""The dashboard shows a workflow as its graph: a column per level, each step with its
state and a link to each of its jobs; what steps and jobs report is escaped."""

from __future__ import annotations

import httpx

from anylaunch.store import Store

HOSTILE = '<img src=x onerror="alert(1)">'


def test_a_workflow_page_draws_the_graph_and_links_every_job(cli, write, ui, home):
    path = write(
        """
        name: page
        launcher: none
        steps:
          fetch:
            command: [bash, -c, "echo fetch"]
          shard:
            needs: [fetch]
            splits: 2
            command: [bash, -c, "exit $SPLIT_ID"]
          report:
            needs: [shard]
            command: [bash, -c, "echo never"]
        """,
        "wf.yaml",
    )
    run = cli("run", str(path), "--json", env={"ANYLAUNCH_WORKFLOW_POLL_S": "0.3"})
    assert run.rc == 1, run.err
    wf = run.json()
    store = Store(home)
    store.set_step_error(wf["id"], "shard", HOSTILE)  # text that reached us from outside

    html = httpx.get(f"{ui.base}/workflows/{wf['id']}").text
    levels = html.split('class="level"')[1:]
    assert ['data-step="fetch"' in lv for lv in levels] == [True, False, False]
    assert 'data-step="shard" data-state="FAILED"' in levels[1]
    assert 'data-step="report" data-state="BLOCKED"' in levels[2]
    for step in wf["steps"]:
        for split in step["splits"]:
            assert f'href="/jobs/{split["attempts"][-1]["id"]}"' in html
    assert f'href="/runs/{wf["id"]}.shard"' in html
    assert HOSTILE not in html and "&lt;img src=x onerror=" in html

    front = httpx.get(f"{ui.base}/").text
    assert f'href="/workflows/{wf["id"]}"' in front
    assert httpx.get(f"{ui.base}/workflows/wf-nothere").status_code == 404
