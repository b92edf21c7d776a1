"""The form of a URL the service will call out to, checked where a caller gives it (its
destination is the SSRF guard's to judge, when it is called)."""

from urllib.parse import urlsplit


def checked_http_url(url: str, *, no_credentials: str) -> str:
    """`url` if it is an http:// or https:// URL with a host, a real port and no credentials
    (`no_credentials` says where they go instead); a `ValueError` saying what is wrong."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"must not hold credentials: {no_credentials}")
    if port == 0:
        raise ValueError("port 0 is not a port a server listens on")
    return url
