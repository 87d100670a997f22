"""The back office's group and user permission pickers are in the page's language (fresh-clone trial: they read
"账号与审计 | API 令牌 | Can add API token"): every option of both pickers in zh has no "Can ..." left, in en they
read as Django writes them."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

pytestmark = pytest.mark.django_db


def _options(client, url: str, lang: str) -> list[str]:
    page = client.get(url, HTTP_ACCEPT_LANGUAGE=lang).content.decode()
    select = re.search(r'<select name="(?:user_)?permissions"[^>]*>(.*?)</select>', page, re.S).group(1)
    return re.findall(r"<option[^>]*>([^<]+)</option>", select)


@pytest.mark.parametrize("url", ["/admin/auth/group/add/", "/admin/auth/user/{pk}/change/"])
def test_permission_pickers_follow_the_language(client, admin_user, url):
    client.force_login(admin_user)
    url = url.format(pk=admin_user.pk)
    zh = _options(client, url, "zh-hans")
    assert len(zh) == Permission.objects.count()
    assert not [o for o in zh if "Can " in o], [o for o in zh if "Can " in o][:5]
    assert "账号与审计 | API 令牌 | 可以添加API 令牌" in zh
    en = _options(client, url, "en")
    assert "Accounts and audit | API token | Can add API token" in en
