"""Bash completion (contrib/completion/tierfs): tierctl's commands, tierfs's
-o options and mkfs.tierfs's flags come from the programs' own --help, so
a command or an option added to a program completes without a change here;
installed by meson install for each of the three commands."""
import subprocess

from conftest import BUILD, ROOT

COMPLETION = ROOT / "contrib" / "completion" / "tierfs"


def complete(fn, *words):
    """COMPREPLY of the completion function fn for the command line words
    (the last one is the word being completed)."""
    arr = " ".join(f"'{w}'" for w in words)
    script = (f"source {COMPLETION}\nCOMP_WORDS=({arr})\nCOMP_CWORD={len(words) - 1}\n"
              f"{fn}\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return [l for l in r.stdout.splitlines() if l]


def test_tierctl_commands_and_arguments():
    tierctl = str(BUILD / "tierctl")
    cmds = complete("_tierctl", tierctl, "")
    for c in ["status", "fail", "replace", "scrub", "wait", "flush", "mode", "detach",
              "stats", "files", "set", "pin", "unpin", "evict", "top", "list", "monitor"]:
        assert c in cmds, (c, cmds)
    assert complete("_tierctl", tierctl, "p") == ["pin"]
    assert complete("_tierctl", tierctl, "mode", "/mnt", "write") == \
        ["writeback", "writethrough", "writearound"]
    assert complete("_tierctl", tierctl, "set", "/mnt", "dirty") == ["dirty_low", "dirty_high"]
    assert complete("_tierctl", tierctl, "scrub", "/mnt", "--re") == ["--repair"]


def test_tierfs_options():
    tierfs = str(BUILD / "tierfs")
    got = complete("_tierfs", tierfs, "-o", "cache_")
    for o in ["cache_mode=", "cache_size=", "cache_dirty_high=", "cache_discard",
              "cache_promote=", "cache_seq_cutoff="]:
        assert o in got, (o, got)
    assert complete("_tierfs", tierfs, "-o", "allow_other,fuse_u") == ["allow_other,fuse_uring="]
    assert complete("_tierfs", tierfs, "-o", "cache_mode=write") == \
        ["cache_mode=writeback", "cache_mode=writethrough", "cache_mode=writearound"]
    assert "search=" in complete("_tierfs", tierfs, "-o", "se")
    # only option names, not the words of the help text around them
    assert complete("_tierfs", tierfs, "-o", "h") == \
        ["hdd_mbps=", "hdd_ncq=", "hdd_rpm=", "hdd_seek_ms=", "hit_ring="]
    assert complete("_tierfs", tierfs, "-o", "cache") .count("cache=") == 1


def test_mkfs_flags_and_levels():
    mkfs = str(BUILD / "mkfs.tierfs")
    assert complete("_mkfs_tierfs", mkfs, "--") == ["--chunk", "--force", "--level", "--version"]
    assert complete("_mkfs_tierfs", mkfs, "--level", "raid1") == ["raid1", "raid10"]


def test_installed_for_each_command(tmp_path):
    dest = tmp_path / "dest"
    subprocess.run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest)],
                   check=True, capture_output=True)
    d = dest / "usr" / "local" / "share" / "bash-completion" / "completions"
    for name in ["tierfs", "tierctl", "mkfs.tierfs"]:
        assert (d / name).read_text() == COMPLETION.read_text(), name
