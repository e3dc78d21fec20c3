#!/usr/bin/python3
"""Reference side of `flexiforce path bench`: k shortest simple paths with networkx.

Reads a FlexiForce topology JSON and a queries JSON ({"k": K, "queries": [[src, dst], ...]}),
runs networkx.shortest_simple_paths weighted by latency_us, and prints JSON with per-query
paths, costs and wall time. Run with Debian's /usr/bin/python3 (python3-networkx).
"""
import itertools
import json
import sys
import time

import networkx as nx


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_networkx.py TOPOLOGY.json QUERIES.json")
    with open(sys.argv[1]) as f:
        topo = json.load(f)
    with open(sys.argv[2]) as f:
        req = json.load(f)
    t0 = time.perf_counter()
    g = nx.Graph()
    for link in topo["links"]:
        g.add_edge(link["a"], link["b"], latency_us=float(link.get("latency_us", 1.0)))
    build_s = time.perf_counter() - t0
    k = int(req["k"])
    out = []
    for src, dst in req["queries"]:
        t = time.perf_counter()
        paths = list(itertools.islice(nx.shortest_simple_paths(g, src, dst, weight="latency_us"), k))
        elapsed = time.perf_counter() - t
        costs = []
        for p in paths:
            c = 0.0
            for a, b in zip(p, p[1:]):
                c += g[a][b]["latency_us"]
            costs.append(c)
        out.append({"src": src, "dst": dst, "seconds": elapsed, "paths": paths, "costs": costs})
    json.dump({"networkx": nx.__version__, "build_seconds": build_s, "results": out}, sys.stdout)


if __name__ == "__main__":
    main()
