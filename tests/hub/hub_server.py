#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub, answering as the hub does for a few repositories of fixture files:

    GET /api/models/{owner}/{repo}/tree/main?recursive=true   the file list (path, size, oid, lfs {oid, size})
    GET /{owner}/{repo}/resolve/main/{path}                    302 to the file on the "CDN"
    GET /cdn/{owner}/{repo}/{path}                             the bytes, with Range requests answered 206

Repositories (`Hub.repos`): test/tiny (two quants, a projector listed first, a README), test/split (a model in two
shards), test/cut (the first transfer of its file breaks off half-way), test/badsum (a wrong sha256 listed),
test/private (needs a bearer token; its redirect goes to another host name), test/evil (paths that leave the
folder), test/paged (its list in two pages, linked as the hub links them), test/plain (a file outside LFS),
test/gone (a listed file whose download is not found), test/slow (its file sent in pieces over a second). Every request is logged in `Hub.log`.

    hub_server.py --fixtures tests/fixtures [--port N]   serve until stopped (to try zinc by hand)
"""
import argparse
import hashlib
import http.server
import json
import os
import re
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_split  # noqa: E402

TOKEN = "secret-token"


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class File:
    def __init__(self, path, data, lfs=True, listed_sha256=None, gone=False):
        self.path, self.data, self.lfs, self.gone = path, data, lfs, gone
        self.sha256 = listed_sha256 or hashlib.sha256(data).hexdigest()

    def entry(self):
        e = {"type": "file", "oid": git_blob_sha1(self.data), "size": len(self.data), "path": self.path}
        if self.lfs:
            e["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": 134}
        return e


class Hub:
    def __init__(self, fixtures, workdir):
        def read(rel):
            path = os.path.join(fixtures, rel)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"fixture {path} is missing")
            with open(path, "rb") as f:
                return f.read()

        q8, q4 = read("qwen3/qwen3-q8_0.gguf"), read("qwen3/qwen3-q4_k_m.gguf")
        shards = gguf_split.split(os.path.join(fixtures, "qwen3/qwen3-q8_0.gguf"),
                                  os.path.join(workdir, "qwen3-Q8_0"), 2)
        self.q8, self.q4 = q8, q4
        self.repos = {
            "test/tiny": [
                File("mmproj-qwen3-Q4_K_M.gguf", b"a projector, never a model"),
                File("README.md", b"# tiny\n", lfs=False),
                File("qwen3-q8_0.gguf", q8),
                File("qwen3-q4_k_m.gguf", q4),
            ],
            "test/split": [File(os.path.basename(p), open(p, "rb").read()) for p in shards],
            "test/cut": [File("qwen3-q8_0.gguf", q8)],
            "test/badsum": [File("qwen3-q8_0.gguf", q8, listed_sha256=hashlib.sha256(b"other").hexdigest())],
            "test/private": [File("qwen3-q8_0.gguf", q8)],
            "test/evil": [File("../escape-Q8_0.gguf", q8), File("a/../../up-Q8_0.gguf", q8),
                          File("/abs-Q8_0.gguf", q8), File("c:\\win-Q8_0.gguf", q8)],
            "test/paged": [File("README.md", b"# paged\n", lfs=False), File("sub/paged-Q8_0.gguf", q8)],
            "test/plain": [File("plain-Q8_0.gguf", q8, lfs=False)],  # outside LFS: checked by its git oid
            "test/gone": [File("gone-Q8_0.gguf", q8, gone=True)],  # listed, but its download is not found
            "test/slow": [File("slow-Q8_0.gguf", q8)],  # sent in pieces over about a second
        }
        self.cut_done = set()  # files whose one broken transfer has happened
        self.log = []          # (path, headers) of every request
        self.lock = threading.Lock()
        self.server = None

    def start(self, port=0):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with hub.lock:
                    hub.log.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                try:
                    hub.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def requests(self, pattern):
        """The logged requests whose path matches `pattern`, as (path, headers)."""
        with self.lock:
            return [(p, h) for p, h in self.log if re.search(pattern, p)]

    def find(self, repo, path):
        for f in self.repos.get(repo, []):
            if f.path == path:
                return f
        return None

    @staticmethod
    def send(h, status, body=b"", headers=()):
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def send_json(self, h, status, value, headers=()):
        self.send(h, status, json.dumps(value).encode(), [("Content-Type", "application/json")] + list(headers))

    def authorised(self, h, repo):
        return repo != "test/private" or h.headers.get("Authorization") == f"Bearer {TOKEN}"

    def answer(self, h):
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/main", path)
        if m:
            return self.answer_tree(h, m.group(1), urllib.parse.parse_qs(url.query))
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/main/(.+)", path)
        if m:
            repo, file = m.groups()
            if not self.authorised(h, repo):
                return self.send_json(h, 401, {"error": "Invalid credentials in Authorization header"})
            f = self.find(repo, file)
            if not f or f.gone:
                return self.send_json(h, 404, {"error": "Entry not found"})
            where = "/cdn/" + repo + "/" + urllib.parse.quote(file)
            if repo == "test/private":  # another host name: the token must not follow the redirect
                where = f"http://localhost:{self.server.server_address[1]}{where}"
            return self.send(h, 302, b"", [("Location", where)])
        m = re.fullmatch(r"/cdn/([^/]+/[^/]+)/(.+)", path)
        if m:
            return self.answer_file(h, *m.groups())
        return self.send_json(h, 404, {"error": "Repository not found"})

    def answer_tree(self, h, repo, query):
        if repo not in self.repos:
            return self.send_json(h, 404, {"error": "Repository not found"})
        if not self.authorised(h, repo):
            return self.send_json(h, 401, {"error": "Invalid credentials in Authorization header"})
        entries = [{"type": "directory", "oid": "0" * 40, "size": 0, "path": "sub"}]
        entries += [f.entry() for f in self.repos[repo]]
        if repo == "test/paged":
            if query.get("cursor") == ["2"]:
                return self.send_json(h, 200, entries[2:])
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            link = f'<{base}/api/models/{repo}/tree/main?recursive=true&cursor=2>; rel="next"'
            return self.send_json(h, 200, entries[:2], [("Link", link)])
        return self.send_json(h, 200, entries)

    def answer_file(self, h, repo, path):
        f = self.find(repo, path)
        if f is None:
            return self.send_json(h, 404, {"error": "Entry not found"})
        data, start = f.data, 0
        rng = h.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
            if not m or int(m.group(1)) >= len(data):
                return self.send(h, 416, b"", [("Content-Range", f"bytes */{len(data)}")])
            start = int(m.group(1))
            end = int(m.group(2)) + 1 if m.group(2) else len(data)
            body = data[start:end]
            headers = [("Content-Range", f"bytes {start}-{start + len(body) - 1}/{len(data)}")]
            status = 206
        else:
            body, headers, status = data, [], 200
        headers += [("Accept-Ranges", "bytes"), ("ETag", f'"{f.sha256}"')]
        key = (repo, path)
        if repo == "test/cut" and key not in self.cut_done:
            # The whole length announced, half of it sent, the connection closed: an interrupted transfer.
            self.cut_done.add(key)
            h.send_response(status)
            for k, v in headers:
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body[:len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            return
        if repo == "test/slow":
            h.send_response(status)
            for k, v in headers:
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            piece = len(body) // 20 + 1
            for at in range(0, len(body), piece):
                h.wfile.write(body[at:at + piece])
                h.wfile.flush()
                time.sleep(0.05)
            return
        self.send(h, status, body, headers)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--port", type=int, default=8089)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        hub = Hub(args.fixtures, work)
        port = hub.start(args.port)
        print(f"HF_ENDPOINT=http://127.0.0.1:{port}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            hub.stop()


if __name__ == "__main__":
    main()
