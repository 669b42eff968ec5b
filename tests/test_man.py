"""The manual pages (doc/man/*.scd, built by scdoc): each is built,
installed by `meson install` in share/man/man8 (the administrator's guide,
tierfs(7), in man7), and rendered by man(1) at 80 columns with no groff
warning; every option, command and flag a binary's own --help prints
(mount.tierfs: the arguments it takes and the options it drops) is in its
page, so an option added to a binary without a word in its page fails here;
and every key of a live mount's user.tierfs.status (with no job, during a
rebuild, during and after a scrub that finds a mismatch) and every
user.tierfs.* name a file and the root list or src/fuse/attrs.c answers has
an entry of its own in tierfs(7), so a status field or an attribute added
without one fails here."""
import os
import re
import subprocess

import pytest

from conftest import BUILD, MKFS, ROOT, TIERFS
from test_cache import copts, ctl, flush, wait_until

TIERCTL = BUILD / "tierctl"
HELPER = ROOT / "mount-helpers" / "mount.tierfs"
ATTRS_C = ROOT / "src" / "fuse" / "attrs.c"
GUIDE_SCD = ROOT / "doc" / "man" / "tierfs.7.scd"
PAGES = ["tierfs.8", "mkfs.tierfs.8", "mount.tierfs.8", "tierctl.8", "tierfs.7"]
# the sections each page must have, by its section of the manual
SECTIONS = {"8": ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"),
            "7": ("NAME", "DESCRIPTION", "CONCEPTS", "ATTRIBUTES", "STATUS",
                  "WHERE TO LOOK", "SEE ALSO")}
STATUS = "user.tierfs.status"


@pytest.fixture(scope="module")
def mandir(tmp_path_factory):
    """The share/man directory `meson install --destdir` fills."""
    dest = tmp_path_factory.mktemp("destdir")
    subprocess.run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest)],
                   check=True, capture_output=True)
    dirs = sorted(dest.glob("**/share/man"))
    assert len(dirs) == 1, f"man directories installed: {dirs}"
    return dirs[0]


@pytest.fixture(scope="module")
def man8(mandir):
    """The man8 directory `meson install --destdir` fills."""
    return mandir / "man8"


@pytest.fixture(scope="module")
def guide(mandir):
    """tierfs(7) as installed, as a reader sees it (page_text)."""
    return page_text(mandir / "man7" / "tierfs.7")


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


def section(text, name):
    """Section NAME of a rendered page, up to the next section."""
    m = re.search(rf"^{name}\n(.*?)(?=^\S|\Z)", text, re.M | re.S)
    assert m, f"no section {name}"
    return m.group(1)


def entries(text):
    """The names a rendered list gives an entry to: each entry's tag, the
    lines seven spaces in right above its text (indented further; a tag too
    long for one line goes on in the next), split at its commas."""
    out, tag = set(), []
    for line in text.splitlines():
        if re.match(r"^ {7}\S", line):
            tag.append(line.strip())
            continue
        if tag and re.match(r"^ {8,}\S", line):
            out |= {t.strip() for t in " ".join(tag).split(",")}
        tag = []
    return out


def status_keys(raw):
    """The keys of a status's key=value lines, a member's index (a dotted
    part that is a number) as N: member.0.reads is member.N.reads."""
    return {re.sub(r"(?<=\.)\d+(?=\.|$)", "N", line.split("=", 1)[0])
            for line in raw.splitlines() if "=" in line}


def attrs_c_names():
    """The names src/fuse/attrs.c answers: those of its lists, the one it
    #defines, and every name it compares a request's with (the actions and
    the unlisted user.tierfs.cache)."""
    src = ATTRS_C.read_text()
    names = set(re.findall(r'strcmp\(n, "([a-z_]+)"\)', src))
    for body in re.findall(r"_names\[\] = \{(.*?)\};", src, re.S):
        names |= set(re.findall(r'"([a-z_]+)"', body))
    return names | set(re.findall(r'#define [A-Z_]+ "([a-z_]+)"', src))


# ------------------------------------------------------------ the tests

@pytest.mark.parametrize("page", PAGES)
def test_page_builds_installs_and_renders(mandir, page):
    built = BUILD / "doc" / "man" / page
    assert built.is_file(), f"{built} not built"
    name, num = page.rsplit(".", 1)
    inst = mandir / f"man{num}" / page
    assert inst.read_bytes() == built.read_bytes(), f"{inst} is not the page built"
    rc, out, err = man(inst, "--warnings=w")
    assert rc == 0 and err == "", f"man -l {inst}: exit {rc}\n{err}"
    assert out.startswith(f"{name}({num})"), out[:200]
    for sect in SECTIONS[num]:
        assert re.search(rf"^{sect}$", out, re.M), f"{page}: no {sect} section"


@pytest.mark.parametrize("page", [p for p in PAGES if p.endswith(".8")])
def test_commands_point_to_the_guide(man8, page):
    """Each command's page names tierfs(7) under SEE ALSO."""
    assert "tierfs(7)" in section(page_text(man8 / page), "SEE ALSO")


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


# --------------------------------------------- tierfs(7) against a mount

def test_every_status_key_has_an_entry(guide, make_array, tmp_path):
    """Every key of user.tierfs.status on a RAID5 with a tier has an entry
    under STATUS: with no job (after a refused set: ctl_error), during a
    rebuild (slowed by maint_mbps so that it is seen running), during a
    scrub and after it, once it found the mismatch made on a member."""
    a = make_array("raid5", 3, "64K")
    a.mount(copts(tmp_path / "ssd"), expect_errors=True)    # tierctl fail logs an error
    mnt = a.mnt

    def raw():
        return os.getxattr(mnt, STATUS).decode()

    def job_ended():
        return "job=none" in raw().splitlines()

    for i in range(3):
        (mnt / f"f{i}").write_bytes(os.urandom(512 * 1024))
    assert (mnt / "f0").read_bytes()
    flush(mnt)                           # the members hold every byte
    with pytest.raises(OSError):         # dirty_low must stay below dirty_high
        os.setxattr(mnt, "user.tierfs.dirty_low", b"99")
    seen = {"no job": raw()}

    os.setxattr(mnt, "user.tierfs.maint_mbps", b"1")
    ctl(mnt, "fail 1")
    (tmp_path / "new").mkdir()
    ctl(mnt, f"replace 1 {tmp_path / 'new'}")
    seen["a rebuild"] = raw()
    os.setxattr(mnt, "user.tierfs.maint_mbps", b"0")
    wait_until(job_ended, "the rebuild's end")

    with open(a.members[0] / "root" / "f0", "r+b") as f:
        f.seek(100)
        f.write(b"XXXX")
    os.setxattr(mnt, "user.tierfs.maint_mbps", b"1")
    ctl(mnt, "scrub")
    seen["a scrub"] = raw()
    os.setxattr(mnt, "user.tierfs.maint_mbps", b"0")
    wait_until(job_ended, "the scrub's end")
    seen["after a scrub"] = raw()

    assert "job=rebuild" in seen["a rebuild"] and "job=check" in seen["a scrub"]
    assert {"ctl_error", "stripe.rows_full", "cache.total.flushed_bytes", "pool.jobs",
            "fuse.transport", "member.N.latency_us"} <= status_keys(seen["no job"])
    assert {"rebuild.member", "eta_s"} <= status_keys(seen["a rebuild"])
    assert {"mismatch", "last"} <= status_keys(seen["after a scrub"])
    documented = entries(section(guide, "STATUS"))
    lost = {when: sorted(status_keys(st) - documented) for when, st in seen.items()}
    assert not any(lost.values()), f"status keys without an entry in tierfs(7): {lost}"


def test_every_attribute_has_an_entry(guide, make_array, tmp_path):
    """Every name listxattr gives on a regular file and on the root (with a
    tier, so the tunables are listed), and every name src/fuse/attrs.c
    answers (the actions flush, evict, pinned, reset and ctl, the unlisted
    user.tierfs.cache), has an entry under ATTRIBUTES."""
    a = make_array("raid1", 2)
    a.mount(copts(tmp_path / "ssd"))
    f = a.mnt / "f"
    f.write_bytes(b"x" * 4096)
    listed = set(os.listxattr(f)) | set(os.listxattr(a.mnt))
    assert {"user.tierfs.residency", "user.tierfs.status", "user.tierfs.dirty_high"} <= listed
    names = listed | {"user.tierfs." + n for n in attrs_c_names()}
    lost = names - entries(section(guide, "ATTRIBUTES"))
    assert lost == set(), f"attributes without an entry in tierfs(7): {sorted(lost)}"


def test_the_checks_see_entries(guide, tmp_path):
    """The parsers find what the page and attrs.c hold (were they misread,
    the tests above would pass on nothing), and the page without one entry
    lacks it."""
    assert status_keys("member.12.latency_us=1.5\ncache.read_hit_ratio_5m=0.1\n"
                       "member.3=in_sync -\nmismatch=f 0\nno line\n") == {
        "member.N.latency_us", "cache.read_hit_ratio_5m", "member.N", "mismatch"}
    assert {"flush", "evict", "pinned", "reset", "ctl", "cache", "status", "stats",
            "maint_mbps", "cached_bytes", "residency", "dirty_high"} <= attrs_c_names()
    st, at = entries(section(guide, "STATUS")), entries(section(guide, "ATTRIBUTES"))
    assert {"uuid", "member.N", "member.N.reads", "ctl_error", "cache",
            "cache.total.flushed_bytes", "cache.read_hit_ratio_1d", "mismatch"} <= st
    assert not any(" " in t or t.startswith("o ") for t in st | at), sorted(st | at)
    assert {"user.tierfs.cached_bytes", "user.tierfs.dirty_low", "user.tierfs.ctl"} <= at
    # an entry taken out of the source is missing from the page made from it
    scd = GUIDE_SCD.read_text()
    for entry, name, sect in (("*cache.fills*\n", "cache.fills", "STATUS"),
                              ("*user.tierfs.evict*\n", "user.tierfs.evict", "ATTRIBUTES")):
        assert scd.count(entry) == 1, entry
        cut = re.sub(re.escape(entry) + r"(\t.*\n)+\n", "", scd)
        page = tmp_path / "cut.7"
        page.write_text(subprocess.run(["scdoc"], input=cut, capture_output=True, text=True,
                                       check=True).stdout)
        assert name in entries(section(guide, sect))
        assert name not in entries(section(page_text(page), sect))
