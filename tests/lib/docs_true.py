"""docs_true.py ROOT BIN [TREE]: the manual and the README (man/ and README.md
of ROOT) against the tools built in BIN and the files of TREE (default ROOT).

Prints "ok", or one line per thing untrue:
- an option in a tool's --help that its man page's OPTIONS section lacks, or
  the reverse (the options every tool shares are documented in tq(7) and named
  in one sentence of each page: they are left out of the comparison, and that
  sentence is checked instead);
- a tq-NAME in a man page or the README that is no tool;
- a command line in a man page or the README that gives a tool an option its
  --help does not list;
- a file of the tree that the README names and the tree does not have.
Man pages are read as man renders them (MANWIDTH wide enough that no line
breaks inside a command)."""
import glob
import os
import re
import subprocess
import sys

ROOT, BIN = sys.argv[1], sys.argv[2]
TREE = sys.argv[3] if len(sys.argv) > 3 else ROOT
TOOLS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(BIN, "tq-*")))
COMMON = {"--output", "--force", "--quiet", "--verbose", "--device", "--list-devices",
          "--threads", "--seed", "--progress", "--help", "--version"}
OPT = r"(?<![\w-])(--[a-z][a-z0-9-]*)"


def tags(lines, indent):
    """The options of the option lines: those that start (at indent) with a
    dash, up to the description after two spaces."""
    opts = set()
    for line in lines:
        if re.match(indent + "-", line):
            opts.update(re.findall(OPT, re.split(r"\s{2,}", line.strip())[0]))
    return opts


def help_opts(tool):
    out = subprocess.run([os.path.join(BIN, tool), "--help"], capture_output=True,
                         text=True).stdout
    return tags(out.splitlines(), r"^\s{2,}")


def render(page):
    env = dict(os.environ, MANWIDTH="250", MAN_KEEP_FORMATTING="")
    out = subprocess.run(["man", "-l", page], capture_output=True, text=True, env=env).stdout
    return out.replace("\u2010", "-").replace("\u2212", "-")


def sections(text):
    sec, out = None, {}
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Z /-]+$", line):
            sec = line.strip()
            continue
        out.setdefault(sec, []).append(line)
    return out


HELP = {t: help_opts(t) for t in TOOLS}
bad = []


def check_text(where, text):
    for name in sorted(set(re.findall(r"(?<![\w/.-])(tq-[a-z]+)(?![\w-])", text))):
        if name not in TOOLS and name != "tq-format":
            bad.append("%s names %s, which is no tool" % (where, name))
    for line in text.splitlines():
        for seg in re.split(r"\||;|&&|\$\(|`", line):
            toks = seg.split()
            for i, tok in enumerate(toks):
                if tok not in TOOLS:
                    continue
                if i and toks[i - 1] not in ("$", "time", "srun", "exec", "env", "xargs"):
                    break  # the tool named in prose, not run
                for o in toks[i + 1:]:
                    o = o.split("=")[0].rstrip(",.);:'\"")
                    if re.match(r"^--[a-z][a-z0-9-]*$", o) and o not in HELP[tok] | COMMON:
                        bad.append("%s: %s has no option %s: %s" % (where, tok, o, line.strip()[:100]))
                break


for tool in TOOLS:
    page = os.path.join(ROOT, "man", tool + ".1")
    if not os.path.exists(page):
        bad.append("%s has no man page" % tool)
        continue
    opts = sections(render(page)).get("OPTIONS", [])
    man = tags(opts, r"^ {7}") - COMMON
    own = HELP[tool] - COMMON
    for o in sorted(own - man):
        bad.append("%s --help lists %s, its man page's OPTIONS do not" % (tool, o))
    for o in sorted(man - own):
        bad.append("%s(1) OPTIONS lists %s, its --help does not" % (tool, o))
    if "tq(7)" not in " ".join(opts):
        bad.append("%s(1) OPTIONS does not send the reader to tq(7) for the common options" % tool)

for page in sorted(glob.glob(os.path.join(ROOT, "man", "*.[0-9]"))):
    check_text(os.path.basename(page), render(page))
readme = open(os.path.join(ROOT, "README.md")).read()
check_text("README.md", readme)
for path in sorted(set(re.findall(
        r"(?<![\w/.-])((?:samples|scripts|tests|man|lib|cmd|kernels)/[\w./*-]*\w)", readme))):
    if not glob.glob(os.path.join(TREE, path)) and not glob.glob(os.path.join(TREE, path) + "*"):
        bad.append("README.md names %s, which is not in the tree" % path)
print("\n".join(bad) or "ok")
