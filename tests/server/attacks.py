#!/usr/bin/env python3
"""The hostile requests of the review of zinc serve, each as an attack with a measure of the harm it does.

    attacks.py --binary build/zinc --model M.gguf    start a zinc serve of its own (the ctest test)
    attacks.py --url http://127.0.0.1:8080 --pid P   attack a server already running (P: its process, for memory)

Every attack ends with GET /health, which must be answered within a second, so a server that died or wedged fails
the attack that did it. Prints a table of what each attack did and measured; the exit status is 1 when any did
harm. With --url it measures any server, which is how zinc's HTTP layers were compared (bench/results/).
"""
import argparse
import gzip
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse


class Target:
    def __init__(self, host, port, pid, judge_memory=True):
        self.host, self.port, self.pid = host, port, pid
        # AddressSanitizer's allocator keeps what is freed for a while: a sanitized server's memory is reported, not
        # judged.
        self.judge_memory = judge_memory

    def connect(self, timeout=10):
        return socket.create_connection((self.host, self.port), timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=30):
        """(status, headers, body) of one request, or (None, None, error text)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        except (OSError, http.client.HTTPException) as e:
            return None, None, str(e).encode()
        finally:
            c.close()

    def health_seconds(self, limit=20):
        """Seconds /health took to answer 200, or None when it did not within `limit`."""
        t0 = time.monotonic()
        status, _, _ = self.request("GET", "/health", timeout=limit)
        return time.monotonic() - t0 if status == 200 else None

    def memory(self):
        """(VmRSS, VmHWM) in MiB, or (None, None) without a process to read."""
        if not self.pid:
            return None, None
        try:
            with open(f"/proc/{self.pid}/status") as f:
                text = f.read()
        except OSError:
            return None, None
        kb = {k: int(v) for k, v in re.findall(r"(VmRSS|VmHWM):\s+(\d+) kB", text)}
        return kb.get("VmRSS", 0) / 1024, kb.get("VmHWM", 0) / 1024


def raw_exchange(t, data, read_seconds=15, send_pause=0.0):
    """Sends `data` (bytes, or a list of pieces) on a new connection and returns what came back before it closed."""
    s = t.connect()
    out = b""
    try:
        for piece in data if isinstance(data, list) else [data]:
            try:
                s.sendall(piece)
            except OSError:
                break  # the server answered and closed: what it said is read below
            if send_pause:
                time.sleep(send_pause)
        s.settimeout(1)
        until = time.monotonic() + read_seconds
        while time.monotonic() < until:
            try:
                got = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not got:
                break
            out += got
    finally:
        s.close()
    return out


def status_of(raw):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
    return int(m.group(1)) if m else None


def chat(content, extra=None):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 2, "temperature": 0}
    body.update(extra or {})
    return body


# --- the attacks: each returns (what it saw, harmless?) ---------------------------------------------------------

def deep_json(t):
    """Item 1: JSON nested 50,000 levels in a message's extra field, 20,000 in a tool's parameters."""
    seen, ok = [], True
    deep = "[" * 50000 + "]" * 50000
    body = '{"messages": [{"role": "user", "content": "hi", "extra": ' + deep + '}], "max_tokens": 2}'
    tools = ('{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tools": [{"type": "function", '
             '"function": {"name": "f", "parameters": ' + "[" * 20000 + "]" * 20000 + '}}]}')
    for path, text in (("/v1/chat/completions", body), ("/apply-template", body), ("/v1/chat/completions", tools)):
        status, _, _ = t.request("POST", path, text.encode())
        seen.append(f"{path} {status}")
        ok = ok and status == 400
    return ", ".join(seen), ok


def chunked_body(t):
    """Item 3: a chunked body of 32 MiB against the default 8 MiB limit."""
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"a" * (1 << 20)
    chunks = [head] + [b"%x\r\n" % len(piece) + piece + b"\r\n" for _ in range(32)] + [b"0\r\n\r\n"]
    before, _ = t.memory()
    t0 = time.monotonic()
    raw = raw_exchange(t, chunks, read_seconds=20)
    after, _ = t.memory()
    grew = f", RSS +{after - before:.0f} MiB" if before is not None else ""
    return f"{status_of(raw)} after {time.monotonic() - t0:.1f} s{grew}", status_of(raw) == 413


def gzip_bomb(t):
    """Item 3: 509 KiB of gzip that inflate to 512 MiB."""
    bomb = gzip.compress(b"\0" * (512 << 20), compresslevel=9)
    before, _ = t.memory()
    status, _, _ = t.request("POST", "/v1/completions", bomb, {"Content-Encoding": "gzip"}, timeout=60)
    after, peak = t.memory()
    grew = f", RSS +{after - before:.0f} MiB (peak {peak:.0f} MiB)" if before is not None else ""
    small = before is None or not t.judge_memory or after - before < 64
    return f"{len(bomb) >> 10} KiB sent, {status}{grew}", status in (413, 415) and small


def slow_and_idle(t):
    """Item 4: 200 idle connections and 40 that send their header a byte every 2 s, while /health is asked."""
    idle = [t.connect() for _ in range(200)]
    stop = threading.Event()
    slow = [t.connect() for _ in range(40)]

    def drip():
        line = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
        i = 0
        while not stop.is_set() and i < len(line):
            for s in slow:
                try:
                    s.send(line[i:i + 1])
                except OSError:
                    pass
            i += 1
            stop.wait(2)

    dripper = threading.Thread(target=drip)
    dripper.start()
    worst = 0.0
    answered = True
    try:
        for _ in range(12):
            took = t.health_seconds(limit=20)
            if took is None:
                answered = False
                break
            worst = max(worst, took)
            time.sleep(1)
    finally:
        stop.set()
        dripper.join()
        for s in idle + slow:
            s.close()
    if not answered:
        return "/health unanswered within 20 s", False
    return f"/health within {worst * 1000:.0f} ms (worst of 12, over 12 s)", worst < 1.0


def slow_header(t, limit=40):
    """Item 4: one client sending its header a byte a second: how long does it keep its connection?"""
    s = t.connect()
    t0 = time.monotonic()
    line = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
    closed = False
    s.settimeout(1)
    for i in range(len(line)):
        if time.monotonic() - t0 > limit:
            break
        try:
            s.send(line[i:i + 1])
            if s.recv(4096) == b"":
                closed = True
                break
        except socket.timeout:
            continue
        except OSError:
            closed = True
            break
    s.close()
    held = time.monotonic() - t0
    return (f"closed after {held:.1f} s" if closed else f"still open after {held:.0f} s"), closed and held < 30


def dns_rebinding(t):
    """Item 5: a page at a name its owner points at 127.0.0.1 calls the API: Host and Origin both that name."""
    name = f"evil.example:{t.port}"
    status, _, _ = t.request("POST", "/v1/chat/completions", json.dumps(chat("hi")).encode(),
                             {"Host": name, "Origin": "http://" + name})
    return f"{status}", status == 403


def ranges(t):
    """Item 6: 1,500 overlapping ranges of /app.js, each the whole file, in a 4.5 KB header."""
    status, _, page = t.request("GET", "/app.js")
    spec = "bytes=" + ",".join(["0-"] * 1500)
    st, _, body = t.request("GET", "/app.js", headers={"Range": spec})
    size = len(body) if st else 0
    return f"{st}, {size / 1024:.1f} KiB for a {len(page) / 1024:.1f} KiB file", st is not None and \
        size <= len(page) + 1024


def tokenize_memory(t):
    """Item 7: /tokenize of 4 MB of text, with the pieces."""
    words = ["hello", "world", "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "zinc", "token"]
    text = " ".join(words[(i * 7) % len(words)] for i in range(700000))[:4000000]
    before, _ = t.memory()
    status, _, body = t.request("POST", "/tokenize", json.dumps({"content": text, "with_pieces": True}).encode(),
                                timeout=120)
    after, peak = t.memory()
    if before is None:
        return f"{status}", status == 200
    small = not t.judge_memory or (peak - before < 400 and after - before < 100)
    return (f"{status}, {len(body) >> 20} MiB answer, RSS peak {peak:.0f} MiB, kept +{after - before:.0f} MiB",
            status == 200 and small)


def huge_numbers(t):
    """Item 9: numbers past a double."""
    seen, ok = [], True
    for field in ("temperature", "max_tokens", "seed"):
        text = json.dumps(chat("hi")).replace('"temperature": 0', f'"{field}": 1e400' if field != "temperature"
                                             else '"temperature": 1e400')
        status, _, body = t.request("POST", "/v1/chat/completions", text.encode())
        seen.append(f"{field} {status}")
        ok = ok and status == 400 and b"json.exception" not in body
    return ", ".join(seen), ok


def many_connections(t):
    """More connections than the server takes: the extra ones are closed, and it serves after they go."""
    socks = []
    for _ in range(600):
        try:
            socks.append(t.connect(timeout=5))
        except OSError:
            break
    took = t.health_seconds(limit=20)
    for s in socks:
        s.close()
    after = t.health_seconds(limit=20)
    during = f"{took * 1000:.0f} ms" if took is not None else "refused or closed"
    return f"{len(socks)} open: /health {during}; after: {after and f'{after * 1000:.0f} ms'}", after is not None


ATTACKS = [deep_json, chunked_body, gzip_bomb, slow_and_idle, slow_header, dns_rebinding, ranges, tokenize_memory,
           huge_numbers, many_connections]


def start_server(binary, model, extra):
    p = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "-t", "1"] + extra,
                         stderr=subprocess.PIPE, text=True)
    port = None
    for line in p.stderr:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "zinc: ready" in line:
            break
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    if port is None:
        p.kill()
        sys.exit("the server did not start")
    return p, port


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary")
    ap.add_argument("--model")
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--only", help="comma-separated attack names")
    ap.add_argument("--sanitized", action="store_true", help="the server runs under ASan: its memory is not judged")
    a = ap.parse_args()
    server = None
    if a.url:
        u = urllib.parse.urlparse(a.url)
        t = Target(u.hostname, u.port or 80, a.pid, not a.sanitized)
    else:
        server, port = start_server(a.binary, a.model, [])
        t = Target("127.0.0.1", port, server.pid, not a.sanitized)
    chosen = [f for f in ATTACKS if not a.only or f.__name__ in a.only.split(",")]
    harmed = 0
    print("| attack | what it saw | /health after | harmless |")
    print("|---|---|---:|---|")
    try:
        for attack in chosen:
            try:
                seen, ok = attack(t)
            except Exception as e:  # the attack itself failed: the server broke it off
                seen, ok = f"{type(e).__name__}: {e}", False
            took = t.health_seconds(limit=5)
            ok = ok and took is not None and took < 1.0
            harmed += not ok
            after = "no answer" if took is None else f"{took * 1000:.0f} ms"
            print(f"| {attack.__name__} | {seen} | {after} | {'yes' if ok else 'NO'} |", flush=True)
    finally:
        if server:
            server.terminate()
            server.wait(timeout=30)
    sys.exit(1 if harmed else 0)


if __name__ == "__main__":
    main()
