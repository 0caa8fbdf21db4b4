"""Headless Chromium for the browser tests (Debian's package, never a download), and the axe-core check."""

import contextlib
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
AXE = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
PATIENCE_MS = 30_000
needs_chromium = pytest.mark.skipif(
    not shutil.which("chromium"), reason="Debian's chromium is not installed (make test installs it as root)"
)


@contextlib.contextmanager
def chromium(**context):
    """A fresh browser context (``context``: e.g. viewport, color_scheme) in headless Chromium."""
    from playwright.sync_api import expect, sync_playwright

    # How long to wait for the page to get there, not a claim about speed: Playwright's 5 s default
    # failed a "Show more" on a CI machine whose two cores were busy with other work.
    expect.set_options(timeout=PATIENCE_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        )
        try:
            browser_context = browser.new_context(**context)
            browser_context.set_default_timeout(PATIENCE_MS)
            yield browser_context
        finally:
            browser.close()


def sign_in(page, base_url: str, username: str, password: str, *, admin: bool = False) -> None:
    page.goto(base_url + ("/admin/login/" if admin else "/accounts/login/"))
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("[type=submit]")
    page.wait_for_load_state()


def csp_violations(page) -> list[str]:
    """A list that fills with what the Content-Security-Policy blocks on ``page`` from now on, across navigations.

    Chromium logs each violation to the console; the securitypolicyviolation
    event adds the directive and the place. htmx's refusal to evaluate an
    attribute (allowEval off) counts too: it is what 'unsafe-eval' would allow.
    """
    seen: list[str] = []
    page.add_init_script("""document.addEventListener("securitypolicyviolation", (e) => console.error(
        `CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline code"}`
        + ` at ${e.sourceFile}:${e.lineNumber}`));""")
    page.on(
        "console",
        lambda message: (
            seen.append(message.text)
            if (
                "Content Security Policy" in message.text
                or "CSP violation" in message.text
                or "evalDisallowedError" in message.text
            )
            else None
        ),
    )
    return seen


def axe_violations(page, *, impacts=("serious", "critical")) -> list[str]:
    """axe-core's WCAG 2 A/AA findings on the page as it is now, of the given impacts, as readable lines."""
    # Evaluated through DevTools, not added as a <script>: the page's policy refuses inline scripts.
    page.evaluate(AXE.read_text())
    result = page.evaluate("""async () => {
        const r = await axe.run(document,
                                {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}));
    }""")
    return [
        f"{v['impact']} {v['id']}: {v['help']} at {', '.join(v['nodes'])}" for v in result if v["impact"] in impacts
    ]
