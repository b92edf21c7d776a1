"""The API reference pages over HTTP: each sends a Content-Security-Policy that allows its own
inline script and style by hash and nothing from elsewhere, and refuses to be framed (the
pages rendering under that policy is tests/browser/test_docs.py)."""

import base64
import hashlib
import re

import pytest

from tests.service import Service


def _directives(policy: str) -> dict[str, list[str]]:
    parts = (part.split() for part in policy.split(";") if part.strip())
    return {name: values for name, *values in parts}


def _sha256(text: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"


@pytest.mark.parametrize(("path", "inline_scripts"), [("/docs", 1), ("/redoc", 0)])
async def test_a_reference_page_is_guarded_by_a_policy_and_cannot_be_framed(
    service: Service, path: str, inline_scripts: int
) -> None:
    async with service.client() as client:
        page = await client.get(path)

    assert page.status_code == 200, page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    policy = _directives(page.headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["connect-src"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"]
    # The page's own inline script is allowed by its hash; no other inline script, no eval.
    scripts = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    assert len(scripts) == inline_scripts
    assert policy["script-src"] == ["'self'", *(_sha256(script) for script in scripts)]


async def test_an_asset_without_a_gzip_copy_is_served_to_a_gzip_client(service: Service) -> None:
    """The page's icon has no `.gz` copy: it is served as it is, not a 404."""
    async with service.client() as client:
        icon = await client.get(
            "/static/vendor/swagger-ui/favicon-32x32.png", headers={"Accept-Encoding": "gzip"}
        )
        script = await client.get(
            "/static/vendor/swagger-ui/swagger-ui-bundle.js", headers={"Accept-Encoding": "gzip"}
        )

    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/png"
    assert "content-encoding" not in icon.headers
    assert script.status_code == 200
    assert script.headers["content-encoding"] == "gzip"
