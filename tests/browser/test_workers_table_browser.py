"""Browser: the Workers table of a running job fits its card in zh and en at a laptop width (fresh-clone trial:
the zh headers were squeezed, the en table with its SSH commands overflowed the page). Headers stay on one line,
the page never scrolls sideways, and a table wider than its card scrolls inside the card.
Screenshots: ``workers-table-{lang}-{width}.png``."""

from __future__ import annotations

import pytest

from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir

seeded = test_diagnosis_browser.seeded  # the fixture: job "demo" with three Running Workers

pytestmark = [pytest.mark.browser]

MEASURE = """() => {
  const table = document.querySelector('[data-testid=worker-table]');
  const card = table.closest('.card');
  const heads = [...table.querySelectorAll(':scope > thead th')].filter(th => th.textContent.trim());
  const line = parseFloat(getComputedStyle(heads[0]).lineHeight) || 20;
  return {
    pageOverflow: document.documentElement.scrollWidth - window.innerWidth,
    cardOverflow: card.scrollWidth - card.clientWidth,
    tallHeads: heads.filter(th => th.getBoundingClientRect().height > 2 * line).map(th => th.textContent.trim()),
    scroller: getComputedStyle(table.parentElement).overflowX,
  };
}"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("orm_beside_playwright")
@pytest.mark.parametrize("lang", ["zh-hans", "en"])
@pytest.mark.parametrize("width", [1280, 1024])
def test_workers_table_fits_its_card(django_db_setup, live_server, client, admin_user, seeded, browser, lang, width):
    ctx = browser.new_context(viewport={"width": width, "height": 800})
    page = ctx.new_page()
    try:
        login(page, live_server, client, admin_user)
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/jobs/demo/?tab=workers")
        page.wait_for_selector("[data-testid=worker-table]")
        assert page.locator("[data-testid^=ssh-command-]").count() == 3  # the long cells are there
        m = page.evaluate(MEASURE)
        assert m["pageOverflow"] <= 0, m  # the page never scrolls sideways
        assert m["cardOverflow"] <= 0, m  # nothing spills over the card; a wide table scrolls inside it
        assert m["tallHeads"] == [], m  # every header on one line (zh was squeezed to a character a line)
        assert m["scroller"] == "auto", m
        page.screenshot(path=str(screenshot_dir() / f"workers-table-{lang}-{width}.png"), full_page=True)
    finally:
        ctx.close()
