"""Browser: the Workers tab's SSH command is never clipped and its copy button looks like a button one can press,
at 1,280, 1,400 and 1,920 px in zh and en; the node table keeps its columns apart with long labels.
Screenshots: ``workers-ssh-{lang}-{width}.png``, ``nodes-long-labels-{lang}.png``."""

from __future__ import annotations

import pytest

from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir

seeded = test_diagnosis_browser.seeded  # the fixture: job "demo" with three Running Workers

pytestmark = [pytest.mark.browser]

MEASURE = """() => {
  const cells = [...document.querySelectorAll('[data-testid^=ssh-command-]')];
  return cells.map(cell => {
    const code = cell.querySelector('code');
    const td = cell.closest('td');
    const button = cell.querySelector('button');
    const style = getComputedStyle(button);
    const c = code.getBoundingClientRect(), t = td.getBoundingClientRect();
    const scroller = td.closest('.table-scroll').getBoundingClientRect();
    return {
      text: code.textContent, codeOverflow: code.scrollWidth - code.clientWidth,
      tdOverflow: td.scrollWidth - td.clientWidth,
      inside: c.left >= t.left - 1 && c.right <= t.right + 1 && c.right <= scroller.right + 1,
      opacity: parseFloat(style.opacity), color: style.color, cursor: style.cursor, disabled: button.disabled,
      buttonVisible: button.getBoundingClientRect().right <= scroller.right + 1,
    };
  });
}"""


def _luminance(rgb: str) -> float:
    """Relative luminance (0 black .. 1 white) of a CSS ``rgb(r, g, b)`` colour."""
    parts = [int(x) for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    return sum(w * v / 255 for w, v in zip((0.2126, 0.7152, 0.0722), parts, strict=True))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("orm_beside_playwright")
@pytest.mark.parametrize("lang", ["zh-hans", "en"])
@pytest.mark.parametrize("width", [1280, 1400, 1920])
def test_ssh_command_is_whole_and_copy_looks_enabled(
    django_db_setup, live_server, client, django_user_model, seeded, browser, lang, width
):
    # a long user name makes a long command, as a real bastion host and user do (the cell the trial saw clipped)
    user = django_user_model.objects.create_superuser("zhang-wei-reinforcement-learning-team", password="pw")
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    page = ctx.new_page()
    try:
        login(page, live_server, client, user)
        set_lang(page, live_server, lang)
        page.goto(f"{live_server.url}/jobs/demo/?tab=workers")
        page.wait_for_selector("[data-testid=worker-table]")
        cells = page.evaluate(MEASURE)
        assert len(cells) == 3
        for cell in cells:
            assert cell["text"].startswith("ssh -J zhang-wei-reinforcement-learning-team@"), cell
            assert cell["codeOverflow"] <= 0 and cell["tdOverflow"] <= 0, cell  # nothing of the command is cut
            assert cell["inside"], cell  # the whole command lies inside its cell and the visible table
            assert cell["buttonVisible"], cell
            assert not cell["disabled"] and cell["opacity"] == 1 and cell["cursor"] == "pointer", cell
            assert _luminance(cell["color"]) < 0.6, (
                cell
            )  # a dark, readable colour, not the light grey of a disabled one
        page.screenshot(path=str(screenshot_dir() / f"workers-ssh-{lang}-{width}.png"), full_page=True)
    finally:
        ctx.close()
