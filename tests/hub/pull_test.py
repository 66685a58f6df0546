#!/usr/bin/env python3
"""zinc pull, list, rm and -hf against a local hub (hub_server.py), each check on the real binary:

    pull_test.py --binary build/zinc --fixtures tests/fixtures

the quant a name picks (and the projector it does not), a split model, a transfer broken off and resumed, a
download resumed from an earlier run's .part, a wrong sha256, a file outside LFS, a listing in pages, a private
repository's token (and that it does not follow a redirect to another host), paths that would leave the cache,
`zinc run -hf` against `zinc run -m` on the same file, `zinc bench -hf`, list and rm, and then, the hub stopped, the cache used
offline and the error when nothing is cached. Prints one line a check and 'N passed, N failed'; exits 1 on a failure.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hub_server import TOKEN, Hub  # noqa: E402


class Context:
    def __init__(self, binary, fixtures, hub, work):
        self.binary, self.fixtures, self.hub, self.work = binary, fixtures, hub, work
        self.cache = os.path.join(work, "cache")
        self.env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_ENDPOINT", "ZINC_CACHE")}
        self.env.update(HF_ENDPOINT=f"http://127.0.0.1:{hub.server.server_address[1]}", ZINC_CACHE=self.cache)

    def zinc(self, *args, env=None, timeout=120):
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run([self.binary, *args], capture_output=True, text=True, env=e, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout, r.stderr

    def cached(self, repo, path):
        return os.path.join(self.cache, "models", repo, path)

    def fixture(self, rel):
        with open(os.path.join(self.fixtures, rel), "rb") as f:
            return f.read()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_ok(r, what):
    code, out, err = r
    expect(code == 0, f"{what}: exit {code}\nstdout: {out}\nstderr: {err}")
    return out, err


def generate(c, *model):
    """The text `zinc run` writes for a fixed prompt, greedy: the same model gives the same text."""
    out, _ = expect_ok(c.zinc("run", *model, "-p", "Hello there", "-n", "8", "--temp", "0", "-t", "1"),
                       f"zinc run {' '.join(model)}")
    return out


# --- The checks, in order: later ones use what earlier ones put in the cache.

def pull_default_quant(c):
    out, err = expect_ok(c.zinc("pull", "test/tiny"), "pull test/tiny")
    path = c.cached("test/tiny", "qwen3-q4_k_m.gguf")
    expect(out.strip() == path, f"pull prints the file's path, not {out!r}")
    expect(read(path) == c.hub.q4, "the Q4_K_M file in the cache is the hub's")
    expect(not c.hub.requests(r"mmproj"), "the projector (listed first, naming Q4_K_M) is never fetched")
    expect("100%" in err, f"the progress line ends at 100%: {err!r}")
    expect(not os.path.exists(path + ".part"), "no .part is left")


def pull_named_quant(c):
    before = len(c.hub.requests(r"/resolve/"))
    expect_ok(c.zinc("pull", "test/tiny:q8_0"), "pull test/tiny:q8_0")
    expect(read(c.cached("test/tiny", "qwen3-q8_0.gguf")) == c.hub.q8, "the Q8_0 file, whatever the tag's case")
    resolves = c.hub.requests(r"/resolve/")[before:]
    cdn = c.hub.requests(r"^/cdn/test/tiny/")
    expect(len(resolves) == 1 and cdn, "one request to resolve/main, redirected (302) to the CDN path")
    code, _, err = c.zinc("pull", "test/tiny:Q2_K")
    expect(code == 1 and "Q2_K" in err and "qwen3-q8_0.gguf" in err,
           f"a quant the repository lacks fails, listing its files: {err!r}")


def pull_again_uses_cache(c):
    before = len(c.hub.requests(r"/resolve/"))
    _, err = expect_ok(c.zinc("pull", "test/tiny:Q8_0"), "pull again")
    expect(len(c.hub.requests(r"/resolve/")) == before, "a file in the cache is not downloaded again")
    expect("in the cache" in err, f"pull says the file is in the cache: {err!r}")


def run_hf_matches_file(c):
    want = generate(c, "-m", os.path.join(c.fixtures, "qwen3/qwen3-q8_0.gguf"))
    got = generate(c, "-hf", "test/tiny:Q8_0")
    expect(want and got == want, f"zinc run -hf gives the text of the same file by -m: {got!r} vs {want!r}")
    out, _ = expect_ok(c.zinc("bench", "-hf", "test/tiny:Q8_0", "-p", "2", "-n", "0", "-r", "1", "-t", "1", "-o",
                              "json"), "zinc bench -hf")
    expect(json.loads(out)[0]["model_filename"] == "qwen3-q8_0.gguf", f"bench -hf measures the pulled file: {out!r}")


def run_hf_pulls_split(c):
    got = generate(c, "-hf", "test/split")  # pulled here, by -hf: the default pick falls to Q8_0
    for k in (1, 2):
        path = c.cached("test/split", f"qwen3-Q8_0-0000{k}-of-00002.gguf")
        expect(os.path.isfile(path), f"shard {k} of the split model is in the cache")
    want = generate(c, "-m", os.path.join(c.fixtures, "qwen3/qwen3-q8_0.gguf"))
    expect(got == want, f"the split model runs as the single file: {got!r} vs {want!r}")


def interrupted_transfer_resumes(c):
    out, err = expect_ok(c.zinc("pull", "test/cut"), "pull test/cut")
    gets = c.hub.requests(r"^/cdn/test/cut/")
    expect(len(gets) == 2, f"the broken transfer is retried once, not {len(gets)} times")
    half = len(c.hub.q8) // 2
    expect("range" not in gets[0][1], "the first request asks for the whole file")
    expect(gets[1][1].get("range") == f"bytes={half}-",
           f"the retry asks for the rest only: {gets[1][1].get('range')!r}")
    expect(read(out.strip()) == c.hub.q8, "the resumed file is the hub's, byte for byte")
    expect("retrying" in err, f"the retry is said: {err!r}")


def part_from_earlier_run_resumes(c):
    path = c.cached("test/tiny", "qwen3-q8_0.gguf")
    os.remove(path)
    with open(path + ".part", "wb") as f:
        f.write(c.hub.q8[:100000])
    code, out, _ = c.zinc("list")
    expect(code == 0 and "partial" in out, f"list shows the partial download: {out!r}")
    before = len(c.hub.requests(r"^/cdn/test/tiny/qwen3-q8_0"))
    _, err = expect_ok(c.zinc("pull", "test/tiny:Q8_0"), "pull over a .part")
    gets = c.hub.requests(r"^/cdn/test/tiny/qwen3-q8_0")[before:]
    expect(len(gets) == 1 and gets[0][1].get("range") == "bytes=100000-",
           f"the download resumes at the .part's end: {[g[1].get('range') for g in gets]}")
    expect(read(path) == c.hub.q8 and not os.path.exists(path + ".part"), "the resumed file is whole")
    expect("resuming" in err, f"the resume is said: {err!r}")


def wrong_sha256_deletes(c):
    code, _, err = c.zinc("pull", "test/badsum")
    expect(code == 1 and "sha256" in err and "deleted" in err, f"a wrong sha256 fails clearly: {err!r}")
    path = c.cached("test/badsum", "qwen3-q8_0.gguf")
    expect(not os.path.exists(path) and not os.path.exists(path + ".part"), "nothing of the bad file is kept")


def missing_file_fails(c):
    code, _, err = c.zinc("pull", "test/gone")
    expect(code == 1 and "HTTP 404" in err and "gone-Q8_0.gguf" in err, f"a file not found fails, named: {err!r}")
    expect(not os.path.exists(c.cached("test/gone", "gone-Q8_0.gguf.part")), "no empty .part is left")


def two_pulls_take_turns(c):
    e = dict(c.env)
    procs = [subprocess.Popen([c.binary, "pull", "test/slow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, env=e, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for out, err, code in results:
        expect(code == 0, f"both pulls succeed: {err!r}")
        expect(read(out.strip()) == c.hub.q8, "and give the whole file")
    gets = c.hub.requests(r"^/cdn/test/slow/")
    expect(len(gets) == 1, f"the file is downloaded once, the second pull waiting for the first: {len(gets)}")


def outside_lfs_checked_by_git_oid(c):
    expect_ok(c.zinc("pull", "test/plain"), "pull test/plain")
    expect(read(c.cached("test/plain", "plain-Q8_0.gguf")) == c.hub.q8, "a file outside LFS, checked by its oid")


def listing_in_pages(c):
    expect_ok(c.zinc("pull", "test/paged"), "pull test/paged")
    expect(len(c.hub.requests(r"/api/models/test/paged/tree/main\?.*cursor=2")) == 1, "the second page is read")
    expect(read(c.cached("test/paged", "sub/paged-Q8_0.gguf")) == c.hub.q8, "a file in a folder of the repository")


def private_needs_token(c):
    code, _, err = c.zinc("pull", "test/private")
    expect(code == 1 and "HF_TOKEN" in err, f"a refused listing names HF_TOKEN: {err!r}")
    expect_ok(c.zinc("pull", "test/private", env={"HF_TOKEN": TOKEN}), "pull test/private with HF_TOKEN")
    api = c.hub.requests(r"^/api/models/test/private/")
    cdn = c.hub.requests(r"^/cdn/test/private/")
    expect(api[-1][1].get("authorization") == f"Bearer {TOKEN}", "the token is sent to the hub as a bearer token")
    expect(cdn and "authorization" not in cdn[-1][1], "the token does not follow a redirect to another host")
    code, _, err = c.zinc("pull", "test/private", env={"HF_TOKEN": TOKEN + "\r\nX-Injected: 1"})
    expect(code == 1 and "HF_TOKEN" in err, f"a token that would add a header line is refused: {err!r}")
    expect(not any("x-injected" in h for _, h in c.hub.log), "no header was injected")


def unsafe_paths_refused(c):
    code, _, err = c.zinc("pull", "test/evil")
    expect(code == 1 and "left out" in err, f"paths leaving the repository are left out: {err!r}")
    expect(not c.hub.requests(r"evil/resolve|/cdn/test/evil"), "no file is fetched")
    for name in ("escape-Q8_0.gguf", "up-Q8_0.gguf"):
        for where in (c.work, os.path.join(c.cache, "models"), os.path.join(c.cache, "models", "test")):
            expect(not os.path.exists(os.path.join(where, name)), f"nothing written at {where}/{name}")


def bad_names_refused(c):
    for name in ("../x", "a/b/c", "a", "a/b:Q4 K", "a/-b", "a/..", "a/b:"):
        code, _, err = c.zinc("pull", name)
        expect(code == 2 and "not a model name" in err, f"{name!r} is refused as a usage error: {err!r}")
    code, _, err = c.zinc("run", "-p", "x")
    expect(code == 2 and "-hf" in err, f"run without -m or -hf says it needs one: {err!r}")
    code, _, err = c.zinc("run", "-m", "x.gguf", "-hf", "a/b", "-p", "x")
    expect(code == 2, f"-m and -hf together are refused: {err!r}")
    for endpoint in ("ftp://127.0.0.1", "http://a b", "127.0.0.1:80", "http://host/path"):
        code, _, err = c.zinc("pull", "a/b", env={"HF_ENDPOINT": endpoint})
        expect(code == 1 and "HF_ENDPOINT" in err, f"HF_ENDPOINT {endpoint!r} is refused: {err!r}")


def list_and_rm(c):
    out, _ = expect_ok(c.zinc("list"), "list")
    for name in ("test/tiny:Q4_K_M", "test/tiny:Q8_0", "test/split:Q8_0", "test/cut:Q8_0"):
        expect(name in out, f"list shows {name}: {out!r}")
    expect("2 of 2 files" in out, f"list counts the split model's files: {out!r}")
    _, err = expect_ok(c.zinc("rm", "test/tiny:Q8_0"), "rm test/tiny:Q8_0")
    expect(not os.path.exists(c.cached("test/tiny", "qwen3-q8_0.gguf")), "rm with a quant removes its file")
    expect(os.path.exists(c.cached("test/tiny", "qwen3-q4_k_m.gguf")), "and keeps the others")
    code, _, err = c.zinc("rm", "test/tiny:Q8_0")
    expect(code == 1 and "not in the cache" in err, f"rm of what is not cached fails: {err!r}")
    expect_ok(c.zinc("rm", "test/plain"), "rm test/plain")
    expect(not os.path.exists(os.path.join(c.cache, "models", "test", "plain")), "rm of a repository removes it")
    out, _ = expect_ok(c.zinc("list"), "list")
    expect("test/plain" not in out and "test/tiny:Q8_0" not in out, f"list no longer shows them: {out!r}")


def offline_uses_cache(c):
    c.hub.stop()
    got = generate(c, "-hf", "test/split")
    want = generate(c, "-m", os.path.join(c.fixtures, "qwen3/qwen3-q8_0.gguf"))
    expect(got == want, "the cached split model runs without the hub")
    code, out, err = c.zinc("pull", "test/cut")
    expect(code == 0 and out.strip() == c.cached("test/cut", "qwen3-q8_0.gguf") and "from the cache" in err,
           f"pull without the hub answers from the cache, saying so: {err!r}")


def offline_nothing_cached(c):
    code, _, err = c.zinc("pull", "test/tiny:Q8_0")  # removed by rm above
    expect(code == 1 and "cannot reach" in err and "lacks" in err, f"no hub, file not cached: {err!r}")
    code, _, err = c.zinc("run", "-hf", "test/never", "-p", "x")
    expect(code == 1 and "cannot reach" in err and "not in the cache" in err,
           f"no hub, nothing cached: a clear error: {err!r}")


CHECKS = [pull_default_quant, pull_named_quant, pull_again_uses_cache, run_hf_matches_file, run_hf_pulls_split,
          interrupted_transfer_resumes, part_from_earlier_run_resumes, wrong_sha256_deletes, missing_file_fails,
          two_pulls_take_turns,
          outside_lfs_checked_by_git_oid, listing_in_pages, private_needs_token, unsafe_paths_refused,
          bad_names_refused, list_and_rm, offline_uses_cache, offline_nothing_cached]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--fixtures", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="zinc_hub_")
    try:
        hub = Hub(args.fixtures, work)  # a missing fixture fails here
        hub.start()
        c = Context(os.path.abspath(args.binary), os.path.abspath(args.fixtures), hub, work)
        passed = failed = 0
        for check in CHECKS:
            try:
                check(c)
                passed += 1
                print(f"ok    {check.__name__}", flush=True)
            except Exception:
                failed += 1
                print(f"FAIL  {check.__name__}\n{traceback.format_exc()}", flush=True)
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
