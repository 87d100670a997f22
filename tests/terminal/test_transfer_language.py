"""Terminal file-transfer refusals are in the page's language, not a Chinese prefix with an English
detail; the websocket's language comes from the language cookie, else Accept-Language."""

from __future__ import annotations

import pytest
from django.utils import translation

from rlark_console.language import scope_language
from terminal.services import transfer


@pytest.mark.parametrize(
    ("lang", "text"),
    [("en", "'..' is not allowed in transfer paths"), ("zh-hans", "传输路径中不允许出现“..”")],
)
def test_transfer_refusals_follow_the_active_language(lang, text):
    with translation.override(lang), pytest.raises(transfer.TransferError) as exc:
        transfer.download_path("a/../b")
    assert str(exc.value) == text


def test_file_name_refusal_in_chinese():
    with translation.override("zh-hans"), pytest.raises(transfer.TransferError) as exc:
        transfer.upload_path("a b.txt")
    assert str(exc.value).startswith("不允许的文件名 'a b.txt'")


def test_scope_language_cookie_then_accept_language_then_default():
    cookie = {"cookies": {"django_language": "en"}, "headers": [(b"accept-language", b"zh-CN,zh;q=0.9")]}
    assert scope_language(cookie) == "en"
    assert scope_language({"headers": [(b"accept-language", b"en-US,en;q=0.8")]}) == "en"
    assert scope_language({"headers": [(b"accept-language", b"zh-CN,zh;q=0.9")]}) == "zh-hans"
    assert scope_language({"headers": [(b"accept-language", b"fr-FR")]}) == "zh-hans"  # unsupported: default
    assert scope_language({"cookies": {"django_language": "xx"}}) == "zh-hans"
    assert scope_language({"headers": [(b"accept-language", b"en" + b",x" * 10_000)]}) == "en"  # bounded
