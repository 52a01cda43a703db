"""Who may use the dashboard: loopback by default; another address only behind the
printed token; Host checked on loopback; actions need the page's action token."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture
def exposed(home, ui_kit):
    """Served on another address than 127.0.0.1 (127.0.0.2: still this machine's loopback
    device, so nothing leaves it, but not the default address)."""
    server = ui_kit.start(home, "--host", "127.0.0.2")
    yield server
    ui_kit.stop(server)


def test_another_address_needs_the_printed_token(exposed, browser):
    assert "?token=" in exposed.url
    token = exposed.url.split("token=")[1]
    assert httpx.get(exposed.base + "/").status_code == 401
    assert httpx.get(exposed.base + "/?token=wrong").status_code == 401
    bearer = httpx.get(exposed.base + "/", headers={"authorization": f"Bearer {token}"})
    assert bearer.status_code == 200

    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(exposed.url)  # the token is traded for a cookie and leaves the address bar
        assert tab.url == exposed.base + "/"
        assert tab.locator("h2", has_text="Jobs").count() == 1
        assert tab.request.get(exposed.base + "/fragments/lists").status == 200
        cookie = next(c for c in context.cookies() if c["name"] == "anylaunch_ui")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    finally:
        context.close()


def test_loopback_needs_no_token_but_checks_the_host(ui):
    assert "token" not in ui.url and ui.url.startswith("http://127.0.0.1:")
    response = httpx.get(ui.base + "/")
    assert response.status_code == 200
    assert "script-src" not in response.headers["content-security-policy"]  # default-src 'self'
    assert response.headers["content-security-policy"].startswith("default-src 'self'")
    # A page that points its own name at 127.0.0.1 (DNS rebinding) is refused.
    rebound = httpx.get(ui.base + "/", headers={"host": "attacker.example:80"})
    assert rebound.status_code == 421


def test_actions_need_the_action_token(ui, submit):
    job = submit("launcher: none\ncommand: [sleep, '60']\n")
    # What a form on another site could send: no custom header.
    forged = httpx.post(f"{ui.base}/jobs/{job['id']}/cancel")
    assert forged.status_code == 403
    page = httpx.get(f"{ui.base}/jobs/{job['id']}").text
    token = page.split('name="anylaunch-action" content="')[1].split('"')[0]
    done = httpx.post(
        f"{ui.base}/jobs/{job['id']}/cancel", headers={"x-anylaunch-action": token}, timeout=60
    )
    assert done.status_code == 200 and done.json()["state"] == "CANCELLED"
    missing = httpx.post(f"{ui.base}/jobs/nosuchjob/cancel", headers={"x-anylaunch-action": token})
    assert missing.status_code == 404 and missing.json()["error"]["code"]
