#!/usr/bin/env python3
"""The report in a real browser (issue 29): renders a trace with `kiln report`, loads the pages
in headless Chromium and checks, from the DOM after the page's script ran (--dump-dom):
  - the script ran (body data-js="ready") and recorded no error (#js-errors is empty);
  - clicking a graph node (page.html?click=ID dispatches a real click on the SVG node)
    highlights exactly the generated lines the trace's provenance gives for it, and the node;
  - clicking a generated line (?click=L<n>) highlights the nodes that line computes;
  - on the AOT page, clicking a saved tensor highlights it in forward and backward;
  - a page whose script fails does show the error (so the no-error check can fail).
Saves one screenshot per page kind (index, graph, aot) in --shots.
Exit 77 (CTest: skipped) with the reason when chromium is absent."""
import argparse, glob, json, os, re, shutil, subprocess, sys, tempfile
from html.parser import HTMLParser


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Dom(HTMLParser):
    """The elements of a dumped DOM that the checks read."""
    def __init__(self):
        super().__init__()
        self.body = {}
        self.errors = []  # text of <li> under #js-errors
        self.hl_lines, self.hl_nodes, self.hl_rows = set(), set(), []
        self.stack = []
        self.in_errors = False
        self.line_nodes = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "body":
            self.body = a
        if a.get("id") == "js-errors":
            self.in_errors = True
        if self.in_errors and tag == "li":
            self.errors.append("")
        if tag == "span" and "ln" in classes:
            n = int(a["data-n"])
            self.line_nodes[n] = set((a.get("data-nodes") or "").split())
            if "hl" in classes:
                self.hl_lines.add(n)
        if tag == "g" and "data-node" in a and "hl" in classes:
            self.hl_nodes.add(a["data-node"])
        if tag == "tr" and "hl" in classes:
            self.hl_rows.append(a.get("data-node") or a.get("data-nodes"))

    def handle_endtag(self, tag):
        if tag == "ul" and self.in_errors:
            self.in_errors = False

    def handle_data(self, data):
        if self.in_errors and self.errors:
            self.errors[-1] += data


class Browser:
    def __init__(self, chromium, profile):
        self.chromium, self.profile = chromium, profile

    def run(self, args, url):
        cmd = [self.chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
               "--user-data-dir=" + self.profile, "--window-size=1400,1000"] + args + [url]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            sys.exit("report_browser: chromium failed on %s:\n%s" % (url, p.stderr[-2000:]))
        return p.stdout

    def dom(self, url):
        d = Dom()
        d.feed(self.run(["--dump-dom"], url))
        return d

    def screenshot(self, url, path):
        self.run(["--screenshot=" + path], url)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            sys.exit("report_browser: no screenshot written for " + url)


failures = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def page_name(prefix, graph):
    return prefix + re.sub(r"[^A-Za-z0-9]", "_", str(graph)) + ".html"


def expand(ranges):
    return {l for a, b in ranges for l in range(a, b + 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--trace", help="a trace folder to render")
    ap.add_argument("--lesson", action="append", default=[],
                    help="a lesson binary to run with KILN_TRACE (repeatable); the trace of all is rendered")
    ap.add_argument("--out", required=True)
    ap.add_argument("--shots", required=True)
    opts = ap.parse_args()
    chromium = find_chromium()
    if not chromium:
        print("report_browser: SKIPPED: no chromium on PATH (Debian: apt-get install chromium; `make test-deps` installs it)")
        return 77
    shutil.rmtree(opts.out, ignore_errors=True)
    os.makedirs(opts.shots, exist_ok=True)
    trace = opts.trace
    if opts.lesson:
        trace = os.path.join(opts.out, "trace")
        os.makedirs(trace)
        env = dict(os.environ, KILN_TRACE=trace)
        for lesson in opts.lesson:
            subprocess.run([lesson], env=env, check=True, stdout=subprocess.DEVNULL)
    files = sorted(glob.glob(os.path.join(trace, "trace_*.jsonl")))
    check(len(files) >= 1, "the trace folder %s holds a trace_*.jsonl" % trace)
    if not files:
        return 1
    site = os.path.join(opts.out, "site")
    subprocess.run([opts.kiln, "report", trace, "-o", site], check=True)
    # The first generated source with provenance and the first AOT graph with saved tensors,
    # in whichever process's log; pages of process k are prefixed runK_ when there are several.
    source = aot = None
    for k, f in enumerate(files):
        prefix = "" if len(files) == 1 else "run%d_" % (k + 1)
        for e in (json.loads(l) for l in open(f) if l.strip()):
            if source is None and e["ev"] == "source" and e.get("provenance"):
                source = dict(e, prefix=prefix)
            if aot is None and e["ev"] == "aot" and e.get("saved"):
                aot = dict(e, prefix=prefix)
    check(source is not None, "the trace has generated source with provenance")
    if source is None:
        return 1
    browser = Browser(chromium, tempfile.mkdtemp(prefix="kiln-chromium-"))
    url = lambda page, q="": "file://" + os.path.abspath(os.path.join(site, page)) + q

    index = browser.dom(url("index.html"))
    check(index.body.get("data-js") == "ready", "index.html: the script ran")
    check(index.errors == [], "index.html: no script errors %s" % index.errors)
    browser.screenshot(url("index.html"), os.path.join(opts.shots, "index.png"))

    # Graph page: click the node with the most generated lines, then one of another node's lines.
    graph_page = page_name(source["prefix"] + "graph_", source["graph"])
    prov = max(source["provenance"], key=lambda p: len(expand(p["lines"])))
    node, lines = prov["node"], expand(prov["lines"])
    dom = browser.dom(url(graph_page, "?click=" + node))
    check(dom.body.get("data-js") == "ready", graph_page + ": the script ran")
    check(dom.errors == [], graph_page + ": no script errors %s" % dom.errors)
    check(dom.body.get("data-selected") == node, graph_page + ": clicking %s selects it" % node)
    check(dom.hl_lines == lines, graph_page + ": clicking node %s highlights lines %s (highlighted: %s)"
          % (node, sorted(lines), sorted(dom.hl_lines)))
    check(node in dom.hl_nodes, graph_page + ": the clicked node %s is highlighted in the graph" % node)
    other = next((p for p in source["provenance"] if p["node"] != node), None)
    if other:
        line = min(expand(other["lines"]))
        back = browser.dom(url(graph_page, "?click=L%d" % line))
        owners = back.line_nodes.get(line, set())
        check(other["node"] in owners, graph_page + ": line %d names node %s" % (line, other["node"]))
        check(back.hl_nodes == owners, graph_page + ": clicking line %d highlights nodes %s in the graph (highlighted: %s)"
              % (line, sorted(owners), sorted(back.hl_nodes)))
    browser.screenshot(url(graph_page, "?click=" + node), os.path.join(opts.shots, "graph.png"))

    broken = browser.dom(url(graph_page, "?click=no_such_node"))
    check(len(broken.errors) == 1 and "no_such_node" in broken.errors[0],
          graph_page + "?click=no_such_node: the page shows its script error (%s)" % broken.errors)

    if aot:
        # A saved tensor links its forward output, backward input and joint node (ids carry
        # their graph's prefix on the AOT page): clicking the forward one highlights all three.
        aot_page = page_name(aot["prefix"] + "aot_", aot["graph"])
        linked = {"fw:" + aot["forward_saved"][0], "bw:" + aot["backward_saved"][0], "joint:" + aot["saved"][0]["id"]}
        click = "fw:" + aot["forward_saved"][0]
        a = browser.dom(url(aot_page, "?click=" + click))
        check(a.errors == [] and a.body.get("data-js") == "ready", aot_page + ": the script ran without errors %s" % a.errors)
        check(linked <= a.hl_nodes, aot_page + ": clicking saved tensor %s highlights %s (highlighted: %s)" % (click, sorted(linked), sorted(a.hl_nodes)))
        check(len(a.hl_rows) == 1, aot_page + ": and its row in the saved-tensor table")
        browser.screenshot(url(aot_page, "?click=" + click), os.path.join(opts.shots, "aot.png"))
    else:
        print("note: the trace has no AOT graph with saved tensors: no aot page to check")
    print("report_browser: %d failures; screenshots in %s" % (len(failures), opts.shots))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
