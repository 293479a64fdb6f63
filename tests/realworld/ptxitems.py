"""Module-level structure of PTX text, enough to mutate real modules:
the text is cut into top-level items (header directives, declarations,
function definitions and prototypes, `.section` blocks, comments and blank
runs) whose concatenation is the original text, byte for byte.

Used by difffuzz.py. Bodies are not parsed; only comments are skipped when
counting braces and parentheses."""

import re

ITEM_KIND = re.compile(r"^\s*(?:\.(?:visible|weak|extern|common)\s+)*\.(entry|func|section|global|const|shared|"
                       r"local|version|target|address_size|file|alias|callprototype|tex|surf|samplerref|"
                       r"texref|surfref|pragma)\b")
NAME_AFTER_PARENS = re.compile(r"\.(?:entry|func)\s*(?:\([^)]*\)\s*)?([\w$.%]+)")
VAR_NAME = re.compile(r"([A-Za-z_$%][\w$.%]*)\s*(?:\[[^\]]*\]\s*)*(?:=|;)")


COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def without_comments(text):
    """text with each comment replaced by a space (line breaks kept)."""
    return COMMENT.sub(lambda m: " " + "\n" * m.group(0).count("\n"), text)


class Item:
    def __init__(self, text):
        self.text = text
        m = ITEM_KIND.match(without_comments(text))
        self.kind = m.group(1) if m else ("space" if not text.strip() else
                                          "comment" if text.lstrip().startswith(("//", "/*")) else "other")
        self.name = None
        self.is_definition = False
        if self.kind in ("entry", "func"):
            head = without_comments(text).split("{", 1)[0]
            n = NAME_AFTER_PARENS.search(head)
            self.name = n.group(1) if n else None
            self.is_definition = "{" in text and not text.rstrip().endswith(";")
        elif self.kind in ("global", "const", "shared"):
            n = VAR_NAME.search(text.split("=", 1)[0] + (";" if "=" in text else ""))
            self.name = n.group(1) if n else None
            self.is_definition = not re.match(r"^\s*\.extern\b", text)

    def __repr__(self):
        return f"Item({self.kind}, {self.name})"


def split(text):
    """[Item] whose texts concatenate to `text`."""
    items, start, i, n = [], 0, 0, len(text)
    depth = 0
    body_done = False

    def flush(end):
        nonlocal start
        if end > start:
            items.append(Item(text[start:end]))
        start = end

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j + 1
            if depth == 0 and not text[start:i].strip():
                flush(i)
                i = j
                flush(i)
                continue
            i = j
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            if depth == 0 and not text[start:i].strip():
                flush(i)  # a comment between items is an item of its own
                i = j
                flush(i)
                continue
            i = j
            continue
        if c == '"':
            j = text.find('"', i + 1)
            i = n if j < 0 else j + 1
            continue
        if c in "{(":
            depth += 1
        elif c in "})":
            depth -= 1
            if depth == 0 and c == "}":
                head = without_comments(text[start:i])
                if re.match(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func|section)\b", head):
                    body_done = True
        elif c == ";" and depth == 0:
            i += 1
            flush(i)
            body_done = False
            continue
        elif c == "\n" and depth == 0:
            if body_done:
                i += 1
                flush(i)
                body_done = False
                continue
            seg = text[start:i + 1]
            if not seg.strip():
                i += 1
                flush(i)
                continue
            # directives without ';' (.version, .target, .address_size, .file)
            if re.match(r"^\s*\.(version|target|address_size|file)\b", seg):
                i += 1
                flush(i)
                continue
        i += 1
    flush(n)
    return items


def join(items):
    return "".join(it.text for it in items)


def body_span(item_text):
    """(start, end) of the text between a function's outermost braces."""
    depth, i, n = 0, 0, len(item_text)
    start = None
    while i < n:
        c = item_text[i]
        if item_text.startswith("//", i):
            j = item_text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if item_text.startswith("/*", i):
            j = item_text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "{" and depth == 0:
            if start is None:
                start = i + 1
            depth += 100
        elif c == "{":
            depth += 1
        elif c == "}":
            if depth == 100:
                return start, i
            depth -= 1
        i += 1
    return None


def references(text, name):
    return re.search(r"(?<![\w$.%])" + re.escape(name) + r"(?![\w$.%])", text) is not None


def rename(text, old, new):
    return re.sub(r"(?<![\w$.%])" + re.escape(old) + r"(?![\w$.%])", new, text)


# A decimal immediate, the last operand of an instruction: "add.s32 %r1,
# %r2, 7;". Hexadecimal and float operands (0x.., 0f..) do not match.
IMMEDIATE = re.compile(r"(,[ \t]*)(-?\d+)([ \t]*;)")


def immediate_sites(text):
    """(start, end) of each immediate in a function body that an edit may
    change: not in a comment, not in a directive (.reg, .loc, .pragma)."""
    span = body_span(text)
    if not span:
        return []
    sites = []
    for m in IMMEDIATE.finditer(text, span[0], span[1]):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if "//" not in line and "/*" not in line and not line.lstrip().startswith("."):
            sites.append(m.span(2))
    return sites


def bumped(text, span, limit=(1 << 31) - 2):
    """text with the number at span one larger (one smaller at the limit)."""
    v = int(text[span[0]:span[1]])
    return text[:span[0]] + str(v + 1 if v < limit else v - 1) + text[span[1]:], v
