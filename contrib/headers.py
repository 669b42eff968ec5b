#!/usr/bin/python3
"""Every public function says what it does and what it returns (issue 13,
lmdb.h's way): reads the headers, finds every function prototype, every
static inline function and every function-pointer member of a struct (the
ops tables), and prints one line for each that

  - has no comment immediately before it (ending on the line above) or on
    one of its own lines ("no comment"), or
  - returns something (not void) and whose comment does not say what:
    none of "return", "0 or", "-errno", "true if", "false", "NULL"
    ("comment does not say what it returns").

It also reports a header that does not open with a comment (what module
it is the interface of).  A divider (/* ---- x.c ---- */) is not a comment
of the declaration under it.

    contrib/headers.py [ROOT]       (default: the tree this script is in)

Exits 1 if it printed anything.  tests/test_headers.py runs it."""
import pathlib
import re
import sys

RETURN_WORDS = ("return", "0 or", "-errno", "true if", "false", "null")
DIVIDER = re.compile(r"^/\*\s*-{3,}")
# ret name(args) [attributes]  --  ret may hold *, qualifiers, struct/enum
FUNC = re.compile(r"^(?P<ret>[A-Za-z_][\w\s\*]*?[\s\*])(?P<name>[A-Za-z_]\w*)\s*\("
                  r"(?P<args>.*)\)\s*(?:__attribute__\s*\(\(.*\)\))?\s*$", re.S)
# ret (*name)(args)
FPTR = re.compile(r"^(?P<ret>[A-Za-z_][\w\s\*]*?)\(\s*\*\s*(?P<name>[A-Za-z_]\w*)\s*\)\s*\(", re.S)


def headers(root):
    root = pathlib.Path(root)
    # the public headers and every folder's private one (src/cache/cache_i.h, ...)
    return sorted(root.glob("include/tierfs/*.h")) + sorted(root.glob("src/*/*_i.h"))


def scan(text):
    """Split a header into comments [(first line, last line, text, trailing)] and
    statements [(kind, first line, last line, text, depth, ctx)], where kind
    is ';' or '{' (the character that ended it), depth the brace depth it is
    at and ctx what the innermost brace opened ('struct' or 'body')."""
    comments, stmts = [], []
    i, line, n = 0, 1, len(text)
    cur, cur_line = [], None
    stack = []
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            at_line_start = True
            cur.append(" ")
            i += 1
            continue
        if at_line_start and c == "#":
            # preprocessor line, with continuations
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                if text[i] == "\n":
                    line += 1
                i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("/*", i):
            j = text.index("*/", i + 2) + 2
            body = text[i:j]
            lead = text[text.rfind("\n", 0, i) + 1:i]
            # a comment after code on its line belongs to that code
            comments.append((line, line + body.count("\n"), body, bool(lead.strip())))
            line += body.count("\n")
            i = j
            cur.append(" ")
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            lead = text[text.rfind("\n", 0, i) + 1:i]
            comments.append((line, line, text[i:j], bool(lead.strip())))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            if cur_line is None:
                cur_line = line
            i = j + 1
            continue
        if c in ";{}":
            s = "".join(cur).strip()
            ctx = stack[-1] if stack else None
            if c == "{":
                stmts.append(("{", cur_line or line, line, s, len(stack), ctx))
                is_aggr = re.match(r"^(typedef\s+)?(struct|union|enum)\b", s) or \
                    re.search(r"=\s*$", s) or (ctx == "struct" and not FUNC.match(s))
                stack.append("struct" if is_aggr else "body")
            elif c == ";":
                if s:
                    stmts.append((";", cur_line or line, line, s, len(stack), ctx))
            else:
                if stack:
                    stack.pop()
            cur, cur_line = [], None
            i += 1
            continue
        if not c.isspace() and cur_line is None:
            cur_line = line
        cur.append(c)
        i += 1
    return comments, stmts


def declarations(text):
    """(name, first line, last line, returns a value) of every function
    declared or defined in a header, and every function-pointer member of
    a struct."""
    _, stmts = scan(text)
    out = []
    for kind, first, last, s, depth, ctx in stmts:
        if ctx == "body":
            continue
        s = re.sub(r"^(extern|static|inline|_Noreturn|const|\s)+(?=\w)", "", s) \
            if not s.startswith("typedef") else s
        if s.startswith("typedef"):
            continue
        m = FPTR.match(s) if ctx == "struct" else None
        if m is None and ctx is None:
            m = FUNC.match(s)
            if m and m.group("ret").strip() in ("return", "struct", "enum", "union"):
                m = None
        if not m:
            continue
        ret = m.group("ret")
        void = re.sub(r"\b(static|inline|extern|_Noreturn|const)\b", "", ret).strip() == "void"
        out.append((m.group("name"), first, last, not void))
    return out


def check_text(text):
    """[(line, name, problem)] for one header's text."""
    comments, _ = scan(text)
    probs = []
    if not text.lstrip().startswith("/*") or DIVIDER.match(text.lstrip()):
        probs.append((1, "-", "no opening comment"))
    docs = [c for c in comments if not DIVIDER.match(c[2])]
    for name, first, last, returns in declarations(text):
        said = [t for a, b, t, trail in docs
                if (b == first - 1 and not trail) or first <= a <= last]
        if not said:
            probs.append((first, name, "no comment"))
            continue
        words = " ".join(said).lower()
        if returns and not any(w in words for w in RETURN_WORDS):
            probs.append((first, name, "comment does not say what it returns"))
    return probs


def offenders(root):
    """{"file.h:name": problem} over every header (file relative to root)."""
    root = pathlib.Path(root)
    out = {}
    for h in headers(root):
        for line, name, prob in check_text(h.read_text()):
            out[f"{h.name}:{name}"] = f"{h.relative_to(root)}:{line}: {name}: {prob}"
    return out


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[1])
    got = offenders(root)
    def where(k):
        f, line = got[k].split(":")[:2]
        return f, int(line)
    for k in sorted(got, key=where):
        print(got[k])
    return 1 if got else 0


if __name__ == "__main__":
    sys.exit(main())
