"""manex.py: extracts the examples of a man page so the tests can run them.

An example is a `.EX` ... `.EE` block. Inside, a line starting with "$ " is a
command (a trailing backslash continues it on the next line, as in the shell,
so a long command can be broken anywhere between words); the lines after
it, up to the next command or the end of the block, are its expected standard
output, exactly. Troff escapes are undone (\\- -> -, \\e -> \\, \\(aq -> ')."""
import json
import re
import sys


def unescape(line):
    line = line.replace("\\-", "-").replace("\\(aq", "'").replace("\\(dq", '"')
    line = line.replace("\\e", "\\").replace("\\&", "")
    return line


def examples(text):
    out, inside, cur = [], False, None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        i += 1
        if raw.startswith(".EX"):
            inside, cur = True, None
            continue
        if raw.startswith(".EE"):
            inside, cur = False, None
            continue
        if not inside or raw.startswith('.\\"'):
            continue
        line = unescape(raw)
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i < len(lines):
                cmd = cmd + "\n" + unescape(lines[i])
                i += 1
            cur = {"cmd": cmd, "out": []}
            out.append(cur)
        elif cur is not None:
            cur["out"].append(line)
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        for n, ex in enumerate(examples(open(path, encoding="utf-8").read())):
            print(json.dumps({"page": path, "n": n, "cmd": ex["cmd"], "out": ex["out"]}))
