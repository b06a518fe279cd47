"""The few GitHub REST endpoints the suite calls (issue and pull-request comments, check runs,
issues), with a token that is never printed: ``cli/github.py`` (the verdict on a pull request)
and ``history/alerts.py`` (issues for the fleet's regressions) use it. Every failed request is
a ``GitHubError`` of one line: a refusal (401, 403, 404), a rate limit (403 or 429 with
``retry-after`` or ``x-ratelimit-reset``), an unreachable API."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any, Callable, List, Mapping, Optional, Tuple

API_VERSION = "2022-11-28"
PER_PAGE = 100


class GitHubError(Exception):
    """One failed request, said in one line (never with the token)."""

    def __init__(self, status: Optional[int], line: str):
        super().__init__(line)
        self.status = status


def _next_link(header: Optional[str]) -> Optional[str]:
    """The ``rel="next"`` URL of a ``Link`` header (GitHub's pagination), or None."""
    for part in (header or "").split(","):
        m = re.match(r'\s*<([^>]+)>\s*;\s*rel="next"', part)
        if m:
            return m.group(1)
    return None


class GitHub:
    """The few REST endpoints this command uses, with ``token``; ``opener``: urllib's (a test
    may pass its own)."""

    def __init__(self, api_url: str, token: str, opener: Callable = urllib.request.urlopen, timeout: float = 30.0):
        self.api = api_url.rstrip("/")
        self._token = token
        self._open = opener
        self.timeout = timeout

    def _clean(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def request(self, method: str, path_or_url: str, body: Optional[Mapping[str, Any]] = None
                ) -> Tuple[Any, Mapping[str, str]]:
        url = path_or_url if path_or_url.startswith(("http://", "https://")) else self.api + path_or_url
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json", "Authorization": f"Bearer {self._token}",
            "X-GitHub-Api-Version": API_VERSION, "User-Agent": "pytest-mxperf",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with self._open(req, timeout=self.timeout) as resp:
                raw = resp.read()
                headers = {k.lower(): v for k, v in resp.headers.items()}
        except urllib.error.HTTPError as exc:
            raise GitHubError(exc.code, self._clean(self._refusal(method, url, exc))) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GitHubError(None, self._clean(f"{method} {self._where(url)}: cannot reach the API: {reason}")) from None
        try:
            return (json.loads(raw) if raw else None), headers
        except ValueError:
            raise GitHubError(None, f"{method} {self._where(url)}: the answer is not JSON") from None

    def _where(self, url: str) -> str:
        return url[len(self.api):].split("?")[0] if url.startswith(self.api) else url.split("?")[0]

    def _refusal(self, method: str, url: str, exc: urllib.error.HTTPError) -> str:
        headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
        try:
            message = str((json.loads(exc.read() or b"{}") or {}).get("message") or exc.reason)
        except (ValueError, AttributeError):
            message = str(exc.reason)
        where = f"{method} {self._where(url)}: HTTP {exc.code}"
        if exc.code in (403, 429) and ("retry-after" in headers or headers.get("x-ratelimit-remaining") == "0"):
            if "retry-after" in headers:
                wait = f"retry after {headers['retry-after']} s"
            else:
                try:
                    wait = f"the limit resets in {max(0, int(headers.get('x-ratelimit-reset', '0')) - int(time.time()))} s"
                except ValueError:
                    wait = "the limit resets later"
            return f"{where}: rate limited by GitHub ({wait}): {message}"
        if exc.code in (401, 403):
            return (f"{where}: the token may not do this ({message}); the workflow needs "
                    f"'pull-requests: write' and 'checks: write'")
        if exc.code == 404:
            return f"{where}: not found ({message}): the repository, pull request or token's access"
        return f"{where}: {message}"

    def pages(self, path: str) -> List[Any]:
        """Every item of a listed endpoint, page after page (``Link: rel="next"``)."""
        items: List[Any] = []
        url: Optional[str] = f"{path}{'&' if '?' in path else '?'}per_page={PER_PAGE}"
        while url:
            page, headers = self.request("GET", url)
            items += list(page or [])
            url = _next_link(headers.get("link"))
        return items


