#!/usr/bin/env python3
"""Regenerate internal/argparse/options.go from sim/flags/*.json: the union of every release's long
options, sorted, wrapped at 95 columns. Run from the repository root."""
import glob
import json

ORDER = ["0_4_1", "0_4_2", "0_4_4", "0_4_7", "0_4_9_post1", "0_5_2", "0_5_3_post2", "0_5_4", "0_5_10", "2026-main"]
tables = {p.split("/")[-1][:-5]: json.load(open(p)) for p in glob.glob("sim/flags/*.json")}
names = sorted({n for t in tables.values() for f in t["flags"] for n in f["names"] if n.startswith("--")})
rels = ", ".join(
    "%s (%s@%s)" % (k if k == "2026-main" else tables[k]["release"], tables[k]["source"]["repo"], tables[k]["source"]["commit"][:12])
    for k in sorted(tables, key=lambda k: ORDER.index(k) if k in ORDER else len(ORDER))
)
lines, cur = [], ""
for n in names:
    if cur and len(cur) + 1 + len(n) > 95:
        lines.append(cur)
        cur = n
    else:
        cur = n if not cur else cur + " " + n
lines.append(cur)
out = (
    "// Code generated from sim/flags/*.json (the long options of SGLang's server_args.py in every\n"
    "// release sglangsim models: " + rels + "); DO NOT EDIT.\n\n"
    "package argparse\n\n"
    "// knownOptions are the long options of launch_server across the releases, one per field.\n"
    "const knownOptions = `\n" + "\n".join(lines) + "\n`\n"
)
open("internal/argparse/options.go", "w").write(out)
