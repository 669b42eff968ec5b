"""The manual pages (doc/man/*.scd, built by scdoc): each is built,
installed by `meson install` in share/man/man8, and rendered by man(1) at 80
columns with no groff warning; and every option, command and flag a
binary's own --help prints (mount.tierfs: the arguments it takes and the
options it drops) is in its page, so an option added to a binary without a
word in its page fails here."""
import os
import re
import subprocess

import pytest

from conftest import BUILD, MKFS, ROOT, TIERFS

TIERCTL = BUILD / "tierctl"
HELPER = ROOT / "mount-helpers" / "mount.tierfs"
PAGES = ["tierfs.8", "mkfs.tierfs.8", "mount.tierfs.8", "tierctl.8"]


@pytest.fixture(scope="module")
def man8(tmp_path_factory):
    """The man8 directory `meson install --destdir` fills."""
    dest = tmp_path_factory.mktemp("destdir")
    subprocess.run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest)],
                   check=True, capture_output=True)
    dirs = sorted(dest.glob("**/share/man/man8"))
    assert len(dirs) == 1, f"man8 directories installed: {dirs}"
    return dirs[0]


def man(path, *flags):
    """man -l PATH at 80 columns in the C locale: (exit status, stdout,
    stderr), the overstrike of bold and underline taken out."""
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C", MAN_KEEP_FORMATTING="")
    env.pop("MANPAGER", None)
    env.pop("PAGER", None)
    r = subprocess.run(["man", *flags, "-l", str(path)], capture_output=True, text=True,
                       env=env)
    return r.returncode, re.sub(r".\x08", "", r.stdout), r.stderr


def page_text(path):
    """The page as a reader sees it, without hyphenation or justification,
    its lines joined: what the options are looked for in."""
    rc, out, err = man(path, "--nh", "--nj")
    assert rc == 0 and not err, err
    return out


def helptext(binary, *args):
    """What BINARY [ARGS] --help prints."""
    r = subprocess.run([str(binary), *args, "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


# ------------------------------------------------ what a --help names

SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def tierfs_words(usage):
    """The words of tierfs --help that name an option: its flags (-f), the
    names after "-o" ("-o ro, allow_other, ..."), every NAME= (kept with its
    "=", as the page must show it) and every snake_case name
    (entry_timeout is only named in a note)."""
    words = set(re.findall(r"^\s+(-[a-zA-Z])\s", usage, re.M))
    for m in re.finditer(r"(?<![\w-])-o ([^\n]*)", usage):
        for w in re.split(r"\s{2,}|\(", m.group(1))[0].split(","):
            name = re.fullmatch(r"([a-z][a-z0-9_]*)(=?)\S*", w.strip())
            if name:
                words.add(name.group(1) + name.group(2))
    words |= {w + "=" for w in re.findall(r"\b([a-z][a-z0-9_]*)=", usage)}
    words |= set(SNAKE.findall(usage))
    return words


def mkfs_words(usage):
    """The long options of mkfs.tierfs --help and the levels --level takes."""
    words = set(re.findall(r"--[a-z][a-z-]*", usage))
    levels = re.search(r"--level ([a-z0-9|]+)", usage).group(1)
    return words | set(levels.split("|"))


def tierctl_words(usage):
    """The options of tierctl --help, and a heading per command form:
    "flush MOUNTPOINT" and "flush FILE" each need their subsection."""
    words = set(re.findall(r"--[a-z][a-z-]*", usage))
    heads = set()
    for m in re.finditer(r"^  ([a-z]+)(?: +([A-Z][A-Z_]*))?", usage, re.M):
        heads.add(" ".join(w for w in m.groups() if w))
    return words, heads


def helper_words(script):
    """The arguments mount.tierfs takes and the options it drops, from its
    case patterns ("-s|-f|-n|-v)", "defaults|auto|...|comment=*)")."""
    words = set()
    for pat in re.findall(r"^\s*([^\s()#][^()\n]*)\)", script, re.M):
        alts = [a.strip().rstrip("*") for a in pat.split("|")]
        if all(a.startswith("-") for a in alts) or "defaults" in alts:
            words |= set(alts)
    return words


def missing(words, text):
    """The words not in text as words of their own (an option NAME= as
    "NAME=", -f not inside --force, _netdev whether or not the page shows
    the underscore's escape)."""
    out = set()
    for w in words:
        pat = re.escape(w)
        if w.endswith("=") or w.endswith("-"):
            pat = r"(?<![\w-])" + pat
        else:
            pat = r"(?<![\w-])" + pat + r"(?![\w])"
        if not re.search(pat, text):
            out.add(w)
    return out


def headings(text):
    """The subsection headings of a rendered page (three spaces in)."""
    return [l.strip() for l in text.splitlines() if re.match(r"^ {3}\S", l)]


# ------------------------------------------------------------ the tests

@pytest.mark.parametrize("page", PAGES)
def test_page_builds_installs_and_renders(man8, page):
    built = BUILD / "doc" / "man" / page
    assert built.is_file(), f"{built} not built"
    inst = man8 / page
    assert inst.read_bytes() == built.read_bytes(), f"{inst} is not the page built"
    rc, out, err = man(inst, "--warnings=w")
    assert rc == 0 and err == "", f"man -l {inst}: exit {rc}\n{err}"
    name = page.rsplit(".", 1)[0]
    assert out.startswith(f"{name}(8)"), out[:200]
    for sect in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"):
        assert re.search(rf"^{sect}$", out, re.M), f"{page}: no {sect} section"


def test_helper_alias_page(man8):
    """mount.fuse.tierfs, the helper's second name, has the helper's page."""
    alias = man8 / "mount.fuse.tierfs.8"
    assert alias.is_symlink() and os.readlink(alias) == "mount.tierfs.8"
    rc, out, err = man(alias)
    assert rc == 0 and not err and "mount.fuse.tierfs" in out


def test_tierfs_options_documented(man8):
    words = tierfs_words(helptext(TIERFS))
    assert missing(words, page_text(man8 / "tierfs.8")) == set()


def test_mkfs_options_documented(man8):
    words = mkfs_words(helptext(MKFS))
    assert missing(words, page_text(man8 / "mkfs.tierfs.8")) == set()


def test_tierctl_commands_and_options_documented(man8):
    words, heads = tierctl_words(helptext(TIERCTL))
    words |= tierctl_words(helptext(TIERCTL, "monitor"))[0]
    text = page_text(man8 / "tierctl.8")
    assert missing(words, text) == set()
    got = headings(text)
    got = {" ".join(g.replace("...", "").split()[:2]) for g in got}
    lost = heads - got
    assert lost == set(), f"commands without a subsection of their own: {sorted(lost)}"


def test_helper_arguments_documented(man8):
    words = helper_words(HELPER.read_text())
    assert missing(words, page_text(man8 / "mount.tierfs.8")) == set()


def test_the_checks_see_options():
    """The parsers find what the binaries print (were the help misread, the
    tests above would pass on nothing), and a page without one of them
    fails."""
    t = tierfs_words(helptext(TIERFS))
    assert {"-f", "-d", "ro", "allow_other", "suid", "dev", "fsname=", "log=",
            "entry_timeout", "fuse_uring=", "hdd_ncq=", "cache_size=", "cache_dirty_high=",
            "hit_ring=", "cache=", "cache_discard", "auto_unmount"} <= t
    assert {"--level", "--chunk", "--force", "raid10", "jbod"} <= mkfs_words(helptext(MKFS))
    w, h = tierctl_words(helptext(TIERCTL))
    assert {"--raw", "--wait", "--repair", "--json"} <= w
    assert {"status MOUNTPOINT", "flush MOUNTPOINT", "flush FILE", "files PATH",
            "set MOUNTPOINT", "detach MOUNTPOINT", "list"} <= h
    assert {"--program-timeout", "--oneshot"} <= tierctl_words(helptext(TIERCTL, "monitor"))[0]
    assert {"-s", "-f", "-n", "-v", "-t", "-o", "defaults", "nofail", "_netdev",
            "x-", "comment="} <= helper_words(HELPER.read_text())
    text = "cache_size=SIZE and -f, cache_discard, --force, x-* and _netdev"
    assert missing({"cache_size=", "-f", "cache_discard", "x-", "_netdev"}, text) == set()
    assert missing({"cache_size", "-f", "-d", "--forc"}, text) == {"-d", "--forc"}
    assert missing({"cache=", "log="}, "cache_size=1G, the log") == {"cache=", "log="}
