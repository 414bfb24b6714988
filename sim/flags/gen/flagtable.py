#!/usr/bin/env python3
"""Extract SGLang's launch flag table from one release's server_args.py into sim/flags/<era>.json.

Usage: git --git-dir=MIRROR show COMMIT:python/sglang/srt/server_args.py |
       flagtable.py --release 0.4.4 --repo sgl-project/sglang --commit COMMIT --version-file "..." > sim/flags/0_4_4.json

It reads the source with Python's ast module (never imports it): every parser.add_argument call in
ServerArgs.add_cli_args, with the option strings, dest, type, default (ServerArgs.x resolved from the
dataclass field defaults), choices (literals, or module-level lists/dict keys), nargs, action.
Only for the releases whose server_args.py declares flags with add_argument (0.4.x to 0.5.x).
"""
import argparse
import ast
import json
import sys

STORE_TRUE_TYPES = {"store_true": "bool", "store_false": "bool"}

# ServerArgs.from_cli_args renames these argparse dests to the dataclass fields.
CLI_RENAMES = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
}


def literal(node, env):
    try:
        return ast.literal_eval(node)
    except Exception:
        pass
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ServerArgs":
        return env["fields"].get(node.attr, None)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys" and node.attr == "maxsize":
        return sys.maxsize
    if isinstance(node, ast.Name) and node.id in env["consts"]:
        return env["consts"][node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list" and node.args:
        v = literal(node.args[0], env)
        if isinstance(v, dict):
            return list(v.keys())
        return v
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys":
        v = literal(node.func.value, env)
        if isinstance(v, dict):
            return list(v.keys())
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = literal(node.left, env), literal(node.right, env)
        if isinstance(a, list) and isinstance(b, list):
            return a + b
    if isinstance(node, ast.List):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                v = literal(e.value, env)
                if not isinstance(v, list):
                    raise ValueError("unresolved")
                out += v
            else:
                out.append(literal(e, env))
        return out
    raise ValueError("unresolved %s" % ast.dump(node)[:80])


def type_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Lambda):
        return "lambda"
    return ast.dump(node)[:40]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", required=True)
    ap.add_argument("--prog", default="launch_server.py")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--version-file", required=True)
    a = ap.parse_args()
    tree = ast.parse(sys.stdin.read())
    env = {"fields": {}, "consts": {}}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                env["consts"][node.targets[0].id] = literal(node.value, env)
            except Exception:
                pass
    env["deprecated_raises"] = any(
        isinstance(n, ast.ClassDef) and n.name == "DeprecatedAction" and any(isinstance(x, ast.Raise) for x in ast.walk(n))
        for n in tree.body
    )
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            v = st.value
            if isinstance(v, ast.Call) and type_name(v.func) == "field":
                kw = {k.arg: k.value for k in v.keywords}
                v = kw.get("default")
                if v is None:
                    env["fields"][st.target.id] = None
                    continue
            try:
                env["fields"][st.target.id] = literal(v, env)
            except Exception:
                env["fields"][st.target.id] = None
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    flags, unresolved = [], []
    for call in ast.walk(fn):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        names = [literal(x, env) for x in call.args]
        kw = {k.arg: k.value for k in call.keywords}
        long_names = [n for n in names if n.startswith("--")]
        if not long_names:
            continue
        dest = literal(kw["dest"], env) if "dest" in kw else long_names[0][2:].replace("-", "_")
        dest = CLI_RENAMES.get(dest, dest)
        f = {"names": names, "dest": dest}
        action = literal(kw["action"], env) if "action" in kw and isinstance(kw["action"], ast.Constant) else (type_name(kw["action"]) if "action" in kw else None)
        if action == "DeprecatedAction":
            # nargs=0; its __call__ either raises ValueError(help) or only warns
            f["type"] = "deprecated_error" if env["deprecated_raises"] else "deprecated"
            action = None
        elif action in STORE_TRUE_TYPES:
            f["type"] = "bool"
        elif action == "BooleanOptionalAction":
            f["type"] = "boolopt"
        elif "type" in kw:
            f["type"] = type_name(kw["type"])
            if f["type"] == "bool":
                f["type"] = "pybool"  # type=bool: any non-empty string is True
        else:
            f["type"] = "str"
        try:
            f["default"] = literal(kw["default"], env) if "default" in kw else (False if f["type"] == "bool" else None)
        except ValueError:
            f["default"] = None
            unresolved.append(long_names[0] + " default")
        if "required" in kw and literal(kw["required"], env):
            f["required"] = True
        if "choices" in kw:
            try:
                f["choices"] = literal(kw["choices"], env)
            except ValueError:
                f["choices_unknown"] = True
                unresolved.append(long_names[0] + " choices")
        if "nargs" in kw:
            f["nargs"] = literal(kw["nargs"], env)
        if action not in (None, "store_true", "store_false", "BooleanOptionalAction", "store"):
            f["action"] = action
        flags.append(f)
    out = {
        "release": a.release,
        "prog": a.prog,
        "source": {"repo": a.repo, "path": "python/sglang/srt/server_args.py", "commit": a.commit, "version_file": a.version_file},
        "flags": flags,
        "excluded_fork_flags": [],
    }
    json.dump(out, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    for u in unresolved:
        print("flagtable: unresolved " + u, file=sys.stderr)


if __name__ == "__main__":
    main()
