"""The manual against the program: every command and option `taskcache
help` and `taskcache help COMMAND` list is documented in docs/cli.md and in
the man page (docs/taskcache.1), under that command, and every option
those document is one the help lists; the environment variables the help
names are in both tables. And the README is a front page: at most 250
lines, the two set-up commands, a link to every page of docs/, and no
link in it or in docs/ that leads nowhere.

Where options are read:
- the help: usage lines, and lines indented by two spaces that start
  with an option, up to the first gap of two spaces before a description
  (taskcache ptxas lists several options a line, two or more spaces
  apart);
- docs/cli.md: the first column of tables headed `option`, in the `##`
  section whose heading names the command (`taskcache build`);
- the man page: the tags of `.TP` paragraphs in the `.SS` section whose
  title names the command."""

import pathlib
import re
import shutil
import subprocess

import pytest

from tchelp import ROOT, tc

CLI_MD = ROOT / "docs" / "cli.md"
MAN = ROOT / "docs" / "taskcache.1"
README = ROOT / "README.md"

OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
ENV = re.compile(r"\b(TASKCACHE_[A-Z_]+)\b")
def options_in(spec):
    """The options named in an option spec such as '-O N, -ON' or
    '--fmad=true|false' (values after '=' and parenthesized words dropped)."""
    spec = re.sub(r"\(.*", "", spec)
    return {m.split("=")[0] for m in OPTION.findall(spec)}


def help_text(*args):
    p = tc("help", *args, check=False)
    return p.returncode, p.stdout


def help_commands():
    """{command: options on its line} from `taskcache help`."""
    rc, text = help_text()
    assert rc == 0
    commands = {}
    listing = False
    for line in text.splitlines():
        if line.strip() == "commands:":
            listing = True
            continue
        if listing and not line.strip():
            break
        m = re.match(r"  ([a-z][\w-]*)(.*)", line) if listing else None
        if m:
            first = re.split(r"\s{2,}", m[2].strip())[0]
            commands[m[1]] = options_in(first)
    return commands


def help_options(text):
    """The options a command's help lists (usage lines and option lines)."""
    found = set()
    usage = False
    for line in text.splitlines():
        if line.startswith("usage:"):
            usage = True
        elif not line.strip():
            usage = False
        if usage:
            found |= options_in(line)
            continue
        if re.match(r"  -", line):  # continuation lines are indented further
            for part in re.split(r"\s{2,}", line.strip()):
                if not part.startswith("-"):
                    break  # the description
                found |= options_in(part)
    return found


@pytest.fixture(scope="module")
def help_by_command():
    """{command: options} for every command `taskcache help` lists."""
    result = {}
    for cmd, on_line in help_commands().items():
        rc, text = help_text(cmd)
        if rc != 0:  # help and version have no page of their own
            assert cmd in ("help", "version"), f"taskcache help {cmd} failed"
            text = ""
        result[cmd] = on_line | help_options(text)
    return result


def help_environment():
    names = set()
    for cmd in [""] + list(help_commands()):
        rc, text = help_text(*([cmd] if cmd else []))
        names |= set(ENV.findall(text)) if rc == 0 else set()
    return names


def sections(text, heading):
    """{command: section text} for each section whose heading (a line that
    heading() recognizes, returning its title) names `taskcache CMD`."""
    out = {}
    current = []
    for line in text.splitlines():
        title = heading(line)
        if title is not None:
            current = re.findall(r"taskcache\s+([a-z][\w-]*)", title)
            for c in current:
                out.setdefault(c, "")
            continue
        for c in current:
            out[c] += line + "\n"
    return out


def cli_md_sections():
    def heading(line):
        return line[3:] if line.startswith("## ") else None
    return sections(CLI_MD.read_text(), heading)


def cli_md_options(section):
    """Options in the first column of the section's `option` tables."""
    found = set()
    in_table = False
    for line in section.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
        if not in_table:
            in_table = cells[0].lower() == "option"
            continue
        if set(cells[0]) <= set("-: "):
            continue
        found |= options_in(" ".join(re.findall(r"`([^`]+)`", cells[0].replace("\\|", "|"))))
    return found


def unroff(line):
    """A roff line as text: fonts and macros dropped, \\- a hyphen."""
    line = re.sub(r"\\f[BIRP]", "", line)
    line = line.replace("\\-", "-").replace("\\(bv", "|").replace("\\ ", " ")
    line = re.sub(r"^\.(B|I|BI|IB|BR|RB|IR|RI)\s+", "", line)
    return line.replace('"', "")


def man_sections():
    def heading(line):
        return unroff(line[4:]) if line.startswith(".SS ") else (
            "" if line.startswith(".SH ") else None)
    return sections(MAN.read_text(), heading)


def man_tags(text):
    """The tag lines of the .TP paragraphs of a stretch of the man page."""
    lines = text.splitlines()
    return [unroff(lines[i + 1]) for i, l in enumerate(lines[:-1]) if l.strip() == ".TP"]


def man_options(section):
    found = set()
    for tag in man_tags(section):
        found |= options_in(tag)
    return found


def man_section(name):
    text = MAN.read_text()
    m = re.search(r"^\.SH " + re.escape(name) + r"\n(.*?)(?=^\.SH |\Z)", text, re.S | re.M)
    assert m, f"the man page has no {name} section"
    return m[1]


def cli_md_environment():
    m = re.search(r"^## Environment variables\n(.*?)(?=^## |\Z)", CLI_MD.read_text(), re.S | re.M)
    assert m, "docs/cli.md has no 'Environment variables' section"
    return {re.sub(r"[`=].*", "", row.split("|")[1].strip().strip("`"))
            for row in m[1].splitlines()
            if row.startswith("| `")}


@pytest.mark.no_toolkit
@pytest.mark.parametrize("where", ["docs/cli.md", "docs/taskcache.1"])
def test_every_command_is_documented_and_nothing_else(help_by_command, where):
    documented = cli_md_sections() if where.endswith(".md") else man_sections()
    assert set(help_by_command) - set(documented) == set(), f"commands missing from {where}"
    assert set(documented) - set(help_by_command) == set(), \
        f"{where} documents commands that `taskcache help` does not list"


@pytest.mark.no_toolkit
@pytest.mark.parametrize("where", ["docs/cli.md", "docs/taskcache.1"])
def test_every_option_is_documented_and_nothing_else(help_by_command, where):
    if where.endswith(".md"):
        documented = {c: cli_md_options(s) for c, s in cli_md_sections().items()}
    else:
        documented = {c: man_options(s) for c, s in man_sections().items()}
    problems = []
    for cmd, listed in sorted(help_by_command.items()):
        missing = listed - documented.get(cmd, set())
        unknown = documented.get(cmd, set()) - listed
        if missing:
            problems.append(f"{cmd}: the help lists {sorted(missing)}, {where} does not")
        if unknown:
            problems.append(f"{cmd}: {where} documents {sorted(unknown)}, "
                            f"`taskcache help {cmd}` does not list them")
    assert not problems, "\n".join(problems)


@pytest.mark.no_toolkit
def test_every_environment_variable_is_documented():
    in_md = cli_md_environment()
    in_man = {t.strip() for t in man_tags(man_section("ENVIRONMENT"))}
    assert help_environment() - in_md == set(), "variables the help names, missing from docs/cli.md"
    assert in_md == in_man, "docs/cli.md's and the man page's environment tables differ"


@pytest.mark.no_toolkit
def test_the_man_page_formats_without_warnings():
    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    p = subprocess.run(["groff", "-man", "-ww", "-z", str(MAN)], capture_output=True, text=True)
    assert p.returncode == 0 and not p.stderr, p.stderr


@pytest.mark.no_toolkit
def test_the_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for command in ("scripts/demo.sh     # installs what it needs, builds, runs the bundled "
                    "example: cold / warm / edit + stats",
                    "scripts/test.sh     # installs what it needs, builds, runs every test "
                    "(gcc, then clang + ASan/UBSan)"):
        assert command in text
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)", text))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), "pages of the manual the README does not link"


def anchors(path):
    """The anchors of a Markdown file's headings, as GitHub makes them."""
    seen = {}
    out = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not re.match(r"#{1,6} ", line):
            continue
        a = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


@pytest.mark.no_toolkit
def test_links_of_the_readme_and_the_manual_lead_somewhere():
    broken = []
    for page in [README] + sorted((ROOT / "docs").glob("*.md")):
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target}: no such heading")
    assert not broken, "\n".join(broken)
