"""A stand-in of GitHub's REST API on loopback, for the endpoints the suite uses, answering as
GitHub's documentation says (docs.github.com/en/rest: issue comments, check runs, pull
requests, issues; pagination by ``Link: <...>; rel="next"``; ``401`` without a valid token;
``403`` without the permission; ``404`` for what does not exist; rate limits as ``403`` with
``x-ratelimit-remaining: 0`` and ``x-ratelimit-reset``, or ``429`` with ``retry-after``).

    with GitHubStandIn(token="t0k3n") as gh:
        gh.url                   # http://127.0.0.1:PORT
        gh.comments[7]           # the comments of issue / pull request 7 (dicts as GitHub's)
        gh.check_runs, gh.issues, gh.requests
        gh.refuse["POST /repos/o/r/check-runs"] = (403, {}, "Resource not accessible by integration")
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

BOT = {"login": "github-actions[bot]", "type": "Bot", "id": 41898282}
PERSON = {"login": "octocat", "type": "User", "id": 1}


class GitHubStandIn:
    def __init__(self, token="t0k3n", repo="o/r", per_page_max=100):
        self.token, self.repo, self.per_page_max = token, repo, per_page_max
        self.comments = {}      # number -> [comment]
        self.pulls = {}         # number -> {"number", "head": {"sha"}}
        self.issues = {}        # number -> issue
        self.check_runs = []
        self.requests = []      # (method, path, headers, body)
        self.refuse = {}        # "METHOD /path" -> (status, headers, message)
        self._next_id = 1000
        self._lock = threading.Lock()
        self._server = None

    # ------------------------------------------------------------------ set-up helpers
    def new_id(self):
        with self._lock:
            self._next_id += 1
            return self._next_id

    def add_comment(self, number, body, user=PERSON):
        c = {"id": self.new_id(), "body": body, "user": dict(user),
             "html_url": f"https://github.com/{self.repo}/pull/{number}#issuecomment"}
        self.comments.setdefault(number, []).append(c)
        return c

    # ------------------------------------------------------------------ serving
    def __enter__(self):
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _answer(self, status, doc, headers=None):
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                u = urlparse(self.path)
                stand_in.requests.append((method, u.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.headers.get("Authorization") not in (f"Bearer {stand_in.token}", f"token {stand_in.token}"):
                    return self._answer(401, {"message": "Bad credentials",
                                              "documentation_url": "https://docs.github.com/rest"})
                refused = stand_in.refuse.get(f"{method} {u.path}")
                if refused:
                    status, headers, message = refused
                    return self._answer(status, {"message": message}, headers)
                status, doc, headers = stand_in.route(method, u.path, parse_qs(u.query), body, self.headers)
                return self._answer(status, doc, headers)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ------------------------------------------------------------------ the endpoints
    def route(self, method, path, query, body, headers):
        repo = re.escape(self.repo)
        m = re.fullmatch(rf"/repos/{repo}/issues/(\d+)/comments", path)
        if m and method == "GET":
            items = self.comments.get(int(m.group(1)), [])
            per_page = min(int(query.get("per_page", ["30"])[0]), self.per_page_max)
            page = int(query.get("page", ["1"])[0])
            chunk = items[(page - 1) * per_page: page * per_page]
            link = {}
            if page * per_page < len(items):
                link = {"Link": f'<{self.url}{path}?per_page={per_page}&page={page + 1}>; rel="next", '
                                f'<{self.url}{path}?per_page={per_page}&page={(len(items) - 1) // per_page + 1}>; '
                                f'rel="last"'}
            return 200, chunk, link
        if m and method == "POST":
            number = int(m.group(1))
            if number not in self.pulls and number not in self.issues:
                return 404, {"message": "Not Found"}, {}
            return 201, self.add_comment(number, body["body"], BOT), {}
        m = re.fullmatch(rf"/repos/{repo}/issues/comments/(\d+)", path)
        if m and method == "PATCH":
            for cs in self.comments.values():
                for c in cs:
                    if c["id"] == int(m.group(1)):
                        if c["user"]["login"] != BOT["login"]:
                            return 403, {"message": "Must have admin rights to Repository."}, {}
                        c["body"] = body["body"]
                        return 200, c, {}
            return 404, {"message": "Not Found"}, {}
        if path == f"/repos/{self.repo}/check-runs" and method == "POST":
            run = dict(body, id=self.new_id())
            self.check_runs.append(run)
            return 201, run, {}
        if path == f"/repos/{self.repo}/issues" and method == "GET":
            items = [i for n, i in sorted(self.issues.items()) if i["state"] == query.get("state", ["open"])[0]
                     and all(lab in [x["name"] for x in i["labels"]]
                             for lab in (query.get("labels", [""])[0].split(",") if query.get("labels") else []))]
            per_page = min(int(query.get("per_page", ["30"])[0]), self.per_page_max)
            page = int(query.get("page", ["1"])[0])
            link = {}
            if page * per_page < len(items):
                q = "&".join(f"{k}={v[0]}" for k, v in query.items() if k != "page")
                link = {"Link": f'<{self.url}{path}?{q}&page={page + 1}>; rel="next"'}
            return 200, items[(page - 1) * per_page: page * per_page], link
        if path == f"/repos/{self.repo}/issues" and method == "POST":
            number = max(list(self.issues) + list(self.pulls) + [0]) + 1
            self.issues[number] = {"number": number, "title": body["title"], "body": body.get("body", ""),
                                   "state": "open", "user": dict(BOT),
                                   "labels": [{"name": x} for x in body.get("labels", [])]}
            return 201, self.issues[number], {}
        m = re.fullmatch(rf"/repos/{repo}/issues/(\d+)", path)
        if m and method == "PATCH":
            issue = self.issues.get(int(m.group(1)))
            if issue is None:
                return 404, {"message": "Not Found"}, {}
            issue.update({k: v for k, v in body.items() if k in ("title", "body", "state", "state_reason")})
            return 200, issue, {}
        m = re.fullmatch(rf"/repos/{repo}/pulls/(\d+)", path)
        if m and method == "GET":
            pr = self.pulls.get(int(m.group(1)))
            return (200, pr, {}) if pr else (404, {"message": "Not Found"}, {})
        return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, {}
